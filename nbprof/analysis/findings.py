"""Findings: what is wrong, the numbers that show it, why it matters, and the fix.

Each rule is a small function of one device's :class:`Signals` returning a Finding or
None; ``build`` runs them all on every device, tells each finding which device it is
about, and orders the results by severity. Every figure a finding quotes is one its own
rule tested; thresholds are named in :mod:`nbprof.analysis.verdict`, beside the verdict's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from nbprof.analysis.device import Signals
from nbprof.analysis.model import Finding, Severity, compute_units
from nbprof.analysis.stalls import RAN
from nbprof.analysis.tensorcores import cc_value
from nbprof.analysis.verdict import (
    CLASS_COVER_PCT,
    DTOD_BUSY_PCT,
    FINDING_STALL_PCT,
    IDLE_HIGH_PCT,
    IDLE_PCT,
    INPUT_STEP_HIGH_PCT,
    INPUT_STEP_PCT,
    MEMORY_BUSY_PCT,
    MEMORY_KERNEL_PCT,
    PAGEABLE_TIME_PCT,
    PRE_GPU_STEP_PCT,
    SETUP_OF_WINDOW_PCT,
    SM_BUSY_PCT,
    SM_FILL,
    SPAN_OF_WINDOW_PCT,
    STALL_PCT,
    TC_GEMM_HIGH_PCT,
    TC_GEMM_PCT,
    TC_LOW_PCT,
    TC_SHARE_OF_GEMM,
    TF32_CC,
    blocker_clause,
    input_work,
    is_launch_bound,
    kernel_busy_us,
    other_pct,
    queue_depth,
    setup_after_first_step,
    stall_shares,
    too_little_work,
)
from nbprof.trace.model import Trace
from nbprof.units import duration as _ms
from nbprof.units import size

logger = logging.getLogger(__name__)

_ORDER = {"high": 0, "medium": 1, "low": 2, "info": 3}


def _r(x: float | None, nd: int = 1) -> float | None:
    return None if x is None else round(float(x), nd)


def _size(n: int | None) -> str:
    return "unknown size" if n is None else size(n)


def _severity(share: float) -> Severity:
    return "high" if share >= STALL_PCT else "medium"


def input_pipeline(s: Signals) -> Finding | None:
    m = s.metrics
    dl = m.dataloader_pct
    gap = m.span_breakdown.get("input", 0.0)
    if (dl is None or dl < INPUT_STEP_PCT) and gap < FINDING_STALL_PCT:
        return None
    sev: Severity = "high" if (dl or 0) >= INPUT_STEP_HIGH_PCT or gap >= STALL_PCT else "medium"
    work = input_work(s)
    if work.startswith("the DataLoader"):
        title = "The GPU waits for the DataLoader"
        detail = (
            f"DataLoader __next__ took {(dl or 0.0):.1f}% of step time, and the whole GPU sat "
            f"idle with nothing queued while it ran for {gap:.1f}% of the "
            f"{_ms(m.gpu_span_us)} span. Batches are prepared on the training "
            f"process's own thread between steps."
        )
    else:
        title = "The GPU waits for CPU preprocessing"
        detail = (
            f"The whole GPU sat idle with nothing queued for {gap:.1f}% of the "
            f"{_ms(m.gpu_span_us)} span while {work}, on the training process's own "
            f"thread between steps."
        )
    return Finding(
        id="input_pipeline",
        severity=sev,
        title=title,
        detail=detail,
        evidence={"dataloader_pct": _r(dl), "idle_in_dataloader_pct": _r(gap)},
        fix=(
            "Load and transform batches in worker processes and pin them, so the next batch "
            "is ready while the GPU runs the current one."
        ),
        code=(
            "loader = torch.utils.data.DataLoader(dataset, batch_size=..., num_workers=8,\n"
            "                                     pin_memory=True, persistent_workers=True,\n"
            "                                     prefetch_factor=4)"
        ),
    )


def sync_stalls(s: Signals) -> Finding | None:
    m = s.metrics
    a = s.accounting
    share = m.span_breakdown.get("sync", 0.0)
    if share < FINDING_STALL_PCT or not a.blockers:
        return None
    top = sorted(a.blockers.items(), key=lambda kv: -kv[1])[:3]
    parts = [
        f"{blocker_clause(s, name)}; the GPU idle, nothing queued, {a.pct(us):.1f}% of the "
        f"span meanwhile"
        for name, us in top
    ]
    copies = any("(" in n for n, _ in top)
    fix = (
        "Keep values on the GPU inside the loop: accumulate losses/metrics as tensors and "
        "read them (.item(), .cpu(), print) once per N steps; drop explicit synchronize "
        "calls."
    )
    if copies:
        fix += (
            " A device-to-host copy the host needs (sizes, splits) blocks until every kernel "
            "queued before it on its stream has run: issue it earlier, copy into pinned "
            "memory with non_blocking=True and wait on an event only where the value is used."
        )
    return Finding(
        id="sync_stalls",
        severity=_severity(share),
        title="The host blocks on the GPU, and the GPU idles meanwhile",
        detail=(
            f"{share:.1f}% of the span is whole-GPU idle time, nothing queued, while the host "
            f"was blocked in a blocking call: " + "; ".join(parts) + "."
        ),
        evidence={
            "idle_charged_to_sync_pct": _r(share),
            "blocking_calls": {n: _r(a.pct(us)) for n, us in top},
            "sync_pct": _r(m.sync_pct),
        },
        fix=fix,
        code=(
            "running = torch.zeros((), device='cuda')\n"
            "for step, (x, y) in enumerate(loader):\n"
            "    loss = train_step(x, y)\n"
            "    running += loss.detach()          # no .item() here\n"
            "    if step % 100 == 0:\n"
            "        print(running.item() / 100); running.zero_()"
        ),
    )


def host_overhead(s: Signals) -> Finding | None:
    m = s.metrics
    share = m.span_breakdown.get("host", 0.0)
    if share < FINDING_STALL_PCT or m.kernel_count < 2:
        return None
    launch = is_launch_bound(s)
    q = queue_depth(s)
    pace = ""
    if m.host_us_per_kernel is not None and m.launch_us_per_kernel is not None:
        pace = (
            f" The host spends {m.host_us_per_kernel:.1f} µs per kernel (median between "
            f"launches), {m.launch_us_per_kernel:.1f} µs of it in the launch call; the median "
            f"kernel runs {(s.median_kernel_us or 0):.1f} µs."
        )
    if q is not None:
        pace += f" Kernels start {m.launch_to_start_us:.1f} µs after their launch call: " + (
            "the queue is typically empty." if q < 1 else f"about {q:.0f} kernels queued."
        )
    evidence = {
        "idle_waiting_on_host_pct": _r(share),
        "host_us_per_kernel": _r(m.host_us_per_kernel),
        "launch_us_per_kernel": _r(m.launch_us_per_kernel),
        "launch_to_start_us": _r(m.launch_to_start_us),
        "median_kernel_us": _r(s.median_kernel_us),
    }
    if launch:
        return Finding(
            id="launch_overhead",
            severity=_severity(share),
            title="Many tiny kernels: the launch calls are the limit",
            detail=(
                f"For {share:.1f}% of the span the GPU had nothing queued while the host "
                f"issued launches.{pace} Each kernel finishes before the next launch returns."
            ),
            evidence={**evidence, "short_kernel_pct": _r(m.short_kernel_pct)},
            fix=(
                "Launch fewer, larger kernels: capture the step in a CUDA graph or let "
                "torch.compile fuse the small ops; larger batches also amortize launches."
            ),
            code='model = torch.compile(model, mode="reduce-overhead")  # fuses, CUDA graphs',
        )
    return Finding(
        id="host_overhead",
        severity=_severity(share),
        title="The GPU waits for Python between kernels",
        detail=(
            f"For {share:.1f}% of the span the GPU had nothing queued while the host ran "
            f"Python and framework code between kernels (eager-mode overhead), not the launch "
            f"calls themselves.{pace}"
        ),
        evidence=evidence,
        fix=(
            "Cut the host's per-kernel work: torch.compile (fewer, fused kernels and no "
            "per-op Python), CUDA graphs for the steady-state step, larger batches so each "
            "kernel does more; move per-step Python (logging, metrics) out of the loop."
        ),
        code='model = torch.compile(model, mode="reduce-overhead")  # fuses, CUDA graphs',
    )


def tensor_cores(s: Signals) -> Finding | None:
    m = s.metrics
    if not s.tc_capable or m.tensor_core_pct is None:
        return None
    gemm = s.class_pct.get("compute", 0.0) + s.class_pct.get("tensor_core", 0.0)
    tc = m.tensor_core_pct
    if gemm < TC_GEMM_PCT or tc >= TC_SHARE_OF_GEMM * gemm:
        return None
    ampere = (cc_value(m.compute_capability) or 0.0) >= TF32_CC
    fix = (
        "Run matrix math on Tensor Cores: allow TF32 for FP32 matmuls and convolutions, and "
        "use bfloat16 autocast for the forward pass."
        if ampere
        else "Run matrix math on Tensor Cores with FP16 autocast (this GPU has no TF32/BF16)."
    )
    code = (
        "torch.set_float32_matmul_precision('high')  # TF32 matmuls\n"
        "torch.backends.cudnn.allow_tf32 = True\n"
        "with torch.autocast('cuda', dtype=torch.bfloat16):\n"
        "    loss = model(x).loss(y)"
        if ampere
        else 'scaler = torch.amp.GradScaler("cuda")\n'
        "with torch.autocast('cuda', dtype=torch.float16):\n"
        "    loss = model(x).loss(y)\n"
        "scaler.scale(loss).backward(); scaler.step(opt); scaler.update()"
    )
    return Finding(
        id="low_tensor_core_share",
        severity="high" if tc < TC_LOW_PCT and gemm >= TC_GEMM_HIGH_PCT else "medium",
        title="GEMMs and convolutions run without Tensor Cores",
        detail=(
            f"GEMM/convolution kernels take {gemm:.0f}% of kernel time but only {tc:.1f}% of "
            f"kernel time ran on Tensor Cores ({m.tensor_core_basis}: {s.tc_how}); "
            f"{s.simt_gemm_pct:.0f}% is in FP32/SIMT GEMM kernels."
        ),
        evidence={
            "tensor_core_pct": _r(tc),
            "gemm_conv_pct": _r(gemm),
            "simt_gemm_pct": _r(s.simt_gemm_pct),
            "tensor_core_basis": m.tensor_core_basis,
        },
        fix=fix,
        code=code,
    )


def _copy(s: Signals, kind: str) -> dict[str, object] | None:
    return next((c for c in s.metrics.copies if c["kind"] == kind), None)


def pageable_copies(s: Signals) -> Finding | None:
    m = s.metrics
    if m.pageable_memcpy_count == 0:
        return None
    rows = [c for c in m.copies if str(c["kind"]).endswith("pageable")]
    us = sum(float(c["us"]) for c in rows)
    share = us / m.gpu_span_us * 100.0 if m.gpu_span_us > 0 else 0.0
    rates = "; ".join(
        f"{c['kind']}: {c['count']} copies, {_size(c['bytes'])}"
        + (f" at {float(c['gbps']):.1f} GB/s" if c["gbps"] is not None else "")
        for c in rows
    )
    pinned = [c for c in m.copies if str(c["kind"]).endswith("pinned") and c["gbps"] is not None]
    vs = (
        f" (pinned copies here ran at {max(float(c['gbps']) for c in pinned):.1f} GB/s)"
        if pinned
        else ""
    )
    return Finding(
        id="pageable_memcpy",
        severity="medium" if share >= PAGEABLE_TIME_PCT else "low",
        title="Copies from pageable host memory",
        detail=(
            f"{m.pageable_memcpy_count} of {m.memcpy_count} memcpys use pageable host memory "
            f"({rates}){vs}; pageable copies are staged through a pinned buffer, block the "
            f"host and cannot overlap with kernels. They occupy {share:.1f}% of the span."
        ),
        evidence={
            "pageable_memcpy_count": m.pageable_memcpy_count,
            "pageable_bytes": s.pageable_bytes,
            "pageable_copy_time_pct": _r(share),
            "pageable_gbps": {str(c["kind"]): _r(c["gbps"], 2) for c in rows},
        },
        fix="Pin host tensors (pin_memory=True in the DataLoader) and copy with non_blocking=True.",
        code="x = x.pin_memory().to('cuda', non_blocking=True)",
    )


def device_copies(s: Signals) -> Finding | None:
    c = _copy(s, "DtoD")
    busy = s.gpu_busy_us
    if c is None or busy <= 0:
        return None
    share = float(c["us"]) / busy * 100.0  # type: ignore[arg-type]
    if share < DTOD_BUSY_PCT:
        return None
    rate = f" at {float(c['gbps']):.0f} GB/s" if c["gbps"] is not None else ""  # type: ignore[arg-type]
    return Finding(
        id="device_to_device_copies",
        severity="medium" if share >= 2 * DTOD_BUSY_PCT else "low",
        title="Device-to-device copies take a noticeable share of GPU time",
        detail=(
            f"{c['count']} device-to-device copies moved {_size(c['bytes'])}{rate} "  # type: ignore[arg-type]
            f"in {_ms(float(c['us']))}, {share:.1f}% of the time the GPU was busy: "  # type: ignore[arg-type]
            f"memory traffic that computes nothing (.contiguous(), .clone(), torch.cat, "
            f"DDP copying gradients into its buckets)."
        ),
        evidence={
            "dtod_copy_count": c["count"],
            "dtod_bytes": c["bytes"],
            "dtod_gbps": _r(c["gbps"]),  # type: ignore[arg-type]
            "dtod_share_of_busy_pct": _r(share),
        },
        fix=(
            "Avoid copies that only change layout (keep tensors contiguous, preallocate "
            "instead of cat), and let DDP use the gradients as its buckets."
        ),
        code=(
            "model = torch.nn.parallel.DistributedDataParallel(model,\n"
            "                                                  gradient_as_bucket_view=True)"
        ),
    )


def communication(s: Signals) -> Finding | None:
    m = s.metrics
    exposed = m.exposed_comm_pct or 0.0
    if exposed < FINDING_STALL_PCT:
        return None
    return Finding(
        id="communication",
        severity=_severity(exposed),
        title="Collective communication is exposed",
        detail=(
            f"For {exposed:.1f}% of the {_ms(m.gpu_span_us)} span a collective ran "
            f"with no compute kernel beside it; collectives take {m.comm_pct or 0:.0f}% of "
            f"kernel time and only {m.comm_overlap_pct or 0:.0f}% of their time overlapped "
            f"with compute. A collective's time includes waiting for the slowest rank to "
            f"arrive, so exposed communication is also how skew between ranks shows."
        ),
        evidence={
            "exposed_comm_pct": _r(exposed),
            "comm_pct": _r(m.comm_pct),
            "comm_overlap_pct": _r(m.comm_overlap_pct),
        },
        fix=(
            "Overlap communication with compute (DDP gradient buckets, FSDP prefetch, "
            "all-to-all on a side stream), communicate less often (gradient accumulation) or "
            "in lower precision, and balance the work across ranks."
        ),
        code=(
            "model = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=50,\n"
            "                                                  gradient_as_bucket_view=True)"
        ),
    )


def memory_bound_kernels(s: Signals) -> Finding | None:
    e = s.bound_evidence
    mem = e["memory"]
    compute_busy = s.metrics.span_breakdown.get("compute", 0.0)
    if mem < MEMORY_KERNEL_PCT or compute_busy < MEMORY_BUSY_PCT:
        return None
    return Finding(
        id="memory_bound_kernels",
        severity="medium",
        title="Most GPU time is elementwise and reduction kernels",
        detail=(
            f"Memory-bound kernels (elementwise, normalization, reduction and copy kernels by "
            f"name, or launched by ops below the roofline ridge) take {mem:.0f}% of kernel "
            f"time; they are limited by memory bandwidth, not by arithmetic, so faster math "
            f"will not help them."
        ),
        evidence={"memory_kernel_pct": _r(mem), "compute_busy_pct": _r(compute_busy)},
        fix="Fuse chains of elementwise ops so each tensor is read and written once.",
        code="model = torch.compile(model)  # fuses elementwise chains into few kernels",
    )


def unclassified_kernels(s: Signals) -> Finding | None:
    """Say when kernel classes cannot carry the compute-vs-memory call (see verdict.py)."""
    other = other_pct(s)
    if round(100.0 - other, 9) >= CLASS_COVER_PCT:
        return None
    return Finding(
        id="unclassified_kernels",
        severity="info",
        title="Most kernel time is in kernels nbprof cannot classify",
        detail=(
            f"{other:.0f}% of kernel time is in kernels whose names match no GEMM, "
            f"convolution, collective or memory-bound family nbprof knows (custom CUDA "
            f"extensions, unfamiliar libraries), so their names say nothing about whether "
            f"they wait on arithmetic or on memory; the timeline shows them as 'other'."
        ),
        evidence={"other_kernel_pct": _r(other), "class_cover_pct": CLASS_COVER_PCT},
        fix=(
            "Record FLOP counts and shapes so the roofline can place the ops that launch "
            "them, or sample hardware counters (NVML GPM) during the run."
        ),
        code="torch.profiler.profile(..., record_shapes=True, with_flops=True)",
    )


def low_sm_efficiency(s: Signals) -> Finding | None:
    m = s.metrics
    ce = s.compute_sm_efficiency
    if ce is None:
        return None
    eff, busy = ce
    if busy < SM_BUSY_PCT or eff >= SM_FILL * busy:
        return None
    units = compute_units(m.vendor)
    return Finding(
        id="low_sm_efficiency",
        severity="medium",
        title=f"Kernels run, but on a fraction of the {units}",
        detail=(
            f"Compute kernels (collectives left out: they never fill the {units} by design) "
            f"are busy {busy:.0f}% of the span, but weighting each by the share of the "
            f"{m.sm_count} {units} its grid can fill gives {eff:.0f}%: many kernels launch "
            f"fewer blocks than the GPU has {units}."
        ),
        evidence={"compute_busy_pct": _r(busy), "compute_sm_efficiency_pct": _r(eff)},
        fix="Give each kernel more parallel work: larger batches, fused ops, fewer tiny tensors.",
    )


def one_time_setup(s: Signals) -> Finding | None:
    m = s.metrics
    share = m.span_breakdown.get("setup", 0.0)
    _, pre_setup = s.pre_gpu
    window = m.window_us or 0.0
    if share < FINDING_STALL_PCT and not (
        window > 0 and pre_setup >= SETUP_OF_WINDOW_PCT / 100 * window
    ):
        return None
    setup = s.view.setup
    by = setup.groupby("name")["dur"].sum().sort_values(ascending=False) if len(setup) else None
    top = ", ".join(f"{n} {_ms(float(v))}" for n, v in by.head(3).items()) if by is not None else ""
    before = (
        f"; {_ms(pre_setup)} of set-up calls ran before the first GPU event, "
        f"{pre_setup / window * 100:.0f}% of the {_ms(window)} window"
        if pre_setup > 0 and window > 0
        else ""
    )
    runtime = "HIP" if m.vendor == "amd" else "CUDA"
    later = setup_after_first_step(s)
    if later is not None and later > 0.5:
        return Finding(
            id="allocation_churn",
            severity="high" if share >= STALL_PCT else "medium",
            title="Memory allocation calls recur step after step",
            detail=(
                f"The GPU waited {share:.1f}% of its span while the host was in allocation "
                f"and set-up calls (by time: {top}), {later * 100:.0f}% of it after the first "
                f"ProfilerStep: the caching allocator keeps returning memory to the driver and "
                f"asking for it again."
            ),
            evidence={"idle_in_setup_pct": _r(share), "after_first_step_pct": _r(later * 100)},
            fix=(
                "Do not call torch.cuda.empty_cache() in the loop; keep shapes steady (pad or "
                "bucket them), or let the allocator grow segments in place."
            ),
            code="PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python train.py",
        )
    return Finding(
        id="one_time_setup",
        severity="high" if share >= STALL_PCT else "medium",
        title="One-time set-up takes much of the profile",
        detail=(
            f"The GPU waited {share:.1f}% of its span while the host was in set-up calls"
            f"{before} (by time: {top}): creating the {runtime} context, allocating memory, "
            f"and loading each kernel's code on its first launch. These costs are paid once; "
            f"they are not the steady state."
        ),
        evidence={
            "idle_in_setup_pct": _r(share),
            "setup_before_gpu_us": _r(pre_setup),
            "window_us": _r(window),
        },
        fix=(
            "Warm up before profiling (run a step or two first) and profile only steady-state "
            "steps with a schedule."
        ),
        code=(
            "schedule = torch.profiler.schedule(wait=1, warmup=2, active=3)\n"
            "with torch.profiler.profile(schedule=schedule, ...) as p:\n"
            "    for step in range(6):\n"
            "        train_step(); p.step()"
        ),
    )


def window_beyond_span(s: Signals) -> Finding | None:
    m = s.metrics
    window = m.window_us or 0.0
    pre, pre_setup = s.pre_gpu
    pre_step = m.pre_gpu_step_pct
    span_share = m.gpu_span_us / window * 100.0 if window > 0 else 100.0
    mostly_before = pre_step is not None and pre_step >= PRE_GPU_STEP_PCT
    if span_share >= SPAN_OF_WINDOW_PCT and not mostly_before:
        return None
    parts = [
        f"The GPU span ({_ms(m.gpu_span_us)}) covers {span_share:.0f}% of the profiled "
        f"window ({_ms(window)}, first to last event of any kind); every share above is of "
        f"the GPU span only."
    ]
    if pre > 0:
        parts.append(
            f"Before the first GPU event the host ran for {_ms(pre)}"
            + (f", {_ms(pre_setup)} of it in set-up calls" if pre_setup > 0 else "")
            + "."
        )
    if mostly_before:
        parts.append(
            f"Most of each ProfilerStep happens before any GPU work: the median step spends "
            f"{pre_step:.0f}% of its time before its first GPU event (preprocessing on the "
            f"host)."
        )
    return Finding(
        id="gpu_span_vs_window",
        severity="medium" if mostly_before else "info",
        title="Most of the profiled time is outside the GPU's work",
        detail=" ".join(parts),
        evidence={
            "window_us": _r(window),
            "gpu_span_us": _r(m.gpu_span_us),
            "before_first_gpu_us": _r(pre),
            "pre_gpu_step_pct": _r(pre_step),
        },
        fix=(
            "Look at what the host does outside the GPU span (the timeline's CPU rows): move "
            "preprocessing to DataLoader workers, and profile steady-state steps."
        ),
    )


def graph_capture(s: Signals) -> Finding | None:
    cap = s.capture
    if not cap.recorded:
        return None
    return Finding(
        id="graph_capture",
        severity="info",
        title="CUDA/HIP graph capture in the trace",
        detail=(
            f"{cap.recorded} launches were recorded into a graph during stream capture "
            f"({_ms(cap.us)}): captured work is recorded, not run, so those calls are left "
            f"out of the launch, sync and idle figures. Profile the graph's replays to see "
            f"the GPU work."
        ),
        evidence={"captured_launches": cap.recorded, "capture_us": _r(cap.us)},
        fix="Profile steady-state steps that replay the captured graphs, not the capture.",
    )


def queued_idle(s: Signals) -> Finding | None:
    m = s.metrics
    a = s.accounting
    share = m.span_breakdown.get("dependency", 0.0)
    if share < FINDING_STALL_PCT:
        return None
    dep = a.causes.get("dependency", 0.0)
    graph = a.graph_wait_us / dep * 100.0 if dep > 0 else 0.0
    detail = (
        f"For {share:.1f}% of the span the whole GPU was idle although work had been "
        f"launched and not started ({m.idle_queued_pct or 0:.0f}% of idle time had work "
        f"queued), and nothing ran on any stream meanwhile: no work the trace shows on this "
        f"GPU is what it waited for. It waited on work outside the trace: another rank or "
        f"process, a host callback, an event recorded outside the profiled window, or GPU "
        f"work the profiler did not record."
    )
    if graph >= 5.0:
        detail += (
            f" {graph:.0f}% of this time the waiting work belonged to CUDA/HIP graph "
            f"replays: a graph paused before or between its nodes."
        )
    evidence: dict[str, object] = {
        "queued_idle_pct": _r(share),
        "idle_queued_pct": _r(m.idle_queued_pct),
        "graph_share_pct": _r(graph),
    }
    if a.blocked_behind:
        name, us = max(a.blocked_behind.items(), key=lambda kv: kv[1])
        detail += (
            f" The host was blocked in {name} for {a.pct(us):.1f}% of the span meanwhile: "
            f"it waits on that same queue, so dropping the call would not start the work."
        )
        evidence["host_blocked_behind_pct"] = _r(a.pct(us))
    return Finding(
        id="queued_idle",
        severity=_severity(share),
        title="The GPU idles with work queued behind work outside the trace",
        detail=detail,
        evidence=evidence,
        fix=dependency_fix(s),
    )


#: From this share of the queued idle time at graph replays' nodes on, the graphs are
#: where to look first.
GRAPH_FIRST_PCT = 50.0


def dependency_fix(s: Signals) -> str:
    """Where to look for what queued work waited on, in the order the trace points: the
    CUDA/HIP graphs first when most of the waiting is at their nodes, then the other ranks
    and processes; and never the host's blocking calls that waited on the same queue."""
    a = s.accounting
    dep = a.causes.get("dependency", 0.0)
    graph = a.graph_wait_us / dep * 100.0 if dep > 0 else 0.0
    inside = (
        f"inside the CUDA/HIP graphs ({graph:.0f}% of this waiting is at their nodes): "
        "profile the same steps with every graph node traced (Nsight Systems: nsys "
        "profile --cuda-graph-trace=node) or run them once without graphs, to see what a "
        "graph holds that this trace does not show"
    )
    elsewhere = (
        "the other ranks' traces at the same moment, other processes on the GPU "
        "(nvidia-smi), events recorded before the profile began"
    )
    if graph >= GRAPH_FIRST_PCT:
        fix = f"Find what the queued work waits for, {inside}; then {elsewhere}."
    elif graph >= 5.0:
        fix = f"Find what the queued work waits for: {elsewhere}; and {inside}."
    else:
        fix = f"Find what the queued work waits for: {elsewhere}."
    if a.blocked_behind:
        name = max(a.blocked_behind.items(), key=lambda kv: kv[1])[0]
        fix += (
            f" Leave the host's {name} as it is: it waits on this same queue, and removing "
            "it would not start the work."
        )
    return fix


