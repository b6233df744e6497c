"""The analysis' idle gaps, placed on the timeline's lanes and packed for the browser."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from nbprof.views._style import GAP_CAUSES
from nbprof.views.timeline.store import TimelineData

if TYPE_CHECKING:
    from nbprof.result import Profile

logger = logging.getLogger(__name__)

#: Idle gaps shaded at most (the longest ones).
MAX_GAPS = 2_000

_GAP_COLUMNS = ("left", "right", "dur", "li", "cause", "cpu_code")


def encode_gaps(gaps: pd.DataFrame, tick: float) -> dict[str, np.ndarray]:
    """Gaps in start order: delta start ticks and length ticks (uint32, the store's tick),
    lane, cause id (GAP_CAUSES order) and CPU-work label code; js/lod.mjs decodeGaps decodes."""
    g = gaps.sort_values("left", kind="stable")
    start = np.rint(g["left"].to_numpy(dtype=np.float64) / tick).astype(np.int64)
    length = np.rint((g["right"] - g["left"]).to_numpy(dtype=np.float64) / tick)
    causes = {c: i for i, c in enumerate(GAP_CAUSES)}
    top = np.iinfo(np.uint32).max
    return {
        "dx": np.diff(start, prepend=0).clip(0, top).astype(np.uint32),
        "dd": length.clip(0, top).astype(np.uint32),
        "li": g["li"].to_numpy(dtype=np.uint16),
        "cause": g["cause"].map(causes).to_numpy(dtype=np.uint8),
        "cpu": g["cpu_code"].to_numpy(dtype=np.uint16),
    }


def gap_table(profile: Profile, data: TimelineData, notes: list[str]) -> pd.DataFrame:
    """Idle gaps from analysis on their lanes (see :func:`gaps_on_lanes`)."""
    try:
        gaps = profile.diagnosis.idle_gaps
    except Exception as e:
        logger.warning("diagnosis unavailable for idle gaps: %s", e)
        gaps = None
    return gaps_on_lanes(gaps, data, notes)


def gaps_on_lanes(gaps: pd.DataFrame | None, data: TimelineData, notes: list[str]) -> pd.DataFrame:
    """The analysis' idle gaps on their lanes: left/right in µs since t0, lane index,
    cause, and a code into ``attrs["cpu_labels"]`` (what the CPU did meanwhile)."""
    empty = pd.DataFrame({c: pd.Series(dtype="float64") for c in _GAP_COLUMNS})
    empty["cause"] = empty["cause"].astype(object)
    empty.attrs["cpu_labels"] = []
    if gaps is None or not len(gaps):
        return empty
    if len(gaps) > MAX_GAPS:
        notes.append(f"Showing the {MAX_GAPS:,} longest of {len(gaps):,} idle gaps.")
        gaps = gaps.nlargest(MAX_GAPS, "dur")
    lane_of = {ln.key: i for i, ln in enumerate(data.lanes)}
    keys = zip(
        gaps["rank"].astype(int).tolist(),
        gaps["device"].astype(str).tolist(),
        gaps["stream"].astype(int).tolist(),
        strict=True,
    )
    li = np.array([lane_of.get(("gpu", r, d, s), -1) for r, d, s in keys], dtype=np.int64)
    keep = li >= 0
    g = gaps[keep]
    cpu = (
        g["cpu_work"].astype(str).replace("", "unknown")
        if "cpu_work" in g
        else pd.Series("unknown", index=g.index)
    )
    codes, labels = pd.factorize(cpu)
    cause = g["cause"].astype(str)
    out = pd.DataFrame(
        {
            "left": g["start"].to_numpy(dtype=np.float64) - data.t0,
            "right": g["end"].to_numpy(dtype=np.float64) - data.t0,
            "dur": g["dur"].to_numpy(dtype=np.float64),
            "li": li[keep],
            "cause": cause.where(cause.isin(list(GAP_CAUSES)), "other").to_numpy(),
            "cpu_code": codes.astype(np.int64),
        }
    ).reset_index(drop=True)
    out.attrs["cpu_labels"] = [str(x) for x in labels.tolist()]
    return out
