"""Bytes off disk: plain or gzip-compressed JSON, with every failure turned into a TraceError.

Gzip is recognised by its magic bytes, not by the file name, so a ``.json`` that is really
compressed (or a ``.gz`` that is not) still reads. Other compressed formats and archives
are named, not reported as bad JSON. Only regular files are read (see
:func:`nbprof._files.open_regular`), and nothing larger than the memory that is free: gzip
data is decompressed a piece at a time and refused as soon as it outgrows that, so a
10 MB file that decompresses to 10 GB costs a moment, not the machine.
"""

from __future__ import annotations

import logging
import os
import re
import types
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nbprof import _memory
from nbprof._files import open_regular
from nbprof.errors import TraceError, plain_text

logger = logging.getLogger(__name__)

_inflate: types.ModuleType
try:
    # ISA-L's inflate, behind zlib's own interface: faster than zlib on every gzip trace
    # benchmarked (1.2x-4.9x, benchmarks/RESULTS.md). Same format, same output.
    from isal import isal_zlib as _inflate

    _INFLATE_ERRORS: tuple[type[Exception], ...] = (zlib.error, _inflate.error)
except ImportError:  # the optional extra nbprof[fast] is not installed
    _inflate = zlib
    _INFLATE_ERRORS = (zlib.error,)

_GZIP_MAGIC = b"\x1f\x8b"
#: File names a folder of per-rank traces may hold.
TRACE_SUFFIXES: tuple[str, ...] = (".json", ".json.gz")

