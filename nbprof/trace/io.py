"""Bytes off disk: plain or gzip-compressed JSON, with every failure turned into a TraceError.

Gzip is recognised by its magic bytes, not by the file name, so a ``.json`` that is really
compressed (or a ``.gz`` that is not) still reads.
"""

from __future__ import annotations

import logging
import os
import zlib
from pathlib import Path

from nbprof.errors import TraceError

logger = logging.getLogger(__name__)

_GZIP_MAGIC = b"\x1f\x8b"
#: File names a folder of per-rank traces may hold.
TRACE_SUFFIXES: tuple[str, ...] = (".json", ".json.gz")


def read_bytes(path: str | os.PathLike[str]) -> bytes:
    """The uncompressed bytes of ``path``; raises :class:`TraceError` with a plain reason."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise TraceError(str(p), "file not found") from None
    except IsADirectoryError:
        raise TraceError(str(p), "is a folder, expected a trace file") from None
    except PermissionError:
        raise TraceError(str(p), "permission denied") from None
    except OSError as e:
        raise TraceError(str(p), f"could not read the file ({e.strerror or e})") from None
    if raw[:2] == _GZIP_MAGIC:
        return _gunzip(raw, str(p))
    return raw


def _gunzip(raw: bytes, where: str) -> bytes:
    # The gzip trailer holds the uncompressed size (mod 2**32): decompressing into a buffer of
    # that size from the start avoids zlib's grow-then-join, which briefly holds the output
    # twice (hundreds of MB for a big trace).
    size = int.from_bytes(raw[-4:], "little") if len(raw) >= 18 else 0
    try:
        out = zlib.decompress(raw, 16 + zlib.MAX_WBITS, max(size, 1 << 16))
    except zlib.error as e:
        if "-5" in str(e) or "truncated" in str(e):
            raise TraceError(where, "gzip data is truncated (the file was cut short)") from None
        raise TraceError(where, f"gzip data is corrupt ({e})") from None
    except MemoryError:
        raise TraceError(where, "not enough memory to decompress the file") from None
    if len(out) % (1 << 32) == size:
        return out
    # Several gzip members (``cat a.gz b.gz`` is legal): the last trailer is not the total.
    return _gunzip_members(raw, where)


def _gunzip_members(raw: bytes, where: str) -> bytes:
    out: list[bytes] = []
    data = raw
    try:
        while data:
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            out.append(d.decompress(data))
            if not d.eof:
                raise TraceError(where, "gzip data is truncated (the file was cut short)")
            data = d.unused_data
            if data[:2] != _GZIP_MAGIC:
                # Trailing zero padding (some tools add it) ends the stream quietly.
                break
    except zlib.error as e:
        raise TraceError(where, f"gzip data is corrupt ({e})") from None
    except MemoryError:
        raise TraceError(where, "not enough memory to decompress the file") from None
    return b"".join(out)


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
