"""The verdict: one bottleneck from the schema's list, and the sentence that says why.

The verdict is read off the busiest device's time accounting (:mod:`nbprof.analysis.stalls`):
its GPU span cut into what ran (compute, exposed collectives, copies alone) and why it
idled (sync, dependency, input, set-up, host...). Rules, in order:

1. no GPU events -> ``cpu_only``;
2. too little GPU work to judge -> ``insufficient_gpu_work``: stream capture covers at
   least half the GPU span (launches recorded into a graph, not run), or fewer than
   :data:`MIN_GPU_EVENTS` GPU events with under :data:`MIN_GPU_BUSY_US` of GPU time;
3. the largest *stall* (time the GPU lost to one cause) decides when it covers at least
   :data:`STALL_PCT` of the span:

   ============  =========================================================
   stall          verdict
   ============  =========================================================
   exposed_comm   ``communication_bound``: collectives ran with no compute
                  kernel beside them, plus the idle time queued work waited
                  behind a collective (``comm_wait``): the communication share
   input          ``input_bound`` (idle while the DataLoader fetched or the
                  host preprocessed on the CPU)
   sync           ``sync_bound`` (idle, nothing queued, while the host was
                  blocked in a synchronize or a blocking copy)
   copy_only      ``transfer_bound`` (only copies ran)
   kernel_wait    ``launch_bound`` (queued kernels shorter than the GPU's own
                  delay between them: tiny kernels, even in a CUDA graph)
   host           ``launch_bound`` when the launch calls take at least
                  :data:`LAUNCH_SHARE` of the host's time per kernel, else
                  ``host_bound`` (Python/framework work between kernels)
   setup          ``idle`` (one-time set-up: allocation, context, code loading)
   dependency     ``idle`` (work queued, waiting on work outside the trace:
                  nothing ran on any stream meanwhile)
   ============  =========================================================

   The shares compete as they are: the communication share against the host's, the
   sync share only with what the host was blocked in while nothing was queued (a host
   blocked on queued work that waits is a consequence of the wait, charged to it). A
   runner-up stall explaining at least :data:`CLOSE_CALL` of the winner's time makes
   the verdict ``low`` confidence and the summary names both;
4. idle time is at least half the span but no one cause covers ``STALL_PCT`` -> ``idle``;
5. otherwise the GPU's own kernels are the limit: compute vs memory, from sampled
   hardware counters when present, else each kernel's own evidence (the roofline of the
   op that launched it when FLOP-counted, else its kernel class), firmly only when that
   evidence covers at least :data:`CLASS_COVER_PCT` of kernel time.

``STALL_PCT`` is a quarter of the span: a cause that, removed, would make the run a third
faster is the first thing to fix, ahead of anything the kernels themselves could gain.
"""

from __future__ import annotations

import logging
from typing import NamedTuple, cast

import numpy as np

from nbprof import vocab
from nbprof.analysis import _frames
from nbprof.analysis.device import Signals
from nbprof.analysis.model import Bottleneck, Confidence, Verdict, VerdictBasis
from nbprof.analysis.stalls import KERNEL_WAIT_US, RAN
from nbprof.trace.model import Trace
from nbprof.units import duration as _us
from nbprof.units import share as _pct
from nbprof.units import size as _size

logger = logging.getLogger(__name__)

# -- thresholds of the verdict ---------------------------------------------------------
#: A stall decides the verdict when it covers at least this share of the GPU span (%).
STALL_PCT = 25.0
#: A runner-up stall with at least this fraction of the winner's time makes a close call.
CLOSE_CALL = 0.75
#: Fewer GPU events than this, with under MIN_GPU_BUSY_US of GPU time, is too little work.
MIN_GPU_EVENTS = 20
MIN_GPU_BUSY_US = 1000.0
#: Stream capture covering at least this share of the GPU span makes it a recording.
CAPTURE_SPAN_PCT = 50.0
#: Launch calls taking at least this share of the host's time per kernel: launch-bound.
LAUNCH_SHARE = 0.5
#: Idle time of at least this share of the span with no one cause: mostly idle.
IDLE_PCT = 50.0
#: The roofline / kernel classes decide firmly only when they cover this share of
#: kernel time; below it the unclassified kernels could outweigh either side.
CLASS_COVER_PCT = 70.0
#: Measured DRAM bandwidth (or SM/tensor activity) at or above this share is the limit.
MEASURED_BOUND_PCT = 50.0
#: FLOP-counted ops on one side of the ridge that reach under this share of that side's
#: peak (bandwidth or FLOP/s) are not limited by it either: the call is made, but low.
LOW_RATE_PCT = 10.0

