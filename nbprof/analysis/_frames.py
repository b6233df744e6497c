"""Small frame helpers: empty frames of given columns and types, built once and copied;
whether a frame's rows are numbered from 0.

pandas takes about 0.2 ms to make each empty typed column (a frame of eight costs more than
most of a small rank's analysis), and the analysis returns such frames from many places
for every device that lacks the events: each distinct one is built once, and callers get a
copy of it (cheap: no rows), never the shared frame itself.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

import pandas as pd


@functools.lru_cache(maxsize=256)
def _built(spec: tuple[tuple[str, Any], ...]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=t) for c, t in spec})


def empty(columns: Iterable[str], dtype: Any = "object") -> pd.DataFrame:
    """A frame with no rows and these columns, every one of type ``dtype``."""
    return _built(tuple((c, dtype) for c in columns)).copy()


def empty_typed(spec: Iterable[tuple[str, Any]]) -> pd.DataFrame:
    """A frame with no rows and these (column, type) pairs."""
    return _built(tuple(spec)).copy()


def numbered(df: pd.DataFrame) -> bool:
    """Whether the rows are numbered 0, 1, ... (what ``ignore_index`` and ``reset_index``
    give)."""
    i = df.index
    return isinstance(i, pd.RangeIndex) and i.start == 0 and i.step == 1
