"""Typed decoding of a trace's JSON: only the fields nbprof reads, ``args`` left raw.

A generic parse (``json``/``orjson``) builds a dict per event and a Python object per value;
most of that is thrown away. Here a skim (:func:`decode_file`) finds the top-level keys and
slices ``traceEvents`` into one raw JSON text per event; then msgspec decodes the events a
chunk at a time (:func:`decode_chunk`) straight into small structs, keeping ``args`` as
:class:`msgspec.Raw` (a slice, no parsing); args are decoded only for the event kinds that
need them, in one batch per kind (:func:`decode_args`).

Timestamps are kept as raw text too and parsed into integer nanoseconds with numpy
(:func:`parse_ts_ns`): an epoch timestamp in µs with three decimals (``1712195495519695.812``)
has 19 significant digits, more than a float64 holds, so parsing it as a float would lose the
nanoseconds.
"""

from __future__ import annotations

import logging
import mmap
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
from nbprof.trace import scan
from nbprof.trace.io import encoding_problem
from nbprof.trace.scan import ArgSpans

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


class FlowEvent(msgspec.Struct, gc=False):
    """The fields of a flow event that links a launch to its GPU activity."""

    pid: int | str = 0
    tid: int | str = 0
    ts: msgspec.Raw = _EMPTY
    id: int | str | None = None


_flows_decoder = msgspec.json.Decoder(list[FlowEvent])


def json_array(raws: list[msgspec.Raw]) -> bytes:
    """The JSON array of these values, copied once (``b"[" + b",".join(...) + b"]"``
    would copy the whole text twice more: a chunk's events are megabytes)."""
    if len(raws) < 2:
        return b"[" + b"".join(raws) + b"]"
    return b",".join([b"[" + bytes(raws[0]), *raws[1:-1], bytes(raws[-1]) + b"]"])


def decode_flows(raws: list[msgspec.Raw], path: str) -> tuple[list[FlowEvent], np.ndarray]:
    """Flow events already checked by :func:`decode_chunk`, decoded again for their links."""
    try:
        events = _flows_decoder.decode(json_array(raws))
    except DECODE_ERRORS as e:
        raise TraceError(path, f"not valid JSON in a flow event ({e})") from None
    except RecursionError:
        raise TraceError(path, f"a flow event: {too_deep()}") from None
    return events, parse_ts_ns([e.ts for e in events], path)


#: An event as decoded, whichever way its timestamp was read.
AnyEvent = Event | IntTsEvent


@dataclass
class Decoded:
    """One file, skimmed: its events as raw JSON slices, and the top-level metadata.

    The events are decoded a chunk at a time (:func:`decode_chunk`) so that only one chunk's
    structs are alive at once: a struct per event costs several times the event's JSON.
    """

    raw_events: list[msgspec.Raw]
    metadata: dict[str, Any] = field(default_factory=dict)
    device_props: list[DeviceProps] = field(default_factory=list)
    #: ``baseTimeNanoseconds``: when present, timestamps are relative to it.
    base_ns: int | None = None
    #: ``distributedInfo.rank`` when the file says it.
    rank: int | None = None
    #: Top-level values that could not be read and are ignored, in words for the user.
    notes: list[str] = field(default_factory=list)
    #: Instead of ``raw_events`` (then empty): the file's bytes and the spans of the pieces
    #: its event array was cut into without a skim (see :func:`split_events`).
    data: Buffer | None = None
    pieces: list[tuple[int, int]] = field(default_factory=list)
    #: The one piece is the whole event array of a file not laid out as Kineto indents it
    #: (see :func:`_one_piece`): its events are tabulated a chunk at a time, as a skimmed
    #: file's are, so that its rows come out in the same order.
    whole: bool = False
    #: The whole piece is larger than a piece (a big file not laid out as Kineto writes
    #: it): only the scanner reads it, and when it leaves it the file is skimmed (decoded
    #: at once in Python, its events would all be structs together).
    scan_only: bool = False


