"""NVML/GPM samples recorded during the trace: the hardware's own view of the run.

A trace names devices by CUDA's ordinal; NVML numbers GPUs its own way (see
:mod:`nbprof.telemetry.devices`). Samples are credited to a trace device only through the
match the capture recorded (``Samples.cuda_devices``, by UUID), or when NVML saw a single
GPU; otherwise not at all, with the reason, rather than another GPU's numbers.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np

from nbprof.analysis import _frames
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
    #: The NVML GPU the samples came from, and how it was matched to the trace's device.
    gpu: int | None = None
    how: str = ""


def nvml_gpu(samples: Samples, device: str) -> tuple[int | None, str]:
    """The NVML index whose samples describe trace device ``device``, and how (or why none).

    Never the CUDA ordinal taken as an NVML index: with ``CUDA_VISIBLE_DEVICES=2`` (or mixed
    GPUs) that is another GPU.
    """
    match = samples.cuda_devices.get(str(device))
    if match is not None:
        gpu = match.get("gpu")
        if match.get("mig"):
            return None, f"CUDA device {device} is {match.get('why', 'a MIG instance')}"
        if isinstance(gpu, int) and not isinstance(gpu, bool):
            return gpu, f"NVML GPU {gpu} is CUDA device {device}: {match.get('how', '')}"
        return None, f"CUDA device {device} not matched to an NVML GPU: {match.get('why', '')}"
    listed = set(samples.gpus) | set(samples.frame["gpu"].unique().tolist())
    if len(listed) == 1:
        (only,) = listed
        if not samples.gpus.get(only, {}).get("mig"):
            return int(only), f"NVML saw one GPU only (GPU {only})"
    return None, (
        f"NVML sampled {len(listed)} GPUs and these samples do not say which one CUDA device "
        f"{device} was (NVML's index is not CUDA's)"
    )


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
    gpu, how = nvml_gpu(samples, device)
    if gpu is None:
        logger.info("NVML samples not used: %s", how)
        return None
    f = samples.frame
    lo = origin_ns + int(start_us * 1000)
    hi = origin_ns + math.ceil(end_us * 1000)
    t = _frames.column(f, "time_ns", "int64")
    sel = f[(_frames.column(f, "gpu") == gpu) & (t >= lo) & (t <= hi)]
    if sel.empty:
        return None

    def mean(col: str) -> float | None:
        if col not in sel:
            return None
        v = _frames.column(sel, col, "float64")
        v = v[~np.isnan(v)]
        return float(v.mean()) if len(v) else None

    return Measured(
        count=len(sel),
        util_gpu=mean("util_gpu"),
        sm_util=mean("sm_util"),
        tensor_util=mean("tensor_util"),
        dram_bw_util=mean("dram_bw_util"),
        gpu=gpu,
        how=how,
    )