#: Formats recognised by their first bytes: (magic, name, what to do instead).
_OTHER_FORMATS: tuple[tuple[bytes, str, str], ...] = (
    (b"BZh", "bzip2-compressed", "bunzip2 FILE"),
    (b"\xfd7zXZ\x00", "xz-compressed", "unxz FILE"),
    (b"\x28\xb5\x2f\xfd", "zstd-compressed", "unzstd FILE"),
    (b"PK\x03\x04", "a zip archive", "unzip FILE"),
    (b"PK\x05\x06", "an empty zip archive", "unzip -l FILE"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive", "7z x FILE"),
    (b"\x04\x22\x4d\x18", "lz4-compressed", "unlz4 FILE"),
)
#: Compressed input read per step (the decompressed output comes in pieces of ``_OUT``).
_IN = 1 << 16
#: Small enough to be reused from the heap (and stay in cache) while it is copied out.
_OUT = 1 << 19
#: The first piece may be larger: a small trace (most ranks' files are) then comes out in
#: one piece, where two pieces cost twice the time (the second, and the buffer's growth).
_FIRST_OUT = 1 << 21
#: And the first step reads enough input for that piece: at gzip's ratios for trace JSON
#: (8x to 17x in the corpus) 64 KiB of it yields only part of a rank's file, and the second
#: piece then costs half again the decompression (0.47 ms against 1.13 for a 77 KB file).
_FIRST_IN = 1 << 18


def other_format(head: bytes) -> str | None:
    """The reason for data that is some other known format than JSON or gzip, else None."""
    for magic, name, fix in _OTHER_FORMATS:
        if head.startswith(magic):
            if name == "bzip2-compressed" and head[3:4] not in b"123456789":
                continue
            return f"is {name}, not JSON or gzip: decompress it first ({fix})"
    if len(head) >= 262 and head[257:262] == b"ustar":
        return "is a tar archive, not JSON or gzip: extract it first (tar xf FILE)"
    return None


def read_bytes(path: str | os.PathLike[str]) -> bytes | bytearray:
    """The uncompressed bytes of ``path``; raises :class:`TraceError` with a plain reason."""
    src = open_source(path)
    try:
        return src.read_all()
    finally:
        src.close()


#: For ``free``: ask :func:`_memory.free_bytes` (the file's reader has asked already).
_ASK = -1


def _limit(free: int | None = _ASK) -> tuple[int | None, int | None]:
    """(the most JSON bytes this process can hold and still build the tables beside them,
    the bytes free now); no limit when the free memory is unknown."""
    if free == _ASK:
        free = _memory.free_bytes()
    return (None, None) if free is None else (free // _memory.JSON_FACTOR, free)


def _too_big(lead: str, free: int | None) -> str:
    return (
        f"{lead}; this machine has {_memory.gb(free or 0)} free, and reading a trace takes "
        f"about {_memory.JSON_FACTOR}x its JSON's size"
    )


def _check_fits(size: int, where: str, free: int | None = _ASK) -> None:
    limit, free = _limit(free)
    if limit is not None and size > limit:
        raise TraceError(where, _too_big(f"is {_memory.gb(size)} of JSON", free))


def _gunzip(raw: bytes, where: str, free: int | None = _ASK) -> bytearray:
    """Decompress every gzip member of ``raw`` (``cat a.gz b.gz`` is legal), a piece at a
    time, into one buffer; refuse as soon as the output outgrows what memory can hold.

    The buffer grows by appending (a ``realloc`` that the system can move without copying),
    and the message readers keep pointing into it (no copy to ``bytes`` at the end).
    """
    _, free = _limit(free)
    return join_pieces(gunzip_pieces(raw, where, free), where, free)


def join_pieces(
    pieces: Iterator[bytes], where: str, free: int | None, out: bytearray | None = None
) -> bytearray:
    """The decompressed ``pieces`` (of :func:`gunzip_pieces`) appended to ``out``."""
    out = bytearray() if out is None else out
    try:
        for piece in pieces:
            out += piece
    except MemoryError:
        raise TraceError(where, _memory.not_enough(len(out), free, "decompressed trace")) from None
    return out


def gunzip_pieces(raw: bytes, where: str, free: int | None = _ASK) -> Iterator[bytes]:
    """The decompressed bytes of every gzip member of ``raw``, a piece at a time, checked
    as :func:`_gunzip` checks them (a start that is not JSON text, damage, truncation,
    more output than memory can hold) and refused with the same TraceError."""
    limit, free = _limit(free)
    view = memoryview(raw)
    at = 0
    produced = 0
    d = _inflate.decompressobj(16 + zlib.MAX_WBITS)
    checked = False
    try:
        while True:
            chunk = view[at : at + (_IN if produced else _FIRST_IN)]
            piece = d.decompress(chunk, _OUT if produced else _FIRST_OUT)
            # At a member's end, what follows it is unused_data (and also, when the output
            # filled up on the way, unconsumed_tail): count it once.
            at += len(chunk) - len(d.unused_data if d.eof else d.unconsumed_tail)
            if piece:
                try:
                    checked = checked or _check_start(piece, where)
                except TraceError:
                    # What the first bytes look like is only the reason when the gzip data
                    # itself is whole: a damaged file says so instead.
                    _raise_if_damaged(d, view[at:], where)
                    raise
                if limit is not None and produced + len(piece) > limit:
                    raise TraceError(
                        where, _too_big(f"decompresses to more than {_memory.gb(limit)}", free)
                    )
                produced += len(piece)
                yield piece
            if d.eof:
                if view[at : at + 2] != _GZIP_MAGIC:
                    # Trailing zero padding (some tools add it) ends the stream quietly.
                    break
                d = _inflate.decompressobj(16 + zlib.MAX_WBITS)
            elif not piece and at >= len(raw):
                raise TraceError(where, "gzip data is truncated (the file was cut short)")
    except _INFLATE_ERRORS as e:
        raise TraceError(where, f"gzip data is corrupt ({e})") from None
    except MemoryError:
        raise TraceError(where, _memory.not_enough(produced, free, "decompressed trace")) from None


@dataclass
class Source:
    """A trace file being read a piece at a time: its pieces still to come (decompressed,
    :func:`gunzip_pieces`, for a gzip file), and its size (for a gzip file the size its
    trailer gives, modulo 4 GiB, and only a hint: nothing checks it before the end)."""

    pieces: Iterator[bytes]
    size_hint: int
    gzip: bool
    where: str
    free: int | None
    #: The open file a plain file's pieces are read from (closed by :meth:`close`).
    file: Any = None

    def close(self) -> None:
        """Stop reading: the pieces' generator is closed, and the file with it."""
        close = getattr(self.pieces, "close", None)
        if close is not None:
            close()
        if self.file is not None:
            self.file.close()

    def read_all(self) -> bytes | bytearray:
        """The whole file's (uncompressed) bytes, none of its pieces having been read."""
        if self.gzip:
            return self.rest_into(bytearray())
        try:
            data: bytes = self.file.read()
        except OSError as e:
            raise TraceError(self.where, f"could not read the file ({e.strerror or e})") from None
        except MemoryError:
            raise TraceError(self.where, _memory.not_enough(self.size_hint, self.free)) from None
        return data

    def rest_into(self, out: bytearray) -> bytearray:
        """The file's pieces still to come appended to ``out``, as :func:`read_bytes`
        would have read them (and refused with the same TraceError)."""
        return join_pieces(self.pieces, self.where, self.free, out)


def open_source(path: str | os.PathLike[str]) -> Source:
    """A trace file, to read a piece at a time (or whole: :meth:`Source.read_all`); raises
    :class:`TraceError` with a plain reason for a file that cannot be read, is not JSON or
    gzip, or is too big for the memory free."""
    p = Path(path)
    f, size = open_regular(p)
    try:
        return _source_of(f, str(p), size, _memory.free_bytes())
    except BaseException:
        f.close()
        raise


def _source_of(f: Any, where: str, size: int, free: int | None) -> Source:
    try:
        head = f.read(512)
        f.seek(0)
        if head[:2] == _GZIP_MAGIC:
            with f:
                raw = f.read()
            hint = int.from_bytes(raw[-4:], "little") if len(raw) >= 18 else 0
            # What is free once the compressed bytes are held, as asking again would say.
            left = None if free is None else max(free - len(raw), 0)
            return Source(gunzip_pieces(raw, where, left), hint, True, where, left)
        why = other_format(head)
        if why:
            raise TraceError(where, why)
        _check_fits(size, where, free)
    except OSError as e:
        raise TraceError(where, f"could not read the file ({e.strerror or e})") from None
    except MemoryError:
        raise TraceError(where, _memory.not_enough(size, free)) from None
    # The file is read, and closed, by its pieces.
    return Source(_file_pieces(f, where), size, False, where, free, f)


def _file_pieces(f: Any, where: str) -> Iterator[bytes]:
    with f:
        try:
            while piece := f.read(_OUT):
                yield piece
        except OSError as e:
            raise TraceError(where, f"could not read the file ({e.strerror or e})") from None


#: How much more output :func:`_raise_if_damaged` decompresses, at most, to find damage.
_PROBE_OUT = 16 << 20


def _raise_if_damaged(d: Any, rest: memoryview, where: str) -> None:
    """Raise the corrupt/truncated TraceError if the member ``d`` is reading turns out broken
    within the next :data:`_PROBE_OUT` bytes of output; return quietly otherwise."""
    produced, at = 0, 0
    try:
        while not d.eof and produced < _PROBE_OUT:
            chunk = rest[at : at + _IN]
            piece = d.decompress(chunk, _OUT)
            at += len(chunk) - len(d.unconsumed_tail)
            produced += len(piece)
            if not piece and at >= len(rest):
                raise TraceError(where, "gzip data is truncated (the file was cut short)")
    except _INFLATE_ERRORS as e:
        raise TraceError(where, f"gzip data is corrupt ({e})") from None


_SPACE_RUN = re.compile(rb"[ \t\r\n]*")


def _check_start(piece: bytes, where: str) -> bool:
    """Refuse, from its first bytes, a gzip file holding something other than JSON text;
    False while those bytes are still all whitespace (look at the next piece then)."""
    m = _SPACE_RUN.match(piece)
    at = m.end() if m else 0
    if at == len(piece):
        return False
    head = piece[at : at + 512]
    if head[:2] == _GZIP_MAGIC:
        raise TraceError(
            where, "is gzip inside gzip (compressed twice): gunzip it once, then load the result"
        )
    why = other_format(head) or encoding_problem(head)
    if why:
        raise TraceError(where, "holds, once gunzipped, data that " + why)
    if head[:1] not in (b"{", b"[") and not head.startswith(b"\xef\xbb\xbf"):
        shown = plain_text(head[:16].decode("utf-8", "replace"))
        raise TraceError(where, f"holds, once gunzipped, no JSON trace (it starts with {shown!r})")
    return True


_JSON_START = frozenset(b'{[ \t\r\n"')


def encoding_problem(head: bytes) -> str | None:
    """The reason when text starting with ``head`` (4 bytes) is JSON in another encoding
    than UTF-8, or binary data; else None."""
    head = head[:4]
    enc = ""
    if head.startswith((b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff")):
        enc = "UTF-32"
    elif head.startswith((b"\xff\xfe", b"\xfe\xff")):
        enc = "UTF-16"
    elif len(head) == 4 and (
        (head[:3] == b"\x00\x00\x00" and head[3] in _JSON_START)
        or (head[1:] == b"\x00\x00\x00" and head[0] in _JSON_START)
    ):
        enc = "UTF-32"
    elif len(head) >= 2 and (
        (head[0] == 0 and head[1] in _JSON_START) or (head[1] == 0 and head[0] in _JSON_START)
    ):
        enc = "UTF-16"
    if enc:
        return (
            f"is {enc} text; JSON traces are UTF-8: convert it first "
            f"(iconv -f {enc} -t UTF-8 FILE > FILE.json)"
        )
    if head[:1] == b"\x00":
        return "is binary data (it starts with a zero byte), not JSON text"
    return None


def trace_files(folder: str | os.PathLike[str]) -> list[Path]:
    """The trace files in ``folder`` (``*.json``, ``*.json.gz``), sorted by name."""
    p = Path(folder)
    try:
        entries = sorted(p.iterdir(), key=lambda f: f.name)
    except OSError as e:
        raise TraceError(str(p), f"could not list the folder ({e.strerror or e})") from None
    files = [f for f in entries if f.is_file() and f.name.endswith(TRACE_SUFFIXES)]
    if not files:
        raise TraceError(str(p), "folder holds no trace files (*.json or *.json.gz)")
    return files