# -- thresholds of the findings (named here, beside the verdict's) ----------------------
#: A stall worth a finding of its own (% of the span); high severity at STALL_PCT.
FINDING_STALL_PCT = 5.0
#: DataLoader share of step time worth a finding; high severity at this share.
INPUT_STEP_PCT = 10.0
INPUT_STEP_HIGH_PCT = 30.0
#: Kernel-time shares of the Tensor Core finding: GEMM/conv time worth checking, and
#: the Tensor Core share below which the GEMMs are said to miss them.
TC_GEMM_PCT = 20.0
TC_GEMM_HIGH_PCT = 40.0
TC_LOW_PCT = 10.0
#: GEMMs "miss" Tensor Cores when under this fraction of their time runs on them.
TC_SHARE_OF_GEMM = 0.5
#: Compute capability from which TF32 and BF16 exist (Ampere): the fix names them.
TF32_CC = 8.0
#: Copy time share of the span for a medium-severity pageable-copy finding.
PAGEABLE_TIME_PCT = 5.0
#: Device-to-device copy time as a share of GPU busy time worth a finding (medium
#: severity at twice it).
DTOD_BUSY_PCT = 5.0
#: Memory-bound kernels share of kernel time, with compute busy at least this share.
MEMORY_KERNEL_PCT = 50.0
MEMORY_BUSY_PCT = 60.0
#: Compute kernels busy at least this share of the span, filling under this fraction of
#: the SMs while they run: the low-SM-efficiency finding.
SM_BUSY_PCT = 30.0
SM_FILL = 0.6
#: GPU span under this share of the profiled window: most of the run is elsewhere.
SPAN_OF_WINDOW_PCT = 50.0
#: Set-up calls before the first GPU event covering this share of the window are worth a
#: finding even when the GPU span itself holds little set-up.
SETUP_OF_WINDOW_PCT = 25.0
#: Idle share of the span from which "mostly idle" is high severity.
IDLE_HIGH_PCT = 90.0
#: Median share of a ProfilerStep before its first GPU event for "most of each step".
PRE_GPU_STEP_PCT = 50.0

_KNOWN = ("tensor_core", "compute", "memory", "communication")
#: Stall (span_breakdown key) -> (verdict, basis, what it means in a sentence): the
#: stalls of the vocabulary, in its order (which breaks ties between equal shares).
STALLS: dict[str, tuple[Bottleneck, VerdictBasis, str]] = {
    s.key: (s.verdict, cast("VerdictBasis", s.basis), s.meaning) for s in vocab.STALLS
}
#: span_breakdown keys a stall's share adds up (its own key alone where not listed): the
#: communication share is the collectives' exposed time and the idle time queued work
#: waited behind a collective.
STALL_PARTS: dict[str, tuple[str, ...]] = {"exposed_comm": ("exposed_comm", "comm_wait")}


class Decision(NamedTuple):
    """What ``compute_vs_memory`` concluded, before the device and busy share are added."""

    kind: Bottleneck
    why: str
    confidence: Confidence
    basis: VerdictBasis


def kernel_busy_us(s: Signals) -> float:
    """Time (µs) at least one kernel ran on the device: what "busiest device" means."""
    return s.metrics.gpu_span_us * (s.metrics.kernel_busy_pct or 0.0) / 100.0


def primary(signals: list[Signals]) -> Signals:
    """The device that ran the most kernel time (first on ties)."""
    return max(signals, key=kernel_busy_us)


def other_pct(s: Signals) -> float:
    """Share of kernel time (%) in kernels no class rule recognised (0 without kernels)."""
    c = s.class_pct
    if not c:
        return 0.0
    if "other" in c:
        return c["other"]
    # Tolerate a class_pct that lists only the recognised classes: the rest is "other".
    return max(0.0, 100.0 - sum(c.get(k, 0.0) for k in _KNOWN))


def stall_shares(s: Signals) -> dict[str, float]:
    """The stalls of :data:`STALLS`, share of the span (%), largest first."""
    return shares_of(s.metrics.span_breakdown)


