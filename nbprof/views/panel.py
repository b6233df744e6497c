"""The diagnosis panel: verdict, the four numbers that disagree, why, findings, notes.

Static HTML with scoped CSS (no script, no external font), so it survives nbconvert, a
saved notebook without trust, and dark themes. This module decides what the panel says
(wording, formatting, order); templates/panel.html lays it out, escaping every string.
Every number is printed next to the basis analysis gave for it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, NamedTuple

from markupsafe import Markup

from nbprof import units, vocab
from nbprof.analysis.model import compute_units, matrix_units, utilization_tool
from nbprof.telemetry.model import METRICS
from nbprof.views import templating
from nbprof.views._style import (
    CLASSES,
    GAP_CAUSES,
    SEVERITY_ORDER,
    fmt_breakdown,
    fmt_copy,
    fmt_evidence,
    short_name,
)
from nbprof.views.assets import asset

if TYPE_CHECKING:
    from nbprof.analysis.model import Basis, DeviceMetrics, Diagnosis, Finding
    from nbprof.result import Profile

logger = logging.getLogger(__name__)

#: Devices shown expanded; further devices start collapsed (a <details> each).
OPEN_DEVICES = 2

TENSOR_CORE_BASIS_WORDS: dict[str, str] = {
    "measured": "measured by hardware counters",
    "kernel_names": "estimated from kernel names",
    "ops": "estimated from the launching ops and their dtypes",
    "unknown": "unknown",
}

#: The dashboard's style sheet (package data: nbprof/views/js/nbprof.css).
CSS = asset("nbprof.css")


def basis_label(dm: DeviceMetrics, metric: str) -> str:
    """The basis analysis recorded for ``metric`` in words; says so when it recorded none."""
    b: Basis | None = dm.basis.get(metric)
    if b is not None:
        return b.label()
    if metric == "tensor_core_pct":
        return TENSOR_CORE_BASIS_WORDS.get(dm.tensor_core_basis, dm.tensor_core_basis)
    return "basis not recorded by the analysis"


class VerdictBox(NamedTuple):
    """A verdict as the panel, the comparison and the job dashboard show it."""

    colour: str
    label: str
    summary: str
    confidence: str
    basis: str
    #: the numbers that decided it, each with its denominator
    facts: tuple[str, ...] = ()


class Card(NamedTuple):
    """One of the four questions: the answer, its unit and basis, and a bar (a width)."""

    question: str
    value: str
    unit: str
    basis: str
    bar: str | None
    also: str


class Reading(NamedTuple):
    """A row of a device's further readings."""

    label: str
    value: str
    basis: str
    short_basis: str


class DeviceBox(NamedTuple):
    metrics: DeviceMetrics
    multi: bool
    open: bool
    sms: str
    cards: list[Card]
    rows: list[Reading]


class FindingBox(NamedTuple):
    severity: str
    title: str
    device: str
    detail: str
    evidence: list[tuple[str, str]]
    fix: str
    code: str


class KernelRow(NamedTuple):
    """A top kernel; ``*_v`` are the sort keys of js/tables.mjs."""

    name: str
    pct_v: str
    pct: str
    total_v: str
    total: str
    calls_v: str
    calls: str
    cls: str
    tensor_core: bool
    short: str


class TopKernels(NamedTuple):
    scope: str
    rows: list[KernelRow]


class OpRow(NamedTuple):
    name: str
    total_v: str
    total: str
    calls_v: str
    calls: str
    short: str


class CpuOnly(NamedTuple):
    rows: list[OpRow]
    note: str


class LegendItem(NamedTuple):
    label: str
    colour: str
    gap: bool