def mostly_idle(s: Signals) -> Finding | None:
    m = s.metrics
    sb = m.span_breakdown
    idle = 100.0 - sum(sb.get(k, 0.0) for k in RAN)
    if idle < IDLE_PCT:
        return None
    stalls = stall_shares(s)
    key, share = next(iter(stalls.items()))
    if share >= STALL_PCT and key != "setup":
        return None  # a named cause: its own finding (queued_idle for dependency) says it
    top = {k: _r(v) for k, v in list(stalls.items())[:3]}
    work = ", ".join(f"{k.replace('_', ' ')} {v:.1f}%" for k, v in top.items() if v)
    return Finding(
        id="gpu_idle",
        severity="high" if idle >= IDLE_HIGH_PCT else "medium",
        title="The GPU is idle most of the time",
        detail=(
            f"The GPU was idle {idle:.1f}% of the {_ms(m.gpu_span_us)} span (kernels "
            f"busy {m.kernel_busy_pct or 0:.1f}%); the idle time by cause: "
            f"{work or 'nothing recorded'}."
        ),
        evidence={"idle_pct": _r(idle, 2), "kernel_busy_pct": _r(m.kernel_busy_pct, 2), **top},
        fix=(
            dependency_fix(s)
            if key == "dependency"
            else "Find the host work in the largest gaps (timeline) and move it off the "
            "critical path: prefetch inputs, avoid per-step synchronization, batch small "
            "requests."
        ),
    )


