/* nbprof's one accelerator (nbprof.trace._accel, behind nbprof.trace.accel): trace events
 * scanned straight into columns, and (in _nest.c) CPU ops nested per thread.
 *
 * A piece of a trace's event array (events written one after another, comma separated)
 * is read once, byte by byte, into the columns the tables are built from: each event's
 * category and phase code, its name as a code into the piece's distinct names, pid, tid,
 * flow id, timestamp in ns, duration and the span of its raw `args`. Only what the
 * pure-Python path (msgspec structs, then columns) reads the same way is taken here;
 * anything else (escaped keys, exponents in timestamps, invalid JSON, wrong types, deep
 * nesting) makes scan() return None and that path reads the piece instead, so results and
 * error messages are the same whichever path ran.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TS_US 9000000000000000LL
#define NO_TS INT64_MIN
/* A pid or tid written as text that is not a number (no integer read here is this low). */
#define TEXT_ID INT64_MIN
/* Deeper values are left to the Python path, which words "nested too deeply". */
#define MAX_DEPTH 64

typedef const unsigned char *cp;

/* Why a scan stopped: not ours to read (the Python path reads the piece), or a Python
 * error (memory) to raise. */
#define BAIL 1
#define FAIL 2

/* -- growable columns -------------------------------------------------------------- */

typedef struct {
    char *data;
    Py_ssize_t n, cap, item;
} Col;

static int col_init(Col *c, Py_ssize_t item) {
    c->n = 0;
    c->cap = 1024;
    c->item = item;
    c->data = PyMem_Malloc(c->cap * item);
    return c->data ? 0 : FAIL;
}

static int col_grow(Col *c) {
    Py_ssize_t cap = c->cap * 2;
    char *d = PyMem_Realloc(c->data, cap * c->item);
    if (!d) return FAIL;
    c->data = d;
    c->cap = cap;
    return 0;
}

#define PUSH(col, type, value)                                                         \
    do {                                                                               \
        if ((col).n == (col).cap && col_grow(&(col))) return FAIL;                     \
        ((type *)(col).data)[(col).n++] = (value);                                     \
    } while (0)

/* A bytearray of n bytes (a copy of data, unless NULL). Made empty, then resized:
 * CPython 3.11's PyByteArray_FromStringAndSize, when its allocation fails, frees the new
 * object before setting its count of buffer exports, which then reads as garbage and
 * prints "SystemError: deallocated bytearray object has exported buffers" on top of the
 * MemoryError (Objects/bytearrayobject.c, 3.11.7). */
static PyObject *new_bytearray(const char *data, Py_ssize_t n) {
    PyObject *out = PyByteArray_FromStringAndSize(NULL, 0);
    if (!out || !n) return out;
    if (PyByteArray_Resize(out, n) < 0) {
        Py_DECREF(out);
        return NULL;
    }
    if (data) memcpy(PyByteArray_AS_STRING(out), data, n);
    return out;
}

static PyObject *col_bytearray(Col *c) { return new_bytearray(c->data, c->n * c->item); }

/* -- interned text, keyed by its raw bytes ---------------------------------------- */

typedef struct {
    uint64_t hash;
    Py_ssize_t len;
    char *raw;       /* a copy of the raw (still escaped) bytes */
    PyObject *text;  /* str, interned */
    long code;       /* categories and phases: their number */
} Entry;

typedef struct {
    Entry *slots;
    Py_ssize_t cap, used;
} Table;

/* Eight bytes a step: names are long (C++ kernel names run to hundreds of bytes), and a
 * byte-at-a-time hash was a third of a scan. */
static uint64_t hash_bytes(cp s, Py_ssize_t n) {
    uint64_t h = 1469598103934665603ULL ^ (uint64_t)n;
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        h = (h ^ w) * 0x9E3779B97F4A7C15ULL;
        h ^= h >> 29;
    }
    uint64_t w = 0;
    memcpy(&w, s + i, n - i);
    h = (h ^ w) * 0x9E3779B97F4A7C15ULL;
    return h ^ (h >> 32);
}

static int table_init(Table *t, Py_ssize_t cap) {
    t->cap = cap;
    t->used = 0;
    t->slots = PyMem_Calloc(cap, sizeof(Entry));
    return t->slots ? 0 : FAIL;
}

static void table_free(Table *t) {
    if (!t->slots) return;
    for (Py_ssize_t i = 0; i < t->cap; i++) {
        if (t->slots[i].raw) {
            PyMem_Free(t->slots[i].raw);
            Py_XDECREF(t->slots[i].text);
        }
    }
    PyMem_Free(t->slots);
    t->slots = NULL;
}

static Entry *table_find(Table *t, cp s, Py_ssize_t n, uint64_t h) {
    Py_ssize_t mask = t->cap - 1, i = (Py_ssize_t)(h & mask);
    for (;;) {
        Entry *e = &t->slots[i];
        if (!e->raw) return e;
        if (e->hash == h && e->len == n && memcmp(e->raw, s, n) == 0) return e;
        i = (i + 1) & mask;
    }
}

static int table_grow(Table *t) {
    Table bigger;
    if (table_init(&bigger, t->cap * 2)) return FAIL;
    for (Py_ssize_t i = 0; i < t->cap; i++) {
        Entry *e = &t->slots[i];
        if (e->raw) *table_find(&bigger, (cp)e->raw, e->len, e->hash) = *e;
    }
    bigger.used = t->used;
    PyMem_Free(t->slots);
    *t = bigger;
    return 0;
}

