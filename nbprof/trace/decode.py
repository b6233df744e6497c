"""The pure-Python reading of trace events: msgspec structs, then columns.

This is the reference path: the accelerator (:mod:`nbprof.trace.accel`) reads the same
text into the same :class:`~nbprof.trace.events.EventColumns`, and leaves here whatever it
cannot read exactly. msgspec decodes a piece of the event array straight into small
structs holding only the fields nbprof reads, ``args`` kept as :class:`msgspec.Raw` (a
slice, no parsing); args are decoded only for the event kinds that need them, in one batch
per kind (:func:`decode_args`). Top-level values other than the events are read by
:func:`top_values`.

Timestamps are kept as raw text too and parsed into integer nanoseconds with numpy
(:func:`parse_ts_ns`): an epoch timestamp in µs with three decimals (``1712195495519695.812``)
has 19 significant digits, more than a float64 holds, so parsing it as a float would lose the
nanoseconds.
"""

from __future__ import annotations

import logging
import re
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, TypeVar, cast

import msgspec
import numpy as np

from nbprof.errors import TraceError as TraceError  # tables raises it as dec.TraceError
from nbprof.errors import plain_text
from nbprof.trace.events import TEXT_ID, ArgSpans, EventColumns
from nbprof.trace.io import encoding_problem
from nbprof.trace.text import Text

logger = logging.getLogger(__name__)

_EMPTY = msgspec.Raw(b"")
_EMPTY_OBJ = msgspec.Raw(b"{}")


class Event(msgspec.Struct, gc=False):
    """One trace event: the fields every kind shares. ``ts`` and ``args`` stay raw."""

    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: int | str = 0
    tid: int | str = 0
    ts: msgspec.Raw = _EMPTY
    dur: float = 0.0
    id: int | str | None = None
    args: msgspec.Raw = _EMPTY_OBJ


class IntTsEvent(msgspec.Struct, gc=False):
    """:class:`Event` with ``ts`` decoded as a number: for files whose timestamps are integers.

    Most traces write integer µs; reading those as numbers skips keeping and re-parsing
    their text. A float read this way may have lost its nanoseconds, so any chunk holding
    one (or anything else unusual) is decoded again as :class:`Event`.
    """

    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: int | str = 0
    tid: int | str = 0
    # UNSET, not None, when absent: an explicit ``null`` is an error the exact path words.
    # Integers only: a float (or anything else) fails the chunk, which is then read exactly.
    ts: int | msgspec.UnsetType = msgspec.UNSET
    dur: float = 0.0
    id: int | str | None = None
    args: msgspec.Raw = _EMPTY_OBJ


class DeviceProps(msgspec.Struct, gc=False):
    """An entry of the file's ``deviceProperties`` list (Kineto's names)."""

    id: int | str = -1
    name: str = ""
    totalGlobalMem: int | None = None
    computeMajor: int | None = None
    computeMinor: int | None = None
    numSms: int | None = None
    maxThreadsPerMultiprocessor: int | None = None


def json_array(raws: list[msgspec.Raw]) -> bytes:
    """The JSON array of these values, copied once (``b"[" + b",".join(...) + b"]"``
    would copy the whole text twice more: a chunk's events are megabytes)."""
    if len(raws) < 2:
        return b"[" + b"".join(raws) + b"]"
    return b",".join([b"[" + bytes(raws[0]), *raws[1:-1], bytes(raws[-1]) + b"]"])


#: An event as decoded, whichever way its timestamp was read.
AnyEvent = Event | IntTsEvent


@dataclass
class Top:
    """A file's top-level values other than its events, read."""

    metadata: dict[str, Any] = field(default_factory=dict)
    device_props: list[DeviceProps] = field(default_factory=list)
    #: ``baseTimeNanoseconds``: when present, timestamps are relative to it.
    base_ns: int | None = None
    #: ``distributedInfo.rank`` when the file says it.
    rank: int | None = None
    #: Top-level values that could not be read and are ignored, in words for the user.
    notes: list[str] = field(default_factory=list)


NO_TS = np.iinfo(np.int64).min

_events_decoder = msgspec.json.Decoder(list[Event])
_int_ts_decoder = msgspec.json.Decoder(list[IntTsEvent])
_raw_list_decoder = msgspec.json.Decoder(list[msgspec.Raw])
_props_decoder = msgspec.json.Decoder(list[DeviceProps])