NO_TS = np.iinfo(np.int64).min

_events_decoder = msgspec.json.Decoder(list[Event])
_int_ts_decoder = msgspec.json.Decoder(list[IntTsEvent])
_raw_list_decoder = msgspec.json.Decoder(list[msgspec.Raw])
_top_decoder = msgspec.json.Decoder(dict[str, msgspec.Raw])
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


#: Text of any kind nbprof reads: the file's bytes (gzip output comes as a bytearray; a
#: helper process reads its pieces from shared memory, :mod:`nbprof.trace.helpers`).
Buffer = bytes | bytearray | mmap.mmap

_UTF8_BOM = b"\xef\xbb\xbf"
_SPACE_RUN = re.compile(rb"[ \t\r\n]*")


def too_deep() -> str:
    """The reason for JSON nested beyond what the decoder (Python's recursion limit) takes."""
    return (
        f"JSON nested too deeply (more than about {sys.getrecursionlimit()} arrays or objects "
        "inside one another; a profiler trace nests a handful)"
    )


def _skip_space(data: Buffer, pos: int) -> int:
    """The first position at or after ``pos`` that is not JSON whitespace."""
    m = _SPACE_RUN.match(data, pos)
    return m.end() if m else pos


def _last_non_space(data: Buffer, end: int) -> int:
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


def _json_error(path: str, data: Buffer, e: Exception) -> TraceError:
    msg = str(e)
    if _last_non_space(data, len(data)) < 0:
        return TraceError(path, "file is empty")
    encoding = encoding_problem(bytes(data[:4]))
    if encoding:
        return TraceError(path, encoding)
    if "truncated" in msg:
        return TraceError(path, "JSON is truncated (the file was cut short)")
    msg = _AT_BYTE.sub(r"at byte \1", msg.removeprefix("JSON is malformed: "))
    return TraceError(path, f"not valid JSON ({msg})")


class _File(msgspec.Struct, gc=False):
    traceEvents: list[msgspec.Raw]


_file_decoder = msgspec.json.Decoder(_File)


def decode_file(data: Buffer, path: str, piece_bytes: int = 0) -> Decoded:
    """Decode one trace file's bytes (a Kineto object, or a bare Chrome-trace array).

    With ``piece_bytes``, an event array written one event per indented block (as Kineto
    writes it) is cut into pieces of about that size instead of being skimmed into a slice
    per event (see :func:`split_events`); any other file is skimmed.
    """
    try:
        return _decode_file(data, path, piece_bytes)
    except RecursionError:
        raise TraceError(path, too_deep()) from None


def _decode_file(data: Buffer, path: str, piece_bytes: int = 0) -> Decoded:
    if data[:3] == _UTF8_BOM:
        # JSON may start with a byte-order mark (RFC 8259 lets readers ignore it): as
        # whitespace it changes no offset; in place when the buffer allows.
        if isinstance(data, bytearray):
            data[:3] = b"   "
        else:
            data = b"   " + data[3:]
    start = _skip_space(data, 0)
    head = bytes(data[start : start + 1])
    metadata: dict[str, Any] = {}
    whole = False
    props: list[DeviceProps] = []
    base_ns: int | None = None
    rank: int | None = None
    notes: list[str] = []
    bare = head == b"["
    raws: list[msgspec.Raw] | None = None
    pieces: list[tuple[int, int]] = []
    big = len(data) > piece_bytes
    if not bare:
        cut = split_events(data, piece_bytes) if piece_bytes > 0 else None
        if cut is None and piece_bytes > 0 and (not big or scan.available()):
            cut = _one_piece(data)
            whole = cut is not None
        split = _split_top(data) if cut is None else None
        if cut is not None:
            pieces, top, dup = cut
            raws = []
        elif split is not None:
            raws, top, dup = split
        else:
            top, dup = _skim_top(data, path, head)
        meta = top_values(top, dup, path)
        metadata, props, base_ns, rank, notes = (
            meta.metadata,
            meta.device_props,
            meta.base_ns,
            meta.rank,
            meta.notes,
        )
    if raws is None:
        try:
            # Slices of the file's own bytes (not of the skim's raw value, which would copy).
            if bare:
                raws = _raw_list_decoder.decode(data)
            else:
                raws = _file_decoder.decode(data).traceEvents
        except msgspec.ValidationError as e:
            _, _, problem = explain_validation(e)
            raise TraceError(path, f"`traceEvents` {problem}") from None
        except DECODE_ERRORS as e:
            closed = _closed_array(data) if bare and "truncated" in str(e) else None
            if closed is None:
                raise _json_error(path, data, e) from None
            # The Trace Event Format lets the array format end without its "]" (a traced
            # process that died mid-trace leaves it so): close it and read again.
            data = closed
            try:
                raws = _raw_list_decoder.decode(data)
            except DECODE_ERRORS:
                raise _json_error(path, data, e) from None
            notes.append("the event array had no closing `]` (allowed by the format); read as is")
    if not raws and not pieces:
        raise TraceError(path, "trace is empty (no events)")
    if pieces:
        return Decoded(
            [], metadata, props, base_ns, rank, notes, data, pieces, whole, whole and big
        )
    return Decoded(raws, metadata, props, base_ns, rank, notes)