def shares_of(breakdown: dict[str, float]) -> dict[str, float]:
    """:func:`stall_shares` of a span breakdown (a device's, or a job's)."""
    shares = {k: sum(breakdown.get(p, 0.0) for p in STALL_PARTS.get(k, (k,))) for k in STALLS}
    return dict(sorted(shares.items(), key=lambda kv: -kv[1]))


def is_launch_bound(s: Signals) -> bool:
    """The launch calls take at least ``LAUNCH_SHARE`` of the host's time per kernel."""
    m = s.metrics
    if m.launch_us_per_kernel is None or not m.host_us_per_kernel:
        return False
    return m.launch_us_per_kernel >= LAUNCH_SHARE * m.host_us_per_kernel


def queue_depth(s: Signals) -> float | None:
    """Kernels typically queued (Little's law): launch-to-start ÷ host time per kernel."""
    m = s.metrics
    if m.launch_to_start_us is None or not m.host_us_per_kernel:
        return None
    return max(m.launch_to_start_us, 0.0) / m.host_us_per_kernel


def too_little_work(s: Signals) -> str | None:
    """Why there is too little GPU work to judge, or None."""
    m = s.metrics
    cap = s.capture
    span = m.gpu_span_us
    busy = s.gpu_busy_us
    events = m.kernel_count + m.memcpy_count + m.memset_count
    if cap.recorded and span > 0 and cap.us >= CAPTURE_SPAN_PCT / 100.0 * span:
        return (
            f"the host recorded {cap.recorded} launches into a CUDA/HIP graph (stream "
            f"capture, {_us(cap.us)} of the {_us(span)} GPU span): captured "
            f"work is recorded, not run, and only {m.kernel_count} kernels ran, "
            f"{_us(busy)} of GPU time"
        )
    if events < MIN_GPU_EVENTS and busy < MIN_GPU_BUSY_US:
        return (
            f"only {events} GPU event{'s' if events != 1 else ''} ran ({_us(busy)} of GPU "
            f"time): too few and too short to tell what limits the work"
        )
    return None


_COPY_WORDS = {"DtoH": "device-to-host", "HtoD": "host-to-device", "DtoD": "device-to-device"}


def blocker_clause(s: Signals, name: str) -> str:
    """One blocking call's numbers in a clause: how many calls, how long the host blocked
    in them (per ProfilerStep), and the longest call (with its copy's size)."""
    calls = s.blocking
    at = (
        np.flatnonzero(_frames.column(calls, "name") == name)
        if not calls.empty
        else np.zeros(0, int)
    )
    if not len(at):
        return f"{name}: no call inside the GPU span"
    dur = _frames.column(calls, "dur", "float64")[at]
    host_us = float(np.nansum(dur))  # a missing duration adds nothing, as pandas' sum
    steps = len(s.steps)
    n = len(at)
    # Per step only for calls made every step: one call at the end is no per-step cost.
    per = f" ({_us(host_us / steps)} per ProfilerStep)" if steps and n >= steps else ""
    i = int(dur.argmax())
    longest = at[i]
    nbytes = int(_frames.column(calls, "bytes")[longest])
    kind = _COPY_WORDS.get(str(_frames.column(calls, "kind")[longest]), "")
    size = f" for a {_size(nbytes)} {kind} copy" if nbytes >= 0 and kind else ""
    return (
        f"the host blocked {_us(host_us)} in {n} call{'s' if n != 1 else ''} of {name}{per}, "
        f"the longest {_us(float(dur[i]))}{size}"
    )


def blocker_summary(s: Signals) -> str:
    """The blocking call that cost the most idle time, with its numbers."""
    a = s.accounting
    if not a.blockers:
        return "no blocking call is recorded"
    name, idle_us = max(a.blockers.items(), key=lambda kv: kv[1])
    return f"{a.pct(idle_us):.0f}% of the span in {name}: {blocker_clause(s, name)}"


def setup_after_first_step(s: Signals) -> float | None:
    """Share of the set-up-charged idle time after the first ProfilerStep ended (None
    without steps or set-up): high when allocation recurs step after step."""
    steps = s.steps
    setup = s.accounting.setup_idle
    total = float(np.sum(setup[1] - setup[0]))
    if steps.empty or total <= 0:
        return None
    first_end = float((steps["ts"] + steps["dur"]).min())
    after = np.clip(setup[1], first_end, None) - np.clip(setup[0], first_end, None)
    return float(after.sum()) / total


