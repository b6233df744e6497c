"""Findings: what is wrong, the numbers that show it, why it matters, and the fix.

Each rule is a small function of one device's :class:`Signals` returning a Finding or
None; ``build`` runs them all on every device, tells each finding which device it is
about, and orders the results by severity.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from nbprof.analysis.device import Signals
from nbprof.analysis.model import Finding
from nbprof.analysis.tensorcores import _cc
from nbprof.analysis.verdict import CLASS_COVER_PCT, gap_share, kernel_busy_us, other_pct
from nbprof.trace.model import Trace

logger = logging.getLogger(__name__)

_ORDER = {"high": 0, "medium": 1, "low": 2, "info": 3}


def _r(x: float | None, nd: int = 1) -> float | None:
    return None if x is None else round(float(x), nd)


def _size(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def input_pipeline(s: Signals) -> Finding | None:
    m = s.metrics
    dl = m.dataloader_pct
    gap = gap_share(s, "DataLoader")
    if (dl is None or dl < 10.0) and gap < 5.0:
        return None
    sev = "high" if (dl or 0) >= 30.0 or gap >= 15.0 else "medium"
    return Finding(
        id="input_pipeline",
        severity=sev,
        title="The GPU waits for the DataLoader",
        detail=(
            f"DataLoader __next__ took {(dl or 0.0):.1f}% of step time, and the whole GPU sat "
            f"idle while it ran for {gap:.1f}% of the {m.gpu_span_us / 1e3:.1f} ms span. "
            f"Batches are prepared on the training process's own thread between steps."
        ),
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


def launch_overhead(s: Signals) -> Finding | None:
    m = s.metrics
    short = m.short_kernel_pct or 0.0
    busy = m.kernel_busy_pct or 0.0
    if short < 50.0 or busy >= 80.0 or m.kernel_count < 20:
        return None
    return Finding(
        id="launch_overhead",
        severity="high" if busy < 50.0 else "medium",
        title="Many tiny kernels: launch overhead dominates",
        detail=(
            f"{short:.0f}% of {m.kernel_count} kernels run under 10 µs (mean kernel "
            f"{(s.mean_kernel_us or 0):.1f} µs, mean launch call "
            f"{(s.launch_call_us or 0):.1f} µs); kernels are busy only {busy:.0f}% of the span "
            f"and {m.idle.host_wait_pct:.0f}% of stream idle time is the host not having "
            f"issued the next kernel yet."
        ),
        evidence={
            "short_kernel_pct": _r(short),
            "kernel_busy_pct": _r(busy),
            "mean_kernel_us": _r(s.mean_kernel_us),
            "mean_launch_call_us": _r(s.launch_call_us),
            "host_wait_pct": _r(m.idle.host_wait_pct),
        },
        fix=(
            "Launch fewer, larger kernels: capture the step in a CUDA graph or let "
            "torch.compile fuse the small ops; larger batches also amortize launches."
        ),
        code='model = torch.compile(model, mode="reduce-overhead")  # fuses ops, uses CUDA graphs',
    )


def tensor_cores(s: Signals) -> Finding | None:
    m = s.metrics
    if not s.tc_capable or m.tensor_core_pct is None:
        return None
    gemm = s.class_pct.get("compute", 0.0) + s.class_pct.get("tensor_core", 0.0)
    tc = m.tensor_core_pct
    if gemm < 20.0 or tc >= 0.5 * gemm:
        return None
    ampere = (_cc(m.compute_capability) or 0.0) >= 8.0
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
        else "scaler = torch.cuda.amp.GradScaler()\n"
        "with torch.autocast('cuda', dtype=torch.float16):\n"
        "    loss = model(x).loss(y)\n"
        "scaler.scale(loss).backward(); scaler.step(opt); scaler.update()"
    )
    return Finding(
        id="low_tensor_core_share",
        severity="high" if tc < 10.0 and gemm >= 40.0 else "medium",
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


def pageable_copies(s: Signals) -> Finding | None:
    m = s.metrics
    if m.pageable_memcpy_count == 0:
        return None
    share = s.memcpy_time_pct
    return Finding(
        id="pageable_memcpy",
        severity="medium" if share >= 5.0 else "low",
        title="Copies from pageable host memory",
        detail=(
            f"{m.pageable_memcpy_count} of {m.memcpy_count} memcpys use pageable host memory "
            f"({_size(s.pageable_bytes)}); pageable copies are staged through a pinned "
            f"buffer, block the host and cannot overlap with kernels. Copies ran at "
            f"{(m.copy_gbps or 0):.1f} GB/s on average and occupy {share:.1f}% of the span."
        ),
        evidence={
            "pageable_memcpy_count": m.pageable_memcpy_count,
            "pageable_bytes": s.pageable_bytes,
            "copy_gbps": _r(m.copy_gbps, 2),
            "memcpy_time_pct": _r(share),
        },
        fix="Pin host tensors (pin_memory=True in the DataLoader) and copy with non_blocking=True.",
        code="x = x.pin_memory().to('cuda', non_blocking=True)",
    )


def sync_stalls(s: Signals) -> Finding | None:
    gap = gap_share(s, "after ", ".item()")
    calls = s.sync_calls
    n_item = int((calls["name"] == "aten::item").sum()) if not calls.empty else 0
    n_sync = len(calls) - n_item if not calls.empty else 0
    if gap < 5.0:
        return None
    names = sorted({k for k in s.gap_work_us if k.startswith(("after ", ".item()"))})
    return Finding(
        id="sync_stalls",
        severity="high" if gap >= 20.0 else "medium",
        title="The host synchronizes with the GPU, then leaves it idle",
        detail=(
            f"{gap:.1f}% of the span is whole-GPU idle time that starts as a synchronization "
            f"returns ({', '.join(names)}); the trace has {n_sync} synchronize calls and "
            f"{n_item} .item() calls. Each one drains the queue, so the GPU waits while the "
            f"host catches up."
        ),
        evidence={"idle_after_sync_pct": _r(gap), "sync_calls": n_sync, "item_calls": n_item},
        fix=(
            "Keep values on the GPU inside the loop: accumulate losses/metrics as tensors "
            "and call .item() (or print) once per N steps; drop explicit synchronize calls."
        ),
        code=(
            "running = torch.zeros((), device='cuda')\n"
            "for step, (x, y) in enumerate(loader):\n"
            "    loss = train_step(x, y)\n"
            "    running += loss.detach()          # no .item() here\n"
            "    if step % 100 == 0:\n"
            "        print(running.item() / 100); running.zero_()"
        ),
    )


def communication(s: Signals) -> Finding | None:
    comm = s.class_pct.get("communication", 0.0)
    if comm < 30.0:
        return None
    return Finding(
        id="communication",
        severity="high" if comm >= 50.0 else "medium",
        title="Collective communication dominates kernel time",
        detail=(
            f"NCCL/RCCL kernels take {comm:.0f}% of kernel time on this device; compute "
            f"kernels wait for gradients or embeddings to cross the interconnect."
        ),
        evidence={"communication_pct": _r(comm)},
        fix=(
            "Overlap communication with compute (DDP gradient buckets, FSDP prefetch), "
            "communicate less often (gradient accumulation) or in lower precision."
        ),
        code=(
            "model = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=50,\n"
            "                                                  gradient_as_bucket_view=True)"
        ),
    )


def memory_bound_kernels(s: Signals) -> Finding | None:
    m = s.metrics
    mem = s.class_pct.get("memory", 0.0)
    if mem < 50.0 or (m.kernel_busy_pct or 0.0) < 60.0:
        return None
    return Finding(
        id="memory_bound_kernels",
        severity="medium",
        title="Most GPU time is elementwise and reduction kernels",
        detail=(
            f"Elementwise, normalization, reduction and copy kernels take {mem:.0f}% of kernel "
            f"time; they are limited by memory bandwidth, not by arithmetic, so faster math "
            f"will not help them."
        ),
        evidence={"memory_kernel_pct": _r(mem)},
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
    busy, eff = m.kernel_busy_pct, m.sm_efficiency_pct
    if busy is None or eff is None or busy < 30.0 or eff >= 0.6 * busy:
        return None
    return Finding(
        id="low_sm_efficiency",
        severity="medium",
        title="Kernels run, but on a fraction of the SMs",
        detail=(
            f"Kernels are busy {busy:.0f}% of the span, but weighting each by the share of the "
            f"{m.sm_count} SMs its grid can fill gives {eff:.0f}%: many kernels launch fewer "
            f"blocks than the GPU has SMs."
        ),
        evidence={"kernel_busy_pct": _r(busy), "sm_efficiency_pct": _r(eff)},
        fix="Give each kernel more parallel work: larger batches, fused ops, fewer tiny tensors.",
    )


def mostly_idle(s: Signals) -> Finding | None:
    m = s.metrics
    busy = m.kernel_busy_pct or 0.0
    if busy >= 30.0:
        return None
    top = sorted(s.gap_work_us.items(), key=lambda kv: -kv[1])[:3]
    span = m.gpu_span_us
    work = ", ".join(f"{k} ({v / span * 100:.1f}%)" for k, v in top) or "nothing recorded"
    return Finding(
        id="gpu_idle",
        severity="high" if busy < 10.0 else "medium",
        title="The GPU is idle most of the time",
        detail=(
            f"Kernels ran {busy:.1f}% of the {span / 1e3:.1f} ms span; host wait is "
            f"{m.idle.host_wait_pct:.0f}% of stream idle time. While the GPU was idle the host "
            f"ran: {work}."
        ),
        evidence={
            "kernel_busy_pct": _r(busy, 2),
            "host_wait_pct": _r(m.idle.host_wait_pct),
            "idle_cpu_work": {k: _r(v / span * 100) for k, v in top},
        },
        fix=(
            "Find the host work in the largest gaps (timeline) and move it off the critical "
            "path: prefetch inputs, avoid per-step synchronization, batch small requests."
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
    input_pipeline, sync_stalls, launch_overhead, communication, tensor_cores,
    pageable_copies, memory_bound_kernels, unclassified_kernels, low_sm_efficiency,
    mostly_idle, unknown_peaks,
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
        for rule in RULES:
            f = rule(s)
            # Multi-rank runs repeat the same finding per rank: keep the first.
            if f is None or f.id in seen:
                continue
            seen.add(f.id)
            f.device = s.metrics.device
            out.append(f)
    out.sort(key=lambda f: _ORDER[f.severity])
    return out
