"""How much memory this process may still use, and how to say that a trace does not fit.

Linux overcommits: an allocation far beyond what is free usually succeeds, and the kernel's
out-of-memory killer ends the process later (a notebook kernel dies, nothing said). So the
reader checks sizes against what is free *before* it allocates, and turns the
``MemoryError`` that a process limit (``ulimit -v``, a container's limit) does raise into
one plain line.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

try:
    import resource
except ImportError:  # Windows: no address-space limits to read
    resource = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)

#: Reading a trace whole holds its JSON and builds tables beside it (1.74x the JSON's size
#: at 2.16M events, when two processes shared a whole file); streamed, the load
#: benchmark's peak there is 0.86x in one process and 0.75x in two; tiny events cost more
#: (about 5x at 5M events of ~60 bytes). JSON larger than the free memory divided by this
#: cannot be read.
JSON_FACTOR = 2
#: What a trace of tiny events can cost, for the words of a refusal after the fact.
WORST_FACTOR = 5

_GB = 1e9


def free_bytes() -> int | None:
    """Bytes this process can still allocate: the least of the machine's available memory,
    its cgroup's headroom and its own address-space limit; None when none is known."""
    limits = [v for v in (_meminfo_available(), _cgroup_headroom(), _rlimit_headroom()) if v]
    return max(min(limits), 0) if limits else None


def gb(n: float) -> str:
    """A size in words that never rounds to nothing: "1.2 GB", "340 MB", "4.2 kB", "80 bytes"."""
    if n >= _GB:
        return f"{n / _GB:.1f} GB"
    if n >= 1e6:
        return f"{n / 1e6:.0f} MB"
    if n >= 1e3:
        return f"{n / 1e3:.1f} kB"
    return f"{max(int(n), 0)} bytes"


def not_enough(size: int, free: int | None, what: str = "trace", detail: str = "") -> str:
    """The reason given when a ``size``-byte file ran out of memory while being read, with
    ``free`` the bytes that were free when reading began (None: unknown) and ``detail``
    what could not be allocated (a MemoryError's own words, often empty).

    Where the file is small beside the memory that was free, its size is not what ran
    out: something it declares (a count, a length) asked for more, and the reason says so
    rather than blaming "this 4 kB trace"."""
    asked = f" ({detail.strip()})" if detail and detail.strip() else ""
    if free is not None and size * WORST_FACTOR <= free:
        return (
            f"not enough memory{asked}: far more than a {gb(size)} {what} takes to read, so "
            f"a count or size it declares is likely wrong ({gb(free)} was free)"
        )
    room = ""
    if free is not None:
        room = f"; {gb(free)} was free, so traces up to about {gb(free / WORST_FACTOR)} of JSON fit"
    return (
        f"not enough memory to read this {gb(size)} {what}{asked} (reading takes up to "
        f"{WORST_FACTOR}x the JSON's size{room})"
    )


def size_on_disk(path: str | os.PathLike[str]) -> int:
    """The bytes of a file, or of the files directly in a folder; 0 when unknown."""
    try:
        p = Path(path)
        if p.is_dir():
            return sum(f.stat().st_size for f in p.iterdir() if f.is_file())
        return p.stat().st_size
    except OSError:
        return 0


def _read(path: str) -> bytes:
    """A small file's bytes (a /proc or cgroup file): read as bytes through the descriptor,
    as ``Path.read_text`` would cost three times as much, and every load asks twice."""
    fd = os.open(path, os.O_RDONLY)
    try:
        parts = []
        while part := os.read(fd, 1 << 16):
            parts.append(part)
        return b"".join(parts)
    finally:
        os.close(fd)


def _meminfo_available() -> int | None:
    try:
        for line in _read("/proc/meminfo").splitlines():
            if line.startswith(b"MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:  # other Unix systems
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _cgroup_headroom() -> int | None:
    """A cgroup v2 memory limit minus what the group already uses (containers, CI jobs)."""
    try:
        text = _read("/proc/self/cgroup").decode()
        rel = text.strip().splitlines()[0].split("::", 1)[1]
        base = Path("/sys/fs/cgroup") / rel.lstrip("/")
        limit = _read(str(base / "memory.max")).decode().strip()
        if limit == "max":
            return None
        return int(limit) - int(_read(str(base / "memory.current")))
    except (OSError, ValueError, IndexError):  # UnicodeDecodeError is a ValueError
        return None


def _rlimit_headroom() -> int | None:
    """The address-space limit (``ulimit -v``) minus the process's current size."""
    if resource is None:
        return None
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    except (ValueError, OSError):
        return None
    if soft == resource.RLIM_INFINITY:
        return None
    try:
        for line in _read("/proc/self/status").splitlines():
            if line.startswith(b"VmSize:"):
                return soft - int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return soft