/* The entry of the raw string s[0:n] (between its quotes), made on first sight: its text
 * decoded (strict UTF-8; through `unescape` when it holds an escape) and interned. */
static int table_get(Table *t, cp s, Py_ssize_t n, int escaped, PyObject *unescape,
                     Entry **out) {
    uint64_t h = hash_bytes(s, n);
    Entry *e = table_find(t, s, n, h);
    if (e->raw) {
        *out = e;
        return 0;
    }
    PyObject *text;
    if (escaped) {
        PyObject *quoted = PyBytes_FromStringAndSize((const char *)s - 1, n + 2);
        if (!quoted) return FAIL;
        text = PyObject_CallOneArg(unescape, quoted);
        Py_DECREF(quoted);
        if (text && !PyUnicode_CheckExact(text)) Py_CLEAR(text);
    } else {
        text = PyUnicode_DecodeUTF8((const char *)s, n, NULL);
    }
    if (!text) {
        if (PyErr_ExceptionMatches(PyExc_MemoryError)) return FAIL;
        PyErr_Clear();
        return BAIL;
    }
    PyUnicode_InternInPlace(&text);
    char *raw = PyMem_Malloc(n ? n : 1);
    if (!raw) {
        Py_DECREF(text);
        return FAIL;
    }
    memcpy(raw, s, n);
    e->hash = h;
    e->len = n;
    e->raw = raw;
    e->text = text;
    e->code = -1;
    t->used++;
    if (t->used * 2 > t->cap) {
        if (table_grow(t)) return FAIL;
        e = table_find(t, s, n, h);
    }
    *out = e;
    return 0;
}

/* -- JSON -------------------------------------------------------------------------- */

static inline cp skip_ws(cp p, cp end) {
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    return p;
}

static inline int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

static inline int is_hex(unsigned char c) {
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* Bytes that end a run of plain string text: the quote, a backslash, control bytes. */
static unsigned char special[256];

static void init_special(void) {
    for (int c = 0; c < 0x20; c++) special[c] = 1;
    special['"'] = special['\\'] = 1;
}

/* A string at *pp (its opening quote): its contents' span, whether it holds an escape. */
static int scan_string(cp *pp, cp end, cp *s, Py_ssize_t *n, int *escaped) {
    cp p = *pp;
    if (p >= end || *p != '"') return BAIL;
    p++;
    cp start = p;
    int esc = 0;
    while (p < end) {
        /* Plain text first: most of a trace's bytes are in strings. */
#if defined(__SSE2__) && defined(__GNUC__)
        /* Sixteen bytes a step, without a branch per byte (short strings made the
         * byte loop's exit a mispredicted branch per string). */
        while (end - p >= 16) {
            __m128i x = _mm_loadu_si128((const __m128i *)p);
            __m128i hit = _mm_or_si128(
                _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('"')),
                             _mm_cmpeq_epi8(x, _mm_set1_epi8('\\'))),
                /* unsigned x <= 0x1f: a control byte */
                _mm_cmpeq_epi8(_mm_max_epu8(x, _mm_set1_epi8(0x1f)), _mm_set1_epi8(0x1f)));
            int mask = _mm_movemask_epi8(hit);
            if (mask) {
                p += __builtin_ctz((unsigned)mask);
                break;
            }
            p += 16;
        }
#endif
        while (p < end && !special[*p]) p++;
        if (p >= end) break;
        unsigned char c = *p;
        if (c == '"') {
            *s = start;
            *n = p - start;
            *escaped = esc;
            *pp = p + 1;
            return 0;
        }
        if (c < 0x20) return BAIL;
        if (c == '\\') {
            esc = 1;
            if (p + 1 >= end) return BAIL;
            unsigned char x = p[1];
            if (x == 'u') {
                if (p + 6 > end || !is_hex(p[2]) || !is_hex(p[3]) || !is_hex(p[4]) ||
                    !is_hex(p[5]))
                    return BAIL;
                p += 6;
                continue;
            }
            if (!strchr("\"\\/bfnrt", x) || x == 0) return BAIL;
            p += 2;
            continue;
        }
        p++;
    }
    return BAIL;
}

/* A number at *pp, by JSON's grammar: its span, whether it has a fraction or exponent. */
static int scan_number(cp *pp, cp end, cp *s, Py_ssize_t *n, int *frac, int *expo) {
    cp p = *pp, start = p;
    *frac = *expo = 0;
    if (p < end && *p == '-') p++;
    if (p >= end) return BAIL;
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        while (p < end && is_digit(*p)) p++;
    } else {
        return BAIL;
    }
    if (p < end && *p == '.') {
        p++;
        if (p >= end || !is_digit(*p)) return BAIL;
        while (p < end && is_digit(*p)) p++;
        *frac = 1;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if (p >= end || !is_digit(*p)) return BAIL;
        while (p < end && is_digit(*p)) p++;
        *expo = 1;
    }
    *s = start;
    *n = p - start;
    *pp = p;
    return 0;
}

static int skip_value(cp *pp, cp end, int depth);