def input_work(s: Signals) -> str:
    """What the host did in the input-charged gaps: "the DataLoader fetched batches", or
    the CPU preprocessing that took the most of that idle time."""
    g = s.accounting.gaps
    if g.empty:
        return "the DataLoader fetched batches"
    rows = g[(g["cause"] == "input") & g["cpu_work"].astype(str).str.startswith("input: ")]
    by_name = rows.groupby("cpu_work")["dur"].sum() if not rows.empty else None
    fetched = float(g.loc[g["cause"] == "input", "dur"].sum())
    if by_name is None or float(by_name.max()) < 0.5 * fetched:
        return "the DataLoader fetched batches"
    top = str(by_name.idxmax()).removeprefix("input: ")
    return f"the host preprocessed inputs on the CPU ({top})"


def dependency_clause(s: Signals) -> str:
    """Why the GPU idled with work queued, with the numbers that show it: the queue was
    long (launch-to-start), nothing ran, the queued work was a graph replay's, and the
    host's blocking calls meanwhile were waiting on that queue."""
    m, a = s.metrics, s.accounting
    dep = a.causes.get("dependency", 0.0)
    parts = [
        "the GPU idled with work queued and nothing running on any stream: waiting on "
        "work outside the trace"
    ]
    if m.launch_to_start_us is not None and m.launch_to_start_us >= 1000:
        parts.append(f"kernels start {_us(m.launch_to_start_us)} after their launch (median)")
    if dep > 0 and a.graph_wait_us >= 0.05 * dep:
        parts.append(
            f"{a.graph_wait_us / dep * 100:.0f}% of it at the nodes of CUDA/HIP graph replays"
        )
    if a.blocked_behind:
        name, behind = max(a.blocked_behind.items(), key=lambda kv: kv[1])
        parts.append(
            f"the host's blocking in {name} meanwhile ({a.pct(behind):.0f}% of the span) "
            f"waits on that queue: a consequence, not the cause"
        )
    return "; ".join(parts)


def drained_clause(s: Signals) -> str:
    """ ", 12% of the span right after a blocking call returned (it had drained the
    queue)" when the host-charged idle time follows blocking calls, else ""."""
    a = s.accounting
    if a.drained_us <= 0 or a.pct(a.drained_us) < 0.05:
        return ""
    return (
        f" ({_pct(a.pct(a.drained_us))} of the span right after a blocking call returned, "
        f"which had drained the queue)"
    )


def _host_why(s: Signals, share: float) -> tuple[Bottleneck, VerdictBasis, str]:
    m = s.metrics
    pace = drained_clause(s)
    if m.host_us_per_kernel is not None and m.launch_us_per_kernel is not None:
        pace += (
            f"; the host spends {m.host_us_per_kernel:.1f} µs per kernel, "
            f"{m.launch_us_per_kernel:.1f} µs of it in the launch call"
        )
        if s.median_kernel_us is not None:
            pace += f", while the median kernel runs {s.median_kernel_us:.1f} µs"
    q = queue_depth(s)
    if q is not None:
        pace += (
            f" (kernels start {m.launch_to_start_us:.1f} µs after their launch: "
            + ("the queue is empty, the GPU waits for every launch)" if q < 1 else
               f"about {q:.0f} kernels queued typically, the host falls behind in phases)")
        )  # fmt: skip
    if is_launch_bound(s):
        return (
            "launch_bound",
            "launch_gaps",
            f"{share:.0f}% of the span the GPU waited with nothing queued while the host "
            f"issued launches{pace}",
        )
    return (
        "host_bound",
        "host_gaps",
        f"{share:.0f}% of the span nothing was queued while the host ran Python/framework "
        f"code between kernels{pace}",
    )


