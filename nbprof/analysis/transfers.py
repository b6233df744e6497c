"""Copies between host and device: direction, pageable vs pinned, achieved bandwidth."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from nbprof.analysis._text import matches

logger = logging.getLogger(__name__)

COPY_COLUMNS = (
    "rank", "device", "kind", "src", "dst", "count", "bytes", "total_us", "gbps", "pageable",
)  # fmt: skip


def is_pageable(memcpy: pd.DataFrame) -> pd.Series:
    """A copy is pageable when either side is pageable host memory (name or columns say so)."""
    if memcpy.empty:
        return pd.Series(dtype=bool)
    by_cols = (memcpy["src"] == "Pageable") | (memcpy["dst"] == "Pageable")
    by_name = pd.Series(matches(memcpy["name"], "Pageable"), index=memcpy.index)
    return by_cols | by_name


def copies_table(memcpy: pd.DataFrame) -> pd.DataFrame:
    """One row per (rank, device, direction, src, dst)."""
    if memcpy.empty:
        return pd.DataFrame({c: pd.Series(dtype="object") for c in COPY_COLUMNS})
    df = memcpy.assign(
        pageable=is_pageable(memcpy).to_numpy(),
        nbytes=memcpy["bytes"].clip(lower=0).to_numpy(),
    )
    g = df.groupby(["rank", "device", "kind", "src", "dst"], sort=True, dropna=False)
    out = g.agg(
        count=("dur", "size"),
        bytes=("nbytes", "sum"),
        total_us=("dur", "sum"),
        pageable=("pageable", "any"),
    ).reset_index()
    tot = out["total_us"].to_numpy(dtype="float64")
    # A zero or subnormal duration is below the trace's resolution: the rate over it is
    # unknown (NaN), not a division warning or an infinite GB/s.
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        rate = out["bytes"].to_numpy(dtype="float64") / tot / 1e3
    out["gbps"] = np.where((tot > 0) & np.isfinite(rate), rate, np.nan)
    out = out.sort_values("total_us", ascending=False, kind="stable").reset_index(drop=True)
    return out[list(COPY_COLUMNS)]