static int skip_literal(cp *pp, cp end, const char *word) {
    size_t k = strlen(word);
    if ((size_t)(end - *pp) < k || memcmp(*pp, word, k) != 0) return BAIL;
    *pp += k;
    return 0;
}

static int skip_value(cp *pp, cp end, int depth) {
    cp p = *pp, s;
    Py_ssize_t n;
    int a, b;
    if (p >= end) return BAIL;
    if (depth > MAX_DEPTH) return BAIL;
    switch (*p) {
        case '"':
            return scan_string(pp, end, &s, &n, &a);
        case '{':
            p = skip_ws(p + 1, end);
            if (p < end && *p == '}') {
                *pp = p + 1;
                return 0;
            }
            for (;;) {
                if (scan_string(&p, end, &s, &n, &a)) return BAIL;
                p = skip_ws(p, end);
                if (p >= end || *p != ':') return BAIL;
                p = skip_ws(p + 1, end);
                if (skip_value(&p, end, depth + 1)) return BAIL;
                p = skip_ws(p, end);
                if (p < end && *p == ',') {
                    p = skip_ws(p + 1, end);
                    continue;
                }
                if (p < end && *p == '}') {
                    *pp = p + 1;
                    return 0;
                }
                return BAIL;
            }
        case '[':
            p = skip_ws(p + 1, end);
            if (p < end && *p == ']') {
                *pp = p + 1;
                return 0;
            }
            for (;;) {
                if (skip_value(&p, end, depth + 1)) return BAIL;
                p = skip_ws(p, end);
                if (p < end && *p == ',') {
                    p = skip_ws(p + 1, end);
                    continue;
                }
                if (p < end && *p == ']') {
                    *pp = p + 1;
                    return 0;
                }
                return BAIL;
            }
        case 't':
            return skip_literal(pp, end, "true");
        case 'f':
            return skip_literal(pp, end, "false");
        case 'n':
            return skip_literal(pp, end, "null");
        default:
            return scan_number(pp, end, &s, &n, &a, &b);
    }
}

/* A JSON integer that fits well inside an int64 (at most 18 digits). */
static int scan_int(cp *pp, cp end, int64_t *out) {
    cp s;
    Py_ssize_t n;
    int frac, expo;
    if (scan_number(pp, end, &s, &n, &frac, &expo) || frac || expo) return BAIL;
    int neg = *s == '-';
    if (n - neg > 18) return BAIL;
    int64_t v = 0;
    for (Py_ssize_t i = neg; i < n; i++) v = v * 10 + (s[i] - '0');
    *out = neg ? -v : v;
    return 0;
}

/* A timestamp in µs, as the Python path reads it: whole µs times 1000 plus the first three
 * digits of the fraction (truncated). Negative, exponent or out of range: not ours. */
static int scan_ts(cp *pp, cp end, int64_t *out) {
    cp s;
    Py_ssize_t n;
    int frac, expo;
    if (scan_number(pp, end, &s, &n, &frac, &expo) || expo || *s == '-') return BAIL;
    int64_t whole = 0;
    Py_ssize_t i = 0;
    for (; i < n && s[i] != '.'; i++) {
        if (i >= 17) return BAIL;
        whole = whole * 10 + (s[i] - '0');
    }
    if (whole > MAX_TS_US) return BAIL;
    int64_t part = 0;
    int k = 0;
    if (i < n) { /* the fraction */
        for (i++; i < n && k < 3; i++, k++) part = part * 10 + (s[i] - '0');
    }
    for (; k < 3; k++) part *= 10;
    *out = whole * 1000 + part;
    return 0;
}

static const double pow10[] = {1e0, 1e1, 1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15};

static int scan_double(cp *pp, cp end, double *out) {
    cp s;
    Py_ssize_t n;
    int frac, expo;
    char buf[64];
    if (scan_number(pp, end, &s, &n, &frac, &expo) || n >= (Py_ssize_t)sizeof buf) return BAIL;
    if (!expo && n <= 16) {
        /* At most 15 digits: the digits as an integer and the power of ten are exact
         * doubles, so one IEEE division is the correctly rounded value, which is what a
         * full parse (and msgspec) gives; without its cost. */
        int64_t m = 0;
        int digits = 0, after = 0, seen_point = 0;
        for (Py_ssize_t i = *s == '-'; i < n; i++) {
            if (s[i] == '.') {
                seen_point = 1;
                continue;
            }
            m = m * 10 + (s[i] - '0');
            digits++;
            after += seen_point;
        }
        if (digits <= 15) {
            double v = (double)m / pow10[after];
            *out = *s == '-' ? -v : v;
            return 0;
        }
    }
    memcpy(buf, s, n);
    buf[n] = 0;
    /* Python's own correctly rounded parser: strtod follows the C locale, which a program
     * may have set to one that writes "1,5". Overflow gives an infinity (no exception). */
    char *stop = NULL;
    double v = PyOS_string_to_double(buf, &stop, NULL);
    if (v == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return BAIL;
    }
    if (stop != buf + n || !isfinite(v)) return BAIL;
    *out = v;
    return 0;
}

/* -- events ------------------------------------------------------------------------ */

typedef struct {
    Col code, name, pid, tid, id, ts, dur, astart, aend;
    Table names, cats, phases;
    /* The distinct names, in order of first use: a name's entry holds its place here. */
    PyObject *cat_codes, *phase_codes, *unescape, *texts, *distinct;
    cp base;
} Scan;

