"""Run one function over many items: here, in local worker processes, or on Dask.

It knows nothing of traces or metrics: :func:`run` maps a module-level function over
items and gives back, in the items' order, each one's value or the reason it has none.
A job's ranks use it so that each rank is read and analysed where it is cheapest (and
only its small summary comes back).

- ``workers=None`` (or 1): in this process, one item after another;
- ``workers=N``: N local processes, forked where that is safe (:mod:`nbprof._forksafe`:
  they start with this process's modules already imported) and spawned elsewhere (from a
  notebook, whose threads a fork would copy half-way); a worker that dies takes its pool
  down, so the items it had not finished are tried again in a fresh pool, and one lost
  twice runs alone and is reported if its worker dies again; items go out in shrinking
  batches, and a worker's allocator keeps what one item freed for the next;
- ``scheduler=``: a ``dask.distributed`` scheduler address (``"tcp://host:8786"``) or a
  ``Client``. Dask reschedules a task whose worker died and gives up after its
  ``distributed.scheduler.allowed-failures``; such an item is reported with the number of
  deaths, and one that succeeded after a death says so too.

Local workers end with the process that started them (:func:`die_with_parent`), however
it ends; :func:`bounded` says how many can be of use.

Dask is optional (``pip install nbprof[dask]``) and imported only here, only when asked.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from nbprof._forksafe import can_fork

if TYPE_CHECKING:
    from concurrent.futures import Future, ProcessPoolExecutor

logger = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")


@dataclass
class Outcome(Generic[R]):
    """What became of one item: its ``value``, or ``error`` (one line, for the user)."""

    value: R | None = None
    error: str | None = None
    #: Times the item was started again because the process running it died.
    retries: int = 0


class NeedsDask(ImportError):
    """``scheduler=`` was given but dask.distributed is not installed."""


def run(
    fn: Callable[[T], R],
    items: Sequence[T],
    *,
    workers: int | None = None,
    scheduler: Any = None,
) -> list[Outcome[R]]:
    """``fn`` over ``items`` (see the module); never raises for an item's failure."""
    if scheduler is not None:
        return _dask(fn, items, scheduler)
    if workers is not None and workers > 1 and len(items) > 1:
        try:
            return _processes(fn, items, workers)
        except OSError as e:
            # No worker could be started at all (no /dev/shm for the pool's locks, a process
            # limit): the items still get their answer, here.
            logger.warning("could not start worker processes (%s); running here instead", e)
    return [_here(fn, x) for x in items]


def _reason(e: BaseException) -> str:
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def _here(fn: Callable[[T], R], item: T) -> Outcome[R]:
    try:
        return Outcome(fn(item))
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as e:  # an item's failure is reported, the others go on
        logger.debug("item failed", exc_info=True)
        return Outcome(error=_reason(e))


def _processes(fn: Callable[[T], R], items: Sequence[T], workers: int) -> list[Outcome[R]]:
    out: list[Outcome[R] | None] = [None] * len(items)
    lost = [0] * len(items)
    pending = list(range(len(items)))
    while pending:
        # A dead worker breaks its whole pool: every item still in it is lost, the one that
        # killed it among them. Each goes round again; one lost twice runs alone, so an
        # item that kills its worker every time fails by itself.
        together = [i for i in pending if lost[i] < 2]
        alone = [i for i in pending if lost[i] >= 2]
        # The first pass hands items out in batches; items that lost a worker already go
        # one at a time, so that one that kills its worker takes no batch with it again.
        batched = not any(lost)
        died = _pool_pass(fn, items, together, workers, out, batched) if together else []
        for i in alone:
            if _pool_pass(fn, items, [i], 1, out, False):
                out[i] = Outcome(
                    error="the worker process analysing it died each time it was tried "
                    "(out of memory, or a crash)",
                    retries=lost[i],
                )
        for i in died:
            lost[i] += 1
        if died:
            logger.warning("a worker process died; trying its %d unfinished items again", len(died))
        pending = died
    for i, o in enumerate(out):
        if o is not None and o.error is None:
            o.retries = lost[i]
    return [o if o is not None else Outcome(error="not run") for o in out]


def cpus() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def bounded(workers: int, items: int) -> tuple[int, list[str]]:
    """(how many worker processes can be of use for ``items`` items: at most one per item
    and per core, at least one; why that is fewer than ``workers``, in words)."""
    n_cpus = cpus()
    n = max(1, min(workers, items, n_cpus))
    why: list[str] = []
    if n < workers:
        if items < workers:
            why.append(f"{items} item{'s' if items != 1 else ''}")
        if n_cpus < workers:
            why.append(f"{n_cpus} CPU{'s' if n_cpus != 1 else ''}")
    return n, why


