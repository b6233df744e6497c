"""The verdict: one bottleneck from the schema's list, and the sentence that says why.

Rules run in order on the busiest device (most kernel time); the first that holds wins.
Thresholds are stated here so the sentence can quote the numbers that decided:

1. no GPU events -> ``cpu_only``;
2. NCCL/RCCL kernels >= 50% of kernel time -> ``communication_bound``;
3. the GPU sat idle while DataLoader ``__next__`` ran for >= 15% of the span (or the
   DataLoader took >= 30% of step time with kernels busy < 80%) -> ``input_bound``;
4. idle gaps that open as a synchronize / ``.item()`` returns cover >= 20% of the span with
   kernels busy < 80% -> ``sync_bound``;
5. memcpy busy >= 30% of the span and more than half the kernel busy time ->
   ``transfer_bound``;
6. kernels busy < 10% -> ``idle``;
7. >= 50% of kernels shorter than 10 µs with kernels busy < 70% -> ``launch_bound``;
8. kernels busy < 30% -> ``idle``;
9. otherwise compute vs memory: sampled hardware counters when present; the roofline's
   time-weighted call when FLOP-counted ops cover >= 30% of kernel time; else the kernel
   classes' time (Tensor Core + GEMM/conv vs elementwise/reduction/copy kernels).

Kernel classes decide with ``confidence="high"`` only when classified kernels (every class
but ``other``) cover >= 70% of kernel time: below that, the unclassified kernels could
outweigh either side, so the verdict still names the better-supported bottleneck (a
partial roofline first, then the classified kernels) but with ``confidence="low"``, and
the summary says what share of kernel time nbprof could not classify. 70% keeps a trace
whose odd kernels are a minority (a custom op or two beside PyTorch's own) firmly decided,
while a trace made mostly of unfamiliar kernels is never called memory- or compute-bound
as if it had been measured.
"""

from __future__ import annotations

import logging
from typing import NamedTuple

from nbprof.analysis.device import Signals
from nbprof.analysis.model import Bottleneck, Confidence, Verdict
from nbprof.trace.model import Trace

logger = logging.getLogger(__name__)


class Decision(NamedTuple):
    """What ``compute_vs_memory`` concluded, before the device and busy share are added."""

    kind: Bottleneck
    why: str
    confidence: Confidence
    basis: str


COMM_PCT = 50.0
INPUT_GAP_PCT = 15.0
INPUT_STEP_PCT = 30.0
SYNC_GAP_PCT = 20.0
TRANSFER_PCT = 30.0
IDLE_PCT = 10.0
LAUNCH_SHORT_PCT = 50.0
LAUNCH_BUSY_PCT = 70.0
LOW_BUSY_PCT = 30.0
ROOFLINE_COVER_PCT = 30.0
CLASS_COVER_PCT = 70.0

_KNOWN = ("tensor_core", "compute", "memory", "communication")


def kernel_busy_us(s: Signals) -> float:
    """Time (µs) at least one kernel ran on the device: what "busiest device" means."""
    return s.metrics.gpu_span_us * (s.metrics.kernel_busy_pct or 0.0) / 100.0


def primary(signals: list[Signals]) -> Signals:
    """The device that ran the most kernel time (first on ties)."""
    return max(signals, key=kernel_busy_us)


def gap_share(s: Signals, *prefixes: str) -> float:
    """Share of the span (%) of whole-device idle gaps whose CPU work starts with a prefix."""
    span = s.metrics.gpu_span_us
    if span <= 0:
        return 0.0
    us = sum(v for k, v in s.gap_work_us.items() if k.startswith(prefixes))
    return us / span * 100.0


def other_pct(s: Signals) -> float:
    """Share of kernel time (%) in kernels no class rule recognised (0 without kernels)."""
    c = s.class_pct
    if not c:
        return 0.0
    if "other" in c:
        return c["other"]
    # Tolerate a class_pct that lists only the recognised classes: the rest is "other".
    return max(0.0, 100.0 - sum(c.get(k, 0.0) for k in _KNOWN))


