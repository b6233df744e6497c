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
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from nbprof._forksafe import can_fork as can_fork

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: Set by the caller just before the fork; children read it (it is never pickled).
_job: tuple[Callable[..., Any], tuple[Any, ...]] | None = None

WORKERS_ENV = "NBPROF_PARSE_WORKERS"
#: More processes than this gain little on one file and cost memory for their results.
MAX_WORKERS = 8


def workers_wanted() -> int:
    """``$NBPROF_PARSE_WORKERS`` processes for one big file; 1 (this process alone) unless
    it is set. Off by default: on the 2-core machine of benchmarks/RESULTS.md, busy with
    other work, two processes were no faster than one (each ran at half speed, and sending
    the columns back cost seconds); where idle cores are known to exist, set it to them."""
    env = os.environ.get(WORKERS_ENV, "").strip()
    if not env:
        return 1
    try:
        return max(1, min(int(env), MAX_WORKERS))
    except ValueError:
        logger.warning("ignoring %s=%r: not a number", WORKERS_ENV, env)
        return 1


def _run(i: int) -> tuple[bool, Any]:
    assert _job is not None
    fn, parts = _job
    try:
        return True, fn(parts[i])
    except BaseException as e:  # reported to the parent, which decides what to do
        return False, f"{type(e).__name__}: {e}"


def map_forked(fn: Callable[[Any], T], parts: Sequence[Any]) -> list[T] | None:
    """``[fn(p) for p in parts]``, the first in this process, the rest in forked children.

    None when any part failed (in a child or here): the caller then does the whole job
    itself, so what it returns or raises is exactly what the one-process path gives.
    """
    global _job
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    _job = (fn, tuple(parts))
    try:
        with ctx.Pool(len(parts) - 1) as pool:
            pending = pool.map_async(_run, range(1, len(parts)))
            try:
                first = fn(parts[0])
            except Exception as e:
                logger.debug("parallel decode: the first part failed here (%s)", e)
                pool.terminate()
                return None
            rest = pending.get()
    finally:
        _job = None
    out = [first]
    for ok, got in rest:
        if not ok:
            logger.debug("parallel decode: a part failed in a child (%s)", got)
            return None
        out.append(got)
    return out