/* The number of a category or phase string (0 for one the mapping lacks). */
static int code_of(Table *t, PyObject *mapping, cp s, Py_ssize_t n, int escaped,
                   long *out) {
    if (escaped) return BAIL;
    Entry *e;
    int r = table_get(t, s, n, 0, NULL, &e);
    if (r) return r;
    if (e->code < 0) {
        PyObject *key = PyBytes_FromStringAndSize((const char *)s, n);
        if (!key) return FAIL;
        PyObject *v = PyDict_GetItemWithError(mapping, key);
        Py_DECREF(key);
        if (!v && PyErr_Occurred()) return FAIL;
        long c = v ? PyLong_AsLong(v) : 0;
        if (c == -1 && PyErr_Occurred()) return FAIL;
        e->code = c;
    }
    *out = e->code;
    return 0;
}

/* A pid or tid: an integer, or text. Numeric text (an optional "-" and digits, shorter
 * than 19 characters) is its number, as Python's Ids reads it; other text is left to the
 * tables (they give it a code in order of first use): TEXT_ID here, the text noted. */
static int scan_id(Scan *sc, cp *pp, cp end, int64_t *out, PyObject **text) {
    cp s;
    Py_ssize_t n;
    int esc;
    *text = NULL;
    if (**pp != '"') return scan_int(pp, end, out);
    if (scan_string(pp, end, &s, &n, &esc)) return BAIL;
    if (!esc && n > 0 && n < 19) {
        Py_ssize_t i = s[0] == '-';
        int digits = i < n;
        for (Py_ssize_t j = i; j < n; j++) digits &= is_digit(s[j]);
        if (digits) {
            int64_t v = 0;
            for (Py_ssize_t j = i; j < n; j++) v = v * 10 + (s[j] - '0');
            *out = i ? -v : v;
            return 0;
        }
    }
    Entry *e;
    int r = table_get(&sc->names, s, n, esc, sc->unescape, &e);
    if (r) return r;
    *out = TEXT_ID;
    *text = e->text;
    return 0;
}

/* Event number (the one about to be pushed), pid (0), tid (1) or flow id (2), and its
 * text. */
static int note_text(Scan *sc, int which, PyObject *text) {
    if (!text) return 0;
    PyObject *item = Py_BuildValue("(niO)", sc->code.n, which, text);
    if (!item) return FAIL;
    int r = PyList_Append(sc->texts, item);
    Py_DECREF(item);
    return r ? FAIL : 0;
}

#define KEY(lit) (n == (Py_ssize_t)(sizeof(lit) - 1) && memcmp(k, lit, n) == 0)

static int scan_event(Scan *sc, cp *pp, cp end) {
    cp p = *pp, k, s;
    Py_ssize_t n, sn;
    int esc;
    static const unsigned char empty[1] = {0};
    cp ph = empty, cat = empty, name = empty;
    Py_ssize_t ph_n = 0, cat_n = 0, name_n = 0;
    int ph_esc = 0, cat_esc = 0, name_esc = 0;
    int64_t pid = 0, tid = 0, id = -1, ts = NO_TS, as = -1, ae = -1;
    PyObject *pid_text = NULL, *tid_text = NULL, *id_text = NULL;
    double dur = 0.0;
    int r;

    if (p >= end || *p != '{') return BAIL;
    p = skip_ws(p + 1, end);
    if (p < end && *p == '}') {
        p++;
    } else {
        for (;;) {
            if (scan_string(&p, end, &k, &n, &esc) || esc) return BAIL;
            p = skip_ws(p, end);
            if (p >= end || *p != ':') return BAIL;
            p = skip_ws(p + 1, end);
            if (p >= end) return BAIL;
            if (KEY("ph")) {
                if (scan_string(&p, end, &ph, &ph_n, &ph_esc)) return BAIL;
            } else if (KEY("cat")) {
                if (scan_string(&p, end, &cat, &cat_n, &cat_esc)) return BAIL;
            } else if (KEY("name")) {
                if (scan_string(&p, end, &name, &name_n, &name_esc)) return BAIL;
            } else if (KEY("pid")) {
                if ((r = scan_id(sc, &p, end, &pid, &pid_text))) return r;
            } else if (KEY("tid")) {
                if ((r = scan_id(sc, &p, end, &tid, &tid_text))) return r;
            } else if (KEY("ts")) {
                if (scan_ts(&p, end, &ts)) return BAIL;
            } else if (KEY("dur")) {
                if (scan_double(&p, end, &dur)) return BAIL;
            } else if (KEY("id")) {
                /* A flow's id: an integer, text (decoded, its UTF-8 checked as the struct
                 * checks it; the tables give it a code) or null (-1, as absent). */
                if (*p == '"') {
                    Entry *e;
                    if (scan_string(&p, end, &s, &sn, &esc)) return BAIL;
                    if ((r = table_get(&sc->names, s, sn, esc, sc->unescape, &e))) return r;
                    id = TEXT_ID;
                    id_text = e->text;
                } else if (*p == 'n') {
                    if (skip_literal(&p, end, "null")) return BAIL;
                    id = -1;
                    id_text = NULL;
                } else {
                    if (scan_int(&p, end, &id)) return BAIL;
                    id_text = NULL;
                }
            } else if (KEY("args")) {
                cp a = p;
                if (skip_value(&p, end, 1)) return BAIL;
                as = a - sc->base;
                ae = p - sc->base;
            } else {
                if (skip_value(&p, end, 1)) return BAIL;
            }
            p = skip_ws(p, end);
            if (p < end && *p == ',') {
                p = skip_ws(p + 1, end);
                continue;
            }
            if (p < end && *p == '}') {
                p++;
                break;
            }
            return BAIL;
        }
    }
    long cat_code, ph_code;
    if ((r = code_of(&sc->cats, sc->cat_codes, cat, cat_n, cat_esc, &cat_code))) return r;
    if ((r = code_of(&sc->phases, sc->phase_codes, ph, ph_n, ph_esc, &ph_code))) return r;
    Entry *e;
    if ((r = table_get(&sc->names, name, name_n, name_esc, sc->unescape, &e))) return r;
    if ((r = note_text(sc, 0, pid_text)) || (r = note_text(sc, 1, tid_text)) ||
        (r = note_text(sc, 2, id_text)))
        return r;
    if (e->code < 0) {
        e->code = PyList_GET_SIZE(sc->distinct);
        if (PyList_Append(sc->distinct, e->text)) return FAIL;
    }
    PUSH(sc->code, uint8_t, (uint8_t)(cat_code + ph_code));
    PUSH(sc->name, int32_t, (int32_t)e->code);
    PUSH(sc->pid, int64_t, pid);
    PUSH(sc->tid, int64_t, tid);
    PUSH(sc->id, int64_t, id);
    PUSH(sc->ts, int64_t, ts);
    PUSH(sc->dur, double, dur);
    PUSH(sc->astart, int64_t, as);
    PUSH(sc->aend, int64_t, ae);
    *pp = p;
    return 0;
}