def render(
    profile: Profile, *, extra_notes: list[str] | None = None, top_kernels: int = 8
) -> Markup:
    """The panel as an HTML fragment (wrapped by the caller in ``<div class="nbprof">``).

    ``extra_notes``: notes from other views (e.g. the timeline's) shown with the profile's.
    """
    extra = list(extra_notes or [])
    try:
        diag = profile.diagnosis
    except Exception as e:  # show the trace even when analysis fails, and say why
        logger.exception("analysis failed")
        return templating.render(
            "panel.html",
            verdict=verdict_box("idle", "The analysis failed on this trace."),
            error=None, cpu_only=None, devices=[], explanation="", findings=None, top=None,
            note_items=_notes(profile, [f"Analysis failed: {type(e).__name__}: {e}", *extra]),
        )  # fmt: skip
    error = profile.error
    cpu_only = diag.verdict.bottleneck == "cpu_only"
    multi = len(diag.devices) > 1
    # Nothing ran on a GPU: device cards would be all n/a. What the CPU did instead.
    devices = [] if cpu_only else [
        _device(dm, open_=i < OPEN_DEVICES, multi=multi) for i, dm in enumerate(diag.devices)
    ]  # fmt: skip
    return templating.render(
        "panel.html",
        verdict=verdict_box(
            diag.verdict.bottleneck,
            diag.verdict.summary,
            confidence_text(diag.verdict),
            getattr(diag.verdict, "facts", []),
        ),
        error=f"{type(error).__name__}: {error}" if error is not None else None,
        cpu_only=_cpu_only(profile) if cpu_only else None,
        devices=devices,
        explanation=diag.explanation,
        findings=_findings(diag.findings),
        top=_top_kernels(diag, top_kernels, ranks=len(profile.trace.ranks)),
        note_items=_notes(profile, extra, cpu_only=cpu_only),
    )


def legend_items(classes: list[str], gap_causes: list[str] | None = None) -> list[LegendItem]:
    """The swatches of the event classes and idle-gap causes present in a timeline."""
    items = [LegendItem(CLASSES[k][0], CLASSES[k][1], False) for k in classes if k in CLASSES]
    items += [
        LegendItem(GAP_CAUSES[k][0], GAP_CAUSES[k][1], True)
        for k in gap_causes or []
        if k in GAP_CAUSES
    ]
    return items


def legend_html(classes: list[str], gap_causes: list[str] | None = None) -> Markup:
    """Colour swatches for the event classes and idle-gap causes present in the timeline."""
    return templating.render("legend.html", items=legend_items(classes, gap_causes))


#: Verdict.basis codes (what decided the verdict) in words.
VERDICT_BASIS_WORDS: dict[str, str] = {
    "no_gpu_events": "no GPU events in the trace",
    "little_gpu_work": "how little GPU work ran",
    "graph_capture": "graph capture (launches recorded, not run)",
    "exposed_communication": "collectives running with no compute beside them",
    "dataloader_gaps": "GPU idle while the DataLoader ran",
    "sync_gaps": "GPU idle while the host was blocked on it",
    "copy_time": "time with only copies running",
    "host_gaps": "GPU idle with nothing queued while the host worked",
    "launch_gaps": "GPU idle with nothing queued while the host launched",
    "kernel_gaps": "GPU idle between back-to-back queued kernels",
    "one_time_setup": "GPU idle during set-up calls",
    "queued_idle": "GPU idle with work queued behind work outside the trace",
    "comm_wait": "GPU idle with work queued behind a collective",
    "kernel_busy": "how much of the span kernels ran",
    "hardware_counters": "hardware counters",
    "roofline": "FLOPs and bytes of the ops (roofline)",
    "kernel_classes": "kernel classes, from kernel names",
}


def confidence_text(verdict: object) -> tuple[str, str]:
    """(confidence, what decided) of a verdict in words; "" for what analysis left out.

    Read with defaults: verdicts from older analyses carry neither field.
    """
    conf = getattr(verdict, "confidence", None)
    basis = getattr(verdict, "basis", None)
    basis = "" if not basis or basis == "none" else str(basis)
    return (str(conf) if conf else "", VERDICT_BASIS_WORDS.get(basis, basis.replace("_", " ")))


