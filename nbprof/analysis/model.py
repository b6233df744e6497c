"""What analysis returns: plain dataclasses, serialisable to schema ``nbprof.analysis/1``.

Every number carries a :class:`Basis` saying where it came from, because a number without
its provenance is how nvidia-smi's "100%" misleads in the first place.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal, get_args

import pandas as pd

from nbprof.analysis._sent import PackedWhenSent
from nbprof.trace.model import NAN, Column, Table
from nbprof.vocab import Bottleneck as Bottleneck

SCHEMA = "nbprof.analysis/1"

BasisKind = Literal["measured", "trace", "estimated", "unknown"]
Severity = Literal["high", "medium", "low", "info"]
Confidence = Literal["high", "low"]
#: Which evidence decided ``tensor_core_pct`` (DESIGN.md's metric contract).
TensorCoreBasis = Literal["measured", "kernel_names", "ops", "unknown"]
#: What decided a verdict (see :class:`Verdict`); "" and "none" when nothing did.
VerdictBasis = Literal[
    "no_gpu_events", "little_gpu_work", "graph_capture", "exposed_communication",
    "dataloader_gaps", "sync_gaps", "copy_time", "host_gaps", "launch_gaps", "kernel_gaps",
    "one_time_setup", "queued_idle", "comm_wait", "kernel_busy", "hardware_counters", "roofline",
    "kernel_classes", "none", "",
]  # fmt: skip
#: The verdicts' names (declared with their words in :mod:`nbprof.vocab`).
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
    #: Share of kernel time in kernels no name rule knows that behave as communication
    #: does (a dedicated stream beside the compute, small grids running long): possibly
    #: communication, estimated; None when the SM count is unknown.
    possible_comm_pct: float | None = None
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


# -- the diagnosis tables, each declared once ------------------------------------------
# Views read these; they never compute metrics themselves. Extra columns are allowed.
# docs/tables.md is written from these declarations (tables_markdown).

_CLS = Column(
    "cls", "object", 'kernel class: "tensor_core", "compute", "memory", "communication" or '
    '"other" (memory needs evidence: a memory-bound kernel family\'s name, or the roofline '
    "placing the launching op below the ridge point; other: a kernel nbprof cannot classify)",
)  # fmt: skip
_TENSOR_CORE = Column("tensor_core", "bool", "the kernel uses Tensor Cores")
_IDLE_CAUSE = Column(
    "cause", "object", 'why the stream was idle: "host_wait" (nothing was queued), '
    '"kernel_wait" (queued, shorter than the back-to-back launch delay) or "other"',
)  # fmt: skip
_CPU_WORK = Column("cpu_work", "object", "what the CPU did during the gap", "")
_GAP = (
    Column("start", "float64", "gap start", unit="µs"),
    Column("end", "float64", "gap end", unit="µs"),
    Column("dur", "float64", "gap length", unit="µs"),
)
_COUNT = Column("count", "int64", "how many")
_TOTAL_US = Column("total_us", "float64", "their total time", unit="µs")

KERNEL_CLASS_TABLE = Table(
    "kernel_class",
    "Each kernel's class; the index is aligned with `trace.kernels`.",
    (_CLS, _TENSOR_CORE),
)
TOP_KERNELS_TABLE = Table(
    "top_kernels",
    "The kernels that took the most GPU time, by name, most first.",
    (
        Column("name", "object", "kernel name"),
        replace(_COUNT, doc="launches"),
        _TOTAL_US,
        Column("mean_us", "float64", "mean duration", unit="µs"),
        Column("pct", "float64", "share of kernel time", NAN, "%"),
        replace(_CLS, doc="kernel class (of its first launch)"),
        replace(_TENSOR_CORE, doc="any launch used Tensor Cores"),
    ),
)
IDLE_GAPS_TABLE = Table(
    "idle_gaps",
    "The idle gaps of each GPU stream, as the timeline shades them, largest first.",
    (
        Column("rank", "int32", "rank"),
        Column("device", "object", "GPU"),
        Column("stream", "int64", "GPU stream"),
        *_GAP,
        _IDLE_CAUSE,
        _CPU_WORK,
    ),
)
STALLS_TABLE = Table(
    "stalls",
    "The idle gaps of each whole device (no stream busy), largest first: what decides the verdict.",
    (
        Column("rank", "int32", "rank"),
        Column("device", "object", "GPU"),
        *_GAP,
        Column("queued", "bool", "work was queued (launched, not yet started) during the gap"),
        Column(
            "queued_us",
            "float64",
            "how much of the gap work was queued: from the launch of the earliest work "
            "still to start, to the gap's end",
            unit="µs",
        ),
        replace(
            _IDLE_CAUSE,
            doc='the idle cause covering most of the gap: "sync", "dependency" (queued '
            'work waiting on work outside the trace), "comm_wait" (queued behind a '
            'collective), "kernel_wait", "capture", "input", "setup", "host" or "unknown"',
        ),
        _CPU_WORK,
    ),
)
ROOFLINE_TABLE = Table(
    "ops_roofline",
    "The FLOP-counted ops per name and dtype, placed on the roofline.",
    (
        Column("op", "object", "op name"),
        replace(_COUNT, doc="calls"),
        Column("flops", "float64", "FLOPs of all calls", unit="FLOP"),
        Column("bytes", "float64", "bytes their inputs and outputs hold", unit="bytes"),
        replace(_TOTAL_US, doc="GPU time of the kernels they launched"),
        Column("tflops", "float64", "achieved rate", NAN, "TFLOP/s"),
        Column("gbps", "float64", "achieved bandwidth", NAN, "GB/s"),
        Column("intensity", "float64", "arithmetic intensity", NAN, "FLOP/byte"),
        Column("bound", "object", '"compute", "memory" or "unknown" (against the ridge point)'),
        Column("basis", "object", "where the bound came from"),
        Column("dtype", "object", "the ops' dtype (fp32, bf16, ...)"),
    ),
)
COPIES_TABLE = Table(
    "copies",
    "Memory copies per device, direction and host-memory kind.",
    (
        Column("rank", "int32", "rank"),
        Column("device", "object", "GPU"),
        Column("kind", "object", 'direction: "HtoD", "DtoH", "DtoD", "HtoH" or "PtoP"'),
        Column("src", "object", "source memory"),
        Column("dst", "object", "destination memory"),
        replace(_COUNT, doc="copies"),
        Column("bytes", "int64", "bytes moved", unit="bytes"),
        _TOTAL_US,
        Column("gbps", "float64", "achieved rate", NAN, "GB/s"),
        Column("pageable", "bool", "a side is pageable host memory"),
    ),
)
SYNCS_TABLE = Table(
    "syncs",
    "Host calls that block on the GPU, per name, most time first.",
    (
        Column("name", "object", "call name"),
        replace(_COUNT, doc="calls"),
        _TOTAL_US,
        Column("pct", "float64", "share of the GPU span", NAN, "%"),
    ),
)
#: Every table of a Diagnosis, in the order ``Diagnosis.tables`` holds them.
DIAGNOSIS_TABLES: tuple[Table, ...] = (
    KERNEL_CLASS_TABLE, TOP_KERNELS_TABLE, IDLE_GAPS_TABLE, STALLS_TABLE, ROOFLINE_TABLE,
    COPIES_TABLE, SYNCS_TABLE,
)  # fmt: skip


@dataclass
class Diagnosis(PackedWhenSent):
    """The result of analysing a trace (and, when present, NVML samples)."""

    # Sent from a job's workers with each rank's summary: its tables are read when the
    # rank's panel is shown, not while the job is put together.
    _SENT_FRAMES = ("tables",)

    source: dict[str, Any]
    devices: list[DeviceMetrics]
    verdict: Verdict
    findings: list[Finding]
    #: The supporting tables by name, each declared once in :data:`DIAGNOSIS_TABLES`
    #: (column reference: docs/tables.md) and also read as attributes
    #: (``diagnosis.idle_gaps``). Views read these; they never compute metrics themselves.
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

    def _table(self, table: Table) -> pd.DataFrame:
        # A Diagnosis built without a table (by hand, or by an older analysis) reads as
        # that table, empty.
        found = self.tables.get(table.name)
        return found if found is not None else table.empty()

    @property
    def kernel_class(self) -> pd.DataFrame:
        """``tables["kernel_class"]``: see :data:`KERNEL_CLASS_TABLE`."""
        return self._table(KERNEL_CLASS_TABLE)

    @property
    def top_kernels(self) -> pd.DataFrame:
        """``tables["top_kernels"]``: see :data:`TOP_KERNELS_TABLE`."""
        return self._table(TOP_KERNELS_TABLE)

    @property
    def idle_gaps(self) -> pd.DataFrame:
        """``tables["idle_gaps"]``: see :data:`IDLE_GAPS_TABLE`."""
        return self._table(IDLE_GAPS_TABLE)

    @property
    def stalls(self) -> pd.DataFrame:
        """``tables["stalls"]``: see :data:`STALLS_TABLE`."""
        return self._table(STALLS_TABLE)

    @property
    def ops_roofline(self) -> pd.DataFrame:
        """``tables["ops_roofline"]``: see :data:`ROOFLINE_TABLE`."""
        return self._table(ROOFLINE_TABLE)

    @property
    def copies(self) -> pd.DataFrame:
        """``tables["copies"]``: see :data:`COPIES_TABLE`."""
        return self._table(COPIES_TABLE)

    @property
    def syncs(self) -> pd.DataFrame:
        """``tables["syncs"]``: see :data:`SYNCS_TABLE`."""
        return self._table(SYNCS_TABLE)