def top_values(top: dict[str, msgspec.Raw], dup: str | None, path: str) -> Decoded:
    """The top-level values other than the events (``top``, with a repeated top-level key
    ``dup``), read: a Decoded with no events yet."""
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
    return Decoded([], metadata, props, base_ns, rank, notes)


def skim_events(data: Buffer) -> list[msgspec.Raw]:
    """The raw event slices of a Kineto file already read by pieces (so known to be valid)."""
    return _file_decoder.decode(data).traceEvents


#: How far before the event array's apparent end top-level keys written after it are
#: looked for (see :func:`split_events`).
TAIL_BYTES = 64 << 10
_EVENTS_KEY = re.compile(rb'"traceEvents"[ \t\r\n]*:[ \t\r\n]*\[')
_INDENT = re.compile(rb"[ \t]*")


def split_events(
    data: Buffer, piece_bytes: int
) -> tuple[list[tuple[int, int]], dict[str, msgspec.Raw], str | None] | None:
    """The spans of pieces of about ``piece_bytes`` of the event array, each a run of whole
    events, with the other top-level values and a repeated top-level key (as
    :func:`_split_top` gives them); None when the array is not laid out as Kineto writes it.

    A skim slices the whole file into a value per event only to find where the events are.
    Kineto writes each event as a block at one indentation, ``},\n  {`` between two, and a
    newline is never inside a JSON string, so that text can only lie between events or at
    some deeper level of one. A cut at a deeper level leaves a piece whose brackets do not
    balance, so it is found when the piece is decoded (:func:`decode_piece` then says None
    and the file is skimmed after all); pieces that all decode are exactly the events.
    The rest of the object is decoded with the array replaced by ``[]``, as in
    :func:`_split_top`, which also checks that the array found is the top-level
    ``traceEvents`` (:func:`top_around_array`).
    """
    lay = layout(data)
    if lay is None:
        return None
    ends = array_end(data, lay.first, len(data), lay)
    if ends is None:
        return None
    end, closing = ends
    around = top_around_array(lay.before, data[closing + 1 :])
    if around is None:
        return None
    top, repeated = around
    return list(cut_pieces(data, lay.first, end, lay.sep, piece_bytes)), top, repeated


@dataclass(frozen=True)
class Layout:
    """An event array written as Kineto writes it, from the text before its first event
    (see :func:`split_events`)."""

    #: The file up to the event array's ``[``.
    before: bytes
    #: The first event's indentation, and the text between two events at it.
    indent: bytes
    sep: bytes
    #: The indentation of the line holding the ``traceEvents`` key (None when that line
    #: is not just indentation before the key).
    key_indent: bytes | None
    #: Where the first event starts.
    first: int


