/* CPU ops' nesting per thread, and the op each call was made from, in one pass: part of
 * the accelerator nbprof.trace._accel (its module is in _accel.c), the fast paths of
 * nbprof.trace.links.nest and innermost_ops.
 *
 * The numpy paths find each op's depth and parent, and each call's innermost op, with a
 * dozen sorts and sorted searches over every op (about 0.3 s for the 567k ops and 424k
 * calls of a 2.16M-event trace). Walked in start order, one thread at a time, the same
 * answers take a heap of the open ops' ends and the last op seen at each depth; a call's
 * op is a binary search among its thread's starts, then a walk up the parents.
 *
 * They answer only where the walk gives the numpy path's answer exactly: starts in
 * ascending order, equal starts by end descending, no end before its start, no NaN, and
 * (for calls) parents before their children and walks of a bounded length. Otherwise they
 * return False and the numpy path runs.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Rows' order accepted: the walk's "ended" is the numpy path's count of ends at or before
 * a start only when later rows cannot end before an earlier row starts. */
static int walkable(const double *s, const double *e, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) {
        if (isnan(s[i]) || isnan(e[i]) || e[i] < s[i]) return 0;
        if (i && (s[i] < s[i - 1] || (s[i] == s[i - 1] && e[i] > e[i - 1]))) return 0;
    }
    return 1;
}

/* A binary min-heap of doubles. */
static void heap_push(double *h, Py_ssize_t *size, double v) {
    Py_ssize_t i = (*size)++;
    while (i > 0) {
        Py_ssize_t up = (i - 1) / 2;
        if (h[up] <= v) break;
        h[i] = h[up];
        i = up;
    }
    h[i] = v;
}

static void heap_pop(double *h, Py_ssize_t *size) {
    double v = h[--(*size)];
    Py_ssize_t n = *size, i = 0;
    for (;;) {
        Py_ssize_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && h[c + 1] < h[c]) c++;
        if (v <= h[c]) break;
        h[i] = h[c];
        i = c;
    }
    if (n) h[i] = v;
}

/* (pid, tid) pairs to dense thread numbers, in order of first appearance. */
typedef struct {
    int64_t pid, tid, code;
} Thread;

typedef struct {
    Thread *slots; /* code -1: empty */
    Py_ssize_t cap, used;
} Threads;

static uint64_t pair_hash(int64_t pid, int64_t tid) {
    uint64_t h = (uint64_t)pid * 0x9E3779B97F4A7C15ULL ^ (uint64_t)tid;
    h *= 0xC2B2AE3D27D4EB4FULL;
    return h ^ (h >> 31);
}

static int threads_init(Threads *t, Py_ssize_t cap) {
    t->cap = cap;
    t->used = 0;
    t->slots = malloc((size_t)cap * sizeof(Thread));
    if (!t->slots) return -1;
    for (Py_ssize_t i = 0; i < cap; i++) t->slots[i].code = -1;
    return 0;
}

static Thread *threads_find(const Threads *t, int64_t pid, int64_t tid) {
    Py_ssize_t mask = t->cap - 1, i = (Py_ssize_t)(pair_hash(pid, tid) & (uint64_t)mask);
    for (;;) {
        Thread *x = &t->slots[i];
        if (x->code < 0 || (x->pid == pid && x->tid == tid)) return x;
        i = (i + 1) & mask;
    }
}

/* The pair's number, given on first sight; -1 when out of memory. */
static int64_t threads_code(Threads *t, int64_t pid, int64_t tid) {
    Thread *x = threads_find(t, pid, tid);
    if (x->code >= 0) return x->code;
    if ((t->used + 1) * 2 > t->cap) {
        Threads bigger;
        if (threads_init(&bigger, t->cap * 2)) return -1;
        for (Py_ssize_t i = 0; i < t->cap; i++)
            if (t->slots[i].code >= 0)
                *threads_find(&bigger, t->slots[i].pid, t->slots[i].tid) = t->slots[i];
        bigger.used = t->used;
        free(t->slots);
        *t = bigger;
        x = threads_find(t, pid, tid);
    }
    x->pid = pid;
    x->tid = tid;
    x->code = t->used++;
    return x->code;
}

/* Rows grouped by thread: each thread's rows in their order, order[first[t]:first[t+1]]. */
typedef struct {
    Threads map;
    int64_t *code, *order, *first;
} Grouped;