def start_method() -> str:
    """How worker processes start here: ``fork`` where it is safe, else ``spawn``.

    A spawned worker imports pandas, numpy and nbprof's analysis again before its first
    item, about a second of CPU each; a forked one has them already.
    """
    return "fork" if can_fork() else "spawn"


def _pool_pass(
    fn: Callable[[T], R],
    items: Sequence[T],
    indices: list[int],
    workers: int,
    out: list[Outcome[R] | None],
    batched: bool,
) -> list[int]:
    """Run ``indices`` in one pool; the indices left unfinished when a worker died."""
    # Here, not at the top: reading one trace imports this module through nbprof.job, and
    # multiprocessing costs that first load about 3 ms it never uses.
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    ctx = multiprocessing.get_context(start_method())
    died: list[int] = []
    batches = _batches(indices, workers) if batched else [[i] for i in indices]
    pool = ProcessPoolExecutor(
        max_workers=min(workers, len(batches)),
        mp_context=ctx,
        initializer=_worker_start,
        initargs=(os.getpid(),),
    )
    try:
        futures: dict[Future[list[Outcome[R]]], list[int]] = {
            pool.submit(_batch, fn, [items[i] for i in b]): b for b in batches
        }
        # as_completed waits on every future once; a wait() per finished item would hook
        # onto each unfinished one again (quadratic in items, in the client's own time).
        for f in as_completed(futures):
            batch = futures[f]
            try:
                for i, o in zip(batch, f.result(), strict=True):
                    out[i] = o
            except BrokenProcessPool:
                died.extend(batch)
            except Exception as e:
                for i in batch:
                    out[i] = Outcome(error=_reason(e))
    except BaseException:
        # Ctrl-C (or anything else that ends the pass early): the workers stop now. Leaving
        # the pool as ``with`` does would wait for every item still queued.
        _stop(pool)
        raise
    pool.shutdown(wait=True)
    return sorted(died)


def _stop(pool: ProcessPoolExecutor) -> None:
    """End a pool's workers at once, queued items dropped."""
    kill = getattr(pool, "kill_workers", None)  # Python 3.14
    if kill is not None:
        kill()
        pool.shutdown(wait=False, cancel_futures=True)
        return
    # Before 3.14 the executor has no way to end its workers but its own map of them,
    # which shutdown() empties: read first.
    workers = list((getattr(pool, "_processes", None) or {}).values())
    for p in workers:
        with contextlib.suppress(Exception):
            p.kill()
    pool.shutdown(wait=False, cancel_futures=True)
    for p in workers:
        with contextlib.suppress(Exception):
            p.join(5)


def _worker_start(parent: int) -> None:
    """In a worker process, first: die with the parent, then keep freed memory.

    Ctrl-C reaches every process of the terminal's foreground group: the parent stops its
    workers (:func:`_stop`), so a worker ignores it rather than print a traceback of its
    own or hand the interrupt back as an item's result."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent(parent)
    _keep_freed_memory()


#: prctl's option that signals a process when its parent ends (linux/prctl.h).
_PR_SET_PDEATHSIG = 1
#: How often a worker without PR_SET_PDEATHSIG looks whether its parent is still there.
_WATCH_S = 0.2


def die_with_parent(parent: int) -> str:
    """Make this worker process end when process ``parent`` does: killed (SIGTERM,
    SIGHUP, SIGKILL), crashed, or a notebook kernel restarted. How it is done, in a word.

    A pool's worker otherwise outlives its parent: it waits on the pool's pipe, whose
    other end its sibling workers hold open too, so no end-of-file ever comes, and it is
    left running under init, holding its memory. On Linux the kernel sends SIGKILL when
    the parent goes (``PR_SET_PDEATHSIG``: no thread, nothing to poll); the parent may have
    gone already, before this call, so that is checked after. Elsewhere a daemon thread
    looks every :data:`_WATCH_S` whether the worker was handed to another parent, and
    ends the process if so, as Dask's worker processes do when their parent's pipe closes
    (``distributed.process.AsyncProcess._immediate_exit_when_closed``).
    """
    if sys.platform.startswith("linux"):
        try:
            prctl = ctypes.CDLL(None, use_errno=True).prctl
            prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                              ctypes.c_ulong]  # fmt: skip
            armed = prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
        except (OSError, AttributeError):
            armed = False
        if armed:
            if os.getppid() != parent:  # it ended before the signal was asked for
                os._exit(1)
            return "pdeathsig"

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(_WATCH_S)
        os._exit(1)

    if os.getppid() != parent:
        os._exit(1)
    threading.Thread(target=watch, name="nbprof-parent-watch", daemon=True).start()
    return "watch"


# glibc's mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def _keep_freed_memory() -> bool:
    """In a worker process: let the C allocator keep memory freed after one item for the
    next (glibc only; elsewhere nothing changes). Whether it was set.

    By default glibc returns each freed buffer of a few hundred KiB or more to the system,
    and the next item's buffers are then new pages, each zeroed by the kernel on first
    touch: 225 page faults, about 0.5 ms, of a DLRM rank's 13.3 ms. Buffers below 32 MiB
    now come from the heap, and up to 128 MiB freed at its top stay there; a worker's
    memory holds at the largest an item needed. Never done in the caller's own process.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # a C library without it (musl has a stub)
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    return bool(mallopt(_M_MMAP_THRESHOLD, 32 << 20)) and bool(
        mallopt(_M_TRIM_THRESHOLD, 128 << 20)
    )


