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
by ``[]``, are decoded as the top-level object, by the functions ``split_events`` uses
(``layout``, ``array_end``, ``top_around_array``, ``cut_pieces``); that also checks that
the array was the top-level ``traceEvents``. Anything else raises
:class:`Unstreamable` (so does a piece the caller cannot read): the caller then reads the
file whole, which reads it, or words its error, exactly as before.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from dataclasses import dataclass

import msgspec

from nbprof.trace import decode as dec

#: The stream's buffer is this many times the bytes that must fit in it (see :func:`pieces`).
_ROOM = 2


class Unstreamable(Exception):
    """The file is not laid out so that it can be read as it is decompressed."""


@dataclass(frozen=True)
class End:
    """The top-level values other than the events, and a top-level key that repeats (see
    :func:`nbprof.trace.decode.split_events`); and the bytes of JSON read in all."""

    top: dict[str, msgspec.Raw]
    repeated: str | None
    json_bytes: int


def pieces(
    source: Iterator[bytes], h: dec.Layout, buf: bytearray, piece_bytes: int
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
    keep = dec.TAIL_BYTES
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
            # start) move to the front, and the buffer grows to twice what must fit.
            # Moving them costs a copy of them; with that much room it is paid once per
            # their size read, where dropping a bytearray's used bytes for each piece read
            # would copy them each time (a fifth of the scan's time). Four times the room
            # made these moves rarer, for no time measured (2.16M events: 1.54-1.70 s
            # either way) and 5 MiB more held while reading.
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
    ends = dec.array_end(buf, start, hi, h)
    if ends is None:
        raise Unstreamable("the event array does not end as Kineto writes it")
    end, closing = ends
    around = dec.top_around_array(h.before, buf[closing + 1 : hi])
    if around is None:
        raise Unstreamable("the array read is not the top-level traceEvents")
    top, repeated = around
    for span in dec.cut_pieces(buf, start, end, sep, piece_bytes):
        yield buf, span
    return End(top, repeated, total)
