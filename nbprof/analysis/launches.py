"""Launch overhead: how long kernels wait between the launch call and their start."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from nbprof.analysis._text import matches

logger = logging.getLogger(__name__)


def launch_delays(kernels: pd.DataFrame) -> np.ndarray:
    """Kernel start minus the start of the runtime call that launched it (µs), known ones."""
    if kernels.empty:
        return np.zeros(0)
    d = (kernels["ts"] - kernels["launch_ts"]).to_numpy(dtype="float64")
    return d[~np.isnan(d)]


def median_launch_delay_us(kernels: pd.DataFrame) -> float | None:
    d = launch_delays(kernels)
    return float(np.median(d)) if len(d) else None


def mean_launch_call_us(runtime: pd.DataFrame) -> float | None:
    """Mean duration of the kernel-launch API calls (cudaLaunchKernel and friends)."""
    if runtime.empty:
        return None
    names = runtime["name"].astype(str)
    m = matches(names, r"LaunchKernel|hipLaunch|hipExtLaunch|hipModuleLaunch")
    if not m.any():
        return None
    return float(runtime.loc[m, "dur"].mean())