def verdict_box(
    bottleneck: str,
    summary: str,
    confidence: tuple[str, str] = ("", ""),
    facts: list[str] | None = None,
) -> VerdictBox:
    term = vocab.term(bottleneck)
    conf, basis = confidence
    return VerdictBox(
        term.colour, term.label, summary or term.label, conf, basis, tuple(facts or ())
    )


def _card(
    question: str, value: str, unit: str, basis: str, bar: float | None, also: str = ""
) -> Card:
    width = None if bar is None else f"{max(0.0, min(100.0, bar)):.1f}"
    return Card(question, value, unit, basis, width, also)


def _pct_value(v: float | None) -> tuple[str, float | None]:
    if v is None or units.missing(v):
        return units.NA, None
    return units.number(v), float(v)


def _measured(dm: DeviceMetrics, attr: str, what: str) -> str:
    """A second, sampled reading of the same question, when analysis has one."""
    v = getattr(dm, attr)
    if v is None:
        return ""
    return f"{what}: {units.pct(v)} ({basis_label(dm, attr)})"


def _device(dm: DeviceMetrics, *, open_: bool, multi: bool) -> DeviceBox:
    cards: list[Card] = []
    v, bar = _pct_value(dm.kernel_busy_pct)
    cards.append(
        _card(
            f"{utilization_tool(dm.vendor)} would report", v, "%" if bar is not None else "",
            basis_label(dm, "kernel_busy_pct"), bar,
            _measured(dm, "nvml_util_pct", "NVML sampled during the run"),
        )
    )  # fmt: skip
    sm_key = "sm_active_pct" if dm.sm_active_pct is not None else "sm_efficiency_pct"
    v, bar = _pct_value(getattr(dm, sm_key))
    also = _measured(dm, "sm_efficiency_pct", "from the trace") if sm_key == "sm_active_pct" else ""
    sms = compute_units(dm.vendor)
    cards.append(
        _card(
            f"{sms} actually busy",
            v,
            "%" if bar is not None else "",
            basis_label(dm, sm_key),
            bar,
            also,
        )
    )
    v, bar = _pct_value(dm.tensor_core_pct)
    # AMD's equivalent units are matrix cores (MFMA kernels): same question, their name.
    tc_q = f"{matrix_units(dm.vendor)} working"
    cards.append(
        _card(
            tc_q, v, "% of kernel time" if bar is not None else "",
            basis_label(dm, "tensor_core_pct"), bar,
            _measured(dm, "tensor_active_pct", "Tensor Core activity sampled"),
        )
    )  # fmt: skip
    if dm.achieved_tflops is not None:
        # A tiny rate is shown in GFLOP/s; then the peak names its own unit so the two are
        # not read as one.
        value, unit = units.flops(dm.achieved_tflops)
        tiny = unit != "TFLOP/s"
        peak_unit = " TFLOP/s" if tiny else ""
        peak = (
            f" of {units.significant(dm.peak_tflops)}{peak_unit} peak"
            if dm.peak_tflops
            else " (peak unknown)"
        )
        # Bar length only (a drawing proportion); the numbers are analysis'.
        bar_f = 100.0 * dm.achieved_tflops / dm.peak_tflops if dm.peak_tflops else None
        also = f"peak: {basis_label(dm, 'peak_tflops')}" if dm.peak_tflops else ""
        if dm.flops_coverage_pct is not None:
            # The rate speaks only for the kernels of the FLOP-counted ops: say how many.
            known = f"FLOPs known for {units.pct(dm.flops_coverage_pct)} of kernel time"
            also = f"{known}; {also}" if also else known
        cards.append(
            _card(
                "Achieved TFLOP/s",
                value,
                (f" {unit}" if tiny else "") + peak,
                basis_label(dm, "achieved_tflops"),
                bar_f,
                also,
            )
        )
    else:
        basis = basis_label(dm, "achieved_tflops")
        cards.append(_card("Achieved TFLOP/s", units.NA, "", basis, None))

    kv: list[tuple[str, str, str]] = [
        *([("GPU model", dm.model or "unknown", "model")] if dm.model_inferred else []),
        ("GPU span", units.duration(dm.gpu_span_us), "gpu_span_us"),
        ("profiled window (any event)", units.duration(dm.window_us), "window_us"),
        ("where the GPU span went", fmt_breakdown(dm.span_breakdown), "span_breakdown"),
        ("GPU busy (kernels + copies + memsets)", units.pct(dm.gpu_busy_pct), "gpu_busy_pct"),
        ("achieved occupancy", _occupancy_text(dm), "occupancy_pct"),
        ("kernels shorter than 10 µs", units.pct(dm.short_kernel_pct), "short_kernel_pct"),
        (
            "kernels / memcpys / memsets",
            f"{dm.kernel_count:,} / {dm.memcpy_count:,} / {dm.memset_count:,}",
            "kernel_count",
        ),
        ("bytes copied", units.size(dm.memcpy_bytes), "memcpy_bytes"),
        ("pageable memcpys", f"{dm.pageable_memcpy_count:,}", "pageable_memcpy_count"),
        ("of idle time: GPU waited for the host", units.pct(dm.idle.host_wait_pct), "idle"),
        ("of idle time: kernel-to-kernel gaps", units.pct(dm.idle.kernel_wait_pct), "idle"),
        ("of idle time: other", units.pct(dm.idle.other_pct), "idle"),
        ("of idle time: work queued", units.pct(dm.idle_queued_pct), "idle_queued_pct"),
    ]
    optional = [
        ("achieved bandwidth", dm.achieved_gbps, "GB/s", "achieved_gbps"),
        ("peak bandwidth", dm.peak_gbps, "GB/s", "peak_gbps"),
        ("ProfilerStep (median)", dm.step_us, "µs", "step_us"),
        ("of a step before its first GPU event", dm.pre_gpu_step_pct, "%", "pre_gpu_step_pct"),
        ("host time per kernel (median)", dm.host_us_per_kernel, "µs", "host_us_per_kernel"),
        ("launch call per kernel (median)", dm.launch_us_per_kernel, "µs", "launch_us_per_kernel"),
        ("launch-to-start delay (median)", dm.launch_to_start_us, "µs", "launch_to_start_us"),
        ("collectives: share of kernel time", dm.comm_pct, "%", "comm_pct"),
        ("collectives alone (exposed)", dm.exposed_comm_pct, "% of span", "exposed_comm_pct"),
        ("collectives hidden under compute", dm.comm_overlap_pct, "%", "comm_overlap_pct"),
        ("time in the DataLoader", dm.dataloader_pct, "%", "dataloader_pct"),
        ("host blocked in blocking calls", dm.sync_pct, "% of span", "sync_pct"),
        ("DRAM bandwidth (sampled)", dm.dram_bw_pct, "%", "dram_bw_pct"),
    ]
    kv += [(label, units.amount(v, unit), key) for label, v, unit, key in optional if v is not None]
    # Copies per direction and host memory: a rate only means something per kind.
    kv += [(f"copies {c['kind']}", fmt_copy(c), "copies") for c in dm.copies]
    rows = [
        Reading(label, value, basis_label(dm, key), _short_basis(dm, key))
        for label, value, key in kv
    ]
    return DeviceBox(dm, multi, open_, sms, cards, rows)


