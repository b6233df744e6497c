"""The public result object: a trace, its NVML samples, and (lazily) their diagnosis.

A Profile is data: what it looks like is :mod:`nbprof.views.render`'s, which its display
hooks ask (``_repr_mimebundle_``, :meth:`Profile.show`, :meth:`Profile.to_html`,
:meth:`Profile.text`). :func:`nbprof.load` is in :mod:`nbprof.loading`.
"""

from __future__ import annotations

import logging
import os
from functools import cached_property
from typing import TYPE_CHECKING, Any

from nbprof import analysis
from nbprof._files import inputs_of, render_page
from nbprof.views import render

if TYPE_CHECKING:
    import pandas as pd

    from nbprof.analysis.model import Diagnosis
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
        return analysis.analyze(self.trace, self.samples)

    def to_json(self) -> dict[str, Any]:
        """The diagnosis as schema ``nbprof.analysis/1``."""
        return self.diagnosis.to_json()

    # -- display (nbprof.views.render) ------------------------------------------------
    def text(self) -> str:
        """The plain-text report (what ``nbprof analyze`` prints)."""
        return render.text(self)

    def to_html(self, path: str | os.PathLike[str] | None = None) -> str:
        """The standalone dashboard (works offline from file://). Writes it when given a path.

        The file is replaced atomically (a failed write leaves the previous one), and never
        over the trace it was read from; :class:`nbprof.errors.OutputError` names it when it cannot
        be written.
        """
        return render_page(path, lambda: render.page(self), inputs=inputs_of(self.trace.source))

    def show(self) -> None:
        """Display the dashboard below the current cell (timeline + diagnosis panel)."""
        render.show(self)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return render.notebook(self)

    def __repr__(self) -> str:
        return f"<nbprof.Profile {self.trace!r}>"
