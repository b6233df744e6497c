"""The diagnosis panel: verdict, the four numbers that disagree, why, findings, notes.

Static HTML with scoped CSS (no script, no external font), so it survives nbconvert, a
saved notebook without trust, and dark themes. Every string is escaped; every number is
printed next to the basis analysis gave for it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from nbprof.analysis.model import compute_units, matrix_units, utilization_tool
from nbprof.views._style import (
    BOTTLENECK_LABELS,
    CLASSES,
    GAP_CAUSES,
    SEVERITY_ORDER,
    esc,
    fmt_breakdown,
    fmt_bytes,
    fmt_copy,
    fmt_evidence,
    fmt_flops_rate,
    fmt_num,
    fmt_pct,
    fmt_tflops,
    fmt_us,
)

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

CSS = """
.nbprof{--nbp-fg:var(--jp-content-font-color1,#1f2328);
--nbp-muted:var(--jp-content-font-color2,#57606a);
--nbp-bg:var(--jp-layout-color0,#ffffff);--nbp-card:var(--jp-layout-color1,#f6f8fa);
--nbp-border:var(--jp-border-color2,#d0d7de);
--nbp-code:var(--jp-cell-editor-background,#f3f4f6);
--nbp-accent:#1f78b4;color:var(--nbp-fg);background:var(--nbp-bg);
font-family:system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;
font-size:14px;line-height:1.45;padding:12px 4px;max-width:1400px}
@media (prefers-color-scheme:dark){.nbprof:not(.nbprof-light){
--nbp-fg:var(--jp-content-font-color1,#e6edf3);
--nbp-muted:var(--jp-content-font-color2,#9da7b3);--nbp-bg:var(--jp-layout-color0,#0d1117);
--nbp-card:var(--jp-layout-color1,#161b22);--nbp-border:var(--jp-border-color2,#30363d);
--nbp-code:var(--jp-cell-editor-background,#1f242c)}}
.nbprof .nbp-card,.nbprof .nbp-device,.nbprof .nbp-verdict,.nbprof .nbp-why{box-sizing:border-box}
.nbprof .nbp-card,.nbprof .nbp-kv,.nbprof .nbp-verdict,.nbprof .nbp-why,.nbprof .nbp-finding,
.nbprof .nbp-notes,.nbprof .nbp-topk,.nbprof .nbp-device>summary{overflow-wrap:anywhere;
word-break:normal;min-width:0}
.nbprof .nbp-cards>*,.nbprof .nbp-kv>*,.nbprof .nbp-kv span{min-width:0}
.nbprof h2,.nbprof h3,.nbprof h4{margin:0;font-weight:600}
.nbprof .nbp-verdict{display:flex;gap:12px;align-items:center;flex-wrap:wrap;padding:12px 16px;
border-radius:10px;border:1px solid var(--nbp-border);
border-left:6px solid var(--nbp-vc,#8c8c8c);
background:var(--nbp-card);margin-bottom:12px}
.nbprof .nbp-verdict h2{font-size:19px;flex:1 1 300px;min-width:0}
.nbprof .nbp-conf{flex-basis:100%;font-size:13px;color:var(--nbp-muted)}
.nbprof .nbp-conf b{color:var(--nbp-fg)}
.nbprof .nbp-tag{display:inline-block;padding:2px 10px;border-radius:999px;font-size:12px;
font-weight:600;
color:#fff;background:var(--nbp-vc,#8c8c8c);white-space:nowrap}
.nbprof .nbp-device{margin:10px 0;border:1px solid var(--nbp-border);border-radius:10px;
padding:8px 12px}
.nbprof .nbp-device>summary{cursor:pointer;font-weight:600;padding:2px 0}
.nbprof .nbp-device>summary .nbp-muted{font-weight:400}
.nbprof .nbp-cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(210px,1fr));
gap:10px;margin:10px 0}
.nbprof .nbp-card{background:var(--nbp-card);border:1px solid var(--nbp-border);
border-radius:10px;padding:10px 12px}
.nbprof .nbp-card .nbp-q{font-size:12px;color:var(--nbp-muted);text-transform:uppercase;
letter-spacing:.03em}
.nbprof .nbp-card .nbp-v{font-size:28px;font-weight:650;margin:2px 0;
font-variant-numeric:tabular-nums}
.nbprof .nbp-card .nbp-v small{font-size:14px;font-weight:500;color:var(--nbp-muted)}
.nbprof .nbp-bar{height:6px;border-radius:3px;background:var(--nbp-border);overflow:hidden;
margin:4px 0 6px}
.nbprof .nbp-bar>span{display:block;height:100%;background:var(--nbp-accent)}
.nbprof .nbp-basis{font-size:12px;color:var(--nbp-muted)}
.nbprof .nbp-basis b{font-weight:600}
.nbprof .nbp-kv{display:grid;grid-template-columns:repeat(auto-fit,minmax(260px,1fr));
gap:2px 18px;font-size:13px}
.nbprof .nbp-kv div{display:flex;justify-content:space-between;gap:8px;
border-bottom:1px dotted var(--nbp-border);padding:2px 0}
.nbprof .nbp-kv span:last-child{font-variant-numeric:tabular-nums;text-align:right}
.nbprof .nbp-kv .nbp-basis{white-space:nowrap}
.nbprof .nbp-muted{color:var(--nbp-muted)}
.nbprof .nbp-why{margin:12px 0;padding:10px 14px;border-radius:10px;background:var(--nbp-card);
border:1px solid var(--nbp-border)}
.nbprof .nbp-why h3,.nbprof .nbp-findings h3,.nbprof .nbp-notes h3,.nbprof .nbp-legend h3{
font-size:15px;margin-bottom:6px}
.nbprof .nbp-finding{border:1px solid var(--nbp-border);border-radius:10px;padding:10px 12px;
margin:8px 0}
.nbprof .nbp-finding h4{font-size:15px;display:flex;gap:8px;align-items:center;flex-wrap:wrap}
.nbprof .nbp-sev{font-size:11px;font-weight:700;text-transform:uppercase;padding:1px 8px;
border-radius:999px;color:#fff}
.nbprof .nbp-sev-high{background:#cf222e}.nbprof .nbp-sev-medium{background:#bc4c00}
.nbprof .nbp-sev-low{background:#4d7c0f}.nbprof .nbp-sev-info{background:#57606a}
.nbprof .nbp-evidence{font-size:12px;color:var(--nbp-muted);margin:4px 0}
.nbprof .nbp-evidence code{font-size:12px}
.nbprof pre{background:var(--nbp-code);border:1px solid var(--nbp-border);border-radius:8px;
padding:8px 10px;
overflow:auto;font-size:12.5px;margin:6px 0 0}
.nbprof code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"Liberation Mono",monospace}
.nbprof .nbp-notes ul{margin:4px 0;padding-left:20px}
.nbprof .nbp-error{border-left:6px solid #cf222e}
.nbprof .nbp-legend{display:flex;flex-wrap:wrap;gap:4px 14px;align-items:center;font-size:12px;
margin:8px 0}
.nbprof .nbp-sw{display:inline-block;width:12px;height:12px;border-radius:3px;
vertical-align:-2px;margin-right:4px}
.nbprof .nbp-timeline{margin-top:8px;background:#fff;border-radius:10px;
border:1px solid var(--nbp-border);padding:4px}
.nbprof .nbp-topk{border-collapse:collapse;font-size:12.5px;width:100%;table-layout:fixed}
.nbprof .nbp-topk col.nbp-num{width:9em}.nbprof .nbp-topk col.nbp-cls{width:13em}
.nbprof .nbp-topk th,.nbprof .nbp-topk td{padding:3px 8px;
border-bottom:1px solid var(--nbp-border);text-align:right}
.nbprof .nbp-topk th:last-child,.nbprof .nbp-topk td:last-child{text-align:left}
.nbprof .nbp-topk td:last-child{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;
font-size:11.5px}
.nbprof pre{white-space:pre-wrap;overflow-wrap:anywhere}
"""

_VERDICT_COLOURS: dict[str, str] = {
    "compute_bound": "#6a3d9a",
    "memory_bound": "#33a02c",
    "host_bound": "#bc4c00",
    "launch_bound": "#bc4c00",
    "input_bound": "#cf222e",
    "sync_bound": "#cf222e",
    "transfer_bound": "#ff7f00",
    "communication_bound": "#e31a1c",
    "idle": "#57606a",
    "insufficient_gpu_work": "#57606a",
    "cpu_only": "#57606a",
}


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
    for i, dm in enumerate(diag.devices):
        out.append(_device_html(dm, open_=i < OPEN_DEVICES, multi=len(diag.devices) > 1))
    if diag.explanation:
        out.append(
            '<div class="nbp-why"><h3>Why these numbers differ</h3>'
            f"<p>{esc(diag.explanation)}</p></div>"
        )
    out.append(_findings_html(diag.findings))
    out.append(_top_kernels_html(diag, top_kernels))
    out.append(_notes_html(profile, extra))
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
    "queued_idle": "GPU idle with work queued behind a dependency",
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
    colour = _VERDICT_COLOURS.get(bottleneck, "#8c8c8c")
    label = BOTTLENECK_LABELS.get(bottleneck, bottleneck)
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
    if v is None or v != v:
        return "n/a", None
    return f"{v:.1f}", float(v)


def _measured(dm: DeviceMetrics, attr: str, what: str) -> str:
    """A second, sampled reading of the same question, when analysis has one."""
    v = getattr(dm, attr)
    if v is None:
        return ""
    return f"{what}: {fmt_pct(v)} ({basis_label(dm, attr)})"


def _device_html(dm: DeviceMetrics, *, open_: bool, multi: bool) -> str:
    cards: list[str] = []
    v, bar = _pct_value(dm.kernel_busy_pct)
    cards.append(
        _card(
            f"{utilization_tool(dm.vendor)} would report", v, " %" if bar is not None else "",
            basis_label(dm, "kernel_busy_pct"), bar,
            _measured(dm, "nvml_util_pct", "NVML sampled during the run"),
        )
    )  # fmt: skip
    sm_key = "sm_active_pct" if dm.sm_active_pct is not None else "sm_efficiency_pct"
    v, bar = _pct_value(getattr(dm, sm_key))
    also = _measured(dm, "sm_efficiency_pct", "from the trace") if sm_key == "sm_active_pct" else ""
    units = compute_units(dm.vendor)
    cards.append(
        _card(
            f"{units} actually busy",
            v,
            " %" if bar is not None else "",
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
            tc_q, v, " % of kernel time" if bar is not None else "",
            basis_label(dm, "tensor_core_pct"), bar,
            _measured(dm, "tensor_active_pct", "Tensor Core activity sampled"),
        )
    )  # fmt: skip
    if dm.achieved_tflops is not None:
        # A tiny rate is shown in GFLOP/s; then the peak names its own unit so the two are
        # not read as one.
        value, unit = fmt_flops_rate(dm.achieved_tflops)
        tiny = unit != "TFLOP/s"
        peak_unit = " TFLOP/s" if tiny else ""
        peak = (
            f" of {fmt_tflops(dm.peak_tflops)}{peak_unit} peak"
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
        cards.append(_card("Achieved TFLOP/s", "n/a", "", basis_label(dm, "achieved_tflops"), None))

    kv: list[tuple[str, str, str]] = [
        ("GPU span", fmt_us(dm.gpu_span_us), "gpu_span_us"),
        ("profiled window (any event)", fmt_us(dm.window_us), "window_us"),
        ("where the GPU span went", fmt_breakdown(dm.span_breakdown), "span_breakdown"),
        ("GPU busy (kernels + copies + memsets)", fmt_pct(dm.gpu_busy_pct), "gpu_busy_pct"),
        ("achieved occupancy", fmt_pct(dm.occupancy_pct), "occupancy_pct"),
        ("kernels shorter than 10 µs", fmt_pct(dm.short_kernel_pct), "short_kernel_pct"),
        (
            "kernels / memcpys / memsets",
            f"{dm.kernel_count:,} / {dm.memcpy_count:,} / {dm.memset_count:,}",
            "kernel_count",
        ),
        ("bytes copied", fmt_bytes(dm.memcpy_bytes), "memcpy_bytes"),
        ("pageable memcpys", f"{dm.pageable_memcpy_count:,}", "pageable_memcpy_count"),
        ("of idle time: GPU waited for the host", fmt_pct(dm.idle.host_wait_pct), "idle"),
        ("of idle time: kernel-to-kernel gaps", fmt_pct(dm.idle.kernel_wait_pct), "idle"),
        ("of idle time: other", fmt_pct(dm.idle.other_pct), "idle"),
        ("of idle time: work queued", fmt_pct(dm.idle_queued_pct), "idle_queued_pct"),
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
    kv += [
        (label, fmt_us(v) if unit == "µs" else f"{fmt_num(v)} {unit}", key)
        for label, v, unit, key in optional
        if v is not None
    ]
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
        f' <span class="nbp-muted">({esc(dm.sm_count) if dm.sm_count else "?"} {units}'
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


def _top_kernels_html(diag: Diagnosis, n: int) -> str:
    t = diag.tables.get("top_kernels")
    if t is None or not len(t):
        return ""
    rows = "".join(
        f"<tr><td>{fmt_num(r.pct)} %</td><td>{esc(fmt_us(r.total_us))}</td>"
        f"<td>{int(r.count):,}</td>"
        f"<td>{esc(CLASSES.get(str(r.cls), (r.cls,))[0])}"
        f"{' (TC)' if bool(getattr(r, 'tensor_core', False)) else ''}</td>"
        f"<td>{esc(r.name)}</td></tr>"
        for r in t.head(n).itertuples(index=False)
    )
    return (
        '<details class="nbp-device"><summary>Top kernels by total time '
        '<span class="nbp-muted">(read from the trace)</span></summary>'
        '<table class="nbp-topk"><colgroup><col class="nbp-num"><col class="nbp-num">'
        '<col class="nbp-num"><col class="nbp-cls"><col></colgroup>'
        "<thead><tr><th>% kernel time</th><th>total</th><th>count</th>"
        f"<th>class</th><th>name</th></tr></thead><tbody>{rows}</tbody></table></details>"
    )


def sample_notes(profile: Profile) -> list[str]:
    """Why NVML readings are missing, grouped by reason (the sampler records them)."""
    samples = profile.samples
    if samples is None:
        return []
    if samples.unavailable:
        return [f"No NVML samples: {samples.unavailable}"]
    from nbprof.telemetry.model import METRICS

    by_reason: dict[tuple[int, str], list[str]] = {}
    for (gpu, metric), reason in sorted(samples.reasons.items()):
        by_reason.setdefault((gpu, reason), []).append(METRICS.get(metric, (metric,))[0])
    return [
        f"Not sampled on GPU {gpu}: {', '.join(labels)} ({reason})"
        for (gpu, reason), labels in by_reason.items()
    ]


def _notes_html(profile: Profile, extra: list[str]) -> str:
    notes = [*extra, *profile.notes, *profile.trace.notes, *sample_notes(profile)]
    if not notes:
        return ""
    items = "".join(f"<li>{esc(n)}</li>" for n in dict.fromkeys(notes))
    return f'<div class="nbp-notes"><h3>Notes</h3><ul>{items}</ul></div>'
