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
    # zlib directly (wbits 16+MAX) instead of the gzip module: one C call, and it lets us tell
    # "cut short" (no end-of-stream marker) apart from "corrupt" (a bad block or checksum).
    out: list[bytes] = []
    data = raw
    try:
        # Concatenated gzip members are legal (``cat a.gz b.gz``): decode them all.
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