def _batch(fn: Callable[[T], R], batch: list[T]) -> list[Outcome[R]]:
    """In a worker: ``fn`` over a batch of items, each failure kept as that item's."""
    return [_here(fn, x) for x in batch]


#: Batches per worker at the start of a pass (they shrink towards its end).
_BATCHES_PER_WORKER = 2


def _batches(indices: list[int], workers: int) -> list[list[int]]:
    """``indices`` cut into batches that shrink as they are handed out (guided
    scheduling): each is the items left over ``workers * _BATCHES_PER_WORKER``, at
    least one. A worker waits on the pool for its next batch, on the client, which it
    shares the cores with; batches cut those waits while small last batches leave no
    worker running long after the others."""
    out: list[list[int]] = []
    at = 0
    while at < len(indices):
        size = max(1, (len(indices) - at) // (workers * _BATCHES_PER_WORKER))
        out.append(indices[at : at + size])
        at += size
    return out


def _dask(fn: Callable[[T], R], items: Sequence[T], scheduler: Any) -> list[Outcome[R]]:
    try:
        from distributed import Client, as_completed
        from distributed.scheduler import KilledWorker
    except ImportError as e:  # pragma: no cover - exercised without the extra installed
        raise NeedsDask(
            "running on a Dask cluster needs dask.distributed: pip install 'nbprof[dask]'"
        ) from e
    own = not isinstance(scheduler, Client)
    client = Client(scheduler) if own else scheduler
    try:
        futures = client.map(fn, list(items), pure=False)
        index = {f.key: i for i, f in enumerate(futures)}
        out: list[Outcome[R]] = [Outcome(error="not run") for _ in items]
        for f in as_completed(futures):
            i = index[f.key]
            try:
                out[i] = Outcome(f.result())
            except KilledWorker as e:
                out[i] = Outcome(error=_killed(e), retries=_allowed(client))
            except Exception as e:
                out[i] = Outcome(error=_reason(e))
        for i, n in _deaths(client, futures).items():
            if out[i].error is None:
                out[i].retries = n
        return out
    finally:
        if own:
            client.close()


def _killed(e: BaseException) -> str:
    return (
        "the Dask worker analysing it died each time it was tried (out of memory, or a "
        f"crash): {_reason(e)}"
    )


def _allowed(client: Any) -> int:
    try:
        import dask

        return int(dask.config.get("distributed.scheduler.allowed-failures"))
    except Exception:  # pragma: no cover - config always has a default
        return 0


def _suspicious(dask_scheduler: Any, keys: list[Any]) -> dict[Any, int]:
    tasks = dask_scheduler.tasks
    return {k: int(getattr(tasks[k], "suspicious", 0)) for k in keys if k in tasks}


def _deaths(client: Any, futures: list[Any]) -> dict[int, int]:
    """Per item, how many times a worker died while running it (the scheduler counts)."""
    try:
        counts = client.run_on_scheduler(_suspicious, keys=[f.key for f in futures])
    except Exception:  # an older scheduler without the counter: nothing to report
        logger.debug("could not read task deaths from the scheduler", exc_info=True)
        return {}
    index = {f.key: i for i, f in enumerate(futures)}
    return {index[k]: n for k, n in counts.items() if n and k in index}
