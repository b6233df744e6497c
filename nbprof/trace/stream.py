"""A Kineto trace's event array cut into pieces while it is still being decompressed.

Holding a whole decompressed trace costs more than decompressing it: its buffer is fresh
memory, and the system fills each new page on first touch (about 0.5 ms per MiB on the
benchmark machine, twice what inflating a MiB costs). :func:`pieces` instead keeps one
buffer of a few MiB: each piece of events is handed out, tabulated by the caller, and its
bytes given up before more are decompressed behind it, so the buffer's memory is reused
(and stays in cache).

It cuts where :func:`nbprof.trace.decode.split_events` cuts a whole file: at ``},\\n{``
between two events at the indentation of the first (see there why only events lie between
those), the first cut at least ``piece_bytes`` after a piece's start. The text before the
array is kept, the text after it is found at the end, and the two, with the array replaced
by ``[]``, are decoded as the top-level object, exactly as ``split_events`` does it; that
also checks that the array was the top-level ``traceEvents``. Anything else raises
:class:`Unstreamable` (so does a piece the caller cannot read): the caller then reads the
file whole, which reads it, or words its error, exactly as before.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from dataclasses import dataclass

import msgspec

from nbprof.trace import decode as dec

#: The stream's buffer is this many times the bytes that must fit in it (see :func:`pieces`).
_ROOM = 4


class Unstreamable(Exception):
    """The file is not laid out so that it can be read as it is decompressed."""


@dataclass(frozen=True)
class Head:
    """What the text before the first event says: where the array opens, and how its
    events are indented."""

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


@dataclass(frozen=True)
class End:
    """The top-level values other than the events, and a top-level key that repeats (see
    :func:`nbprof.trace.decode.split_events`); and the bytes of JSON read in all."""

    top: dict[str, msgspec.Raw]
    repeated: str | None
    json_bytes: int


def head(start: bytes | bytearray) -> Head | None:
    """The event array's layout, from the first decompressed bytes of a file; None when
    they do not show an object whose ``traceEvents`` array holds events one indented
    block each, as Kineto writes it."""
    at = dec._skip_space(start, 0)
    if start[at : at + 1] != b"{":
        return None
    m = dec._EVENTS_KEY.search(start)
    if m is None:
        return None
    opening = m.end() - 1
    first = dec._skip_space(start, m.end())
    line = start.rfind(b"\n", opening, first)
    if start[first : first + 1] != b"{" or line < 0:
        return None
    indent = bytes(start[line + 1 : first])
    if dec._INDENT.fullmatch(indent) is None:
        return None
    key_at = start.rfind(b"\n", 0, m.start()) + 1
    key_indent = bytes(start[key_at : m.start()])
    return Head(
        before=bytes(start[:opening]),
        indent=indent,
        sep=b"},\n" + indent + b"{",
        key_indent=key_indent if dec._INDENT.fullmatch(key_indent) else None,
        first=first,
    )


def pieces(
    source: Iterator[bytes], h: Head, buf: bytearray, piece_bytes: int
) -> Generator[tuple[bytearray, tuple[int, int]], None, End]:
    """The pieces of the event array as (buffer, span) pairs, then (as the generator's
    return value) the rest of the top-level object. ``buf`` holds the bytes read so far
    (the first of them those ``h`` was read from), ``source`` yields the rest.

    A span is valid until the next piece is asked for: the buffer's bytes before it may
    then be overwritten. One byte is kept before each span and one after it, as
    :func:`nbprof.trace.decode.decode_piece` needs. Raises :class:`Unstreamable`.
    """
    start = h.first
    hi = total = len(buf)  # the bytes read end at hi; past it, the buffer is spare room
    sep = h.sep
    # The last bytes read are kept back from cutting until the end is known: top-level
    # values written after the array (newer PyTorch) can hold text like a cut.
    keep = dec._TAIL_BYTES
    while True:
        while True:
            lo = start + piece_bytes
            stop = hi - keep
            cut = buf.find(sep, lo, stop) if lo < stop else -1
            if cut < 0:
                break
            yield buf, (start, cut + 1)
            start = cut + len(sep) - 1
        piece = next(source, None)
        if piece is None:
            break
        n = len(piece)
        if hi + n > len(buf):
            # Out of room: the bytes still needed (from the one before the next piece's
            # start) move to the front, and the buffer grows to four times what must fit.
            # Moving them costs a copy of them; with that much room it is paid once per
            # three times their size read, where dropping a bytearray's used bytes for each
            # piece read would copy them each time (a fifth of the scan's time).
            live = hi - (start - 1)
            with memoryview(buf) as view:
                view[:live] = view[start - 1 : hi]
            hi, start = live, 1
            room = _ROOM * (live + n)
            if room > len(buf):
                try:
                    buf.extend(bytes(room - len(buf)))
                except BufferError:  # a view of it is still held: a new buffer
                    grown = bytearray(room)
                    grown[:hi] = buf[:hi]
                    buf = grown
        buf[hi : hi + n] = piece
        hi += n
        total += n
    # The end: the last events, the array's "]" and what follows it.
    last = buf.rfind(b"\n" + h.indent + b"}", start, hi)
    if last < 0:
        raise Unstreamable("no event ends at the events' indentation")
    if h.key_indent is not None:
        key = buf.rfind(b"\n" + h.key_indent + b'"', max(start, last - keep), last)
        if key >= 0:
            last = buf.rfind(b"\n" + h.indent + b"}", start, key)
            if last < 0:
                raise Unstreamable("no event ends before the top-level values after the array")
    end = last + len(h.indent) + 2
    closing = dec._skip_space(buf, end)
    if closing >= hi or buf[closing] != 0x5D:  # "]"
        raise Unstreamable("the events are not followed by the array's end")
    rest = h.before + b"[]" + bytes(buf[closing + 1 : hi])
    try:
        top = dec._top_decoder.decode(rest)
    except dec.DECODE_ERRORS:
        raise Unstreamable("the top-level object is not valid JSON") from None
    raw = top.get("traceEvents")
    if (
        raw is None
        or dec._address(raw) - dec._address(rest) != len(h.before)
        or bytes(raw) != b"[]"
    ):
        raise Unstreamable("the array read is not the top-level traceEvents")
    while True:
        cut = buf.find(sep, start + piece_bytes, end) if start + piece_bytes < end else -1
        if cut < 0:
            yield buf, (start, end)
            break
        yield buf, (start, cut + 1)
        start = cut + len(sep) - 1
    return End(top, dec._repeated_key(rest, top), total)
