"""Where a trace file's events are: its event array cut into pieces of whole events.

A file laid out as Kineto writes it (each event a block at one indentation, ``},\\n  {``
between two) is cut while it is still being decompressed (:class:`Stream`): one buffer
of a few MiB holds the bytes not yet read; each piece is handed out, read by the caller,
and its bytes given up before more are decompressed behind it, so the buffer's memory is
reused (holding a whole decompressed trace costs more than decompressing it: fresh memory,
filled a page at a time on first touch). The text before the array is kept, the text after
it found at the end, and the two, with the array replaced by ``[]``, decoded as the
top-level object (:func:`top_around_array`), which also checks that the array was the
top-level ``traceEvents``. A newline is never inside a JSON string, so that separator
lies only between events or at some deeper level of one; a cut at a deeper level leaves a
piece that is not a list of JSON values, and the caller then asks for the rest of the array
as one piece (:meth:`Stream.widen`).

Any other file is read whole (:func:`whole`): its top-level value is decoded with the
events left raw, which checks its JSON and words any error, and its event array is one
piece (cut at the separator too where the events are laid out so). A stream that does not
end as Kineto writes it (a file cut short, a top-level key that is not where Kineto puts
it) is read again whole by the caller, which reads it, or words its error, that way.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import msgspec
import numpy as np

from nbprof.errors import TraceError
from nbprof.trace import decode as dec
from nbprof.trace import io

#: How far before the event array's apparent end top-level keys written after it are
#: looked for (see :func:`array_end`).
TAIL_BYTES = 64 << 10
#: How much of a file is read to see whether it is laid out for streaming (the first piece
#: decompressed is larger: a trace's events start well within it).
HEAD_BYTES = 1 << 16
#: The stream's buffer is this many times the bytes that must fit in it.
_ROOM = 2

_EVENTS_KEY = re.compile(rb'"traceEvents"[ \t\r\n]*:[ \t\r\n]*\[')
_INDENT = re.compile(rb"[ \t]*")
_SPACE_RUN = re.compile(rb"[ \t\r\n]*")
_UTF8_BOM = b"\xef\xbb\xbf"

_top_decoder = msgspec.json.Decoder(dict[str, msgspec.Raw])
_raw_decoder = msgspec.json.Decoder(msgspec.Raw)


@dataclass(frozen=True)
class Piece:
    """A run of whole events, ``data[span]``, valid until the next piece is asked for.
    ``whole``: the file's whole event array (its events are read a chunk at a time)."""

    data: bytearray
    span: tuple[int, int]
    whole: bool = False


@dataclass(frozen=True)
class Top:
    """The top-level values other than the events, read, and the bytes of JSON read."""

    meta: dec.Top
    json_bytes: int


def skip_space(data: bytes | bytearray, pos: int) -> int:
    """The first position at or after ``pos`` that is not JSON whitespace."""
    m = _SPACE_RUN.match(data, pos)
    return m.end() if m else pos


@dataclass(frozen=True)
class Layout:
    """An event array written as Kineto writes it, from the text before its first event."""

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


def layout(data: bytes | bytearray) -> Layout | None:
    """The event array's layout, from a file's first bytes; None when they do not show an
    object whose ``traceEvents`` array holds events one indented block each."""
    at = skip_space(data, 0)
    if data[at : at + 1] != b"{":
        return None
    m = _EVENTS_KEY.search(data)
    if m is None:
        return None
    opening = m.end() - 1
    first = skip_space(data, m.end())
    indent = _indent(data, opening, first)
    if indent is None:
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


def _indent(data: bytes | bytearray, opening: int, first: int) -> bytes | None:
    """The indentation of the first event (at ``first``, after the array's ``[`` at
    ``opening``) where it starts a line of its own, else None."""
    line = data.rfind(b"\n", opening, first)
    if data[first : first + 1] != b"{" or line < 0:
        return None
    indent = bytes(data[line + 1 : first])
    return indent if _INDENT.fullmatch(indent) else None


def array_end(buf: bytearray, start: int, stop: int, lay: Layout) -> tuple[int, int] | None:
    """(where the last event ends, where the array's ``]`` is) in ``buf[start:stop]``, which
    holds the end of the array and all that follows it; None when it does not end as
    Kineto writes it."""
    last = buf.rfind(b"\n" + lay.indent + b"}", start, stop)
    if last < 0:
        return None
    # Newer PyTorch writes top-level values after the event array, deviceProperties among
    # them: a list of objects that can sit at the events' indentation, whose last "}"
    # the search above finds. A top-level key line after the events says the array ends
    # before it. Those values are a few kB, so only that much before the end is searched.
    if lay.key_indent is not None:
        key = buf.rfind(b"\n" + lay.key_indent + b'"', max(start, last - TAIL_BYTES), last)
        if key >= 0:
            last = buf.rfind(b"\n" + lay.indent + b"}", start, key)
            if last < 0:
                return None
    end = last + len(lay.indent) + 2
    closing = skip_space(buf, end)
    if closing >= stop or buf[closing] != 0x5D:  # "]"
        return None
    return end, closing