def _stall_why(s: Signals, key: str, share: float) -> tuple[Bottleneck, VerdictBasis, str]:
    m = s.metrics
    if key == "host":
        return _host_why(s, share)
    kind, basis, what = STALLS[key]
    if key == "exposed_comm":
        exposed = m.span_breakdown.get("exposed_comm", 0.0)
        queued = m.span_breakdown.get("comm_wait", 0.0)
        behind = (
            f", and for {_pct(queued)} the GPU idled with work queued behind a collective "
            f"that had not started"
            if queued >= 0.05
            else ""
        )
        return (
            kind,
            basis if exposed >= queued else "comm_wait",
            f"for {_pct(exposed)} of the span collectives ran with no compute kernel beside "
            f"them (collectives take {m.comm_pct or 0:.0f}% of kernel time, "
            f"{m.comm_overlap_pct or 0:.0f}% of it overlapped with compute){behind}",
        )
    if key == "dependency":
        return kind, basis, f"{share:.0f}% of the span {dependency_clause(s)}"
    if key == "possible_comm":
        how = m.basis["possible_comm_pct"].how if "possible_comm_pct" in m.basis else ""
        at = how.find("(streams")
        detail = f", {how[at + 1 : -1]}" if at >= 0 else ""
        return (
            kind,
            basis,
            f"for {share:.0f}% of the span the only kernels running were ones no name rule "
            f"knows that behave as communication kernels do (a stream of their own beside "
            f"the compute, fewer blocks than SMs, running long{detail}): possibly "
            f"communication",
        )
    if key == "sync":
        return (
            kind,
            basis,
            f"for {share:.0f}% of the span the GPU was idle, nothing queued, while the host "
            f"was blocked waiting on it; {blocker_summary(s)}",
        )
    if key == "input":
        dl = m.dataloader_pct
        return (
            kind,
            basis,
            f"for {share:.0f}% of the span the GPU sat idle while {input_work(s)}"
            + (f" (the DataLoader took {dl:.0f}% of step time)" if dl else ""),
        )
    if key == "copy_only":
        return kind, basis, f"for {share:.0f}% of the span only copies ran, no kernel"
    if key == "kernel_wait":
        med = s.median_kernel_us
        return (
            kind,
            basis,
            f"for {share:.0f}% of the span the GPU sat in the gaps between back-to-back "
            f"queued kernels (each under {KERNEL_WAIT_US:g} µs)"
            + (f" while the median kernel runs {med:.1f} µs" if med is not None else "")
            + ": the kernels are too small to cover the GPU's own launch delay",
        )
    if key == "setup":
        later = setup_after_first_step(s)
        if later is not None and later > 0.5:
            return (
                kind,
                basis,
                f"{share:.0f}% of the span the GPU waited while the host was in allocation "
                f"and set-up calls, {later * 100:.0f}% of it after the first ProfilerStep: "
                f"they recur (the caching allocator releasing and growing memory: "
                f"empty_cache() calls, changing shapes)",
            )
        return (
            kind,
            basis,
            f"{share:.0f}% of the span the GPU waited while the host was in set-up calls "
            f"(allocation, context creation, first launches loading kernel code): one-time "
            f"costs, not the steady state",
        )
    return kind, basis, f"for {share:.0f}% of the span {what}"