def unknown_peaks(s: Signals) -> Finding | None:
    m = s.metrics
    if s.peak is not None:
        return None
    why = m.basis["peak_gbps"].how if "peak_gbps" in m.basis else "unknown device"
    return Finding(
        id="unknown_peaks",
        severity="info",
        title="Peak FLOP/s and bandwidth unknown for this device",
        detail=f"{why}; achieved rates are shown without a roofline verdict.",
        evidence={"device_name": m.name, "vendor": m.vendor},
        fix="None needed; the verdict falls back to kernel classes.",
    )


RULES: tuple[Callable[[Signals], Finding | None], ...] = (
    input_pipeline, sync_stalls, host_overhead, communication, queued_idle, tensor_cores,
    pageable_copies, device_copies, memory_bound_kernels, unclassified_kernels,
    low_sm_efficiency, one_time_setup, window_beyond_span, graph_capture, mostly_idle,
    unknown_peaks,
)  # fmt: skip


def build(trace: Trace, signals: list[Signals]) -> list[Finding]:
    if not signals:
        note = trace.notes[0] if trace.notes else "the trace holds no GPU events"
        return [
            Finding(
                id="no_gpu_activity",
                severity="info",
                title="No GPU activity in this trace",
                detail=f"{note}. Only CPU-side numbers are available.",
                evidence={"kernel_count": 0, "cpu_ops": len(trace.cpu_ops)},
                fix=(
                    "Profile a run on a CUDA device with CUDA activity enabled "
                    "(torch.profiler.ProfilerActivity.CUDA)."
                ),
                code=(
                    "from torch.profiler import profile, ProfilerActivity\n"
                    "with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:\n"
                    "    train_step()"
                ),
            )
        ]
    out: list[Finding] = []
    seen: set[str] = set()
    # The busiest device first, so a finding shared by every rank is told from the one
    # that matters most.
    for s in sorted(signals, key=kernel_busy_us, reverse=True):
        # Too little GPU work to judge: no finding about shares of the GPU's time, only
        # those about what the trace is.
        rules = (
            (graph_capture, pageable_copies, one_time_setup, window_beyond_span, unknown_peaks)
            if too_little_work(s)
            else RULES
        )
        for rule in rules:
            f = rule(s)
            # Multi-rank runs repeat the same finding per rank: keep the first.
            if f is None or f.id in seen:
                continue
            seen.add(f.id)
            f.device = s.metrics.device
            out.append(f)
    out.sort(key=lambda f: _ORDER[f.severity])
    return out
