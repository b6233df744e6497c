"""The plain-text report: what ``nbprof analyze`` prints and the notebook's text/plain.

Fixed width, no colour. Names from the trace are printed as they are except for control
characters, which would otherwise let a crafted kernel name drive the user's terminal.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from nbprof import units, vocab
from nbprof.analysis.model import compute_units, matrix_units, utilization_tool
from nbprof.views._style import (
    SEVERITY_ORDER,
    clip,
    fmt_breakdown,
    fmt_copy,
    fmt_evidence,
    plain,
    wrap,
)
from nbprof.views.panel import basis_label, confidence_text, sample_notes

if TYPE_CHECKING:
    from nbprof.analysis.job import JobDiagnosis
    from nbprof.analysis.model import DeviceMetrics, Diagnosis
    from nbprof.job import Job
    from nbprof.result import Profile

logger = logging.getLogger(__name__)

WIDTH = 88
TOP_FINDINGS = 5
TOP_KERNELS = 5


def render(profile: Profile, *, width: int = WIDTH) -> str:
    """The compact report: verdict, key numbers with their basis, findings, top kernels."""
    lines: list[str] = [clip(f"nbprof · {plain(profile.trace.source)}", width), "=" * width]
    try:
        diag = profile.diagnosis
    except Exception as e:  # still say something useful about the trace
        logger.exception("analysis failed")
        lines += wrap(f"Analysis failed: {type(e).__name__}: {e}", width)
        lines += _notes(profile, width)
        return "\n".join(map(plain, lines)) + "\n"
    label = vocab.term(diag.verdict.bottleneck).label
    lines += wrap(f"Verdict: {label}. {diag.verdict.summary}", width, indent="         ")
    conf, basis = confidence_text(diag.verdict)
    said = [f"{conf} confidence" if conf else "", f"decided by: {basis}" if basis else ""]
    if any(said):
        pad = " " * len("Verdict: ")
        lines += wrap(" · ".join(x for x in said if x), width, first=pad, indent=pad)
    if profile.error is not None:
        lines += wrap(
            f"The profiled code raised {type(profile.error).__name__}: {profile.error} "
            "(this profile is partial).",
            width,
        )
    for dm in diag.devices:
        lines.append("")
        lines += _device(dm, width, multi=len(diag.devices) > 1)
    if diag.explanation:
        lines += ["", "Why these numbers differ:"]
        lines += wrap(diag.explanation, width, indent="  ", first="  ")
    lines += _findings(diag, width)
    lines += _top_kernels(diag, width)
    lines += _notes(profile, width)
    return "\n".join(map(plain, lines)) + "\n"


def _device(dm: DeviceMetrics, width: int, *, multi: bool) -> list[str]:
    where = f"rank {dm.rank} · " if multi else ""
    sm_word = compute_units(dm.vendor)
    sms = f"{dm.sm_count} {sm_word}" if dm.sm_count else f"{sm_word[:-1]} count unknown"
    cc = f", cc {dm.compute_capability}" if dm.compute_capability else ""
    out = [
        clip(
            plain(
                f"{where}GPU {dm.device}: {dm.name or 'unknown GPU'} ({sms}{cc}),"
                f" span {units.duration(dm.gpu_span_us)}"
            ),
            width,
        )
    ]
    # Sampled (NVML/GPM) readings, when analysis has them, beat the trace's estimate.
    sm_act = dm.sm_active_pct
    flops = units.NA
    if dm.achieved_tflops is not None:
        flops = units.amount(dm.achieved_tflops, "TFLOP/s") + (
            f" of {units.significant(dm.peak_tflops)} TFLOP/s peak" if dm.peak_tflops else ""
        )
    rows = [
        (
            f"{utilization_tool(dm.vendor)} would report",
            units.pct(dm.kernel_busy_pct),
            basis_label(dm, "kernel_busy_pct"),
        ),
        (
            f"{sm_word} actually busy",
            units.pct(sm_act if sm_act is not None else dm.sm_efficiency_pct),
            basis_label(dm, "sm_active_pct" if sm_act is not None else "sm_efficiency_pct"),
        ),
        (
            f"{matrix_units(dm.vendor)} working",
            units.pct(dm.tensor_core_pct),
            basis_label(dm, "tensor_core_pct"),
        ),
        *[
            (label, units.pct(getattr(dm, attr)), basis_label(dm, attr))
            for label, attr in (
                ("NVML utilization sampled", "nvml_util_pct"),
                ("Tensor Core activity sampled", "tensor_active_pct"),
                ("DRAM bandwidth sampled", "dram_bw_pct"),
            )
            if getattr(dm, attr) is not None
        ],
        ("FLOP/s achieved", flops, basis_label(dm, "achieved_tflops")),
        ("GPU busy incl. copies", units.pct(dm.gpu_busy_pct), basis_label(dm, "gpu_busy_pct")),
        ("kernels < 10 µs", units.pct(dm.short_kernel_pct), basis_label(dm, "short_kernel_pct")),
        (
            "idle: host / k2k / other",
            f"{units.pct(dm.idle.host_wait_pct)} / {units.pct(dm.idle.kernel_wait_pct)}"
            f" / {units.pct(dm.idle.other_pct)}",
            basis_label(dm, "idle"),
        ),
        (
            "kernels/memcpy/memset",
            f"{dm.kernel_count:,} / {dm.memcpy_count:,} / {dm.memset_count:,}",
            "read from the trace",
        ),
        ("bytes copied", units.size(dm.memcpy_bytes), basis_label(dm, "memcpy_bytes")),
        *[
            (label, units.amount(getattr(dm, attr), unit), basis_label(dm, attr))
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
        out.append(clip(plain(f"  {label:<27}{value:>24}"), width))
        out += wrap(f"basis: {basis}", width, first="      ", indent="        ")
    if dm.span_breakdown:
        out += wrap(
            f"where the GPU span went: {fmt_breakdown(dm.span_breakdown)}",
            width,
            first="  ",
            indent="      ",
        )
        out += wrap(
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
        out += wrap(f.title + where, width, first=head, indent=" " * len(head))
        pad = " " * len(head)
        out += wrap(f.detail, width, first=pad, indent=pad)
        if f.evidence:
            ev = ", ".join(f"{k}={fmt_evidence(v)}" for k, v in f.evidence.items())
            out += wrap(f"evidence: {ev}", width, first=pad, indent=pad)
        out += wrap(f"fix: {f.fix}", width, first=pad, indent=pad)
        if f.code:
            out += [clip(pad + "    " + plain(line), width) for line in f.code.splitlines()]
    return out


def _top_kernels(diag: Diagnosis, width: int) -> list[str]:
    t = diag.top_kernels
    if not len(t):
        return []
    out = [
        "",
        "Top kernels (read from the trace):",
        f"  {'% time':>7} {'total':>10} {'count':>8}  name",
    ]
    for r in t.head(TOP_KERNELS).itertuples(index=False):
        out.append(
            clip(
                f"  {units.number(r.pct):>7} {units.duration(r.total_us):>10} {int(r.count):>8,}"
                f"  {plain(r.name)}",
                width,
            )
        )
    return out


def _notes(profile: Profile, width: int) -> list[str]:
    notes = [*profile.notes, *profile.trace.notes, *sample_notes(profile)]
    if not notes:
        return []
    out = ["", "Notes:"]
    for n in dict.fromkeys(notes):
        out += wrap(n, width, first="  - ", indent="    ")
    return out


# -- a multi-rank job ---------------------------------------------------------------------

#: Collectives the text report lists (those the ranks waited longest at).
TOP_COLLECTIVES = 10
_KIND_WORDS = {
    "all_reduce": "all-reduce", "all_gather": "all-gather", "reduce_scatter": "reduce-scatter",
    "all_to_all": "all-to-all", "send_recv": "send/recv",
}  # fmt: skip


def render_job(job: Job, *, width: int = WIDTH) -> str:
    """The job's report: verdict and fixes, the rank table, stragglers, step skew, the
    collectives the ranks waited longest at, missing ranks, then the straggler's own
    verdict and findings."""
    d = job.diagnosis
    n = len(d.ranks)
    world = f", world size {d.world_size}" if d.world_size else ""
    backend = plain(d.backend) if d.backend else "backend unknown"
    lines = [
        clip(f"nbprof · {plain(d.source)}", width),
        clip(f"job of {n} rank{'s' if n != 1 else ''} ({backend}{world})", width),
        "=" * width,
    ]
    v = d.verdict
    label = vocab.term(v.bottleneck).label
    head, rest = label, v.summary
    if v.summary.lower().startswith(label.lower()) and ": " in v.summary:
        head, rest = v.summary.split(": ", 1)
        rest = rest[:1].upper() + rest[1:]
    lines += wrap(f"Verdict: {head}. {rest}", width, indent="         ")
    pad = " " * len("Verdict: ")
    lines += wrap(f"{v.confidence} confidence · decided by: {v.cause.replace('_', ' ')}", width,
                   first=pad, indent=pad)  # fmt: skip
    for i, fix in enumerate(v.fixes, 1):
        lines += wrap(f"Fix {i}: {fix}", width, first="  ", indent="         ")
    lines += ["", *_job_ranks(job, width)]
    if d.stragglers:
        lines += ["", "Stragglers (the ranks the others wait for):"]
        for s in d.stragglers:
            lines += wrap(s.sentence[0].upper() + s.sentence[1:], width, first="  ", indent="    ")
            if s.fix:
                lines += wrap(f"fix: {s.fix}", width, first="    ", indent="      ")
    lines += _job_skew(d, width)
    lines += _job_collectives(d, width)
    if d.missing:
        from nbprof.analysis.job import describe_missing

        lines += ["", "Missing ranks (the job is analysed without them):"]
        for m in d.missing:
            lines += wrap(describe_missing(m), width, first="  ", indent="    ")
    others = [f for f in d.findings if f.id not in ("straggler",)]
    if others:
        lines += ["", "Findings:"]
        for f in others:
            h = f"  [{f.severity.upper()}] "
            lines += wrap(f.title, width, first=h, indent=" " * len(h))
            lines += wrap(f.detail, width, first=" " * len(h), indent=" " * len(h))
    if d.stragglers:
        s = d.stragglers[0]
        rank_view = job.rank(s.rank)
        rd = rank_view.diagnosis
        lines += ["", f"Rank {s.rank}, the straggler, on its own:"]
        lab = vocab.term(rd.verdict.bottleneck).label
        lines += wrap(f"Verdict: {lab}. {rd.verdict.summary}", width, first="  ",
                       indent="           ")  # fmt: skip
        lines += _findings(rd, width)[1:]
    notes = [*job.notes, *d.notes]
    if notes:
        lines += ["", "Notes:"]
        for note in dict.fromkeys(notes):
            lines += wrap(note, width, first="  - ", indent="    ")
    return "\n".join(map(plain, lines)) + "\n"


def _job_ranks(job: Job, width: int) -> list[str]:
    d = job.diagnosis
    names = sorted({r.device_name for r in d.ranks if r.device_name})
    gpus = f" on {', '.join(plain(x) for x in names)}" if names else ""
    steps = sorted({k for r in d.ranks for k in r.steps})
    step_col = f"step {steps[0]}" if len(steps) == 1 else "step med"
    out = [
        clip(f"Ranks{gpus} (read from the trace; % of each rank's GPU span):", width),
        clip(
            f"  {'rank':>4} {'span':>9} {'kernels':>7} {'compute':>7} {'exposed':>7} "
            f"{'waiting':>7} {'host':>5} {'sync':>5} {'idle+':>5} {step_col:>9} verdict",
            width,
        ),
    ]
    import numpy as np

    for r in d.ranks:
        idle = r.idle
        rest = sum(v for k, v in idle.items() if k not in ("host", "sync"))
        st = list(r.steps.values())
        step = units.duration(float(np.median(st))) if st else units.NA
        mark = " *" if r.rank in job.stragglers else ""
        out.append(
            clip(
                f"  {r.rank:>4} {units.duration(r.gpu_span_us):>9} {_p(r.kernel_busy_pct):>7} "
                f"{_p(r.compute_busy_pct):>7} {_p(r.exposed_comm_pct):>7} {_p(r.wait_pct):>7} "
                f"{_p(idle.get('host')):>5} {_p(idle.get('sync')):>5} {_p(rest):>5} "
                f"{step:>9} {vocab.term(r.bottleneck).short}{mark}",
                width,
            )
        )
    out += wrap(
        "kernels: a kernel ran (nvidia-smi's view); compute: a non-collective kernel ran; "
        "exposed: a collective ran with no compute beside it; waiting: the part of exposed "
        "spent waiting for a later rank at a collective; host/sync/idle+: idle time charged "
        "to the host's Python, to blocking calls, to every other cause; verdict: the rank's "
        f"own bottleneck; * a straggler. Waits: {d.clock.label()}.",
        width,
        first="  ",
        indent="  ",
    )
    return out


def _p(v: float | None) -> str:
    """A share in a column headed by its unit (%)."""
    return units.number(v)


def _job_skew(d: JobDiagnosis, width: int) -> list[str]:
    sk = d.skew
    out: list[str] = []
    if sk.get("steps") or sk.get("start_spread_us") is not None:
        out += ["", "Skew (ProfilerStep durations across ranks):"]
    for s in sk.get("steps", []):
        if not s["spread_us"]:
            out += wrap(f"step {s['step']}: {units.duration(s['max_us'])} on every rank", width,
                         first="  ", indent="    ")  # fmt: skip
            continue
        line = (
            f"step {s['step']}: {units.duration(s['min_us'])} (rank {s['fastest_rank']}) to "
            f"{units.duration(s['max_us'])} (rank {s['slowest_rank']}), "
            f"spread {units.duration(s['spread_us'])}"
        )
        if s.get("spread_pct") is not None:
            line += f" ({units.pct(s['spread_pct'], 0)} of the median)"
        if s.get("start_spread_us") is not None:
            line += (
                f"; the ranks started it {units.duration(s['start_spread_us'])} apart and ended it "
                f"{units.duration(s['end_spread_us'])} apart"
            )
        out += wrap(line, width, first="  ", indent="    ")
    if sk.get("start_spread_us"):
        out += wrap(
            f"first events: rank {sk['last_to_start']} started "
            f"{units.duration(sk['start_spread_us'])} after rank {sk['first_to_start']}",
            width,
            first="  ",
            indent="    ",
        )
    return out


def _job_collectives(d: JobDiagnosis, width: int) -> list[str]:
    cs = d.collectives
    if not cs:
        return ["", "Collectives: none recorded."]
    by_seq = any(c.seq >= 0 for c in cs)
    how = "by process group and sequence number" if by_seq else "by order of each kind on each rank"
    top = sorted(cs, key=lambda c: -max(c.wait_us.values(), default=0.0))[:TOP_COLLECTIVES]
    more = f", the {len(top)} with the longest waits" if len(top) < len(cs) else ""
    out = [
        "",
        *wrap(f"Collectives ({len(cs)}, matched across ranks {how}{more}):", width),
        f"  {'#':>3} {'kind':<12} {'size':>9} {'n':>3} {'last':>4} {'time':>9} {'algbw':>7} "
        f"{'busbw':>7} {'peak':>7} {'max wait':>13}",
    ]
    for c in top:
        worst = max(c.wait_us, key=lambda r: c.wait_us[r]) if c.wait_us else None
        wait = f"{units.duration(c.wait_us[worst])} ({worst})" if worst is not None else units.NA
        out.append(
            clip(
                f"  {c.index:>3} {_KIND_WORDS.get(c.kind, c.kind):<12} {units.size(c.bytes):>9} "
                f"{c.group_size:>3} {c.last:>4} {units.duration(c.duration_us):>9} "
                f"{units.significant(c.algbw_gbps):>7} {units.significant(c.busbw_gbps):>7} "
                f"{(units.significant(c.peak_gbps) if c.peak_gbps else 'unknown'):>7} {wait:>13}",
                width,
            )
        )
    first = top[0]
    for key, what in (("busbw_gbps", "busbw"), ("peak_gbps", "peak"), ("wait_us", "wait")):
        b = first.basis.get(key)
        if b is not None:
            out += wrap(f"{what}: {b.label()}", width, first="      ", indent="        ")
    out += wrap(
        "time: the last arrival's kernel time (the data moves once every rank is there); "
        "algbw = size ÷ time, busbw = algbw × NCCL's factor for the kind (all-reduce "
        "2(n-1)/n; all-gather, reduce-scatter, all-to-all (n-1)/n; others 1), in GB/s; "
        "n: ranks in the group; last: the rank the others waited for; max wait (rank).",
        width,
        first="      ",
        indent="        ",
    )
    return out
