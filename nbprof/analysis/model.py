"""What analysis returns: plain dataclasses, serialisable to schema ``nbprof.analysis/1``.

Every number carries a :class:`Basis` saying where it came from, because a number without
its provenance is how nvidia-smi's "100%" misleads in the first place.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import pandas as pd

SCHEMA = "nbprof.analysis/1"

BasisKind = Literal["measured", "trace", "estimated", "unknown"]
Bottleneck = Literal[
    "compute_bound", "memory_bound", "launch_bound", "input_bound", "sync_bound",
    "transfer_bound", "communication_bound", "idle", "cpu_only",
]  # fmt: skip
Severity = Literal["high", "medium", "low", "info"]
Confidence = Literal["high", "low"]
BOTTLENECKS: tuple[str, ...] = Bottleneck.__args__  # type: ignore[attr-defined]


def utilization_tool(vendor: str) -> str:
    """The tool whose "GPU utilization" a device's users read (never NVIDIA's on AMD)."""
    return "rocm-smi" if vendor == "amd" else "nvidia-smi"


def matrix_units(vendor: str) -> str:
    """What a device's matrix-multiply units are called: AMD has matrix cores, not Tensor Cores."""
    return "Matrix cores" if vendor == "amd" else "Tensor Cores"


@dataclass(frozen=True)
class Basis:
    """Where a number came from.

    ``kind``: ``measured`` (hardware counters: NVML/GPM samples or CUPTI counters in the
    trace), ``trace`` (read or computed directly from trace events), ``estimated`` (inferred;
    ``how`` says from what), ``unknown`` (not available; ``how`` says why).
    """

    kind: BasisKind
    how: str

    def label(self) -> str:
        names = {
            "measured": "measured by hardware counters",
            "trace": "read from the trace",
            "estimated": "estimated",
            "unknown": "unknown",
        }
        return f"{names[self.kind]} ({self.how})" if self.how else names[self.kind]


@dataclass
class IdleBreakdown:
    host_wait_pct: float = 0.0
    kernel_wait_pct: float = 0.0
    other_pct: float = 0.0
    idle_us: float = 0.0


@dataclass
class DeviceMetrics:
    """The per-device numbers of DESIGN.md's metric contract, plus extras."""

    rank: int
    device: str
    name: str
    vendor: str
    sm_count: int | None
    compute_capability: str | None
    gpu_span_us: float
    kernel_count: int
    memcpy_count: int
    memset_count: int
    kernel_busy_pct: float | None
    gpu_busy_pct: float | None
    sm_efficiency_pct: float | None
    occupancy_pct: float | None
    tensor_core_pct: float | None
    tensor_core_basis: str  # "measured" | "kernel_names" | "ops" | "unknown"
    memcpy_bytes: int
    pageable_memcpy_count: int
    short_kernel_pct: float | None
    idle: IdleBreakdown = field(default_factory=IdleBreakdown)
    # Extras (welcome by the schema): roofline, launches, copies, input pipeline.
    achieved_tflops: float | None = None
    peak_tflops: float | None = None
    achieved_gbps: float | None = None
    peak_gbps: float | None = None
    median_launch_delay_us: float | None = None
    copy_gbps: float | None = None
    dataloader_pct: float | None = None
    sync_pct: float | None = None
    #: Means of NVML/GPM samples taken during the GPU span (None: not sampled).
    nvml_util_pct: float | None = None
    sm_active_pct: float | None = None
    tensor_active_pct: float | None = None
    dram_bw_pct: float | None = None
    #: metric name -> where its value came from.
    basis: dict[str, Basis] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["basis"] = {k: {"kind": b.kind, "how": b.how} for k, b in self.basis.items()}
        return d


@dataclass
class Finding:
    id: str
    severity: Severity
    title: str
    detail: str
    evidence: dict[str, Any]
    fix: str
    code: str | None = None
    #: Which device the finding is about ("" = the whole trace).
    device: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Verdict:
    """The one bottleneck, the sentence that says why, and how firmly the evidence holds.

    ``confidence`` is ``low`` when the deciding evidence covers too little of what the GPU
    did (compute vs memory from kernel classes when most kernel time is in kernels nbprof
    cannot classify); the summary then says so with the share. ``basis`` names what decided:
    ``no_gpu_events``, ``communication_kernels``, ``dataloader_gaps``, ``sync_gaps``,
    ``memcpy_time``, ``kernel_busy``, ``short_kernels``, ``hardware_counters``,
    ``roofline``, ``kernel_classes`` or ``none`` (no evidence either way; a default).
    """

    bottleneck: Bottleneck
    summary: str
    confidence: Confidence = "high"
    basis: str = ""


@dataclass
class Diagnosis:
    """The result of analysing a trace (and, when present, NVML samples)."""

    source: dict[str, Any]
    devices: list[DeviceMetrics]
    verdict: Verdict
    findings: list[Finding]
    #: Supporting tables, each a DataFrame (may be empty). Views read these; they never
    #: compute metrics themselves. Contract (extra columns allowed):
    #:
    #: ``kernel_class``  index aligned with ``trace.kernels``; ``cls`` ("tensor_core",
    #:     "compute", "memory", "communication", "other"), ``tensor_core`` (bool).
    #:     "memory" needs evidence (a memory-bound kernel family's name, or the roofline
    #:     placing the launching op below the ridge point); "other" is a kernel nbprof
    #:     cannot classify (custom extensions, unfamiliar names)
    #: ``top_kernels``   name, count, total_us, mean_us, pct (of kernel time), cls,
    #:     tensor_core
    #: ``idle_gaps``     rank, device, stream, start, end, dur, cause ("host_wait",
    #:     "kernel_wait", "other"), cpu_work (what the CPU did meanwhile, "" unknown)
    #: ``ops_roofline``  op, count, flops, bytes, total_us, tflops, gbps, intensity,
    #:     bound ("compute", "memory", "unknown"), basis
    #: ``copies``        rank, device, kind, src, dst, count, bytes, total_us, gbps,
    #:     pageable (bool)
    #: ``syncs``         name, count, total_us, pct (of the GPU span)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    #: Why utilization (nvidia-smi) differs from real activity, in this run's numbers.
    explanation: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "source": self.source,
            "devices": [d.to_json() for d in self.devices],
            "verdict": {
                "bottleneck": self.verdict.bottleneck,
                "summary": self.verdict.summary,
                "confidence": self.verdict.confidence,
                "basis": self.verdict.basis,
            },
            "findings": [f.to_json() for f in self.findings],
            "explanation": self.explanation,
        }