def compute_vs_memory(s: Signals) -> Decision:
    """Compute- or memory-bound, the reason with numbers, the confidence and the basis.

    Hardware counters decide when they were sampled (DRAM bandwidth >= 50% is memory-bound,
    SM or tensor activity >= 50% with less DRAM traffic is compute-bound). Otherwise each
    kernel's time goes to the side its own best evidence names: the roofline bound of the
    FLOP-counted op that launched it, else its kernel class; the call is firm only when
    that evidence covers at least ``CLASS_COVER_PCT`` of kernel time.
    """
    meas = s.measured
    if meas is not None and meas.dram_bw_util is not None:
        compute_act = max(meas.tensor_util or 0.0, meas.sm_util or 0.0)
        if meas.dram_bw_util >= MEASURED_BOUND_PCT:
            return Decision(
                "memory_bound",
                f"measured DRAM bandwidth utilization {meas.dram_bw_util:.0f}% "
                f"(NVML GPM, {meas.count} samples)",
                "high",
                "hardware_counters",
            )
        if compute_act >= MEASURED_BOUND_PCT:
            return Decision(
                "compute_bound",
                f"measured SM/tensor activity {compute_act:.0f}% with DRAM bandwidth "
                f"{meas.dram_bw_util:.0f}% (NVML GPM, {meas.count} samples)",
                "high",
                "hardware_counters",
            )
    e = s.bound_evidence
    comp, mem, roof_comp, roof_mem = e["compute"], e["memory"], e["roof_compute"], e["roof_memory"]
    other = max(0.0, 100.0 - comp - mem)
    cover = comp + mem
    if comp + mem <= 0:
        aside = _possible_aside(s)
        return Decision(
            "compute_bound",
            (f"{aside}; " if aside else "")
            + f"{other:.0f}% of {'the other ' if aside else ''}kernel time is in kernels "
            f"nbprof cannot classify (custom or "
            f"unfamiliar names), and no hardware counter or FLOP count says whether they wait "
            f"on arithmetic or on memory; it is called compute-bound only because the GPU's own "
            f"kernels, not the host, kept it busy",
            "low",
            "none",
        )
    firm = round(cover, 9) >= CLASS_COVER_PCT
    aside = _possible_aside(s)
    if firm:
        lead = f"{aside}; " if aside else ""
    else:
        lead = (
            f"{other:.0f}% of {'the other ' if aside else ''}kernel time is in kernels nbprof "
            f"cannot classify (custom or unfamiliar names)"
            + (f" ({aside})" if aside else "")
            + ", so this call rests on the rest: "
        )
    basis: VerdictBasis = "roofline" if roof_comp + roof_mem >= max(comp, mem) else "kernel_classes"
    tc = s.class_pct.get("tensor_core", 0.0)
    parts = []
    if roof_comp + roof_mem > 0:
        side = "above" if roof_comp >= roof_mem else "below"
        parts.append(
            f"FLOP-counted ops {side} the roofline ridge point take "
            f"{max(roof_comp, roof_mem):.0f}% of kernel time{_roof_rate(s, side)}"
        )
    class_comp, class_mem = comp - roof_comp, mem - roof_mem
    if class_comp + class_mem > 0:
        parts.append(
            f"GEMM/convolution kernels take {class_comp:.0f}% and elementwise, reduction "
            f"and copy kernels {class_mem:.0f}% by name"
        )
    if tc > 0:
        parts.append(f"Tensor Core kernels {tc:.0f}% of kernel time")
    kind: Bottleneck = "compute_bound" if comp >= mem else "memory_bound"
    why = (
        f"{lead}{kind.replace('_', '-')} kernels take "
        f"{max(comp, mem):.0f}% of kernel time against {min(comp, mem):.0f}% ("
        + "; ".join(parts)
        + ")"
    )
    doubt = _contradiction(s, kind)
    if doubt:
        return Decision(kind, f"{why}; but {doubt}", "low", basis)
    return Decision(kind, why, "high" if firm else "low", basis)


def _possible_aside(s: Signals) -> str:
    """ "31% of kernel time is possibly communication (by its behaviour) and left out" when
    kernels behave as communication kernels do, else ""."""
    maybe = s.metrics.possible_comm_pct or 0.0
    if maybe < 0.5:
        return ""
    return f"{maybe:.0f}% of kernel time is possibly communication (by its behaviour) and left out"


def _roof_rate(s: Signals, side: str) -> str:
    """ ", at 623 TFLOP/s (63% of the 989.5 TFLOP/s peak)" for the roofline's side, when
    its peak is known: how close those ops came to the limit that names them."""
    roof, m = s.roofline, s.metrics
    rows = roof[roof["bound"] == ("compute" if side == "above" else "memory")]
    us = float(rows["total_us"].sum()) if not rows.empty else 0.0
    if us <= 0:
        return ""
    if side == "above" and m.peak_tflops:
        rate = float(rows["flops"].sum()) / us / 1e6
        return f", at {rate:.0f} TFLOP/s ({rate / m.peak_tflops * 100:.0f}% of the peak)"
    if side == "below" and m.peak_gbps:
        rate = float(rows["bytes"].sum()) / us / 1e3
        return f", at {rate:.0f} GB/s ({rate / m.peak_gbps * 100:.0f}% of the peak)"
    return ""