def compute_vs_memory(s: Signals) -> Decision:
    """Compute- or memory-bound, the reason with numbers, the confidence and the basis.

    Hardware counters decide when they were sampled (DRAM bandwidth >= 50% is memory-bound,
    SM or tensor activity >= 50% with less DRAM traffic is compute-bound); then the roofline;
    then the kernel classes, firmly only when they cover >= ``CLASS_COVER_PCT`` of kernel time.
    """
    meas = s.measured
    if meas is not None and meas.dram_bw_util is not None:
        compute_act = max(meas.tensor_util or 0.0, meas.sm_util or 0.0)
        if meas.dram_bw_util >= 50.0:
            return Decision(
                "memory_bound",
                f"measured DRAM bandwidth utilization {meas.dram_bw_util:.0f}% "
                f"(NVML GPM, {meas.count} samples)",
                "high",
                "hardware_counters",
            )
        if compute_act >= 50.0:
            return Decision(
                "compute_bound",
                f"measured SM/tensor activity {compute_act:.0f}% with DRAM bandwidth "
                f"{meas.dram_bw_util:.0f}% (NVML GPM, {meas.count} samples)",
                "high",
                "hardware_counters",
            )
    roof = s.roofline
    ktime = kernel_busy_us(s)
    roof_comp = roof_mem = cover = 0.0
    if not roof.empty and ktime > 0:
        known = roof[roof["bound"] != "unknown"]
        cover = float(known["total_us"].sum()) / ktime * 100.0
        roof_comp = float(known.loc[known["bound"] == "compute", "total_us"].sum())
        roof_mem = float(known.loc[known["bound"] == "memory", "total_us"].sum())
        if cover >= ROOFLINE_COVER_PCT and roof_comp + roof_mem > 0:
            return _roofline_call(roof_comp, roof_mem, "high", "")
    c = s.class_pct
    tc = c.get("tensor_core", 0.0)
    comp = tc + c.get("compute", 0.0)
    mem = c.get("memory", 0.0)
    other = other_pct(s)
    # Rounded so a share that is 70% on paper is not 69.99999999999999% in floats.
    if round(100.0 - other, 9) >= CLASS_COVER_PCT:
        return _class_call(comp, mem, tc, "high", "")
    unknown = (
        f"{other:.0f}% of kernel time is in kernels nbprof cannot classify (custom or "
        f"unfamiliar names), so this call rests on the rest"
    )
    if roof_comp + roof_mem > 0:
        return _roofline_call(roof_comp, roof_mem, "low", f"{unknown}: ")
    if comp + mem > 0:
        return _class_call(comp, mem, tc, "low", f"{unknown}: ")
    return Decision(
        "compute_bound",
        f"{other:.0f}% of kernel time is in kernels nbprof cannot classify (custom or "
        f"unfamiliar names), and no hardware counter or FLOP count says whether they wait "
        f"on arithmetic or on memory; it is called compute-bound only because the GPU's own "
        f"kernels, not the host, kept it busy",
        "low",
        "none",
    )


def _roofline_call(comp: float, mem: float, confidence: Confidence, lead: str) -> Decision:
    tot = comp + mem
    if comp >= mem:
        return Decision(
            "compute_bound",
            f"{lead}ops above the roofline ridge point take {comp / tot * 100:.0f}% of the "
            f"FLOP-counted GPU time",
            confidence,
            "roofline",
        )
    return Decision(
        "memory_bound",
        f"{lead}ops below the roofline ridge point take {mem / tot * 100:.0f}% of the "
        f"FLOP-counted GPU time",
        confidence,
        "roofline",
    )


def _class_call(comp: float, mem: float, tc: float, confidence: Confidence, lead: str) -> Decision:
    if comp >= mem:
        return Decision(
            "compute_bound",
            f"{lead}GEMM/convolution kernels take {comp:.0f}% of kernel time "
            f"({tc:.0f}% on Tensor Cores) against {mem:.0f}% in elementwise, reduction and "
            f"copy kernels",
            confidence,
            "kernel_classes",
        )
    return Decision(
        "memory_bound",
        f"{lead}elementwise, reduction and copy kernels take {mem:.0f}% of kernel time "
        f"against {comp:.0f}% in GEMM/convolution kernels",
        confidence,
        "kernel_classes",
    )


