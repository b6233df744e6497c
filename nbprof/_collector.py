"""Python's cyclic garbage collector paused while a stretch of work runs.

Reading a trace and analysing a rank make and drop many objects that reference counts
free; the collector would scan them, and everything the process holds, for nothing.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused() -> Iterator[None]:
    """The cyclic collector off meanwhile, then on again only if it was on before."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
