"""The plain-text report: what ``nbprof analyze`` prints and the notebook's text/plain.

Fixed width, no colour. Names from the trace are printed as they are except for control
characters, which would otherwise let a crafted kernel name drive the user's terminal.
"""

from __future__ import annotations

import logging
import textwrap
from typing import TYPE_CHECKING

from nbprof.analysis.model import compute_units, matrix_units, utilization_tool
from nbprof.views._style import (
    BOTTLENECK_LABELS,
    SEVERITY_ORDER,
    fmt_breakdown,
    fmt_bytes,
    fmt_copy,
    fmt_evidence,
    fmt_flops_rate,
    fmt_num,
    fmt_pct,
    fmt_tflops,
    fmt_us,
    plain,
)

if TYPE_CHECKING:
    from nbprof.analysis.model import DeviceMetrics, Diagnosis
    from nbprof.result import Profile

logger = logging.getLogger(__name__)

WIDTH = 88
TOP_FINDINGS = 5
TOP_KERNELS = 5


def render(profile: Profile, *, width: int = WIDTH) -> str:
    """The compact report: verdict, key numbers with their basis, findings, top kernels."""
    lines: list[str] = [_clip(f"nbprof · {plain(profile.trace.source)}", width), "=" * width]
    try:
        diag = profile.diagnosis
    except Exception as e:  # still say something useful about the trace
        logger.exception("analysis failed")
        lines += _wrap(f"Analysis failed: {type(e).__name__}: {e}", width)
        lines += _notes(profile, width)
        return "\n".join(lines) + "\n"
    label = BOTTLENECK_LABELS.get(diag.verdict.bottleneck, diag.verdict.bottleneck)
    lines += _wrap(f"Verdict: {label}. {diag.verdict.summary}", width, indent="         ")
    from nbprof.views.panel import confidence_text

    conf, basis = confidence_text(diag.verdict)
    said = [f"{conf} confidence" if conf else "", f"decided by: {basis}" if basis else ""]
    if any(said):
        pad = " " * len("Verdict: ")
        lines += _wrap(" · ".join(x for x in said if x), width, first=pad, indent=pad)
    if profile.error is not None:
        lines += _wrap(
            f"The profiled code raised {type(profile.error).__name__}: {profile.error} "
            "(this profile is partial).",
            width,
        )
    for dm in diag.devices:
        lines.append("")
        lines += _device(dm, width, multi=len(diag.devices) > 1)
    if diag.explanation:
        lines += ["", "Why these numbers differ:"]
        lines += _wrap(diag.explanation, width, indent="  ", first="  ")
    lines += _findings(diag, width)
    lines += _top_kernels(diag, width)
    lines += _notes(profile, width)
    return "\n".join(lines) + "\n"


