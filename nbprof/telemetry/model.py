"""Recorded NVML samples: the shape shared by the sampler, replays, analysis and views.

``frame`` is wide: one row per (time, gpu) with NaN where a metric was not available;
``reasons`` says why for each missing metric, in words a user can act on.

Columns (all float64 except ``time_ns``/``gpu``):
``time_ns`` int64, wall clock (ns since the Unix epoch, ``time.time_ns()``: the clock
Kineto stamps traces with), ``gpu`` int64 (NVML index), then the metrics in
:data:`METRICS` (percentages 0-100, bytes, watts, MHz, °C).

NVML numbers its GPUs its own way, and a trace's device ids are CUDA's (after
``CUDA_VISIBLE_DEVICES``), so ``gpu`` is *not* a trace device id: ``cuda_devices`` says which
NVML GPU each CUDA device of the run was (see :mod:`nbprof.telemetry.devices`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

#: metric column -> (label, unit, basis). Basis says what kind of number it is.
METRICS: dict[str, tuple[str, str, str]] = {
    "util_gpu": ("nvidia-smi utilization", "%",
                 "NVML utilization.gpu: share of time >=1 kernel ran"),
    "util_mem": ("memory controller busy", "%", "NVML utilization.memory"),
    "mem_used": ("memory used", "B",
                 "NVML memory info: allocated (v2; v1 where the driver lacks it adds reserved)"),
    "mem_total": ("memory total", "B", "NVML memory info"),
    "mem_reserved": ("memory reserved by the driver", "B", "NVML memory info v2"),
    "power_w": ("power", "W", "NVML power usage"),
    "sm_clock_mhz": ("SM clock", "MHz", "NVML clock info"),
    "temp_c": ("temperature", "°C", "NVML temperature"),
    "sm_util": ("SM activity", "%", "NVML GPM SM utilization (hardware counters)"),
    "sm_occupancy": ("SM occupancy", "%", "NVML GPM SM occupancy (hardware counters)"),
    "tensor_util": ("Tensor Core activity", "%", "NVML GPM any-tensor utilization"),
    "hmma_util": ("HMMA tensor activity", "%", "NVML GPM FP16/BF16 tensor pipe"),
    "imma_util": ("IMMA tensor activity", "%", "NVML GPM integer tensor pipe"),
    "dfma_util": ("DFMA tensor activity", "%", "NVML GPM FP64 tensor pipe"),
    "dram_bw_util": ("DRAM bandwidth", "%", "NVML GPM DRAM bandwidth utilization"),
    "fp16_util": ("FP16 pipe", "%", "NVML GPM FP16 pipe utilization"),
    "fp32_util": ("FP32 pipe", "%", "NVML GPM FP32 pipe utilization"),
}  # fmt: skip

SAMPLE_COLUMNS: tuple[str, ...] = ("time_ns", "gpu", *METRICS)


@dataclass
class Samples:
    """A series of NVML samples, live or replayed."""

    frame: pd.DataFrame
    #: (gpu, metric) -> reason it is missing, e.g. "GPM needs Hopper or newer".
    reasons: dict[tuple[int, str], str] = field(default_factory=dict)
    #: gpu index -> {"name": ..., "uuid": ..., ...}
    gpus: dict[int, dict[str, Any]] = field(default_factory=dict)
    #: "live" or "replay: <path>"; shown wherever the samples are.
    source: str = "live"
    #: Process-wide reason there are no samples at all (no NVML, no GPU, ...), else "".
    unavailable: str = ""
    #: CUDA device id (as a trace names it: "0") -> {"gpu": NVML index or None, "uuid": ...,
    #: "how": how it was matched, "why": why not}; empty when no capture said.
    cuda_devices: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def empty(cls, unavailable: str = "", source: str = "live") -> Samples:
        frame = pd.DataFrame(
            {
                c: pd.Series(dtype="int64" if c in ("time_ns", "gpu") else "float64")
                for c in SAMPLE_COLUMNS
            }
        )
        return cls(frame=frame, source=source, unavailable=unavailable)

    def __len__(self) -> int:
        return len(self.frame)