def layout(data: Buffer) -> Layout | None:
    """The event array's layout, from a file's text (its first bytes are enough); None when
    they do not show an object whose ``traceEvents`` array holds events one indented block
    each."""
    at = _skip_space(data, 0)
    if data[at : at + 1] != b"{":
        return None
    m = _EVENTS_KEY.search(data)
    if m is None:
        return None
    opening = m.end() - 1
    first = _skip_space(data, m.end())
    line = data.rfind(b"\n", opening, first)
    if data[first : first + 1] != b"{" or line < 0:
        return None
    indent = bytes(data[line + 1 : first])
    if _INDENT.fullmatch(indent) is None:
        return None
    key_at = data.rfind(b"\n", 0, m.start()) + 1
    key_indent = bytes(data[key_at : m.start()])
    return Layout(
        before=bytes(data[:opening]),
        indent=indent,
        sep=b"},\n" + indent + b"{",
        key_indent=key_indent if _INDENT.fullmatch(key_indent) else None,
        first=first,
    )


def array_end(buf: Buffer, start: int, stop: int, lay: Layout) -> tuple[int, int] | None:
    """(where the last event ends, where the array's ``]`` is) in ``buf[start:stop]``, which
    holds the end of the array and all that follows it; None when it does not end as
    Kineto writes it."""
    # The last event's closing brace, at the events' indentation, then the array's end.
    last = buf.rfind(b"\n" + lay.indent + b"}", start, stop)
    if last < 0:
        return None
    # Newer PyTorch writes top-level values after the event array, deviceProperties among
    # them: a list of objects that can sit at the events' indentation, whose last "}"
    # the search above finds. A top-level key line after the events says the array ends
    # before it. Those values are a few kB, so only that much before the end is searched:
    # further back lie the events, which a search would read for nothing (a key beyond
    # it only costs the skim, as before).
    if lay.key_indent is not None:
        key = buf.rfind(b"\n" + lay.key_indent + b'"', max(start, last - TAIL_BYTES), last)
        if key >= 0:
            last = buf.rfind(b"\n" + lay.indent + b"}", start, key)
            if last < 0:
                return None
    end = last + len(lay.indent) + 2
    closing = _skip_space(buf, end)
    if closing >= stop or buf[closing] != 0x5D:  # "]"
        return None
    return end, closing


def top_around_array(
    before: Buffer, after: Buffer
) -> tuple[dict[str, msgspec.Raw], str | None] | None:
    """The top-level values of the object ``before`` + an event array + ``after``, read
    with the array replaced by ``[]``, and a repeated top-level key; None when that is not
    a valid object whose ``traceEvents`` is that array."""
    rest = bytes(before) + b"[]" + bytes(after)
    try:
        top = _top_decoder.decode(rest)
    except DECODE_ERRORS:
        return None
    raw = top.get("traceEvents")
    if raw is None or _address(raw) - _address(rest) != len(before) or bytes(raw) != b"[]":
        return None
    return top, _repeated_key(rest, top)


def cut_pieces(
    buf: Buffer, start: int, end: int, sep: bytes, piece_bytes: int
) -> Iterator[tuple[int, int]]:
    """The spans of the events in ``buf[start:end]`` cut at ``sep``, each of at least
    ``piece_bytes`` but the last."""
    while True:
        cut = buf.find(sep, start + piece_bytes, end) if start + piece_bytes < end else -1
        if cut < 0:
            yield start, end
            return
        yield start, cut + 1
        start = cut + len(sep) - 1