static void grouped_free(Grouped *g) {
    free(g->map.slots);
    free(g->code);
    free(g->order);
    free(g->first);
}

static int group(Grouped *g, const int64_t *pid, const int64_t *tid, Py_ssize_t n) {
    memset(g, 0, sizeof(*g));
    if (threads_init(&g->map, 64)) return -1;
    g->code = malloc((size_t)(n ? n : 1) * sizeof(int64_t));
    g->order = malloc((size_t)(n ? n : 1) * sizeof(int64_t));
    if (!g->code || !g->order) return -1;
    for (Py_ssize_t i = 0; i < n; i++)
        if ((g->code[i] = threads_code(&g->map, pid[i], tid[i])) < 0) return -1;
    int64_t threads = g->map.used;
    g->first = calloc((size_t)threads + 1, sizeof(int64_t));
    int64_t *fill = malloc((size_t)(threads ? threads : 1) * sizeof(int64_t));
    if (!g->first || !fill) {
        free(fill);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) g->first[g->code[i] + 1]++;
    for (int64_t t = 0; t < threads; t++) g->first[t + 1] += g->first[t];
    memcpy(fill, g->first, (size_t)threads * sizeof(int64_t));
    for (Py_ssize_t i = 0; i < n; i++) g->order[fill[g->code[i]]++] = i;
    free(fill);
    return 0;
}

static int same_length(Py_buffer *v, Py_ssize_t n, Py_ssize_t item) {
    return v->len == n * item;
}

const char nbprof_nest_doc[] =
    "nest(pid, tid, starts, ends, depth, parent)\n--\n\n"
             "Fill depth (int32) and parent (int64) for rows of int64 pids and tids and\n"
             "float64 starts and ends; False (nothing written) where the rows are not in\n"
             "the order the walk needs.";

PyObject *nbprof_nest(PyObject *self, PyObject *args) {
    Py_buffer pv, tv, sv, ev, dv, av;
    if (!PyArg_ParseTuple(args, "y*y*y*y*w*w*:nest", &pv, &tv, &sv, &ev, &dv, &av))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = sv.len / (Py_ssize_t)sizeof(double);
    Grouped g;
    memset(&g, 0, sizeof(g));
    int64_t *last_at = NULL;
    double *heap = NULL;
    if (!same_length(&pv, n, sizeof(int64_t)) || !same_length(&tv, n, sizeof(int64_t)) ||
        !same_length(&ev, n, sizeof(double)) || !same_length(&dv, n, sizeof(int32_t)) ||
        !same_length(&av, n, sizeof(int64_t))) {
        PyErr_SetString(PyExc_ValueError, "nest: buffers of different lengths");
        goto done;
    }
    const double *s = sv.buf, *e = ev.buf;
    int32_t *depth = dv.buf;
    int64_t *parent = av.buf;
    if (!walkable(s, e, n)) {
        result = Py_NewRef(Py_False);
        goto done;
    }
    last_at = malloc((size_t)(n + 1) * sizeof(int64_t));
    heap = malloc((size_t)(n ? n : 1) * sizeof(double));
    if (!last_at || !heap || group(&g, pv.buf, tv.buf, n)) {
        PyErr_NoMemory();
        goto done;
    }
    for (int64_t t = 0; t < g.map.used; t++) {
        Py_ssize_t open = 0;
        int64_t deepest = -1;
        for (int64_t k = g.first[t]; k < g.first[t + 1]; k++) {
            int64_t i = g.order[k];
            /* Ops ended by this start (end <= start) close; starts only grow, so they stay
             * closed for every later row of the thread. */
            while (open && heap[0] <= s[i]) heap_pop(heap, &open);
            int64_t d = open;
            /* The parent: the thread's last row one level up. */
            parent[i] = d > 0 && d - 1 <= deepest ? last_at[d - 1] : -1;
            /* Levels never seen on this thread (possible only with zero-length rows):
             * no last row there. */
            for (int64_t l = deepest + 1; l < d; l++) last_at[l] = -1;
            last_at[d] = i;
            if (d > deepest) deepest = d;
            depth[i] = (int32_t)d;
            heap_push(heap, &open, e[i]);
        }
    }
    result = Py_NewRef(Py_True);
done:
    grouped_free(&g);
    free(last_at);
    free(heap);
    PyBuffer_Release(&pv);
    PyBuffer_Release(&tv);
    PyBuffer_Release(&sv);
    PyBuffer_Release(&ev);
    PyBuffer_Release(&dv);
    PyBuffer_Release(&av);
    return result;
}