def _device(dm: DeviceMetrics, width: int, *, multi: bool) -> list[str]:
    from nbprof.views.panel import basis_label

    where = f"rank {dm.rank} · " if multi else ""
    units = compute_units(dm.vendor)
    sms = f"{dm.sm_count} {units}" if dm.sm_count else f"{units[:-1]} count unknown"
    cc = f", cc {dm.compute_capability}" if dm.compute_capability else ""
    out = [
        _clip(
            plain(
                f"{where}GPU {dm.device}: {dm.name or 'unknown GPU'} ({sms}{cc}),"
                f" span {fmt_us(dm.gpu_span_us)}"
            ),
            width,
        )
    ]
    # Sampled (NVML/GPM) readings, when analysis has them, beat the trace's estimate.
    sm_act = dm.sm_active_pct
    flops = "n/a"
    if dm.achieved_tflops is not None:
        value, unit = fmt_flops_rate(dm.achieved_tflops)
        flops = f"{value} {unit}" + (
            f" of {fmt_tflops(dm.peak_tflops)} TFLOP/s peak" if dm.peak_tflops else ""
        )
    rows = [
        (
            f"{utilization_tool(dm.vendor)} would report",
            fmt_pct(dm.kernel_busy_pct),
            basis_label(dm, "kernel_busy_pct"),
        ),
        (
            f"{units} actually busy",
            fmt_pct(sm_act if sm_act is not None else dm.sm_efficiency_pct),
            basis_label(dm, "sm_active_pct" if sm_act is not None else "sm_efficiency_pct"),
        ),
        (
            f"{matrix_units(dm.vendor)} working",
            fmt_pct(dm.tensor_core_pct),
            basis_label(dm, "tensor_core_pct"),
        ),
        *[
            (label, fmt_pct(getattr(dm, attr)), basis_label(dm, attr))
            for label, attr in (
                ("NVML utilization sampled", "nvml_util_pct"),
                ("Tensor Core activity sampled", "tensor_active_pct"),
                ("DRAM bandwidth sampled", "dram_bw_pct"),
            )
            if getattr(dm, attr) is not None
        ],
        ("FLOP/s achieved", flops, basis_label(dm, "achieved_tflops")),
        ("GPU busy incl. copies", fmt_pct(dm.gpu_busy_pct), basis_label(dm, "gpu_busy_pct")),
        ("kernels < 10 µs", fmt_pct(dm.short_kernel_pct), basis_label(dm, "short_kernel_pct")),
        (
            "idle: host / k2k / other",
            f"{fmt_pct(dm.idle.host_wait_pct)} / {fmt_pct(dm.idle.kernel_wait_pct)}"
            f" / {fmt_pct(dm.idle.other_pct)}",
            basis_label(dm, "idle"),
        ),
        (
            "kernels/memcpy/memset",
            f"{dm.kernel_count:,} / {dm.memcpy_count:,} / {dm.memset_count:,}",
            "read from the trace",
        ),
        ("bytes copied", fmt_bytes(dm.memcpy_bytes), basis_label(dm, "memcpy_bytes")),
        *[
            (
                label,
                fmt_us(getattr(dm, attr))
                if unit == "µs"
                else f"{fmt_num(getattr(dm, attr))} {unit}",
                basis_label(dm, attr),
            )
            for label, attr, unit in (
                ("profiled window", "window_us", "µs"),
                ("ProfilerStep (median)", "step_us", "µs"),
                ("step before first GPU event", "pre_gpu_step_pct", "%"),
                ("host time per kernel", "host_us_per_kernel", "µs"),
                ("launch call per kernel", "launch_us_per_kernel", "µs"),
                ("launch-to-start (median)", "launch_to_start_us", "µs"),
                ("idle with work queued", "idle_queued_pct", "%"),
                ("collectives / kernel time", "comm_pct", "%"),
                ("collectives exposed", "exposed_comm_pct", "% span"),
                ("collectives hidden", "comm_overlap_pct", "%"),
            )
            if getattr(dm, attr) is not None
        ],
        *[(f"copies {c['kind']}", fmt_copy(c), basis_label(dm, "copies")) for c in dm.copies],
    ]
    for label, value, basis in rows:
        out.append(_clip(plain(f"  {label:<27}{value:>24}"), width))
        out += _wrap(f"basis: {basis}", width, first="      ", indent="        ")
    if dm.span_breakdown:
        out += _wrap(
            f"where the GPU span went: {fmt_breakdown(dm.span_breakdown)}",
            width,
            first="  ",
            indent="      ",
        )
        out += _wrap(
            f"basis: {basis_label(dm, 'span_breakdown')}", width, first="      ", indent="        "
        )
    return out


def _findings(diag: Diagnosis, width: int) -> list[str]:
    if not diag.findings:
        return ["", "Findings: none."]
    fs = sorted(diag.findings, key=lambda f: SEVERITY_ORDER.get(f.severity, 9))
    out = [
        "",
        f"Findings ({len(fs)}{', top ' + str(TOP_FINDINGS) if len(fs) > TOP_FINDINGS else ''}):",
    ]
    multi = len(diag.devices) > 1
    for f in fs[:TOP_FINDINGS]:
        head = f"  [{f.severity.upper()}] "
        where = f" (GPU {f.device})" if multi and f.device else ""
        out += _wrap(f.title + where, width, first=head, indent=" " * len(head))
        pad = " " * len(head)
        out += _wrap(f.detail, width, first=pad, indent=pad)
        if f.evidence:
            ev = ", ".join(f"{k}={fmt_evidence(v)}" for k, v in f.evidence.items())
            out += _wrap(f"evidence: {ev}", width, first=pad, indent=pad)
        out += _wrap(f"fix: {f.fix}", width, first=pad, indent=pad)
        if f.code:
            out += [_clip(pad + "    " + plain(line), width) for line in f.code.splitlines()]
    return out


def _top_kernels(diag: Diagnosis, width: int) -> list[str]:
    t = diag.tables.get("top_kernels")
    if t is None or not len(t):
        return []
    out = [
        "",
        "Top kernels (read from the trace):",
        f"  {'% time':>7} {'total':>10} {'count':>8}  name",
    ]
    for r in t.head(TOP_KERNELS).itertuples(index=False):
        out.append(
            _clip(
                f"  {fmt_num(r.pct):>7} {fmt_us(r.total_us):>10} {int(r.count):>8,}"
                f"  {plain(r.name)}",
                width,
            )
        )
    return out


def _notes(profile: Profile, width: int) -> list[str]:
    from nbprof.views.panel import sample_notes

    notes = [*profile.notes, *profile.trace.notes, *sample_notes(profile)]
    if not notes:
        return []
    out = ["", "Notes:"]
    for n in dict.fromkeys(notes):
        out += _wrap(n, width, first="  - ", indent="    ")
    return out


def _wrap(text: str, width: int, *, first: str = "", indent: str = "") -> list[str]:
    return textwrap.wrap(
        plain(text),
        width=width,
        initial_indent=first,
        subsequent_indent=indent,
        break_on_hyphens=False,
    ) or [first.rstrip()]


def _clip(line: str, width: int) -> str:
    return line if len(line) <= width else line[: width - 1] + "…"
