"""One renderer per output, looked up by the result's type.

:class:`~nbprof.Profile`, :class:`~nbprof.Job` and :class:`~nbprof.Comparison` are data;
their display hooks call :func:`notebook` (the display bundle below a cell), :func:`page`
(a standalone HTML document) and :func:`text` (plain text), which pick the views of the
object's type from :data:`RENDERERS`.

The table names the result types by their qualified names rather than importing them:
the results import this module, and views never import results back, so no import goes
round a loop (tests/test_imports.py walks them all).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from nbprof.views import compare, dashboard, job, report
from nbprof.views import text as text_view

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Renderer:
    """The three outputs of one result type."""

    #: The display bundle: HTML (or widgets) and ``text/plain``.
    notebook: Callable[[Any], dict[str, Any]]
    #: A complete HTML document that works offline from file://.
    page: Callable[[Any], str]
    #: The plain-text report a terminal prints.
    text: Callable[[Any], str]


#: Result type (module and class name) -> its renderer. Each view is looked up when it
#: renders, so a view replaced at run time (a test's stand-in) is the one used.
RENDERERS: dict[str, Renderer] = {
    "nbprof.result.Profile": Renderer(
        lambda p: dashboard.mimebundle(p), lambda p: report.render(p),
        lambda p: text_view.render(p),
    ),
    "nbprof.job.Job": Renderer(
        lambda j: job.mimebundle(j), lambda j: job.page(j), lambda j: text_view.render_job(j)
    ),
    "nbprof.comparison.Comparison": Renderer(
        lambda c: compare.mimebundle(c), lambda c: compare.page(c), lambda c: compare.text(c)
    ),
}  # fmt: skip


def renderer(obj: object) -> Renderer:
    """The renderer of ``obj``'s type (or of the nearest base class that has one)."""
    for cls in type(obj).__mro__:
        found = RENDERERS.get(f"{cls.__module__}.{cls.__qualname__}")
        if found is not None:
            return found
    raise TypeError(f"nbprof has no view of a {type(obj).__name__}")


def notebook(obj: object) -> dict[str, Any]:
    """The display bundle of ``obj`` (what ``_repr_mimebundle_`` returns)."""
    return renderer(obj).notebook(obj)


def page(obj: object) -> str:
    """``obj`` as a standalone HTML document."""
    return renderer(obj).page(obj)


def text(obj: object) -> str:
    """``obj`` as plain text."""
    return renderer(obj).text(obj)


def show(obj: object) -> None:
    """Display ``obj`` below the running cell (IPython's display, which asks
    :func:`notebook`)."""
    from IPython.display import display  # only in a notebook; importing nbprof stays light

    display(obj)