def top_around_array(
    before: bytes, after: bytes | bytearray
) -> tuple[dict[str, msgspec.Raw], str | None] | None:
    """The top-level values of the object ``before`` + an event array + ``after``, read
    with the array replaced by ``[]``, and a repeated top-level key; None when that is not
    a valid object whose ``traceEvents`` is that array."""
    rest = before + b"[]" + bytes(after)
    try:
        top = _top_decoder.decode(rest)
    except dec.DECODE_OR_DEPTH_ERRORS:
        return None
    raw = top.get("traceEvents")
    if raw is None or _address(raw) - _address(rest) != len(before) or bytes(raw) != b"[]":
        return None
    return top, _repeated_key(rest, top)


def cut(buf: bytearray, start: int, end: int, sep: bytes, piece_bytes: int) -> Iterator[Piece]:
    """The events in ``buf[start:end]`` cut at ``sep``, each piece of at least
    ``piece_bytes`` but the last."""
    while True:
        at = buf.find(sep, start + piece_bytes, end) if start + piece_bytes < end else -1
        if at < 0:
            yield Piece(buf, (start, end))
            return
        yield Piece(buf, (start, at + 1))
        start = at + len(sep) - 1


class Unstreamable(Exception):
    """The stream does not end as Kineto writes a file: read it whole."""


class Stream:
    """The pieces of a Kineto-laid-out file as it is decompressed (iterate), then its
    top-level values (:attr:`top`). ``head`` holds the bytes read so far, those ``lay``
    was read from. Iterating raises :class:`Unstreamable` at an end it cannot read."""

    def __init__(self, src: io.Source, lay: Layout, head: bytearray, piece_bytes: int) -> None:
        self._src = src
        self._lay = lay
        self._buf = head
        self._piece_bytes = piece_bytes
        self._rest = False
        self.top: Top | None = None

    def widen(self) -> None:
        """The piece just handed out is not whole events (a cut at a deeper level): the
        next one starts where it did and runs to the array's end."""
        self._rest = True

    def __iter__(self) -> Iterator[Piece]:
        buf, lay, piece_bytes = self._buf, self._lay, self._piece_bytes
        start = lay.first
        hi = total = len(buf)  # the bytes read end at hi; past it, the buffer is spare room
        # The last bytes read are kept back from cutting until the end is known: top-level
        # values written after the array (newer PyTorch) can hold text like a cut.
        keep = TAIL_BYTES
        while True:
            while not self._rest:
                lo = start + piece_bytes
                stop = hi - keep
                at = buf.find(lay.sep, lo, stop) if lo < stop else -1
                if at < 0:
                    break
                yield Piece(buf, (start, at + 1))
                if self._rest:
                    break
                start = at + len(lay.sep) - 1
            piece = next(self._src.pieces, None)
            if piece is None:
                break
            n = len(piece)
            if hi + n > len(buf):
                buf, hi, start = _room(buf, hi, start, n)
            buf[hi : hi + n] = piece
            hi += n
            total += n
        # The end: the last events, the array's "]" and what follows it.
        ends = array_end(buf, start, hi, lay)
        if ends is None:
            raise Unstreamable("the event array does not end as Kineto writes it")
        end, closing = ends
        around = top_around_array(lay.before, buf[closing + 1 : hi])
        if around is None:
            raise Unstreamable("the array read is not the top-level traceEvents")
        self.top = Top(dec.top_values(*around, self._src.where), total)
        if self._rest:
            yield Piece(buf, (start, end), whole=True)
            return
        for p in cut(buf, start, end, lay.sep, piece_bytes):
            yield p
            if self._rest:
                yield Piece(buf, (p.span[0], end), whole=True)
                return


def _room(buf: bytearray, hi: int, start: int, n: int) -> tuple[bytearray, int, int]:
    """Room for ``n`` more bytes: the bytes still needed (from the one before the next
    piece's start) move to the front, and the buffer grows to twice what must fit. Moving
    them costs a copy of them; with that much room it is paid once per their size read,
    where dropping a bytearray's used bytes for each piece read would copy them each time."""
    live = hi - (start - 1)
    with memoryview(buf) as view:
        view[:live] = view[start - 1 : hi]
    room = _ROOM * (live + n)
    if room > len(buf):
        try:
            buf.extend(bytes(room - len(buf)))
        except BufferError:  # a view of it is still held: a new buffer
            grown = bytearray(room)
            grown[:live] = buf[:live]
            buf = grown
    return buf, live, 1