def _contradiction(s: Signals, kind: Bottleneck) -> str:
    """Why another basis disagrees with ``kind`` (measured counters well below the limit
    the call names, or FLOP-counted ops far from the peak on their side), or ""."""
    meas = s.measured
    if meas is not None:
        if kind == "memory_bound" and meas.dram_bw_util is not None:
            return (
                f"measured DRAM bandwidth is only {meas.dram_bw_util:.0f}% (NVML GPM): the "
                f"memory-bound kernels do not saturate memory"
            )
        act = max(meas.tensor_util or 0.0, meas.sm_util or 0.0)
        if kind == "compute_bound" and (meas.sm_util is not None or meas.tensor_util is not None):
            return f"measured SM/tensor activity is only {act:.0f}% (NVML GPM)"
    roof, m = s.roofline, s.metrics
    if roof.empty:
        return ""
    side = "memory" if kind == "memory_bound" else "compute"
    rows = roof[roof["bound"] == side]
    us = float(rows["total_us"].sum())
    if us <= 0 or s.bound_evidence[f"roof_{side}"] < 0.5 * max(
        s.bound_evidence["compute"], s.bound_evidence["memory"]
    ):
        return ""  # the roofline's ops are not what the call rests on
    if side == "memory" and m.peak_gbps:
        rate = float(rows["bytes"].sum()) / us / 1e3
        if rate < LOW_RATE_PCT / 100 * m.peak_gbps:
            return (
                f"the memory-bound FLOP-counted ops move only {rate:.0f} GB/s, "
                f"{rate / m.peak_gbps * 100:.0f}% of the {m.peak_gbps:.0f} GB/s peak: "
                f"latency or launches, not bandwidth, hold them back"
            )
    if side == "compute" and m.peak_tflops:
        rate = float(rows["flops"].sum()) / us / 1e6
        if rate < LOW_RATE_PCT / 100 * m.peak_tflops:
            return (
                f"the compute-bound FLOP-counted ops reach only {rate:.1f} TFLOP/s, "
                f"{rate / m.peak_tflops * 100:.0f}% of the {m.peak_tflops:g} TFLOP/s peak"
            )
    return ""


def decide(trace: Trace, signals: list[Signals]) -> Verdict:
    if not signals:
        why = trace.notes[0] if trace.notes else "no kernel, memcpy or memset events"
        return Verdict("cpu_only", f"No GPU activity was recorded: {why}.", basis="no_gpu_events")
    s = primary(signals)
    m = s.metrics
    busy = m.kernel_busy_pct or 0.0
    # Summaries open with the device, not the label: views print the label beside them.
    where = (m.name or f"device {m.device}") + (f" (rank {m.rank})" if len(signals) > 1 else "")
    span = f"{_us(m.gpu_span_us)} GPU span"
    little = too_little_work(s)
    if little is not None:
        basis: VerdictBasis = "graph_capture" if "stream capture" in little else "little_gpu_work"
        return Verdict(
            "insufficient_gpu_work",
            f"{where}: {little} (kernels busy {busy:.1f}% of the {span}).",
            basis=basis,
        )
    stalls = stall_shares(s)
    (key, share), (key2, share2) = list(stalls.items())[:2]
    if share >= STALL_PCT:
        kind, basis, why = _stall_why(s, key, share)
        # Behaviour alone is weak evidence: a verdict resting on it is never firm.
        confidence: Confidence = "low" if key == "possible_comm" else "high"
        close = ""
        if share2 >= CLOSE_CALL * share:
            kind2, _, why2 = _stall_why(s, key2, share2)
            confidence = "low"
            close = (
                f" A close call: {why2} — nearly as much; "
                f"{kind2.replace('_', '-')} fits almost as well."
            )
        return Verdict(
            kind,
            f"{where}: {why}; kernels busy {_pct(busy)} of the {span}.{close}",
            confidence,
            basis,
        )
    idle = 100.0 - sum(m.span_breakdown.get(k, 0.0) for k in RAN)
    if idle >= IDLE_PCT:
        unknown = m.span_breakdown.get("unknown", 0.0)
        if unknown >= STALL_PCT:
            return Verdict(
                "idle",
                f"{where}: the GPU was idle {idle:.0f}% of the {span}; for {unknown:.0f}% of "
                f"it the work that ended the gap has no launch record (the trace links no "
                f"kernel to its launch call), so whether the host was late cannot be told; "
                f"kernels busy {_pct(busy)}.",
                "low",
                "kernel_busy",
            )
        top = ", ".join(f"{k.replace('_', ' ')} {v:.0f}%" for k, v in list(stalls.items())[:3])
        return Verdict(
            "idle",
            f"{where}: the GPU was idle {idle:.0f}% of the {span} and no one cause covers "
            f"{STALL_PCT:.0f}% of it ({top}); kernels busy {_pct(busy)}.",
            "low",
            "kernel_busy",
        )
    d = compute_vs_memory(s)
    return Verdict(
        d.kind,
        f"{where}: {d.why}, with kernels busy {busy:.0f}% of the span.",
        d.confidence,
        d.basis,
    )
