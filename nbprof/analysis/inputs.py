"""The input pipeline: when the DataLoader fetched batches, and how much of each step.

PyTorch records a batch fetch as ``enumerate(DataLoader)#_SingleProcessDataLoaderIter.
__next__``, as a ``cpu_op`` in older releases and a ``user_annotation`` in newer ones; a
trace taken with ``with_stack=True`` adds the Python frame
``torch/utils/data/dataloader.py(...): __next__``. Any of them marks a fetch.
"""

from __future__ import annotations

import logging
import re

import numpy as np
import pandas as pd

from nbprof.analysis import _frames
from nbprof.analysis import intervals as iv
from nbprof.analysis._text import matches, name_column, name_pattern
from nbprof.trace.model import frame_from_arrays

logger = logging.getLogger(__name__)

_DATALOADER = name_pattern(
    r"DataLoader|DataLoaderIter\.__next__|_DataLoaderIter|dataloader\.py\(\d+\): __next__",
    re.IGNORECASE,
)


def dataloader_ops(cpu_ops: pd.DataFrame, annotations: pd.DataFrame | None = None) -> pd.DataFrame:
    """The batch fetches: rank, tid, name, ts, dur, from CPU ops and CPU-side annotations."""
    parts: list[tuple[pd.DataFrame, np.ndarray]] = []
    for f in (cpu_ops, annotations):
        if f is None or f.empty:
            continue
        # Row numbers first (most ranks have no fetch): a frame only of the hits.
        hit = matches(name_column(f, "name"), _DATALOADER)
        if "on_gpu" in f:
            hit &= ~_frames.column(f, "on_gpu", bool)
        rows = np.flatnonzero(hit)
        if len(rows):
            parts.append((f, rows))
    if not parts:
        return _frames.empty_typed(
            (("rank", "int32"), ("tid", "int64"), ("name", "object"), ("ts", "float64"),
             ("dur", "float64"))
        )  # fmt: skip
    types = [[_frames.dtype_of(f, c) for c in _FETCH_COLUMNS] for f, _ in parts]
    if all(
        isinstance(t, np.dtype) and t == first
        for ts in types
        for t, first in zip(ts, types[0], strict=True)
    ):
        # NumPy columns of one type in every part: what concatenating the parts' rows
        # gives, from the columns' arrays (a frame per part, then their concatenation,
        # cost more than the rest of the search).
        return frame_from_arrays(
            {
                c: np.concatenate([_frames.column(f, c)[rows] for f, rows in parts])
                for c in _FETCH_COLUMNS
            }
        )
    return pd.concat([f.iloc[rows][list(_FETCH_COLUMNS)] for f, rows in parts], ignore_index=True)


_FETCH_COLUMNS = ("rank", "tid", "name", "ts", "dur")


def dataloader_set(fetches: pd.DataFrame) -> iv.Set:
    """The time the host spent fetching batches, as an interval set."""
    if fetches.empty:
        return iv.EMPTY
    s = _frames.column(fetches, "ts", "float64")
    return iv.merge(s, s + _frames.column(fetches, "dur", "float64"))


def dataloader_pct(
    fetches: pd.DataFrame, steps: pd.DataFrame, window: tuple[float, float] | None
) -> tuple[float | None, str]:
    """Share of step time (or of ``window`` when there are no steps) spent in DataLoader."""
    if fetches.empty:
        return None, "no DataLoader __next__ ops or annotations in the trace"
    fetch = dataloader_set(fetches)
    if not steps.empty:
        ss = _frames.column(steps, "ts", "float64")
        within = iv.merge(ss, ss + _frames.column(steps, "dur", "float64"))
        how = f"DataLoader __next__ time ÷ {len(steps)} ProfilerStep(s)"
    elif window is not None and window[1] > window[0]:
        within = (np.array([window[0]]), np.array([window[1]]))
        how = "DataLoader __next__ time ÷ traced CPU span (no ProfilerStep)"
    else:
        return None, "no step or span to compare with"
    total = iv.total(within)
    if total <= 0:
        return None, "empty steps"
    return iv.total(iv.intersect(fetch, within)) / total * 100.0, how