_TYPE_WORDS = {
    "float": "a number",
    "int": "an integer",
    "str": "a string",
    "object": "an object",
    "array": "an array",
    "null": "null",
    "bool": "a boolean",
}
_VALIDATION_RE = re.compile(r"Expected `(?P<want>[^`]*)`, got `(?P<got>[^`]*)`")
_INDEX_RE = re.compile(r"^\[(\d+)\]")


def _words(type_text: str) -> str:
    parts = [p.strip() for p in type_text.split("|")]
    return " or ".join(_TYPE_WORDS.get(p, p) for p in parts)


def explain_validation(e: msgspec.ValidationError) -> tuple[int | None, str, str]:
    """(index of the list item, the field path below it, the plain problem) of ``e``."""
    msg = str(e)
    head, _, at = msg.partition(" - at `$")
    at = at.rstrip("`")
    im = _INDEX_RE.match(at)
    index = int(im.group(1)) if im else None
    sub = (at[im.end() :] if im else at).lstrip(".")
    m = _VALIDATION_RE.match(head)
    if m:
        problem = f"should be {_words(m.group('want'))}, got {_words(m.group('got'))}"
    else:
        problem = head.rstrip(".").lower()
    return index, sub, problem


#: Text of any kind nbprof reads: the file's bytes (gzip output comes as a bytearray).
Buffer = bytes | bytearray | memoryview


def too_deep() -> str:
    """The reason for JSON nested beyond what the decoder (Python's recursion limit) takes."""
    return (
        f"JSON nested too deeply (more than about {sys.getrecursionlimit()} arrays or objects "
        "inside one another; a profiler trace nests a handful)"
    )


def last_non_space(data: Buffer, end: int) -> int:
    """The last position before ``end`` that is not JSON whitespace (-1 if none).

    Scanned backwards in growing blocks with numpy: megabytes of padding cost milliseconds,
    and the usual case (a byte or two) looks at one small block.
    """
    step = 256
    while end > 0:
        lo = max(0, end - step)
        # Every byte above 32 is solid; of those at or below it (whitespace, or control
        # bytes, which JSON does not allow there) only the run after the last one above 32
        # needs the exact test.
        above = np.frombuffer(data, np.uint8, count=end - lo, offset=lo) > 32
        back = int(above[::-1].argmax())  # argmax stops at the first True
        low = end - back if above[-1 - back] else lo
        tail = np.frombuffer(data, np.uint8, count=end - low, offset=low)
        solid = np.flatnonzero((tail != 32) & (tail != 10) & (tail != 13) & (tail != 9))
        if len(solid):
            return low + int(solid[-1])
        if low > lo:
            return low - 1
        end = lo
        step = min(step * 16, 1 << 24)
    return -1


_AT_BYTE = re.compile(r"\(byte (\d+)\)")


#: What a msgspec decode raises for bad input: msgspec 0.18 and 0.19 raise Python's own
#: UnicodeDecodeError for invalid UTF-8 inside a string, later releases a DecodeError.
DECODE_ERRORS: tuple[type[Exception], ...] = (msgspec.DecodeError, UnicodeDecodeError)
#: Those, and JSON nested beyond what the decoder takes.
DECODE_OR_DEPTH_ERRORS: tuple[type[Exception], ...] = (*DECODE_ERRORS, RecursionError)


def json_error(path: str, data: Buffer, e: Exception) -> TraceError:
    msg = str(e)
    if last_non_space(data, len(data)) < 0:
        return TraceError(path, "file is empty")
    encoding = encoding_problem(bytes(data[:4]))
    if encoding:
        return TraceError(path, encoding)
    if "truncated" in msg:
        return TraceError(path, "JSON is truncated (the file was cut short)")
    msg = _AT_BYTE.sub(r"at byte \1", msg.removeprefix("JSON is malformed: "))
    return TraceError(path, f"not valid JSON ({msg})")


