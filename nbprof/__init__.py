"""nbprof: what your GPU was really doing, inside a Jupyter notebook.

Public names are few: :func:`load`, :func:`profile`, :func:`compare`, :func:`gauge`,
:class:`Profile`, :class:`Job` (a multi-rank job), :class:`Comparison` (two runs, before
and after), :class:`TraceError`. Importing nbprof never imports torch, IPython, bokeh,
ipywidgets or dask: those load inside the functions that need them, so trace analysis
works anywhere.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nbprof._version import __version__ as __version__
from nbprof.errors import NbprofError, TraceError

__all__ = [
    "Comparison", "Job", "NbprofError", "Profile", "TraceError", "compare", "gauge", "load",
    "profile",
]  # fmt: skip

if TYPE_CHECKING:
    from nbprof.capture import profile
    from nbprof.comparison import Comparison, compare
    from nbprof.job import Job
    from nbprof.loading import load
    from nbprof.result import Profile
    from nbprof.views.gauge import gauge


def __getattr__(name: str) -> Any:
    # Lazy so that `import nbprof` stays light (no pandas/torch/bokeh at import time).
    if name == "Profile":
        from nbprof.result import Profile

        return Profile
    if name == "load":
        from nbprof.loading import load

        return load
    if name in ("Comparison", "compare"):
        from nbprof import comparison as _c

        return getattr(_c, name)
    if name == "Job":
        from nbprof.job import Job

        return Job
    if name == "profile":
        from nbprof.capture import profile

        return profile
    if name == "gauge":
        from nbprof.views.gauge import gauge

        return gauge
    raise AttributeError(f"module 'nbprof' has no attribute {name!r}")


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext nbprof``: registers ``%gpuprof`` / ``%%gpuprof`` and, in a notebook, loads
    BokehJS once for the page (``%reload_ext nbprof`` loads it again where it was cleared)."""
    from nbprof.magic import register
    from nbprof.views.dashboard import publish_loader

    register(ipython)
    publish_loader(force=True)


def unload_ipython_extension(ipython: Any) -> None:
    from nbprof.magic import unregister

    unregister(ipython)