def _one_piece(
    data: Buffer,
) -> tuple[list[tuple[int, int]], dict[str, msgspec.Raw], str | None] | None:
    """The inside of the top-level ``traceEvents`` array as one piece, with the top-level
    values and a repeated top-level key, as :func:`split_events` gives them; None when the
    file is not a valid JSON object with a non-empty array there.

    For a file small enough to be one piece whose events are not one indented block each
    (``json.dump``'s one line): a skim of the top level that leaves the array raw costs
    less than the skim that slices it into a value per event, and the piece is decoded
    from the file's own bytes, where the events' slices are joined into a copy.
    """
    try:
        top = _top_decoder.decode(data)
    except DECODE_ERRORS:  # ValidationError included: the other ways word the error
        return None
    raw = top.get("traceEvents")
    if raw is None:
        return None
    at = _address(raw) - _address(data)
    end = at + len(raw)
    if not (0 <= at < end <= len(data)) or data[at : at + 1] != b"[" or data[end - 1] != 0x5D:
        return None
    start = at + 1
    if _skip_space(data, start) >= end - 1:  # no events: the skim says so
        return None
    return [(start, end - 1)], top, _repeated_key(data, top)


def decode_piece(
    data: Buffer, span: tuple[int, int], offset: int, path: str, mode: TsMode
) -> tuple[list[AnyEvent], np.ndarray] | None:
    """:func:`decode_chunk` of the events in ``data[span]`` (see :func:`split_events`), the
    first of them event ``offset``; None when that text is not a list of valid events.

    The bytes just outside the span are whitespace (or the array's ``[``) before it and
    a comma or whitespace after it: a bytearray (a gunzipped file) has them turned into
    brackets while the piece is decoded from a view, so the piece is not copied.
    """
    start, stop = span
    try:
        if isinstance(data, bytearray):
            before, after = data[start - 1], data[stop]
            data[start - 1], data[stop] = 0x5B, 0x5D  # "[", "]"
            try:
                return _decode_joined(memoryview(data)[start - 1 : stop + 1], offset, 1, path, mode)
            finally:
                data[start - 1], data[stop] = before, after
        joined = b"".join((b"[", memoryview(data)[start:stop], b"]"))
        return _decode_joined(joined, offset, 1, path, mode)
    except TraceError:
        return None


def _closed_array(data: Buffer) -> Buffer | None:
    """A bare event array that lacks its closing ``]``, closed (a trailing comma dropped);
    None when it does not end like one (after an event's ``}``, or a comma)."""
    last = _last_non_space(data, len(data))
    if last < 0 or data[last] not in b",}":
        return None
    keep = last if data[last] == ord(",") else last + 1
    if isinstance(data, bytearray):
        del data[keep:]
        data += b"]"
        return data
    return data[:keep] + b"]"


def _address(buf: Buffer | msgspec.Raw) -> int:
    return int(np.frombuffer(buf, np.uint8).ctypes.data)


def _split_top(
    data: Buffer,
) -> tuple[list[msgspec.Raw], dict[str, msgspec.Raw], str | None] | None:
    """The events, the other top-level values and a repeated top-level key, in one pass over
    the events; or None.

    The events' raw slices point into ``data``, so their addresses say where the
    ``traceEvents`` array lies; the rest of the object (the metadata, a few hundred bytes)
    is then decoded with that array replaced by ``[]``. This spares a second pass over the
    whole file. None when anything is unusual (invalid JSON, no events, a slice that is not
    inside ``data``): the caller then takes the two-pass way, which also words the errors.
    """
    try:
        raws = _file_decoder.decode(data).traceEvents
    except DECODE_ERRORS:  # ValidationError included
        return None
    if not raws or not len(raws[0]) or not len(raws[-1]):
        return None
    base = _address(data)
    first = _address(raws[0]) - base
    end = _address(raws[-1]) - base + len(raws[-1])
    if not (0 < first < end <= len(data)) or data[first : first + len(raws[0])] != bytes(raws[0]):
        return None
    opening = _last_non_space(data, first)
    closing = _skip_space(data, end)
    if data[opening : opening + 1] != b"[" or data[closing : closing + 1] != b"]":
        return None
    around = _top_around(data, opening, closing)
    if around is None:
        return None
    rest, top = around
    return raws, top, _repeated_key(rest, top)