def top_values(top: dict[str, msgspec.Raw], dup: str | None, path: str) -> Top:
    """The top-level values other than the events (``top``, with a repeated top-level key
    ``dup``), read."""
    metadata: dict[str, Any] = {}
    base_ns: int | None = None
    rank: int | None = None
    notes: list[str] = []
    if dup == "traceEvents":
        raise TraceError(
            path,
            "`traceEvents` appears more than once at the top level: refusing to guess "
            "which one is the trace (a JSON reader keeps only the last)",
        )
    if dup is not None:
        notes.append(f"top-level `{plain_text(dup)}` appears more than once; the last one is used")
    if "traceEvents" not in top:
        raise TraceError(path, "no `traceEvents` in the file (is this a profiler trace?)")
    del top["traceEvents"]
    for key, raw in top.items():
        try:
            metadata[key] = msgspec.json.decode(raw)
        except (msgspec.DecodeError, UnicodeDecodeError, RecursionError) as e:
            # The skim checks the JSON's structure but not the UTF-8 inside raw strings,
            # so a value can still fail here. Metadata only adds to the tables: ignore it.
            why = too_deep() if isinstance(e, RecursionError) else str(e)
            metadata[key] = None
            if key != "deviceProperties":  # logged and noted below, as malformed
                safe = plain_text(key)
                logger.warning(
                    "%s: ignoring unreadable top-level `%s` (%s)", plain_text(path), safe, why
                )
                notes.append(f"top-level `{safe}` could not be read ({why}) and is ignored")
    raw_props = top.get("deviceProperties")
    got = _device_props(raw_props, path)
    if got is None:
        notes.append("deviceProperties was malformed and is ignored")
    props = got or []
    base = metadata.get("baseTimeNanoseconds")
    if isinstance(base, int) and not isinstance(base, bool) and base >= 0:
        if base >= 2**62:
            raise TraceError(path, f"baseTimeNanoseconds out of range ({base})")
        base_ns = base
    info = metadata.get("distributedInfo")
    if isinstance(info, dict):
        r = info.get("rank")
        if isinstance(r, int) and not isinstance(r, bool) and 0 <= r < 2**31:
            rank = r
    return Top(metadata, props, base_ns, rank, notes)


@dataclass
class TsMode:
    """Per file: whether integer timestamps are still worth trying (see :class:`IntTsEvent`)."""

    try_int: bool = True


#: The largest integer µs timestamp taken as is (the exact path checks the same bound), and
#: the longest duration: about 285 years, so that ns times still fit in an int64.
MAX_TS_US = 9_000_000_000_000_000


def _decode_joined(
    joined: bytes | memoryview,
    offset: int,
    count: int,
    path: str,
    mode: TsMode | None,
    *,
    malformed: bool = False,
) -> tuple[list[AnyEvent], np.ndarray]:
    """Events ``offset ..`` of the JSON array ``joined`` (``count`` of them, as far as an
    error message says): their structs and timestamps in ns. With ``mode`` still allowing
    it, integer timestamps are read as numbers; the first run where that does not hold
    turns ``mode`` off for the rest of the file (a trace writes its timestamps one way
    throughout), so a float-timestamp file pays for one run decoded twice. ``malformed``:
    text that is not valid JSON raises :class:`Malformed` (the caller words it)."""
    if mode is not None and mode.try_int:
        fast = _int_ts(joined)
        if fast is not None:
            return fast
        mode.try_int = False
    try:
        events = _events_decoder.decode(joined)
    except msgspec.ValidationError as e:
        index, sub, problem = explain_validation(e)
        where = offset + (index or 0)
        if not sub:
            raise TraceError(path, f"event {where} {problem}") from None
        raise TraceError(path, f"event {where}: `{sub}` {problem}") from None
    except DECODE_ERRORS as e:
        if malformed:
            raise Malformed(str(e)) from None
        # The skim leaves event contents raw, so invalid UTF-8 inside a string is first
        # seen here.
        last = offset + count - 1
        raise TraceError(path, f"not valid JSON in events {offset}-{last} ({e})") from None
    except RecursionError:
        last = offset + count - 1
        raise TraceError(path, f"events {offset}-{last}: {too_deep()}") from None
    # list is invariant: a list of one event type is read here as a list of either type.
    return cast("list[AnyEvent]", events), parse_ts_ns([e.ts for e in events], path, offset)


