"""What analysis returns: plain dataclasses, serialisable to schema ``nbprof.analysis/1``.

Every number carries a :class:`Basis` saying where it came from, because a number without
its provenance is how nvidia-smi's "100%" misleads in the first place.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal, get_args

import pandas as pd

SCHEMA = "nbprof.analysis/1"

BasisKind = Literal["measured", "trace", "estimated", "unknown"]
Bottleneck = Literal[
    "compute_bound", "memory_bound", "host_bound", "launch_bound", "input_bound",
    "sync_bound", "transfer_bound", "communication_bound", "idle", "insufficient_gpu_work",
    "cpu_only",
]  # fmt: skip
Severity = Literal["high", "medium", "low", "info"]
Confidence = Literal["high", "low"]
#: Which evidence decided ``tensor_core_pct`` (DESIGN.md's metric contract).
TensorCoreBasis = Literal["measured", "kernel_names", "ops", "unknown"]
#: What decided a verdict (see :class:`Verdict`); "" and "none" when nothing did.
VerdictBasis = Literal[
    "no_gpu_events", "little_gpu_work", "graph_capture", "exposed_communication",
    "dataloader_gaps", "sync_gaps", "copy_time", "host_gaps", "launch_gaps", "kernel_gaps",
    "one_time_setup", "queued_idle", "kernel_busy", "hardware_counters", "roofline",
    "kernel_classes", "none", "",
]  # fmt: skip
BOTTLENECKS: tuple[str, ...] = get_args(Bottleneck)
TENSOR_CORE_BASES: tuple[str, ...] = get_args(TensorCoreBasis)
VERDICT_BASES: tuple[str, ...] = get_args(VerdictBasis)


def utilization_tool(vendor: str) -> str:
    """The tool whose "GPU utilization" a device's users read (never NVIDIA's on AMD)."""
    return "rocm-smi" if vendor == "amd" else "nvidia-smi"


def matrix_units(vendor: str) -> str:
    """What a device's matrix-multiply units are called: AMD has matrix cores, not Tensor Cores."""
    return "Matrix cores" if vendor == "amd" else "Tensor Cores"


def compute_units(vendor: str) -> str:
    """What a device's multiprocessors are called: AMD GPUs have CUs, NVIDIA GPUs SMs."""
    return "CUs" if vendor == "amd" else "SMs"


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
    """The device's idle time (the union over its streams, never more than the span) and
    the shares of it that are ``host_wait`` (nothing was queued when the GPU went idle),
    ``kernel_wait`` (work was queued; a gap shorter than the back-to-back launch delay) and
    ``other`` (work was queued and waited longer, or its launch is unknown)."""

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
    tensor_core_basis: TensorCoreBasis
    #: Bytes the copies moved; None when no copy carries a byte count.
    memcpy_bytes: int | None
    pageable_memcpy_count: int
    short_kernel_pct: float | None
    idle: IdleBreakdown = field(default_factory=IdleBreakdown)
    #: Share of kernel time in collectives; share of the span where a collective runs and
    #: no compute kernel does; share of collective time with a compute kernel beside it.
    comm_pct: float | None = None
    exposed_comm_pct: float | None = None
    comm_overlap_pct: float | None = None
    #: First to last event of any kind on this device's rank (host and GPU), µs; the
    #: median ProfilerStep, and the median share of a step before its first GPU event.
    window_us: float | None = None
    step_us: float | None = None
    pre_gpu_step_pct: float | None = None
    #: Median host time between consecutive launches, median launch-call duration, and
    #: median launch-to-start delay of kernels, µs.
    host_us_per_kernel: float | None = None
    launch_us_per_kernel: float | None = None
    launch_to_start_us: float | None = None
    #: Share of idle time during which work was queued (launched, not yet started).
    idle_queued_pct: float | None = None
    #: Copies per direction and host-memory kind: kind, count, bytes, us, gbps.
    copies: list[dict[str, Any]] = field(default_factory=list)
    #: The GPU span cut into disjoint shares (%): compute, exposed_comm, copy_only, then
    #: the idle causes of nbprof.analysis.stalls (sync, dependency, kernel_wait, input,
    #: setup, host, unknown). They add up to 100.
    span_breakdown: dict[str, float] = field(default_factory=dict)
    # Extras (welcome by the schema): roofline, input pipeline, syncs.
    achieved_tflops: float | None = None
    peak_tflops: float | None = None
    achieved_gbps: float | None = None
    peak_gbps: float | None = None
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
    cannot classify), or when two bases disagree; the summary then says so with the
    numbers. ``basis`` names what decided: ``no_gpu_events``, ``little_gpu_work``,
    ``graph_capture``, ``exposed_communication``, ``dataloader_gaps``, ``sync_gaps``,
    ``copy_time``, ``host_gaps``, ``launch_gaps``, ``kernel_gaps``, ``one_time_setup``,
    ``queued_idle``, ``kernel_busy``, ``hardware_counters``, ``roofline``,
    ``kernel_classes`` or ``none`` (no evidence either way; a default).
    """

    bottleneck: Bottleneck
    summary: str
    confidence: Confidence = "high"
    basis: VerdictBasis = ""


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
    #:     "kernel_wait", "other"), cpu_work (what the CPU did meanwhile, "" unknown):
    #:     gaps of each stream, as the timeline shades them
    #: ``stalls``        rank, device, start, end, dur, queued (bool), cause (the idle
    #:     cause covering most of the gap: "sync", "dependency", "kernel_wait", "input",
    #:     "setup", "host", "unknown"), cpu_work: idle gaps of the whole device, largest
    #:     first; what decides the verdict
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
