"""The public result object: a trace, its NVML samples, and (lazily) their diagnosis."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import pandas as pd

    from nbprof.analysis.model import Diagnosis
    from nbprof.job import Job
    from nbprof.telemetry.model import Samples
    from nbprof.trace.model import Trace

logger = logging.getLogger(__name__)


class Profile:
    """One profiled run (live from ``%%gpuprof`` / :func:`nbprof.profile`, or a loaded file).

    ``kernels``, ``memcpy``, ``memset``, ``cpu_ops``, ``steps`` and ``devices`` are the
    trace's tables (pandas DataFrames); ``diagnosis`` is computed on first access.
    """

    def __init__(
        self,
        trace: Trace,
        samples: Samples | None = None,
        *,
        notes: list[str] | None = None,
        error: BaseException | None = None,
    ) -> None:
        self.trace = trace
        self.samples = samples
        #: Plain-language notes about how the run was captured (e.g. "no CUDA: CPU only").
        self.notes: list[str] = list(notes or [])
        #: The exception the profiled code raised, when it did (the profile is partial).
        self.error = error

    # -- tables -----------------------------------------------------------------------
    @property
    def kernels(self) -> pd.DataFrame:
        return self.trace.kernels

    @property
    def memcpy(self) -> pd.DataFrame:
        return self.trace.memcpy

    @property
    def memset(self) -> pd.DataFrame:
        return self.trace.memset

    @property
    def cpu_ops(self) -> pd.DataFrame:
        return self.trace.cpu_ops

    @property
    def steps(self) -> pd.DataFrame:
        return self.trace.steps

    @property
    def devices(self) -> pd.DataFrame:
        return self.trace.devices

    # -- analysis ---------------------------------------------------------------------
    @cached_property
    def diagnosis(self) -> Diagnosis:
        from nbprof.analysis import analyze

        return analyze(self.trace, self.samples)

    # -- views ------------------------------------------------------------------------
    def text(self) -> str:
        """The plain-text report (what ``nbprof analyze`` prints)."""
        from nbprof.views.text import render

        return render(self)

    def to_json(self) -> dict[str, Any]:
        """The diagnosis as schema ``nbprof.analysis/1``."""
        return self.diagnosis.to_json()

    def to_html(self, path: str | os.PathLike[str] | None = None) -> str:
        """The standalone dashboard (works offline from file://). Writes it when given a path.

        The file is replaced atomically (a failed write leaves the previous one), and never
        over the trace it was read from; :class:`nbprof.errors.OutputError` names it when it cannot
        be written.
        """
        from nbprof._files import inputs_of, render_page
        from nbprof.views.report import render

        return render_page(path, lambda: render(self), inputs=inputs_of(self.trace.source))

    def show(self) -> None:
        """Display the dashboard below the current cell (timeline + diagnosis panel)."""
        from IPython.display import display

        display(self)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        from nbprof.views.dashboard import mimebundle

        return mimebundle(self)

    def __repr__(self) -> str:
        return f"<nbprof.Profile {self.trace!r}>"


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
        from nbprof.job import load_job

        return load_job(
            path, job=job, workers=workers, scheduler=scheduler, progress=progress, cache=cache
        )
    from nbprof.trace import read

    return Profile(read(one, progress=progress, cache=cache))