static int scan_all(Scan *sc, cp p, cp end) {
    p = skip_ws(p, end);
    if (p >= end) return BAIL;
    for (;;) {
        int r = scan_event(sc, &p, end);
        if (r) return r;
        p = skip_ws(p, end);
        if (p >= end) return 0;
        if (*p != ',') return BAIL;
        p = skip_ws(p + 1, end);
    }
}

static void scan_free(Scan *sc) {
    Col *cols[] = {&sc->code, &sc->name, &sc->pid,    &sc->tid, &sc->id,
                   &sc->ts,   &sc->dur,  &sc->astart, &sc->aend};
    for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++) PyMem_Free(cols[i]->data);
    table_free(&sc->names);
    table_free(&sc->cats);
    table_free(&sc->phases);
    Py_XDECREF(sc->texts);
    Py_XDECREF(sc->distinct);
}

PyDoc_STRVAR(scan_doc,
             "scan(buffer, start, stop, cat_codes, phase_codes, unescape)\n--\n\n"
             "The events in buffer[start:stop] as columns: (codes, name_codes, names, pid, "
             "tid, id, ts_ns, dur, args_start, args_stop, texts), numeric columns as "
             "bytearrays, name_codes (int32) the place of each event's name in names (the "
             "distinct names in order of first use), texts the (event, 0 for pid, 1 for tid "
             "or 2 for id, text) of ids written as text that is not a number (their column "
             "holds the lowest int64 there); None when the text is not what this scanner "
             "reads exactly as the Python path does.");

static PyObject *scan(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t start, stop;
    PyObject *cat_codes, *phase_codes, *unescape;
    if (!PyArg_ParseTuple(args, "y*nnO!O!O:scan", &view, &start, &stop, &PyDict_Type,
                          &cat_codes, &PyDict_Type, &phase_codes, &unescape))
        return NULL;
    PyObject *result = NULL;
    Scan sc;
    memset(&sc, 0, sizeof sc);
    if (start < 0 || stop > view.len || start > stop) {
        PyErr_SetString(PyExc_ValueError, "span outside the buffer");
        PyBuffer_Release(&view);
        return NULL;
    }
    sc.cat_codes = cat_codes;
    sc.phase_codes = phase_codes;
    sc.unescape = unescape;
    sc.base = (cp)view.buf;
    sc.texts = PyList_New(0);
    sc.distinct = PyList_New(0);
    int r = !sc.texts || !sc.distinct || col_init(&sc.code, 1) || col_init(&sc.name, 4) ||
            col_init(&sc.pid, 8) || col_init(&sc.tid, 8) || col_init(&sc.id, 8) ||
            col_init(&sc.ts, 8) ||
            col_init(&sc.dur, 8) || col_init(&sc.astart, 8) || col_init(&sc.aend, 8) ||
            table_init(&sc.names, 1024) || table_init(&sc.cats, 64) ||
            table_init(&sc.phases, 16);
    if (!r) r = scan_all(&sc, sc.base + start, sc.base + stop);
    if (r == BAIL) {
        result = Py_NewRef(Py_None);
    } else if (r == 0) {
        result = Py_BuildValue("(NNONNNNNNNO)", col_bytearray(&sc.code),
                               col_bytearray(&sc.name), sc.distinct, col_bytearray(&sc.pid),
                               col_bytearray(&sc.tid), col_bytearray(&sc.id),
                               col_bytearray(&sc.ts), col_bytearray(&sc.dur),
                               col_bytearray(&sc.astart), col_bytearray(&sc.aend), sc.texts);
    } else if (!PyErr_Occurred()) {
        PyErr_NoMemory();
    }
    scan_free(&sc);
    PyBuffer_Release(&view);
    return result;
}