/* Steps up the parents a call may take on average before the numpy path, which jumps up
 * deep trees, takes over: real traces nest a few dozen levels deep. */
#define WALK_BUDGET 64

const char nbprof_innermost_doc[] =
    "innermost(pid, tid, starts, ends, parent, q_pid, q_tid, q_t, out)\n--\n\n"
             "Fill out (int64) with each query's innermost op (-1: none), for ops as nest()\n"
             "takes them and its parents; False (out unspecified) where the walk does not\n"
             "answer.";

PyObject *nbprof_innermost(PyObject *self, PyObject *args) {
    Py_buffer pv, tv, sv, ev, av, qpv, qtv, qv, ov;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*y*y*w*:innermost", &pv, &tv, &sv, &ev, &av, &qpv,
                          &qtv, &qv, &ov))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = sv.len / (Py_ssize_t)sizeof(double);
    Py_ssize_t m = qv.len / (Py_ssize_t)sizeof(double);
    Grouped g;
    memset(&g, 0, sizeof(g));
    double *gs = NULL;
    if (!same_length(&pv, n, sizeof(int64_t)) || !same_length(&tv, n, sizeof(int64_t)) ||
        !same_length(&ev, n, sizeof(double)) || !same_length(&av, n, sizeof(int64_t)) ||
        !same_length(&qpv, m, sizeof(int64_t)) || !same_length(&qtv, m, sizeof(int64_t)) ||
        !same_length(&ov, m, sizeof(int64_t))) {
        PyErr_SetString(PyExc_ValueError, "innermost: buffers of different lengths");
        goto done;
    }
    const double *s = sv.buf, *e = ev.buf, *q = qv.buf;
    const int64_t *parent = av.buf, *qpid = qpv.buf, *qtid = qtv.buf;
    int64_t *out = ov.buf;
    int ok = walkable(s, e, n);
    for (Py_ssize_t i = 0; ok && i < n; i++) ok = parent[i] >= -1 && parent[i] < i;
    for (Py_ssize_t j = 0; ok && j < m; j++) ok = !isnan(q[j]);
    if (!ok) {
        result = Py_NewRef(Py_False);
        goto done;
    }
    gs = malloc((size_t)(n ? n : 1) * sizeof(double));
    if (!gs || group(&g, pv.buf, tv.buf, n)) {
        PyErr_NoMemory();
        goto done;
    }
    /* Each thread's starts, in its rows' order (ascending: the rows are by start). */
    for (Py_ssize_t k = 0; k < n; k++) gs[k] = s[g.order[k]];
    int64_t budget = (int64_t)WALK_BUDGET * (m + 1);
    for (Py_ssize_t j = 0; j < m; j++) {
        Thread *x = threads_find(&g.map, qpid[j], qtid[j]);
        int64_t cur = -1;
        if (x->code >= 0) {
            /* The thread's last row starting at or before the query. */
            int64_t lo = g.first[x->code], hi = g.first[x->code + 1];
            while (lo < hi) {
                int64_t mid = lo + (hi - lo) / 2;
                if (gs[mid] <= q[j])
                    lo = mid + 1;
                else
                    hi = mid;
            }
            if (lo > g.first[x->code]) cur = g.order[lo - 1];
        }
        /* That op contains the query or has ended: up to the first ancestor still open. */
        while (cur >= 0 && e[cur] < q[j]) {
            if (--budget < 0) {
                result = Py_NewRef(Py_False);
                goto done;
            }
            cur = parent[cur];
        }
        out[j] = cur;
    }
    result = Py_NewRef(Py_True);
done:
    grouped_free(&g);
    free(gs);
    PyBuffer_Release(&pv);
    PyBuffer_Release(&tv);
    PyBuffer_Release(&sv);
    PyBuffer_Release(&ev);
    PyBuffer_Release(&av);
    PyBuffer_Release(&qpv);
    PyBuffer_Release(&qtv);
    PyBuffer_Release(&qv);
    PyBuffer_Release(&ov);
    return result;
}