def decide(trace: Trace, signals: list[Signals]) -> Verdict:
    if not signals:
        why = trace.notes[0] if trace.notes else "no kernel, memcpy or memset events"
        return Verdict("cpu_only", f"No GPU activity was recorded: {why}.", basis="no_gpu_events")
    s = primary(signals)
    m = s.metrics
    busy = m.kernel_busy_pct or 0.0
    # Summaries open with the device, not the label: views print the label beside them.
    where = (m.name or f"device {m.device}") + (f" (rank {m.rank})" if len(signals) > 1 else "")
    comm = s.class_pct.get("communication", 0.0)
    if comm >= COMM_PCT:
        return Verdict(
            "communication_bound",
            f"{where}: NCCL/RCCL kernels take {comm:.0f}% of kernel time "
            f"(kernels busy {busy:.0f}% of the {m.gpu_span_us / 1e3:.1f} ms GPU span).",
            basis="communication_kernels",
        )
    dl_gap = gap_share(s, "DataLoader")
    dl = m.dataloader_pct
    if dl_gap >= INPUT_GAP_PCT or (dl is not None and dl >= INPUT_STEP_PCT and busy < 80.0):
        return Verdict(
            "input_bound",
            f"{where}: the GPU sat idle while the DataLoader fetched batches for "
            f"{dl_gap:.0f}% of the span; the DataLoader took "
            f"{(dl or 0.0):.0f}% of step time and kernels ran only {busy:.0f}% of it.",
            basis="dataloader_gaps",
        )
    sync_gap = gap_share(s, "after ", ".item()")
    if sync_gap >= SYNC_GAP_PCT and busy < 80.0:
        return Verdict(
            "sync_bound",
            f"{where}: {sync_gap:.0f}% of the span is GPU idle time right after "
            f"the host synchronized (synchronize calls / .item()); kernels busy {busy:.0f}%.",
            basis="sync_gaps",
        )
    if s.memcpy_time_pct >= TRANSFER_PCT and s.memcpy_time_pct > 0.5 * busy:
        return Verdict(
            "transfer_bound",
            f"{where}: memcpys occupy {s.memcpy_time_pct:.0f}% of the span "
            f"against {busy:.0f}% for kernels ({m.pageable_memcpy_count} pageable copies).",
            basis="memcpy_time",
        )
    short = m.short_kernel_pct or 0.0
    if busy < IDLE_PCT:
        return Verdict(
            "idle",
            f"{where}: kernels ran only {busy:.1f}% of the {m.gpu_span_us / 1e3:.1f} ms GPU span.",
            basis="kernel_busy",
        )
    if short >= LAUNCH_SHORT_PCT and busy < LAUNCH_BUSY_PCT:
        pace = ""
        if s.median_kernel_us is not None and s.launch_call_us is not None:
            pace = (
                f", the median kernel runs {s.median_kernel_us:.1f} µs while each launch "
                f"call takes {s.launch_call_us:.1f} µs on the host,"
            )
        return Verdict(
            "launch_bound",
            f"{where}: {short:.0f}% of {m.kernel_count} kernels run under 10 µs{pace} and "
            f"kernels are busy only {busy:.0f}% of the span.",
            basis="short_kernels",
        )
    if busy < LOW_BUSY_PCT:
        return Verdict(
            "idle",
            f"{where}: kernels ran only {busy:.0f}% of the {m.gpu_span_us / 1e3:.1f} ms GPU span.",
            basis="kernel_busy",
        )
    d = compute_vs_memory(s)
    return Verdict(
        d.kind,
        f"{where}: {d.why}, with kernels busy {busy:.0f}% of the span.",
        d.confidence,
        d.basis,
    )
