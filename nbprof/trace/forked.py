"""Running one function over parts of data already in memory, in forked processes.

The reader's work on one big file is decoding its chunks of events, and those chunks are
independent. Forked children see the parent's memory (the file's bytes, copy-on-write), so
nothing is sent to them but a range; only their results come back. Fork is used only where
it is safe (:func:`nbprof._forksafe.can_fork`: on Linux, with no other thread that could
hold a lock a child needs). Anywhere else, and for small inputs, the caller runs everything
itself.

The parent works on the first part while the children do the rest.
"""

from __future__ import annotations

import logging
import os
import pickle
import signal
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TypeVar

from nbprof._forksafe import can_fork as can_fork

logger = logging.getLogger(__name__)

T = TypeVar("T")

WORKERS_ENV = "NBPROF_PARSE_WORKERS"
#: More processes than this gain little on one file and cost memory for their results.
MAX_WORKERS = 8


def workers_wanted(*, auto: bool = True) -> int:
    """Processes to decode one big file in: ``$NBPROF_PARSE_WORKERS`` when set (1 turns
    the parallel path off); else, with ``auto``, the cores no other process is using
    (:func:`idle_cores`), else 1.

    Only idle cores count: two processes on a core that something else keeps busy run at
    half speed each, and then sending a child's columns back makes the load slower than
    one process's (measured on the 2-core benchmark machine while another load ran).

    1 in a worker process of a pool (a job's ranks, a Dask worker): its siblings already
    keep the cores busy, one file each, and more processes would only compete.
    """
    if _in_pool_worker():
        return 1
    env = os.environ.get(WORKERS_ENV, "").strip()
    if env:
        try:
            return max(1, min(int(env), MAX_WORKERS))
        except ValueError:
            logger.warning("ignoring %s=%r: not a number", WORKERS_ENV, env)
            return 1
    return idle_cores() if auto else 1


def idle_cores() -> int:
    """Cores this process may run on, less the other tasks running on the machine now,
    rounded; at least 1 and at most MAX_WORKERS. A CPU quota that is not an affinity (a
    container's) is not seen.

    "Now" is the running count of ``/proc/loadavg`` (this thread not counted; the least
    of three readings a millisecond apart, as a task that runs for a moment, such as a
    kernel's thread sending output, is not using a core), not the load average: that
    average counts this process's own recent work against it, and a notebook's kernel
    that had just run a cell for a minute read 0.8 and left the second of two idle cores
    unused. Where the count cannot be read (not Linux), the 1-minute load average stands
    in for it."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux; fork is not used there anyway
        cores = os.cpu_count() or 1
    busy = _others_running()
    if busy is None:
        try:
            busy = os.getloadavg()[0]
        except (AttributeError, OSError):  # nothing to read: assume the cores are busy
            return 1
    return max(1, min(cores, MAX_WORKERS, int(cores - busy + 0.5)))


_LOADAVG = "/proc/loadavg"


def _others_running() -> float | None:
    """Tasks running or ready to run on the machine now, this thread aside (see
    :func:`idle_cores`); None where ``/proc/loadavg`` does not say."""
    seen: list[int] = []
    for i in range(3):
        if i:
            time.sleep(0.001)
        try:
            with open(_LOADAVG, "rb") as f:
                running = f.read().split()[3].split(b"/")[0]
            seen.append(max(0, int(running) - 1))
        except (OSError, IndexError, ValueError):
            return None
    return float(min(seen))


def _in_pool_worker() -> bool:
    # A pool's worker has multiprocessing imported before it runs anything; a process that
    # has not imported it is no such worker, and importing it only to ask (about 3 ms:
    # sockets, arrays) would be paid by every first load.
    mp = sys.modules.get("multiprocessing")
    return mp is not None and mp.parent_process() is not None


def map_forked(fn: Callable[[Any], T], parts: Sequence[Any]) -> list[T] | None:
    """``[fn(p) for p in parts]``, the first in this process, the rest in forked children.

    None when any part failed (in a child or here): the caller then does the whole job
    itself, so what it returns or raises is exactly what the one-process path gives.

    Each child is a bare ``os.fork`` that writes its pickled result to a pipe and exits:
    a ``multiprocessing`` pool costs more to start (its threads, queues and locks) and to
    hand a result back (through its result thread) than decoding a few MB of events takes.
    """
    children: list[tuple[int, int]] = []
    finished: set[int] = set()
    try:
        for part in parts[1:]:
            try:
                read_end, write_end = os.pipe()
            except OSError as e:  # no file descriptors left: do it all here
                logger.debug("parallel decode: no pipe (%s)", e)
                return None
            try:
                pid = os.fork()
            except OSError as e:  # no more processes: do it all here
                logger.debug("parallel decode: could not fork (%s)", e)
                os.close(read_end)
                os.close(write_end)
                return None
            if pid == 0:  # pragma: no cover - the child; its exit status is checked below
                os.close(read_end)
                _widen(write_end)
                _child(fn, part, write_end)
            os.close(write_end)
            children.append((pid, read_end))
        try:
            first = fn(parts[0])
        except Exception as e:
            logger.debug("parallel decode: the first part failed here (%s)", e)
            return None
        out = [first]
        for pid, read_end in children:
            got = _result(pid, read_end)
            finished.add(pid)
            if got is None:
                return None
            out.append(got)
        return out
    finally:
        for pid, read_end in children:
            _reap(pid, read_end, finished=pid in finished)


def _child(fn: Callable[[Any], Any], part: Any, write_end: int) -> NoReturn:
    """Run ``fn(part)`` and send ``(True, value)`` or ``(False, reason)``; never return."""
    status = 1
    try:
        try:
            message: tuple[bool, Any] = (True, fn(part))
        except BaseException as e:  # reported to the parent, which decides what to do
            message = (False, f"{type(e).__name__}: {e}")
        with os.fdopen(write_end, "wb") as pipe:
            pipe.write(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))
        status = 0
    finally:
        # No atexit handlers, no flushing of the parent's buffered output twice.
        os._exit(status)


def _widen(fd: int) -> None:
    """Give the pipe a 1 MiB buffer (Linux's default is 64 KiB): a result of tens of MB
    then crosses in a few hundred writes, not thousands of switches between the two."""
    try:
        import fcntl

        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, 1 << 20)
    except (ImportError, AttributeError, OSError):  # not Linux, or above pipe-max-size
        pass


def _result(pid: int, read_end: int) -> Any | None:
    """A child's value, or None when it failed, died or sent something unreadable."""
    with os.fdopen(read_end, "rb", closefd=False) as pipe:
        data = pipe.read()
    try:
        ok, got = pickle.loads(data) if data else (False, "no result (the child died)")
    except Exception as e:
        ok, got = False, f"an unreadable result ({type(e).__name__})"
    if not ok:
        logger.debug("parallel decode: a part failed in child %d (%s)", pid, got)
        return None
    return got


def _reap(pid: int, read_end: int, *, finished: bool) -> None:
    """Close the pipe and wait for the child: one whose result was read is exiting; one
    abandoned (another part failed first) is killed."""
    os.close(read_end)
    try:
        if not finished:
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ChildProcessError, ProcessLookupError):  # already gone
        pass