def whole(data: bytearray, path: str, piece_bytes: int) -> tuple[list[Piece], Top]:
    """A file read whole: its event array's pieces and its top-level values. Raises the
    TraceError that words what is wrong with its JSON."""
    try:
        return _whole(data, path, piece_bytes)
    except RecursionError:
        raise TraceError(path, dec.too_deep()) from None


def _whole(data: bytearray, path: str, piece_bytes: int) -> tuple[list[Piece], Top]:
    if data[:3] == _UTF8_BOM:
        # JSON may start with a byte-order mark (RFC 8259 lets readers ignore it): as
        # whitespace it changes no offset.
        data[:3] = b"   "
    start = skip_space(data, 0)
    head = bytes(data[start : start + 1])
    if head == b"[":
        # A bare Chrome-trace array: no top-level values.
        try:
            raw = _raw_decoder.decode(data)
        except dec.DECODE_ERRORS as e:
            if "truncated" not in str(e) or not _close_array(data):
                raise dec.json_error(path, data, e) from None
            # The Trace Event Format lets the array format end without its "]" (a traced
            # process that died mid-trace leaves it so): close it and read again.
            try:
                raw = _raw_decoder.decode(data)
            except dec.DECODE_ERRORS:
                raise dec.json_error(path, data, e) from None
            meta = dec.Top(
                notes=["the event array had no closing `]` (allowed by the format); read as is"]
            )
        else:
            meta = dec.Top()
    else:
        values, repeated = _skim_top(data, path, head)
        events = values.get("traceEvents")
        meta = dec.top_values(values, repeated, path)  # raises where traceEvents is missing
        assert events is not None
        raw = events
    first_byte = bytes(memoryview(raw)[:1])
    if first_byte != b"[":
        raise TraceError(path, f"`traceEvents` should be an array, got {_kind(first_byte)}")
    at = _address(raw) - _address(data)
    first = skip_space(data, at + 1)
    end = at + len(raw) - 1  # the array's "]"
    if first >= end:
        raise TraceError(path, "trace is empty (no events)")
    stop = dec.last_non_space(data, end) + 1
    indent = None if head == b"[" else _indent(data, at, first)
    if indent is None:
        pieces = [Piece(data, (first, stop), whole=True)]
    else:
        pieces = list(cut(data, first, stop, b"},\n" + indent + b"{", piece_bytes))
    return pieces, Top(meta, len(data))


def _kind(first: bytes) -> str:
    return {b"{": "an object", b'"': "a string", b"n": "null", b"t": "a boolean",
            b"f": "a boolean"}.get(first, "a number")  # fmt: skip


def _skim_top(data: bytearray, path: str, head: bytes) -> tuple[dict[str, msgspec.Raw], str | None]:
    """The top-level object's values, left raw, and a repeated key (see
    :func:`_repeated_key`); TraceError when it is not a JSON object."""
    try:
        # The events are left raw, but their JSON is checked.
        top = _top_decoder.decode(data)
    except msgspec.ValidationError:
        raise TraceError(
            path,
            f"expected a JSON object with `traceEvents` (or an array of events), got {_kind(head)}",
        ) from None
    except dec.DECODE_ERRORS as e:
        raise dec.json_error(path, data, e) from None
    return top, _repeated_key(data, top)


def _close_array(data: bytearray) -> bool:
    """Close a bare event array that lacks its ``]`` (dropping a trailing comma), in place;
    False when it does not end like one (after an event's ``}``, or a comma)."""
    last = dec.last_non_space(data, len(data))
    if last < 0 or data[last] not in b",}":
        return False
    keep = last if data[last] == ord(",") else last + 1
    del data[keep:]
    data += b"]"
    return True


def _address(buf: bytes | bytearray | msgspec.Raw) -> int:
    return int(np.frombuffer(buf, np.uint8).ctypes.data)


_KEY = rb'"(?:[^"\\]|\\.)*"'
_FIRST_GAP = re.compile(rb"[ \t\r\n]*\{[ \t\r\n]*(" + _KEY + rb")[ \t\r\n]*:[ \t\r\n]*")
_GAP = re.compile(rb"[ \t\r\n]*,[ \t\r\n]*(" + _KEY + rb")[ \t\r\n]*:[ \t\r\n]*")


def _repeated_key(text: bytes | bytearray, top: dict[str, msgspec.Raw]) -> str | None:
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
    except dec.DECODE_ERRORS:
        return raw.decode("utf-8", "replace")
