"""NVML/GPM samples recorded during the trace: the hardware's own view of the run."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np

from nbprof.telemetry.model import Samples

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Measured:
    """Means over the samples that fall inside one device's GPU span (None: not sampled)."""

    count: int
    util_gpu: float | None
    sm_util: float | None
    tensor_util: float | None
    dram_bw_util: float | None


def measured_for(
    samples: Samples | None,
    device: str,
    origin_ns: int | None,
    start_us: float,
    end_us: float,
) -> Measured | None:
    """Align samples to the trace (``origin_ns + ts × 1000`` vs ``time_ns``) and average."""
    if samples is None or len(samples) == 0 or origin_ns is None or end_us <= start_us:
        return None
    try:
        gpu = int(device)
    except ValueError:
        return None
    f = samples.frame
    lo = origin_ns + int(start_us * 1000)
    hi = origin_ns + math.ceil(end_us * 1000)
    t = f["time_ns"].to_numpy(dtype="int64")
    sel = f[(f["gpu"].to_numpy() == gpu) & (t >= lo) & (t <= hi)]
    if sel.empty:
        return None

    def mean(col: str) -> float | None:
        if col not in sel:
            return None
        v = sel[col].to_numpy(dtype="float64")
        v = v[~np.isnan(v)]
        return float(v.mean()) if len(v) else None

    return Measured(
        count=len(sel),
        util_gpu=mean("util_gpu"),
        sm_util=mean("sm_util"),
        tensor_util=mean("tensor_util"),
        dram_bw_util=mean("dram_bw_util"),
    )