PyDoc_STRVAR(join_doc,
             "join(buffer, starts, stops)\n--\n\n"
             "The JSON array of the values buffer[starts[i]:stops[i]] (int64 arrays as "
             "buffers); a negative start stands for an absent value, written as {}.");

static PyObject *join(PyObject *self, PyObject *args) {
    Py_buffer view, sv, ev;
    if (!PyArg_ParseTuple(args, "y*y*y*:join", &view, &sv, &ev)) return NULL;
    PyObject *out = NULL;
    Py_ssize_t n = sv.len / 8;
    const int64_t *st = sv.buf, *en = ev.buf;
    const char *base = view.buf;
    if (ev.len != sv.len) {
        PyErr_SetString(PyExc_ValueError, "starts and stops differ in length");
        goto done;
    }
    Py_ssize_t size = 2 + (n > 0 ? n - 1 : 0);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (st[i] < 0) {
            size += 2;
        } else if (st[i] > en[i] || en[i] > view.len) {
            PyErr_SetString(PyExc_ValueError, "span outside the buffer");
            goto done;
        } else {
            size += en[i] - st[i];
        }
    }
    out = PyBytes_FromStringAndSize(NULL, size);
    if (!out) goto done;
    char *w = PyBytes_AS_STRING(out);
    *w++ = '[';
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i) *w++ = ',';
        if (st[i] < 0) {
            *w++ = '{';
            *w++ = '}';
        } else {
            memcpy(w, base + st[i], en[i] - st[i]);
            w += en[i] - st[i];
        }
    }
    *w++ = ']';
done:
    PyBuffer_Release(&view);
    PyBuffer_Release(&sv);
    PyBuffer_Release(&ev);
    return out;
}

/* -- args fields ------------------------------------------------------------------ */

/* What a field of an event's args held. */
enum {
    F_ABSENT = 0,
    F_INT = 1,    /* an integer of at most 18 digits: ival, and num = (double)ival */
    F_FLOAT = 2,  /* a finite number with a fraction or exponent: num */
    F_STR = 3,    /* a string: its span, quotes included */
    F_NULL = 4,
    F_BOOL = 5,
    F_INTS = 6,   /* an array of such integers: ival = their product, or -1 when the array
                     is empty or the product is out of (-2**62, 2**62); num = their count */
    F_ARRAY = 7,  /* any other array */
    F_OBJECT = 8,
    F_OTHER = 9,  /* a number not held exactly here (huge, or not finite) */
};

#define LIMIT62 (((int64_t)1) << 62)

/* An array at *pp of integers only: their product as _product() gives it, else BAIL with
 * *pp unchanged (the caller skips it as any array). */
static int scan_int_array(cp *pp, cp end, int64_t *product, int64_t *count) {
    cp p = skip_ws(*pp + 1, end);
    int64_t acc = 1;
    int zero = 0, over = 0;
    int64_t k = 0;
    if (p < end && *p == ']') {
        *pp = p + 1;
        *product = -1;
        *count = 0;
        return 0;
    }
    for (;;) {
        int64_t v;
        if (p >= end || scan_int(&p, end, &v)) return BAIL;
        k++;
        if (v == 0) zero = 1;
        if (!over && v != 0) {
            /* |acc| < 2**62 and |v| < 10**18: the product is out of range exactly when
             * |acc| > (2**62 - 1) / |v|, tested before it could overflow; with every item
             * at least 1 in size, it stays out (a zero, checked apart, makes it 0). */
            int64_t m = v < 0 ? -v : v, a = acc < 0 ? -acc : acc;
            if (a > (LIMIT62 - 1) / m) {
                over = 1;
            } else {
                acc *= v;
            }
        }
        p = skip_ws(p, end);
        if (p < end && *p == ',') {
            p = skip_ws(p + 1, end);
            continue;
        }
        if (p < end && *p == ']') break;
        return BAIL;
    }
    *pp = p + 1;
    *product = zero ? 0 : over ? -1 : acc;
    *count = k;
    return 0;
}

typedef struct {
    PyObject *tags, *num, *ival, *start, *stop; /* bytearrays of n items */
} Field;

