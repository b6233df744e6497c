"""The comparison result object: two profiles and (lazily) what changed between them.

Named ``comparison``, not ``compare``: ``nbprof.compare`` is the function, and a submodule
of that name would replace it as the package's attribute once imported.
"""

from __future__ import annotations

import logging
import os
from functools import cached_property
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from nbprof._files import inputs_of, render_page

if TYPE_CHECKING:
    import pandas as pd

    from nbprof.analysis.compare import Diff, StepTime
    from nbprof.result import Profile

logger = logging.getLogger(__name__)

# Heavy modules (pandas, the analysis, the views) are imported where they are first
# needed: `nbprof.compare` itself stays as light as `import nbprof`.


class Comparison:
    """Two runs, before and after a change: what changed, with numbers, and why.

    ``before`` and ``after`` are the :class:`~nbprof.Profile` s; ``summary`` is the sentence
    that says what changed; ``metrics``, ``kernels`` and ``ops`` are tables (pandas
    DataFrames) of every key metric and of kernels and top-level CPU ops grouped by
    normalized name, biggest movers first; ``warnings`` say what makes the runs differ
    beyond the code (another GPU, other step counts or batch sizes).
    """

    def __init__(self, before: Profile, after: Profile) -> None:
        self.before = before
        self.after = after

    @cached_property
    def diff(self) -> Diff:
        """The comparison as analysis returns it (schema ``nbprof.compare/1``)."""
        from nbprof.analysis.compare import compare as compare_runs

        b, a = self.before, self.after
        return compare_runs(b.trace, b.diagnosis, a.trace, a.diagnosis)

    # -- what changed -------------------------------------------------------------------
    @property
    def summary(self) -> str:
        return self.diff.summary

    @property
    def warnings(self) -> list[str]:
        return list(self.diff.warnings)

    @property
    def step_time(self) -> StepTime:
        return self.diff.step_time

    @property
    def metrics(self) -> pd.DataFrame:
        """name, label, unit, before, after, delta, better: one row per metric."""
        import pandas as pd

        cols = ["name", "label", "unit", "before", "after", "delta", "better"]
        rows = [[getattr(m, c) for c in cols] for m in self.diff.metrics]
        return pd.DataFrame(rows, columns=cols)

    @property
    def kernels(self) -> pd.DataFrame:
        return self.diff.kernels

    @property
    def ops(self) -> pd.DataFrame:
        return self.diff.ops

    def to_json(self) -> dict[str, Any]:
        """The comparison as schema ``nbprof.compare/1``."""
        return self.diff.to_json()

    # -- display (nbprof.views.render) ------------------------------------------------
    def text(self) -> str:
        """The plain-text comparison (what ``nbprof compare`` prints)."""
        return _render().text(self)

    def to_html(self, path: str | os.PathLike[str] | None = None) -> str:
        """The standalone comparison page (works offline). Writes it when given a path.

        Written as a profile's page is: replaced atomically, and never over either run's
        trace (:class:`nbprof.errors.OutputError` names the path when it cannot be written).
        """
        return render_page(path, lambda: _render().page(self), inputs=self._inputs())

    def _inputs(self) -> list[Path]:
        return [*inputs_of(self.before.trace.source), *inputs_of(self.after.trace.source)]

    def show(self) -> None:
        """Display the comparison below the current cell."""
        _render().show(self)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return _render().notebook(self)

    def __repr__(self) -> str:
        return (
            f"<nbprof.Comparison before={self.before.trace.source!r} "
            f"after={self.after.trace.source!r}>"
        )


def compare(
    before: Profile | str | os.PathLike[str],
    after: Profile | str | os.PathLike[str],
    *,
    cache: bool = True,
) -> Comparison:
    """Compare two runs: each a :class:`~nbprof.Profile` or the path of a saved trace.

    A folder of rank files is read as one flat trace (its primary device is compared).
    ``cache``: as for :func:`nbprof.load`, for the runs given as paths.
    Raises :class:`nbprof.TraceError` for a path that cannot be read, ``TypeError`` for
    anything else (a :class:`~nbprof.Job` included: compare single runs).
    """
    return Comparison(_profile(before, "before", cache), _profile(after, "after", cache))


def _profile(value: Any, which: str, cache: bool) -> Profile:
    from nbprof.loading import load
    from nbprof.result import Profile

    if isinstance(value, Profile):
        return value
    if isinstance(value, (str, os.PathLike)):
        # A folder of rank files is read as one flat trace: a comparison follows the
        # primary device of each run, not a job's ranks.
        got = (
            load(value, job=False, cache=cache)
            if os.path.isdir(value)
            else load(value, cache=cache)
        )
        if isinstance(got, Profile):
            return got
        value = got
    raise TypeError(
        f"nbprof.compare: {which} must be an nbprof.Profile or the path of a trace, "
        f"not {type(value).__name__}"
    )


def _render() -> ModuleType:
    """The renderer (:mod:`nbprof.views.render`). Imported on first display: the views
    read pandas, and ``nbprof.compare`` is reached without it until a comparison is made."""
    from nbprof.views import render

    return render
