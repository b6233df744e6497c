"""Opening a saved run: :func:`load` reads one trace as a :class:`~nbprof.Profile`, or the
rank files of a job as a :class:`~nbprof.Job`, whichever the path holds.

Its own module, above both result types: a job's ranks are Profiles, so :mod:`nbprof.job`
reads :mod:`nbprof.result`, and what may give either reads both.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, cast

from nbprof.job import Job, load_job
from nbprof.result import Profile
from nbprof.trace import read


def load(
    path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    progress: bool | None = None,
    job: bool | None = None,
    workers: int | None = None,
    scheduler: Any = None,
    cache: bool = True,
) -> Profile | Job:
    """Read a saved trace (``.json``, ``.json.gz``), or a job's rank files.

    A folder (or a list of files, or an fsspec URL such as ``s3://bucket/run/``) whose
    files' ``distributedInfo`` agree is one job and gives a :class:`nbprof.job.Job`; files
    that do not agree are refused with a :class:`nbprof.TraceError` naming them, unless
    ``job=True`` says they are one job anyway (``job=False``: read a folder as one flat
    trace, as a Profile). ``workers=N`` reads and analyses the ranks in N local processes
    (default: one per core where the processes can be forked, as from a script or the CLI;
    this process alone where they would be spawned, as from a notebook; ``workers=1``: this
    process); ``scheduler`` (an address or a ``dask.distributed.Client``) runs them on Dask.

    Raises :class:`nbprof.TraceError` with the file and the plain reason on bad input.
    ``progress``: show a progress bar (``None``: only when the load takes over ~1 s).
    ``cache``: reopen a trace file read before from its cached tables, and cache those of a
    file read now (in ``$NBPROF_TABLE_CACHE``, else ``$NBPROF_CACHE_DIR/tables``, else the user
    cache folder); a stale or damaged cache is ignored and rebuilt. ``cache=False`` always
    reads the file itself.
    """
    one = cast("str | os.PathLike[str]", path)  # read only once a list or tuple is ruled out
    if (
        job is not None
        or workers is not None
        or scheduler is not None
        or isinstance(path, (list, tuple))
        or "://" in os.fspath(one)
        or os.path.isdir(one)
    ):
        return load_job(
            path, job=job, workers=workers, scheduler=scheduler, progress=progress, cache=cache
        )
    return Profile(read(one, progress=progress, cache=cache))