static int field_value(cp base, cp *pp, cp end, Field *f, Py_ssize_t i) {
    cp p = *pp, s;
    Py_ssize_t n;
    int a, frac, expo;
    uint8_t tag;
    double num = 0.0;
    int64_t iv = 0;
    switch (*p) {
        case '"':
            if (scan_string(&p, end, &s, &n, &a)) return BAIL;
            tag = F_STR;
            break;
        case 'n':
            if (skip_literal(&p, end, "null")) return BAIL;
            tag = F_NULL;
            break;
        case 't':
        case 'f':
            if (skip_value(&p, end, 1)) return BAIL;
            tag = F_BOOL;
            break;
        case '{':
            if (skip_value(&p, end, 1)) return BAIL;
            tag = F_OBJECT;
            break;
        case '[': {
            int64_t count;
            if (scan_int_array(&p, end, &iv, &count) == 0) {
                num = (double)count;
                tag = F_INTS;
            } else {
                if (skip_value(&p, end, 1)) return BAIL;
                tag = F_ARRAY;
            }
            break;
        }
        default: {
            cp q = p;
            if (scan_number(&q, end, &s, &n, &frac, &expo)) return BAIL;
            if (!frac && !expo && n - (*s == '-') <= 18) {
                if (scan_int(&p, end, &iv)) return BAIL;
                num = (double)iv;
                tag = F_INT;
            } else if (frac || expo) {
                if (scan_double(&p, end, &num)) {
                    /* Not finite (1e999): msgspec refuses it for a float field. */
                    p = q;
                    tag = F_OTHER;
                } else {
                    tag = F_FLOAT;
                }
            } else {
                p = q;
                tag = F_OTHER;
            }
        }
    }
    ((uint8_t *)PyByteArray_AS_STRING(f->tags))[i] = tag;
    ((double *)PyByteArray_AS_STRING(f->num))[i] = num;
    ((int64_t *)PyByteArray_AS_STRING(f->ival))[i] = iv;
    ((int64_t *)PyByteArray_AS_STRING(f->start))[i] = *pp - base;
    ((int64_t *)PyByteArray_AS_STRING(f->stop))[i] = p - base;
    *pp = p;
    return 0;
}

#define MAX_FIELDS 16

PyDoc_STRVAR(fields_doc,
             "fields(buffer, starts, stops, keys)\n--\n\n"
             "The values of the keys (a tuple of bytes) in each args object "
             "buffer[starts[i]:stops[i]] (a negative start: no args, every key absent), per "
             "key (tags, num, ival, start, stop) as bytearrays of uint8, float64 and int64: "
             "what the key held, its number, its integer (an int array's product), its span. "
             "None when an args value is not an object, or not read here exactly (an escaped "
             "key, invalid JSON, deep nesting). A repeated key's last value counts.");

static PyObject *fields(PyObject *self, PyObject *args) {
    Py_buffer view, sv, ev;
    PyObject *keys;
    if (!PyArg_ParseTuple(args, "y*y*y*O!:fields", &view, &sv, &ev, &PyTuple_Type, &keys))
        return NULL;
    PyObject *out = NULL;
    Field f[MAX_FIELDS];
    memset(f, 0, sizeof f);
    Py_ssize_t nk = PyTuple_GET_SIZE(keys), n = sv.len / 8;
    const char *kp[MAX_FIELDS];
    Py_ssize_t kn[MAX_FIELDS];
    const int64_t *st = sv.buf, *en = ev.buf;
    cp base = view.buf;
    int r = 0;
    if (nk > MAX_FIELDS || ev.len != sv.len) {
        PyErr_SetString(PyExc_ValueError, "too many keys, or starts and stops differ");
        goto done;
    }
    for (Py_ssize_t k = 0; k < nk; k++) {
        PyObject *key = PyTuple_GET_ITEM(keys, k);
        if (!PyBytes_Check(key)) {
            PyErr_SetString(PyExc_TypeError, "keys must be bytes");
            goto done;
        }
        kp[k] = PyBytes_AS_STRING(key);
        kn[k] = PyBytes_GET_SIZE(key);
        f[k].tags = new_bytearray(NULL, n);
        f[k].num = new_bytearray(NULL, n * 8);
        f[k].ival = new_bytearray(NULL, n * 8);
        f[k].start = new_bytearray(NULL, n * 8);
        f[k].stop = new_bytearray(NULL, n * 8);
        if (!f[k].tags || !f[k].num || !f[k].ival || !f[k].start || !f[k].stop) goto done;
        memset(PyByteArray_AS_STRING(f[k].tags), F_ABSENT, n);
        memset(PyByteArray_AS_STRING(f[k].num), 0, n * 8);
        memset(PyByteArray_AS_STRING(f[k].ival), 0, n * 8);
        memset(PyByteArray_AS_STRING(f[k].start), 0xff, n * 8); /* -1: no span */
        memset(PyByteArray_AS_STRING(f[k].stop), 0xff, n * 8);
    }
    for (Py_ssize_t i = 0; i < n && !r; i++) {
        if (st[i] < 0) continue;
        if (st[i] > en[i] || en[i] > view.len) {
            PyErr_SetString(PyExc_ValueError, "span outside the buffer");
            goto done;
        }
        cp p = base + st[i], end = base + en[i], s;
        Py_ssize_t sn;
        int esc;
        if (p >= end || *p != '{') {
            r = BAIL;
            break;
        }
        p = skip_ws(p + 1, end);
        if (p < end && *p == '}') {
            if (skip_ws(p + 1, end) != end) r = BAIL; /* text after the object */
            continue;
        }
        for (;;) {
            if (scan_string(&p, end, &s, &sn, &esc) || esc) {
                r = BAIL;
                break;
            }
            p = skip_ws(p, end);
            if (p >= end || *p != ':') {
                r = BAIL;
                break;
            }
            p = skip_ws(p + 1, end);
            if (p >= end) {
                r = BAIL;
                break;
            }
            Py_ssize_t k = 0;
            while (k < nk && !(kn[k] == sn && memcmp(kp[k], s, sn) == 0)) k++;
            if (k < nk) {
                if ((r = field_value(base, &p, end, &f[k], i))) break;
            } else if ((r = skip_value(&p, end, 1))) {
                break;
            }
            p = skip_ws(p, end);
            if (p < end && *p == ',') {
                p = skip_ws(p + 1, end);
                continue;
            }
            if (p < end && *p == '}') {
                if (skip_ws(p + 1, end) != end) r = BAIL; /* text after the object */
                break;
            }
            r = BAIL;
            break;
        }
    }
    if (r) {
        out = Py_NewRef(Py_None);
        goto done;
    }
    out = PyTuple_New(nk);
    if (!out) goto done;
    for (Py_ssize_t k = 0; k < nk; k++) {
        PyObject *t = PyTuple_Pack(5, f[k].tags, f[k].num, f[k].ival, f[k].start, f[k].stop);
        if (!t) {
            Py_CLEAR(out);
            goto done;
        }
        PyTuple_SET_ITEM(out, k, t);
    }
done:
    for (Py_ssize_t k = 0; k < MAX_FIELDS; k++) {
        Py_XDECREF(f[k].tags);
        Py_XDECREF(f[k].num);
        Py_XDECREF(f[k].ival);
        Py_XDECREF(f[k].start);
        Py_XDECREF(f[k].stop);
    }
    PyBuffer_Release(&view);
    PyBuffer_Release(&sv);
    PyBuffer_Release(&ev);
    return out;
}

