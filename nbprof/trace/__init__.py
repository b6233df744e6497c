"""Reading profiler traces into columnar tables: :func:`read` -> :class:`Trace`."""

from __future__ import annotations

from nbprof.trace.model import Trace
from nbprof.trace.reader import read

__all__ = ["Trace", "read"]
