"""Opening files to read, and writing files, without surprises.

* :func:`open_regular` opens only regular files: a FIFO would block the reader forever,
  ``/dev/zero`` never ends, a folder or a device is not a trace. It opens without blocking
  and then asks the open file what it is, so nothing can swap the path in between.
* :func:`atomic_output` writes beside the destination and renames over it at the end: a
  failed write (full disk, Ctrl-C) leaves the previous file as it was, never half of a new
  one. A writer killed mid-write (SIGTERM, SIGKILL) leaves its temporary file, named for
  its process; the next write of the same file removes it. :func:`check_writable` says
  up front whether that can work, so a long profiling run is not wasted on an output path
  that was never writable.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import secrets
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from nbprof.errors import OutputError, TraceError, plain_text, valid_text

logger = logging.getLogger(__name__)

_KINDS = {
    stat.S_IFDIR: "is a folder, expected a file",
    stat.S_IFIFO: "is a named pipe (FIFO), not a file: reading it would wait for a writer",
    stat.S_IFCHR: "is a device, not a file",
    stat.S_IFBLK: "is a block device, not a file",
    stat.S_IFSOCK: "is a socket, not a file",
}


def kind_of(mode: int) -> str:
    """Why a file of this ``st_mode`` is not a regular file, in words ("" when it is one)."""
    if stat.S_ISREG(mode):
        return ""
    return _KINDS.get(stat.S_IFMT(mode), "is not a regular file")


def _reason(e: OSError, path: Path) -> str:
    if e.errno == errno.ENOENT:
        if path.is_symlink():
            return f"broken symbolic link (it points to {os.readlink(path)}, which does not exist)"
        return "file not found"
    if e.errno == errno.ELOOP:
        return "symbolic link loop (following the links never reaches a file)"
    if e.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if e.errno == errno.EISDIR:
        return _KINDS[stat.S_IFDIR]
    return f"could not read the file ({e.strerror or e})"


def open_regular(path: str | os.PathLike[str]) -> tuple[BinaryIO, int]:
    """``(file, size)`` for a regular file; a :class:`TraceError` naming it for anything else."""
    p = Path(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(p, flags)
    except OSError as e:
        raise TraceError(str(p), _reason(e, p)) from None
    try:
        st = os.fstat(fd)
        why = kind_of(st.st_mode)
        if why:
            raise TraceError(str(p), why)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return open(fd, "rb", closefd=True), st.st_size
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str | os.PathLike[str]) -> bytes:
    """All the bytes of a regular file (see :func:`open_regular` for what is refused)."""
    f, _ = open_regular(path)
    with f:
        try:
            return f.read()
        except OSError as e:
            raise TraceError(str(path), _reason(e, Path(path))) from None


def write_reason(e: OSError) -> str:
    if e.errno == errno.ENOSPC:
        return "could not write it: no space left on the disk"
    if e.errno in (errno.EACCES, errno.EPERM):
        return "could not write it: permission denied"
    if e.errno == errno.EROFS:
        return "could not write it: the file system is read-only"
    if e.errno == errno.ENOENT:
        return "could not write it: no such folder"
    return f"could not write it ({e.strerror or e})"


def output_name(path: str | os.PathLike[str]) -> Path:
    """``path`` as the Path of a file to write; an :class:`OutputError` where its name
    cannot be one: empty (an unset variable, which must not mean some default file), or
    ending in a slash (a folder: ``Path`` would drop the slash, and the page would be
    written as a file of the folder's name)."""
    text = os.fspath(path)
    if not isinstance(text, str):
        text = os.fsdecode(text)
    if not text.strip():
        raise OutputError(repr(text), "an empty file name (is the variable empty?)")
    if text.endswith("/") or text.endswith(os.sep) or (os.altsep and text.endswith(os.altsep)):
        raise OutputError(text, "names a folder (it ends in /): give the file to write in it")
    return Path(text)


def check_writable(path: str | os.PathLike[str], *, not_over: list[Path] | None = None) -> Path:
    """Refuse, with an :class:`OutputError` naming ``path``, an output that cannot be written.

    Refused: an existing folder, device, FIFO or other non-regular file; a missing parent
    folder; a folder where no file can be created (permissions, a read-only or virtual file
    system such as ``/proc``); and any of ``not_over`` (the input being read). Returns
    ``path`` as a Path. A full disk is only found when writing. Refused first, by its name
    alone (:func:`output_name`): an empty name, and one that ends in a slash.
    """
    p = output_name(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise OutputError(str(p), write_reason(e)) from None
    if st is not None:
        why = kind_of(st.st_mode)
        if why:
            raise OutputError(str(p), why.replace("expected a file", "expected a file name"))
        for other in not_over or []:
            with contextlib.suppress(OSError):
                if os.path.samefile(p, other):
                    raise OutputError(str(p), f"is the input {other}: refusing to overwrite it")
    parent = p.parent
    if not parent.is_dir():
        raise OutputError(str(p), f"no such folder ({parent})")
    # Creating (and removing) a file is the only reliable test: permissions, read-only
    # mounts and virtual file systems all answer it, for any user (root included).
    probe = parent / f".{p.name}.{secrets.token_hex(4)}.probe"
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except OSError as e:
        if e.errno == errno.ENOENT:  # the folder is there: a virtual file system (/proc)
            raise OutputError(str(p), f"no file can be created in {parent}") from None
        raise OutputError(str(p), write_reason(e)) from None
    with contextlib.suppress(OSError):
        os.unlink(probe)
    return p


_refused: set[tuple[str, str]] = set()


def env_folder(var: str, raw: str, otherwise: str) -> Path | None:
    """The absolute folder the environment variable ``var`` (set to ``raw``) names, ``~``
    expanded; None where it is blank or relative, said in one warning per process that
    ends in ``otherwise`` (what nbprof does instead). A relative value would otherwise make
    a folder named "~" or " " wherever the command happens to run."""
    folder = Path(os.path.expanduser(raw.strip())) if raw.strip() else None
    if folder is not None and folder.is_absolute():
        return folder
    if (var, raw) not in _refused:
        _refused.add((var, raw))
        why = "is blank" if folder is None else "is not an absolute path"
        logger.warning(
            "%s=%s %s: %s (set it to a folder such as ~/.cache/nbprof, or unset it)",
            var,
            plain_text(repr(raw)),
            why,
            otherwise,
        )
    return None


#: A temporary file whose writer still runs is left alone, unless it is older than this
#: (its process id may have been given to another process since).
STALE_TEMP_S = 3600.0
_TEMP = re.compile(r"\.(?P<name>.+)\.(?P<pid>\d+)-[0-9a-f]{8}\.tmp")


def temp_name(name: str) -> str:
    """The name of a temporary file that becomes ``name`` once written: hidden, beside it,
    and naming the process writing it, so that what a killed writer left behind is known
    for what it is (:func:`is_stale_temp`)."""
    return f".{name}.{os.getpid()}-{secrets.token_hex(4)}.tmp"


def temp_target(name: str) -> str | None:
    """The file a temporary file named ``name`` was to become (None: not one of ours)."""
    m = _TEMP.fullmatch(name)
    return m.group("name") if m else None


def is_stale_temp(name: str, mtime: float) -> bool:
    """Whether the temporary file ``name`` (see :func:`temp_name`), last written at
    ``mtime``, was left by a writer that is gone: a SIGTERM or a crash mid-write."""
    m = _TEMP.fullmatch(name)
    if m is None:
        return False
    if time.time() - mtime > STALE_TEMP_S:
        return True
    pid = int(m.group("pid"))
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OverflowError, OSError):
        return False  # alive, someone else's, or not a process id this system has
    return False


def remove_stale_temps(target: Path) -> int:
    """Remove the temporary files an interrupted write of ``target`` left beside it; how
    many were removed. Only files named by :func:`temp_name` for this target."""
    removed = 0
    try:
        with os.scandir(target.parent) as it:
            for e in it:
                if temp_target(e.name) != target.name:
                    continue
                try:
                    st = e.stat(follow_symlinks=False)
                    if stat.S_ISREG(st.st_mode) and is_stale_temp(e.name, st.st_mtime):
                        os.unlink(e.path)
                        removed += 1
                        logger.debug("removed %s, left by an interrupted write", plain_text(e.path))
                except OSError:
                    pass
    except OSError:
        pass
    return removed


@contextlib.contextmanager
def atomic_output(
    path: str | os.PathLike[str], *, not_over: list[Path] | None = None, durable: bool = True
) -> Iterator[BinaryIO]:
    """A binary file to write ``path``'s new content into; it replaces ``path`` on success.

    Written to a temporary file in the same folder (so the final rename is atomic), with
    the permissions a new file gets (the umask applies). On any failure the temporary file
    is removed and ``path`` is left as it was; an ``OSError`` while writing becomes an
    :class:`OutputError` naming ``path``, anything else propagates unchanged.

    ``durable``: the content reaches the disk before it replaces ``path`` (``fsync``), so a
    crash cannot leave ``path`` empty or cut short. Off only for what is checked when read
    and can be made again (a cache entry).
    """
    p = check_writable(path, not_over=not_over)
    remove_stale_temps(p)
    tmp = p.parent / temp_name(p.name)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    except OSError as e:
        raise OutputError(str(p), write_reason(e)) from None
    done = False
    try:
        with open(fd, "wb", closefd=True) as f:
            try:
                yield f
                f.flush()
                if durable:
                    os.fsync(f.fileno())
            except OSError as e:
                raise OutputError(str(p), write_reason(e)) from None
        try:
            os.replace(tmp, p)
        except OSError as e:
            raise OutputError(str(p), write_reason(e)) from None
        done = True
    finally:
        if not done:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def inputs_of(source: str | os.PathLike[str]) -> list[Path]:
    """The local files a trace (or a folder of rank files) was read from: what an output
    written from it must never replace. Empty for URLs and live captures."""
    src = Path(source)
    try:
        if src.is_dir():
            return sorted(f for f in src.iterdir() if f.is_file())
        return [src] if src.is_file() else []
    except OSError:
        return []


def write_atomic(
    path: str | os.PathLike[str], data: bytes | str, *, not_over: list[Path] | None = None
) -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` atomically (see :func:`atomic_output`)."""
    # A page that names a file whose name is not UTF-8 shows its bytes as \xNN.
    raw = valid_text(data).encode("utf-8") if isinstance(data, str) else data
    with atomic_output(path, not_over=not_over) as f:
        f.write(raw)
    return Path(path)


def render_page(
    path: str | os.PathLike[str] | None, render: Callable[[], str], *, inputs: list[Path]
) -> str:
    """``render()``'s page, also written to ``path`` when given: checked before rendering
    (which can take a while on a big trace), replaced atomically, never over ``inputs``."""
    if path is not None:
        check_writable(path, not_over=inputs)
    html = valid_text(render())
    if path is not None:
        write_atomic(path, html, not_over=inputs)
        logger.info("wrote %s", path)
    return html