PyDoc_STRVAR(texts_doc,
             "texts(buffer, starts, stops)\n--\n\n"
             "The text of each span buffer[starts[i]:stops[i]] (UTF-8, invalid bytes replaced; "
             "a negative start: the empty string), dictionary-encoded: (codes, distinct), "
             "codes an int32 bytearray of each span's place in distinct, the distinct texts "
             "in order of first appearance.");

static PyObject *texts(PyObject *self, PyObject *args) {
    Py_buffer view, sv, ev;
    if (!PyArg_ParseTuple(args, "y*y*y*:texts", &view, &sv, &ev)) return NULL;
    PyObject *out = NULL, *distinct = NULL, *codes = NULL;
    Table seen = {0};
    Py_ssize_t n = sv.len / 8;
    const int64_t *st = sv.buf, *en = ev.buf;
    cp base = view.buf;
    if (ev.len != sv.len) {
        PyErr_SetString(PyExc_ValueError, "starts and stops differ in length");
        goto done;
    }
    if (table_init(&seen, 64)) goto done;
    distinct = PyList_New(0);
    codes = new_bytearray(NULL, n * 4);
    if (!distinct || !codes) goto done;
    int32_t *code = (int32_t *)PyByteArray_AS_STRING(codes);
    for (Py_ssize_t i = 0; i < n; i++) {
        cp s = base;
        Py_ssize_t len = 0;
        if (st[i] >= 0) {
            if (st[i] > en[i] || en[i] > view.len) {
                PyErr_SetString(PyExc_ValueError, "span outside the buffer");
                goto done;
            }
            s = base + st[i];
            len = en[i] - st[i];
        }
        uint64_t h = hash_bytes(s, len);
        Entry *e = table_find(&seen, s, len, h);
        if (!e->raw) {
            PyObject *text = PyUnicode_DecodeUTF8((const char *)s, len, "replace");
            char *raw = text ? PyMem_Malloc(len ? len : 1) : NULL;
            if (!raw) {
                Py_XDECREF(text);
                if (!PyErr_Occurred()) PyErr_NoMemory();
                goto done;
            }
            memcpy(raw, s, len);
            e->hash = h;
            e->len = len;
            e->raw = raw;
            e->text = text;
            e->code = PyList_GET_SIZE(distinct);
            if (PyList_Append(distinct, text)) goto done;
            seen.used++;
            if (seen.used * 2 > seen.cap) {
                if (table_grow(&seen)) {
                    PyErr_NoMemory();
                    goto done;
                }
                e = table_find(&seen, s, len, h);
            }
        }
        code[i] = (int32_t)e->code;
    }
    out = PyTuple_Pack(2, codes, distinct);
done:
    Py_XDECREF(codes);
    Py_XDECREF(distinct);
    table_free(&seen);
    PyBuffer_Release(&view);
    PyBuffer_Release(&sv);
    PyBuffer_Release(&ev);
    return out;
}

/* The ops' nesting walks, in _nest.c. */
extern PyObject *nbprof_nest(PyObject *self, PyObject *args);
extern PyObject *nbprof_innermost(PyObject *self, PyObject *args);
extern const char nbprof_nest_doc[], nbprof_innermost_doc[];

static PyMethodDef methods[] = {
    {"texts", texts, METH_VARARGS, texts_doc},
    {"fields", fields, METH_VARARGS, fields_doc},
    {"scan", scan, METH_VARARGS, scan_doc},
    {"join", join, METH_VARARGS, join_doc},
    {"nest", nbprof_nest, METH_VARARGS, nbprof_nest_doc},
    {"innermost", nbprof_innermost, METH_VARARGS, nbprof_innermost_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "nbprof.trace._accel",
    "Trace events scanned into columns, and CPU ops nested per thread.", -1,
    methods,
};

PyMODINIT_FUNC PyInit__accel(void) {
    init_special();
    return PyModule_Create(&module);
}