def _top_around(
    data: Buffer, opening: int, closing: int
) -> tuple[bytes, dict[str, msgspec.Raw]] | None:
    """The top-level object with its event array (``[`` at ``opening`` to ``]`` at
    ``closing``) replaced by ``[]``, and its decoded values; None when that is not valid."""
    rest = bytes(data[:opening]) + b"[]" + bytes(data[closing + 1 :])
    try:
        return rest, _top_decoder.decode(rest)
    except DECODE_ERRORS:
        return None


_KEY = rb'"(?:[^"\\]|\\.)*"'
_FIRST_GAP = re.compile(rb"[ \t\r\n]*\{[ \t\r\n]*(" + _KEY + rb")[ \t\r\n]*:[ \t\r\n]*")
_GAP = re.compile(rb"[ \t\r\n]*,[ \t\r\n]*(" + _KEY + rb")[ \t\r\n]*:[ \t\r\n]*")


def _repeated_key(text: Buffer, top: dict[str, msgspec.Raw]) -> str | None:
    """A key of the top-level object ``text`` that appears more than once, else None.

    A JSON object read into a dict keeps the last value of a repeated key, silently. The
    values kept are slices of ``text``: between two of them there must be exactly one
    ``, "key":``; a gap holding anything more holds a value that was dropped, and its key.
    (A key that cannot be told from the gap is not reported: this only adds a note.)
    """
    base = _address(text)
    spans = sorted((_address(v) - base, len(v)) for v in top.values())
    view = memoryview(text)
    at = 0
    for i, (start, size) in enumerate(spans):
        gap = view[at:start]
        m = (_FIRST_GAP if i == 0 else _GAP).fullmatch(gap)
        if m is None:
            found = (_FIRST_GAP if i == 0 else _GAP).match(gap)
            return _key_text(found.group(1)) if found else None
        at = start + size
    return None


def _key_text(raw: bytes) -> str:
    try:
        return str(msgspec.json.decode(raw))
    except DECODE_ERRORS:
        return raw.decode("utf-8", "replace")


def _skim_top(data: Buffer, path: str, head: bytes) -> tuple[dict[str, msgspec.Raw], str | None]:
    """The top-level object's values, left raw, and a repeated key (see :func:`_repeated_key`);
    TraceError when it is not a JSON object."""
    try:
        # A skim of the top level (values left raw): validates the JSON, finds the keys.
        top = _top_decoder.decode(data)
    except msgspec.ValidationError:
        kind = {b'"': "a string", b"n": "null", b"t": "a boolean", b"f": "a boolean"}.get(
            head, "a number"
        )
        raise TraceError(
            path,
            f"expected a JSON object with `traceEvents` (or an array of events), got {kind}",
        ) from None
    except DECODE_ERRORS as e:
        raise _json_error(path, data, e) from None
    return top, _repeated_key(data, top)


@dataclass
class TsMode:
    """Per file: whether integer timestamps are still worth trying (see :class:`IntTsEvent`)."""

    try_int: bool = True


#: The largest integer µs timestamp taken as is (the exact path checks the same bound), and
#: the longest duration: about 285 years, so that ns times still fit in an int64.
MAX_TS_US = 9_000_000_000_000_000


def decode_chunk(
    raws: list[msgspec.Raw], offset: int, path: str, mode: TsMode | None = None
) -> tuple[list[AnyEvent], np.ndarray]:
    """Decode events ``offset .. offset+len(raws)``: their structs and timestamps in ns.

    With a ``mode`` that still allows it, integer timestamps are read as numbers; the first
    chunk where that does not hold turns ``mode`` off for the rest of the file (a trace
    writes its timestamps one way throughout), so a float-timestamp file pays for one chunk
    decoded twice. Results and errors are the same either way.
    """
    return _decode_joined(json_array(raws), offset, len(raws), path, mode)


def _decode_joined(
    joined: bytes | memoryview, offset: int, count: int, path: str, mode: TsMode | None
) -> tuple[list[AnyEvent], np.ndarray]:
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
    joined = raws.joined() if isinstance(raws, ArgSpans) else json_array(raws)
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