def _occupancy_text(dm: DeviceMetrics) -> str:
    """The occupancy, or why there is none: Kineto's 0 means it was not computed."""
    if dm.occupancy_pct is not None:
        return units.pct(dm.occupancy_pct)
    b = dm.basis.get("occupancy_pct")
    return "not computed" if b is not None and b.how.startswith("not computed") else "unknown"


def _short_basis(dm: DeviceMetrics, metric: str) -> str:
    b = dm.basis.get(metric)
    if b is not None:
        return {
            "measured": "measured",
            "trace": "from trace",
            "estimated": "estimated",
            "unknown": "unknown",
        }[b.kind]
    return "from trace" if metric in ("kernel_count", "gpu_span_us") else "basis not recorded"


def _findings(findings: list[Finding]) -> list[FindingBox]:
    return [
        FindingBox(
            f.severity, f.title, str(f.device or ""), f.detail,
            [(str(k), fmt_evidence(v)) for k, v in f.evidence.items()], f.fix, f.code or "",
        )
        for f in sorted(findings, key=lambda f: SEVERITY_ORDER.get(f.severity, 9))
    ]  # fmt: skip


def _top_kernels(diag: Diagnosis, n: int, ranks: int = 1) -> TopKernels | None:
    t = diag.top_kernels
    if not len(t):
        return None
    rows = [
        KernelRow(
            name=str(r.name),
            pct_v=f"{float(r.pct):.6g}",
            pct=units.pct(r.pct),
            total_v=f"{float(r.total_us):.6g}",
            total=units.duration(r.total_us),
            calls_v=str(int(r.count)),
            calls=f"{int(r.count):,}",
            cls=CLASSES.get(str(r.cls), (str(r.cls),))[0],
            tensor_core=bool(getattr(r, "tensor_core", False)),
            short=short_name(r.name),
        )
        for r in t.head(n).itertuples(index=False)
    ]
    scope = f"summed over all {ranks} ranks" if ranks > 1 else "read from the trace"
    return TopKernels(scope, rows)