def _int_ts(joined: bytes | memoryview) -> tuple[list[AnyEvent], np.ndarray] | None:
    """The chunk's structs and ns timestamps when every ``ts`` is a plain integer, else None.

    None also for any type error: the exact path decodes the chunk again and words it.
    """
    try:
        events = _int_ts_decoder.decode(joined)
    except msgspec.ValidationError:
        return None
    # The exact path words the error.
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        return None
    values = [e.ts for e in events]
    n = len(values)
    missing: np.ndarray | None = None
    try:
        # Every value is an int or UNSET (the struct allows nothing else), so this C loop
        # cannot truncate a float; np.array would look at every value's type first.
        ts = np.fromiter(values, np.int64, n)
    except TypeError:
        # Events without ``ts`` (some metadata events) hold UNSET.
        unset = msgspec.UNSET
        missing = np.fromiter([v is unset for v in values], bool, n)
        try:
            ts = np.fromiter([0 if v is unset else v for v in values], np.int64, n)
        except OverflowError:
            return None
    except OverflowError:  # beyond int64: the exact path bounds it
        return None
    if not n or ts.min() < 0 or ts.max() > MAX_TS_US:
        return None
    ts = ts * 1000
    if missing is not None:
        ts[missing] = NO_TS
    return cast("list[AnyEvent]", events), ts


class Malformed(Exception):
    """Text that is not a JSON array of values (wrongly cut, or broken JSON); the reader
    reads it otherwise, or words the error from the whole file."""


#: Event structs decoded at once, at most, from a piece read whole (the structs of a whole
#: file's events together would cost several times its JSON).
CHUNK = 8192


def events(
    data: bytearray,
    span: tuple[int, int],
    offset: int,
    path: str,
    mode: TsMode,
    cat_no: dict[str, int],
    phase_code: dict[str, int],
    batch: int | None = None,
) -> Iterator[EventColumns]:
    """The events of ``data[span]`` (the first of them event ``offset``) as columns: all at
    once, or (with ``batch``) that many at a time. Raises :class:`Malformed` where the text
    is not a list of JSON values, TraceError for an event that is not valid.

    The bytes just outside the span are whitespace (or the array's ``[``) before it and a
    comma or whitespace after it: they are turned into brackets while the piece is
    decoded from a view, so the piece is not copied.
    """
    start, stop = span
    before, after = data[start - 1], data[stop]
    data[start - 1], data[stop] = 0x5B, 0x5D  # "[", "]"
    try:
        text = memoryview(data)[start - 1 : stop + 1]
        if batch is None:
            got = _decode_joined(text, offset, 1, path, mode, malformed=True)
            yield _columns(*got, cat_no, phase_code)
            return
        try:
            raws = _raw_list_decoder.decode(text)
        except DECODE_OR_DEPTH_ERRORS as e:
            raise Malformed(str(e)) from None
        del text
        for at in range(0, len(raws), batch):
            part = raws[at : at + batch]
            got = _decode_joined(json_array(part), offset + at, len(part), path, mode)
            del part
            yield _columns(*got, cat_no, phase_code)
    finally:
        data[start - 1], data[stop] = before, after


def _columns(
    evs: list[AnyEvent], ts: np.ndarray, cat_no: dict[str, int], phase_code: dict[str, int]
) -> EventColumns:
    """The structs' fields as columns, as the accelerator gives them."""
    n = len(evs)
    cget, pget = cat_no.get, phase_code.get
    # One pass of two dict lookups per event, category and phase packed in one small int.
    codes = np.fromiter([cget(e.cat, 0) + pget(e.ph, 0) for e in evs], np.uint8, n)
    pid, pid_text = _ids([e.pid for e in evs])
    tid, tid_text = _ids([e.tid for e in evs])
    fid, id_text = _ids([-1 if e.id is None else e.id for e in evs])
    return EventColumns(
        codes=codes,
        name=Text.of(e.name for e in evs),
        pid=pid,
        tid=tid,
        id=fid,
        ts=ts,
        # The struct's dur is always a float: no type discovery needed, unlike np.array.
        dur=np.fromiter([e.dur for e in evs], np.float64, n),
        args=[e.args for e in evs],
        pid_text=pid_text,
        tid_text=tid_text,
        id_text=id_text,
    )


def _ids(values: list[int | str]) -> tuple[np.ndarray, dict[int, str]]:
    """Ids as int64, and as text (their column :data:`TEXT_ID`) where they are text or an
    integer beyond int64 (the tables give those codes, as the accelerator's text ids)."""
    try:
        return np.fromiter(values, np.int64, len(values)), {}
    except (TypeError, ValueError, OverflowError):
        pass
    out = np.empty(len(values), np.int64)
    texts: dict[int, str] = {}
    for i, v in enumerate(values):
        if isinstance(v, int) and TEXT_ID < v < 2**63:
            out[i] = v
        else:
            out[i] = TEXT_ID
            texts[i] = str(v)
    return out, texts


