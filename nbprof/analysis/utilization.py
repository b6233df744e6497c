"""Per-device time accounting: spans, interval unions and the busy/efficiency metrics.

Everything here follows DESIGN.md's metric contract to the letter; each function takes
plain arrays or frames for one device and returns plain numbers, so golden tests can check
them against formulas.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from nbprof.analysis import _frames

logger = logging.getLogger(__name__)

#: Kernels shorter than this (µs) count as "short" in ``short_kernel_pct``.
SHORT_KERNEL_US = 10.0


def union_length(starts: np.ndarray, ends: np.ndarray) -> float:
    """Total length covered by the intervals [start, end): overlaps count once.

    Sorts once and sweeps with a running maximum of ends, so it is O(n log n) and fully
    vectorised.
    """
    if len(starts) == 0:
        return 0.0
    order = np.argsort(starts, kind="stable")
    s = np.asarray(starts, dtype="float64")[order]
    e = np.maximum(np.asarray(ends, dtype="float64")[order], s)
    run_end = np.maximum.accumulate(e)
    # An interval opens a new merged block when it starts after every earlier one ended.
    prev_end = np.concatenate(([-np.inf], run_end[:-1]))
    new_block = s > prev_end
    block_id = np.cumsum(new_block) - 1
    block_start = s[new_block]
    block_end = np.zeros(len(block_start))
    np.maximum.at(block_end, block_id, run_end)
    return float(np.sum(block_end - block_start))


def span(starts: np.ndarray, ends: np.ndarray) -> tuple[float, float]:
    """(first start, last end); (0, 0) when empty."""
    if len(starts) == 0:
        return 0.0, 0.0
    return float(np.min(starts)), float(np.max(ends))


def busy_pct(starts: np.ndarray, ends: np.ndarray, span_us: float) -> float | None:
    """Union of the intervals ÷ span × 100; None when the span is empty."""
    if span_us <= 0:
        return None
    return union_length(starts, ends) / span_us * 100.0


def weighted_coverage(
    starts: np.ndarray, ends: np.ndarray, weights: np.ndarray, cap: float = 1.0
) -> float:
    """∫ min(Σ weights of intervals open at t, cap) dt: overlapping intervals add, clamped."""
    if len(starts) == 0:
        return 0.0
    # Each step's arrays replace the last's (twice the kernels each, a few of them at once
    # at most: this runs late in an analysis, beside everything it holds).
    t = np.concatenate((starts, ends)).astype("float64", copy=False)
    w = np.concatenate((weights, -np.asarray(weights))).astype("float64", copy=False)
    order = np.argsort(t, kind="stable")
    t, w = t[order], w[order]
    del order
    level = np.cumsum(w)
    del w
    # Float sums of +w/-w can leave tiny negatives once every interval has closed.
    np.clip(level, 0.0, cap, out=level)
    return float(np.sum(level[:-1] * np.diff(t)))


def sm_efficiency_pct(
    kernels: pd.DataFrame, sm_count: int | None, span_us: float
) -> tuple[float | None, int]:
    """DESIGN.md's SM efficiency and the number of kernels left out for lack of a grid.

    Each kernel weighs min(grid ÷ SM count, 1); overlapping kernels add, clamped at 1;
    integrated over time and divided by the GPU span (idle counts as 0).
    """
    if not sm_count or sm_count <= 0 or span_us <= 0 or kernels.empty:
        return None, 0
    grid = _frames.column(kernels, "grid", "float64")
    known = grid > 0
    if not known.any():
        return None, len(kernels)
    w = np.minimum(grid[known] / float(sm_count), 1.0)
    s = _frames.column(kernels, "ts", "float64")[known]
    e = s + _frames.column(kernels, "dur", "float64")[known]
    return weighted_coverage(s, e, w) / span_us * 100.0, int((~known).sum())


def occupancy_pct(kernels: pd.DataFrame) -> float | None:
    """Kernel-duration-weighted mean of Kineto's ``est. achieved occupancy %``, over the
    kernels it was computed for: Kineto writes 0 where its occupancy calculation failed,
    and a kernel that ran had warps resident, so 0 means "not computed", not "empty"."""
    return occupancy(kernels)[0]


def occupancy(kernels: pd.DataFrame) -> tuple[float | None, int, int]:
    """(:func:`occupancy_pct`, kernels with a computed occupancy, kernels Kineto wrote 0
    for)."""
    if kernels.empty:
        return None, 0, 0
    occ = _frames.column(kernels, "occupancy", "float64")
    dur = _frames.column(kernels, "dur", "float64")
    ok = occ > 0  # NaN (absent) and 0 (not computed) both fall out
    zero = int((occ == 0).sum())
    total = dur[ok].sum()
    if not ok.any() or total <= 0:
        return None, int(ok.sum()), zero
    return float((occ[ok] * dur[ok]).sum() / total), int(ok.sum()), zero


def short_kernel_pct(kernels: pd.DataFrame, threshold_us: float = SHORT_KERNEL_US) -> float | None:
    """Share of kernels (by count) shorter than ``threshold_us``."""
    if kernels.empty:
        return None
    return float((_frames.column(kernels, "dur") < threshold_us).mean() * 100.0)
