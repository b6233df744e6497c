"""The diagnosis panel: verdict, the four numbers that disagree, why, findings, notes.

Static HTML with scoped CSS (no script, no external font), so it survives nbconvert, a
saved notebook without trust, and dark themes. Every string is escaped; every number is
printed next to the basis analysis gave for it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from nbprof import units, vocab
from nbprof.analysis.model import compute_units, matrix_units, utilization_tool
from nbprof.telemetry.model import METRICS
from nbprof.views._style import (
    CLASSES,
    GAP_CAUSES,
    SEVERITY_ORDER,
    esc,
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


def render(profile: Profile, *, extra_notes: list[str] | None = None, top_kernels: int = 8) -> str:
    """The panel as an HTML fragment (wrapped by the caller in ``<div class="nbprof">``).

    ``extra_notes``: notes from other views (e.g. the timeline's) shown with the profile's.
    """
    out: list[str] = []
    extra = list(extra_notes or [])
    try:
        diag = profile.diagnosis
    except Exception as e:  # show the trace even when analysis fails, and say why
        logger.exception("analysis failed")
        out.append(_verdict_html("idle", "The analysis failed on this trace."))
        out.append(_notes_html(profile, [f"Analysis failed: {type(e).__name__}: {e}", *extra]))
        return "\n".join(out)
    out.append(
        _verdict_html(diag.verdict.bottleneck, diag.verdict.summary, confidence_text(diag.verdict))
    )
    if profile.error is not None:
        out.append(
            '<div class="nbp-why nbp-error"><h3>The profiled code raised an exception</h3>'
            f"<p><code>{esc(type(profile.error).__name__)}: {esc(profile.error)}</code> — this "
            "profile covers the run up to that point only.</p></div>"
        )
    cpu_only = diag.verdict.bottleneck == "cpu_only"
    if cpu_only:
        # Nothing ran on a GPU: device cards would be all n/a. What the CPU did instead.
        out.append(_cpu_only_html(profile))
    else:
        for i, dm in enumerate(diag.devices):
            out.append(_device_html(dm, open_=i < OPEN_DEVICES, multi=len(diag.devices) > 1))
    if diag.explanation:
        out.append(
            '<div class="nbp-why"><h3>Why these numbers differ</h3>'
            f"<p>{esc(diag.explanation)}</p></div>"
        )
    out.append(_findings_html(diag.findings))
    out.append(_top_kernels_html(diag, top_kernels, ranks=len(profile.trace.ranks)))
    out.append(_notes_html(profile, extra, cpu_only=cpu_only))
    return "\n".join(x for x in out if x)


def legend_html(classes: list[str], gap_causes: list[str] | None = None) -> str:
    """Colour swatches for the event classes and idle-gap causes present in the timeline."""
    items = "".join(
        f'<span><span class="nbp-sw" style="background:{CLASSES[k][1]}"></span>'
        f"{esc(CLASSES[k][0])}</span> "
        for k in classes
        if k in CLASSES
    )
    gaps = "".join(
        f'<span><span class="nbp-sw" style="background:{GAP_CAUSES[k][1]};opacity:.6"></span>'
        f"idle: {esc(GAP_CAUSES[k][0])}</span> "
        for k in gap_causes or []
        if k in GAP_CAUSES
    )
    return f'<div class="nbp-legend">{items}{gaps}</div>'


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


def _verdict_html(bottleneck: str, summary: str, confidence: tuple[str, str] = ("", "")) -> str:
    term = vocab.term(bottleneck)
    colour, label = term.colour, term.label
    conf, basis = confidence
    parts = [f"<b>{esc(conf)} confidence</b>"] if conf else []
    if basis:
        parts.append(f"decided by: {esc(basis)}")
    conf_html = f'<div class="nbp-conf">{" · ".join(parts)}</div>' if parts else ""
    return (
        f'<div class="nbp-verdict" style="--nbp-vc:{colour}">'
        f'<span class="nbp-tag">{esc(label)}</span> <h2>{esc(summary or label)}</h2>'
        f"{conf_html}</div>"
    )


def _card(
    question: str, value: str, unit: str, basis: str, bar: float | None, also: str = ""
) -> str:
    bar_html = ""
    if bar is not None:
        w = max(0.0, min(100.0, bar))
        bar_html = f'<div class="nbp-bar"><span style="width:{w:.1f}%"></span></div>'
    also_html = f'<div class="nbp-basis">{esc(also)}</div>' if also else ""
    return (
        f'<div class="nbp-card"><div class="nbp-q">{esc(question)}</div>'
        f'<div class="nbp-v">{esc(value)}<small>{esc(unit)}</small></div>{bar_html}'
        f'<div class="nbp-basis"><b>basis:</b> {esc(basis)}</div>{also_html}</div>'
    )


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


def _device_html(dm: DeviceMetrics, *, open_: bool, multi: bool) -> str:
    cards: list[str] = []
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
        ("GPU span", units.duration(dm.gpu_span_us), "gpu_span_us"),
        ("profiled window (any event)", units.duration(dm.window_us), "window_us"),
        ("where the GPU span went", fmt_breakdown(dm.span_breakdown), "span_breakdown"),
        ("GPU busy (kernels + copies + memsets)", units.pct(dm.gpu_busy_pct), "gpu_busy_pct"),
        ("achieved occupancy", units.pct(dm.occupancy_pct), "occupancy_pct"),
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
    rows = "".join(
        f'<div title="basis: {esc(basis_label(dm, key))}"><span>{esc(label)}</span> '
        f'<span>{esc(value)} <span class="nbp-basis">· {esc(_short_basis(dm, key))}</span>'
        "</span></div>"
        for label, value, key in kv
    )
    head = (
        f"{'rank ' + esc(dm.rank) + ' · ' if multi else ''}GPU {esc(dm.device)}"
        f" — {esc(dm.name or 'unknown GPU')}"
        f' <span class="nbp-muted">({esc(dm.sm_count) if dm.sm_count else "?"} {sms}'
        f"{', compute capability ' + esc(dm.compute_capability) if dm.compute_capability else ''}"
        f"{', ' + esc(dm.vendor) if dm.vendor and dm.vendor != 'nvidia' else ''})</span>"
    )
    return (
        f'<details class="nbp-device"{" open" if open_ else ""}><summary>{head}</summary>'
        f'<div class="nbp-cards">{"".join(cards)}</div><div class="nbp-kv">{rows}</div></details>'
    )


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


def _findings_html(findings: list[Finding]) -> str:
    if not findings:
        return (
            '<div class="nbp-findings"><h3>Findings</h3>'
            '<p class="nbp-muted">Nothing to flag.</p></div>'
        )
    items: list[str] = []
    for f in sorted(findings, key=lambda f: SEVERITY_ORDER.get(f.severity, 9)):
        ev = ", ".join(
            f"<code>{esc(k)}</code> = {esc(fmt_evidence(v))}" for k, v in f.evidence.items()
        )
        where = f' <span class="nbp-muted">(GPU {esc(f.device)})</span>' if f.device else ""
        code = f"<pre><code>{esc(f.code)}</code></pre>" if f.code else ""
        items.append(
            '<div class="nbp-finding"><h4>'
            f'<span class="nbp-sev nbp-sev-{esc(f.severity)}">{esc(f.severity)}</span> '
            f"{esc(f.title)}{where}</h4><p>{esc(f.detail)}</p>"
            f"{'<div class=nbp-evidence>evidence: ' + ev + '</div>' if ev else ''}"
            f"<p><b>Fix:</b> {esc(f.fix)}</p>{code}</div>"
        )
    return f'<div class="nbp-findings"><h3>Findings</h3>{"".join(items)}</div>'


def _top_kernels_html(diag: Diagnosis, n: int, ranks: int = 1) -> str:
    t = diag.top_kernels
    if not len(t):
        return ""
    # Numbers sort by data-v (js/tables.mjs); a row zooms the timeline to that kernel.
    rows = "".join(
        f'<tr data-nbp-kernel="{esc(r.name)}" title="{esc(r.name)}">'
        f'<td data-v="{float(r.pct):.6g}">{units.pct(r.pct)}</td>'
        f'<td data-v="{float(r.total_us):.6g}">{esc(units.duration(r.total_us))}</td>'
        f'<td data-v="{int(r.count)}">{int(r.count):,}</td>'
        f"<td>{esc(CLASSES.get(str(r.cls), (r.cls,))[0])}"
        f"{' (TC)' if bool(getattr(r, 'tensor_core', False)) else ''}</td>"
        f"<td>{esc(short_name(r.name))}</td></tr>"
        for r in t.head(n).itertuples(index=False)
    )
    scope = f"summed over all {ranks} ranks" if ranks > 1 else "read from the trace"
    return (
        '<details class="nbp-device nbp-topk-box" open><summary>Top kernels by total time '
        f'<span class="nbp-muted">({scope}; click a header to sort, a row to find it on '
        "the timeline)</span></summary>"
        '<table class="nbp-topk nbp-sortable"><colgroup><col class="nbp-num"><col class="nbp-num">'
        '<col class="nbp-num"><col class="nbp-cls"><col></colgroup>'
        "<thead><tr><th>% kernel time</th><th>total</th><th>count</th>"
        f"<th>class</th><th>name</th></tr></thead><tbody>{rows}</tbody></table></details>"
    )


#: Top-level CPU ops listed for a run without GPU activity.
TOP_CPU_OPS = 10

NVML_DEVICE_WIDE = (
    "NVML's utilization is device-wide: a GPU gauge can read above 0 % while this process "
    "ran nothing on it (other processes, the display, another notebook's kernel)."
)


def _cpu_only_html(profile: Profile) -> str:
    """A run without GPU activity: its top CPU ops by total time, and one short note."""
    ops = profile.trace.cpu_ops
    top = ops[ops["depth"] == 0] if "depth" in ops else ops
    rows = ""
    if len(top):
        # Read from the trace: top-level ops' durations summed by name (no overlap within
        # a thread's top level, so the sum is time spent in each).
        g = (
            top.groupby("name", sort=False)["dur"]
            .agg(["count", "sum"])
            .sort_values("sum", ascending=False, kind="stable")
            .head(TOP_CPU_OPS)
        )
        rows = "".join(
            f'<tr title="{esc(name)}"><td data-v="{float(r["sum"]):.6g}">'
            f'{esc(units.duration(float(r["sum"])))}</td><td data-v="{int(r["count"])}">'
            f"{int(r['count']):,}</td><td>{esc(short_name(str(name)))}</td></tr>"
            for name, r in g.iterrows()
        )
    table = (
        '<table class="nbp-topk nbp-sortable nbp-cpuops"><colgroup><col class="nbp-num">'
        '<col class="nbp-num"><col></colgroup><thead><tr><th>total</th><th>calls</th>'
        f"<th>CPU op (top level)</th></tr></thead><tbody>{rows}</tbody></table>"
        if rows
        else '<p class="nbp-muted">The trace holds no CPU ops either.</p>'
    )
    return (
        '<div class="nbp-why nbp-cpu-only"><h3>Where the time went (CPU)</h3>'
        '<p class="nbp-basis">Read from the trace: top-level ops, durations summed by name.</p>'
        f'{table}<p class="nbp-basis nbp-nvml-note">{esc(NVML_DEVICE_WIDE)}</p></div>'
    )


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


def _notes_html(profile: Profile, extra: list[str], cpu_only: bool = False) -> str:
    # Which NVML readings a GPU lacks says nothing about a run that used no GPU (the CPU
    # section's note says what NVML's numbers mean there).
    sampled = [] if cpu_only else sample_notes(profile)
    notes = [*extra, *profile.notes, *profile.trace.notes, *sampled]
    if not notes:
        return ""
    items = "".join(f"<li>{esc(n)}</li>" for n in dict.fromkeys(notes))
    return f'<div class="nbp-notes"><h3>Notes</h3><ul>{items}</ul></div>'
