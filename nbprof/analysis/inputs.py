"""The input pipeline: how much of each step the DataLoader took."""

from __future__ import annotations

import logging
import re

import numpy as np
import pandas as pd

from nbprof.analysis._text import matches
from nbprof.analysis.utilization import union_length

logger = logging.getLogger(__name__)

_DATALOADER = re.compile(r"DataLoader|DataLoaderIter\.__next__|_DataLoaderIter", re.IGNORECASE)


def dataloader_ops(cpu_ops: pd.DataFrame) -> pd.DataFrame:
    """CPU ops that fetch a batch (``enumerate(DataLoader)#..._DataLoaderIter.__next__``)."""
    if cpu_ops.empty:
        return cpu_ops
    return cpu_ops[matches(cpu_ops["name"], _DATALOADER)]


def dataloader_pct(
    cpu_ops: pd.DataFrame, steps: pd.DataFrame, window: tuple[float, float] | None
) -> tuple[float | None, str]:
    """Share of step time (or of ``window`` when there are no steps) spent in DataLoader."""
    dl = dataloader_ops(cpu_ops)
    if dl.empty:
        return None, "no DataLoader ops in the trace"
    s = dl["ts"].to_numpy(dtype="float64")
    e = s + dl["dur"].to_numpy(dtype="float64")
    if not steps.empty:
        ss = steps["ts"].to_numpy(dtype="float64")
        se = ss + steps["dur"].to_numpy(dtype="float64")
        total = union_length(ss, se)
        lo, hi = float(ss.min()), float(se.max())
        how = f"DataLoader __next__ time ÷ {len(steps)} ProfilerStep(s)"
    elif window is not None and window[1] > window[0]:
        lo, hi = window
        total = hi - lo
        how = "DataLoader __next__ time ÷ traced CPU span (no ProfilerStep)"
    else:
        return None, "no step or span to compare with"
    if total <= 0:
        return None, "empty steps"
    cs, ce = np.clip(s, lo, hi), np.clip(e, lo, hi)
    return union_length(cs, ce) / total * 100.0, how