#: Top-level CPU ops listed for a run without GPU activity.
TOP_CPU_OPS = 10

NVML_DEVICE_WIDE = (
    "NVML's utilization is device-wide: a GPU gauge can read above 0 % while this process "
    "ran nothing on it (other processes, the display, another notebook's kernel)."
)


def _cpu_only(profile: Profile) -> CpuOnly:
    """A run without GPU activity: its top CPU ops by total time, and one short note."""
    ops = profile.trace.cpu_ops
    top = ops[ops["depth"] == 0] if "depth" in ops else ops
    rows: list[OpRow] = []
    if len(top):
        # Read from the trace: top-level ops' durations summed by name (no overlap within
        # a thread's top level, so the sum is time spent in each).
        g = (
            top.groupby("name", sort=False)["dur"]
            .agg(["count", "sum"])
            .sort_values("sum", ascending=False, kind="stable")
            .head(TOP_CPU_OPS)
        )
        rows = [
            OpRow(
                str(name), f"{float(r['sum']):.6g}", units.duration(float(r["sum"])),
                str(int(r["count"])), f"{int(r['count']):,}", short_name(str(name)),
            )
            for name, r in g.iterrows()
        ]  # fmt: skip
    return CpuOnly(rows, NVML_DEVICE_WIDE)


def sample_notes(profile: Profile) -> list[str]:
    """Why NVML readings are missing, grouped by reason (the sampler records them)."""
    samples = profile.samples
    if samples is None:
        return []
    if samples.unavailable:
        return [f"No NVML samples: {samples.unavailable}"]
    by_reason: dict[tuple[int, str], list[str]] = {}
    for (gpu, metric), reason in sorted(samples.reasons.items()):
        by_reason.setdefault((gpu, reason), []).append(METRICS.get(metric, (metric,))[0])
    return [
        f"Not sampled on GPU {gpu}: {', '.join(labels)} ({reason})"
        for (gpu, reason), labels in by_reason.items()
    ]


def _notes(profile: Profile, extra: list[str], cpu_only: bool = False) -> list[str]:
    # Which NVML readings a GPU lacks says nothing about a run that used no GPU (the CPU
    # section's note says what NVML's numbers mean there).
    sampled = [] if cpu_only else sample_notes(profile)
    return list(dict.fromkeys([*extra, *profile.notes, *profile.trace.notes, *sampled]))