def _device_props(raw: msgspec.Raw | None, path: str) -> list[DeviceProps] | None:
    """The file's device properties; None when they are there but malformed."""
    # An explicit null says "none", as torch's `[]` does when it saw no GPU: not malformed.
    if raw is None or bytes(raw) == b"null":
        return []
    try:
        return _props_decoder.decode(raw)
    # ValidationError and bad UTF-8 too.
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError) as e:
        # Raw values skip string contents, so bad UTF-8 inside them surfaces only here.
        # Device properties only enrich the devices table: a malformed list is not worth
        # refusing the whole trace for. The caller notes that they were ignored.
        why = too_deep() if isinstance(e, RecursionError) else plain_text(e)
        logger.warning("%s: ignoring malformed deviceProperties (%s)", plain_text(path), why)
        return None


def parse_ts_ns(raws: list[msgspec.Raw], path: str, offset: int = 0) -> np.ndarray:
    """Raw JSON numbers (µs) to int64 ns, exactly; ``NO_TS`` where the text is empty.

    Integer timestamps (most traces) are parsed in one C call over the joined text. Decimal
    ones are split at the dot with numpy's string functions and the integer and fraction
    parts converted as integers (fraction truncated to ns). Anything else (exponents,
    strings, null, negatives) goes through :func:`_parse_one`, which parses it or raises a
    TraceError naming the event.
    """
    n = len(raws)
    if n == 0:
        return np.zeros(0, np.int64)
    lens = np.fromiter(map(len, raws), np.int64, n)
    missing = lens == 0
    items = [r if len(r) else b"0" for r in raws] if missing.any() else raws
    joined = b",".join(items)
    out: np.ndarray | None = None
    if not re.search(rb"[^0-9,]", joined):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            try:
                got = np.fromstring(joined, dtype=np.int64, sep=",")
                if len(got) == n and (got <= MAX_TS_US).all():
                    out = got * 1000
            except (ValueError, DeprecationWarning, OverflowError):
                out = None
    if out is None:
        out = _parse_decimal(np.array([bytes(r) for r in items]), raws, path, offset)
    out[missing] = NO_TS
    return out


def _split_point(arr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The parts of each byte string before and after its first "."."""
    strings = getattr(np, "strings", None)
    if strings is not None and hasattr(strings, "partition"):  # numpy >= 2.1
        ip, _, fp = strings.partition(arr, b".")
        return ip, fp
    parts = np.char.partition(arr, b".")  # older numpy: one (n, 3) array
    return parts[:, 0], parts[:, 2]


def _parse_decimal(arr: np.ndarray, raws: list[msgspec.Raw], path: str, offset: int) -> np.ndarray:
    try:
        ip, fp = _split_point(arr)
        whole = ip.astype(np.int64)
        frac = np.char.ljust(fp, 3, b"0").astype("S3").astype(np.int64)
        if np.char.startswith(ip, b"-").any() or (frac < 0).any():
            raise ValueError("negative")
        if (whole > MAX_TS_US).any():
            raise OverflowError
        return whole * 1000 + frac
    except (ValueError, OverflowError):
        return np.array(
            [_parse_one(bytes(r), offset + i, path) for i, r in enumerate(raws)], np.int64
        )


def _json_kind(text: bytes) -> str:
    """A JSON value's kind in words (``null``, ``a boolean``, ...), or its first characters."""
    kinds = {b"n": "null", b"t": "a boolean", b"f": "a boolean", b"[": "an array",
             b"{": "an object", b'"': "a string"}  # fmt: skip
    if text[:1] in kinds:
        return kinds[text[:1]]
    return repr(plain_text(text[:20].decode("utf-8", "replace")))


def _parse_one(text: bytes, index: int, path: str) -> int:
    if not text:
        return 0
    if text[:1] == b'"':
        raise TraceError(path, f"event {index}: `ts` should be a number, got a string")
    try:
        value = Decimal(text.decode("ascii"))
    except (InvalidOperation, UnicodeDecodeError):
        raise TraceError(
            path, f"event {index}: `ts` should be a number, got {_json_kind(text)}"
        ) from None
    if not value.is_finite():
        raise TraceError(path, f"event {index}: `ts` should be a finite number")
    if value < 0:
        raise TraceError(path, f"event {index}: negative timestamp ({text.decode()})")
    ns = int(value * 1000)
    if ns >= 2**63:
        raise TraceError(path, f"event {index}: timestamp out of range ({text.decode()})")
    return ns


S = TypeVar("S", bound=msgspec.Struct)


def decode_args(
    raws: list[msgspec.Raw] | ArgSpans, kind: type[S], path: str, event_index: np.ndarray
) -> list[S]:
    """Decode the ``args`` of many events into ``kind`` in one call (one joined JSON array).

    ``event_index`` maps a position in ``raws`` back to the event's index in the file, so a
    type error names the event the user can find.
    """
    if not len(raws):
        return []
    if isinstance(raws, ArgSpans):
        from nbprof.trace import accel  # spans come only from it

        joined = accel.join(raws)
    else:
        joined = json_array(raws)
    try:
        return msgspec.json.decode(joined, type=list[kind])  # type: ignore[valid-type]
    except msgspec.ValidationError as e:
        index, sub, problem = explain_validation(e)
        where = int(event_index[index]) if index is not None else "?"
        if not sub:
            raise TraceError(path, f"event {where}: `args` {problem}") from None
        raise TraceError(path, f"event {where}: `args.{sub}` {problem}") from None
    except DECODE_ERRORS as e:  # invalid UTF-8 inside the raw `args`
        first, last = int(event_index[0]), int(event_index[-1])
        raise TraceError(
            path, f"not valid JSON in the `args` of events {first}-{last} ({e})"
        ) from None
    except RecursionError:
        first, last = int(event_index[0]), int(event_index[-1])
        raise TraceError(path, f"the `args` of events {first}-{last}: {too_deep()}") from None


# -- args, per event kind: only the keys nbprof reads ------------------------------------------
# Wrong types in these keys raise a TraceError naming the event (see the reader's docstring);
# ``device`` and ``stream`` also accept strings because ROCm traces write some as text.


class KernelArgs(msgspec.Struct, gc=False):
    device: int | str | None = None
    stream: int | str | None = None
    correlation: int | None = None
    registers: int | float | None = msgspec.field(default=None, name="registers per thread")
    shared_mem: int | float | None = msgspec.field(default=None, name="shared memory")
    blocks_per_sm: float | None = msgspec.field(default=None, name="blocks per SM")
    occupancy: float | None = msgspec.field(default=None, name="est. achieved occupancy %")
    grid: list[int] | int | None = None
    block: list[int] | int | None = None


class CopyArgs(msgspec.Struct, gc=False):
    device: int | str | None = None
    stream: int | str | None = None
    correlation: int | None = None
    bytes: int | float | None = None
    kind: str | int | None = None


class RuntimeArgs(msgspec.Struct, gc=False):
    correlation: int | None = None
    #: A ``cuda_sync`` "Stream Wait Event": the stream whose event the waiting stream waits on.
    wait_on_stream: int | None = None


class OpArgs(msgspec.Struct, gc=False):
    external_id: int | None = msgspec.field(default=None, name="External id")
    flops: float | None = None
    input_dims: msgspec.Raw = msgspec.field(default=_EMPTY, name="Input Dims")
    input_types: msgspec.Raw = msgspec.field(default=_EMPTY, name="Input type")


class CommArgs(msgspec.Struct, gc=False):
    """What PyTorch records about a collective call (``record_param_comms`` ops, and the
    kernels of newer releases), and the shape of a ``nccl:all_reduce``-style annotation.

    Every field accepts any JSON value: these keys only enrich the collectives table, and
    their types have changed between releases ("Process Group Ranks" is a list in some and
    its text in others), so an unexpected type makes the value unknown, never the load fail.
    """

    device: Any = None
    correlation: Any = None
    collective: Any = msgspec.field(default=None, name="Collective name")
    pg_name: Any = msgspec.field(default=None, name="Process Group Name")
    pg_id: Any = msgspec.field(default=None, name="Process Group ID")
    pg_ranks: Any = msgspec.field(default=None, name="Process Group Ranks")
    group_size: Any = msgspec.field(default=None, name="Group size")
    seq: Any = msgspec.field(default=None, name="Seq")
    in_nelems: Any = msgspec.field(default=None, name="In msg nelems")
    out_nelems: Any = msgspec.field(default=None, name="Out msg nelems")
    dtype: Any = None
    input_dims: msgspec.Raw = msgspec.field(default=_EMPTY, name="Input Dims")
    input_types: msgspec.Raw = msgspec.field(default=_EMPTY, name="Input type")
