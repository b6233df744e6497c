"""All the numbers for one device (rank, device), each with its basis."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from nbprof.analysis import idle, inputs, launches, peaks, roofline, syncs, tensorcores
from nbprof.analysis._text import matches
from nbprof.analysis.classes import class_shares, kernel_classes, roofline_memory_evidence
from nbprof.analysis.model import Basis, DeviceMetrics, IdleBreakdown, utilization_tool
from nbprof.analysis.samples import Measured, measured_for
from nbprof.analysis.transfers import is_pageable
from nbprof.analysis.utilization import (
    SHORT_KERNEL_US,
    busy_pct,
    occupancy_pct,
    short_kernel_pct,
    sm_efficiency_pct,
    span,
    union_length,
)
from nbprof.telemetry.model import Samples
from nbprof.trace.model import Trace
from nbprof.trace.tables import vendor_of

logger = logging.getLogger(__name__)


@dataclass
class Signals:
    """What the verdict and findings need beyond DeviceMetrics, for one device."""

    metrics: DeviceMetrics
    start_us: float
    end_us: float
    class_pct: dict[str, float]  # share of kernel time per class
    memcpy_time_pct: float  # memcpy duration union ÷ span
    gap_work_us: dict[str, float]  # cpu_work label -> idle µs in the named gaps
    largest_gaps: pd.DataFrame
    roofline: pd.DataFrame
    simt_gemm_pct: float  # share of kernel time in FP32/SIMT GEMMs (no Tensor Cores)
    tc_capable: bool
    launch_call_us: float | None
    mean_kernel_us: float | None
    median_kernel_us: float | None
    peak: peaks.Peak | None
    measured: Measured | None
    tc_how: str
    pageable_bytes: int
    copy_us: float
    sync_calls: pd.DataFrame = field(default_factory=pd.DataFrame)


def _sel(df: pd.DataFrame, rank: int, device: str) -> pd.DataFrame:
    if df.empty:
        return df
    return df[(df["rank"].to_numpy() == rank) & (df["device"].astype(str).to_numpy() == device)]


def _props(trace: Trace, rank: int, device: str) -> dict[str, object]:
    d = trace.devices
    if d.empty:
        return {}
    m = d[(d["rank"] == rank) & (d["device"].astype(str) == device)]
    if m.empty:
        m = d[d["device"].astype(str) == device]
    return m.iloc[0].to_dict() if not m.empty else {}


def _vendor(props: dict[str, object], runtime: pd.DataFrame) -> tuple[str, Basis]:
    """The device's vendor and its basis: from its properties or name, else from the launch
    API the trace used (``cuda*``/``cu*`` calls vs ``hip*``), else unknown."""
    v = str(props.get("vendor") or "")
    if v not in ("nvidia", "amd"):
        v = vendor_of(str(props.get("name") or ""))
    if v != "unknown":
        return v, Basis("trace", "the device name in the trace's device properties")
    if not runtime.empty:
        names = runtime["name"].astype(str)
        if matches(names, r"^hip").any():
            return "amd", Basis("estimated", "the trace's launch calls are HIP (hip*)")
        if matches(names, r"^cu(?:da)?[A-Z]").any():
            return "nvidia", Basis("estimated", "the trace's launch calls are CUDA (cu*)")
    return "unknown", Basis("unknown", "no known device name and no CUDA or HIP calls")


def analyze_device(
    trace: Trace, rank: int, device: str, samples: Samples | None
) -> tuple[Signals, pd.DataFrame, pd.DataFrame]:
    """(signals, kernel classes for this device's kernels, idle gaps)."""
    k = _sel(trace.kernels, rank, device)
    mc = _sel(trace.memcpy, rank, device)
    ms = _sel(trace.memset, rank, device)
    props = _props(trace, rank, device)
    rt = trace.runtime[trace.runtime["rank"] == rank] if not trace.runtime.empty else trace.runtime
    vendor, vendor_basis = _vendor(props, rt)
    name = str(props.get("name") or "")
    sm = int(props.get("sm_count", -1) or -1) if props else -1
    sm_count = sm if sm > 0 else None
    cc = str(props.get("compute_capability") or "") or None
    total_mem = int(props.get("total_memory", -1) or -1) if props else -1
    no_props = "the trace's device properties do not give it"
    basis: dict[str, Basis] = {
        "vendor": vendor_basis,
        "sm_count": Basis("trace", "the trace's device properties (numSms)")
        if sm_count is not None
        else Basis("unknown", no_props),
        "compute_capability": Basis("trace", "the trace's device properties")
        if cc is not None
        else Basis("unknown", no_props),
        "kernel_count": Basis("trace", "kernel events on this device"),
        "memcpy_count": Basis("trace", "memcpy events on this device"),
        "memset_count": Basis("trace", "memset events on this device"),
    }

    ev = idle.gpu_events(k, mc, ms)
    s_all = ev["ts"].to_numpy(dtype="float64")
    e_all = ev["end"].to_numpy(dtype="float64")
    t0, t1 = span(s_all, e_all)
    span_us = t1 - t0
    ks = k["ts"].to_numpy(dtype="float64")
    ke = ks + k["dur"].to_numpy(dtype="float64")
    kernel_busy = busy_pct(ks, ke, span_us)
    gpu_busy = busy_pct(s_all, e_all, span_us)
    basis["gpu_span_us"] = Basis("trace", "last GPU event end − first GPU event start")
    basis["kernel_busy_pct"] = Basis(
        "trace",
        f"union of kernel intervals ÷ GPU span: what {utilization_tool(vendor)}'s "
        "utilization averages to",
    )
    basis["gpu_busy_pct"] = Basis("trace", "union of kernel, memcpy and memset intervals ÷ span")

    sm_eff, left_out = sm_efficiency_pct(k, sm_count, span_us)
    if sm_eff is None:
        why = (
            "SM count unknown (no deviceProperties)" if sm_count is None else "no kernel grid sizes"
        )
        basis["sm_efficiency_pct"] = Basis("unknown", why if not k.empty else "no kernels")
    else:
        how = f"min(grid ÷ {sm_count} SMs, 1) per kernel, overlaps add (≤1), ÷ span"
        if left_out:
            how += f"; {left_out} kernels without a grid size left out"
        basis["sm_efficiency_pct"] = Basis("trace", how)
    occ = occupancy_pct(k)
    basis["occupancy_pct"] = (
        Basis("trace", "kernel-time-weighted mean of Kineto's est. achieved occupancy")
        if occ is not None
        else Basis("unknown", "the trace has no est. achieved occupancy")
    )

    # Tensor Cores.
    tc = tensorcores.classify(
        k, trace.cpu_ops, vendor=vendor, compute_capability=cc,
        counters=_sel(trace.counters, rank, device) if not trace.counters.empty else None,
    )  # fmt: skip
    kdur = k["dur"].to_numpy(dtype="float64")
    ktime = float(kdur.sum())
    tc_pct: float | None
    if tc.basis == "unknown":
        tc_pct = None
    else:
        tc_pct = float(kdur[tc.flags].sum() / ktime * 100.0) if ktime > 0 else None
    measured = measured_for(samples, device, trace.origin_ns, t0, t1)
    tc_basis = tc.basis
    if measured is not None and measured.tensor_util is not None and measured.tensor_util < 0.5:
        # The hardware saw no Tensor Core activity at all: that outranks any name.
        tc_pct, tc_basis = 0.0, "measured"
        tc = tensorcores.TensorCoreResult(np.zeros(len(k), dtype=bool), "measured", tc.how)
        tc_how = (
            f"NVML GPM tensor activity {measured.tensor_util:.1f}% over {measured.count} samples"
        )
    else:
        tc_how = tc.how
        if measured is not None and measured.tensor_util is not None and not tc.flags.any():
            # Counters saw tensor work that no name or op explains: the evidence is stale.
            tc_how += (
                f"; but NVML GPM measured {measured.tensor_util:.1f}% tensor activity, so "
                "kernels these rules do not recognise used Tensor Cores"
            )
    if tc_basis in ("measured", "unknown"):
        tc_kind = tc_basis
    elif "compute capability" in tc_how:
        tc_kind = "trace"  # the device properties rule Tensor Cores out
    else:
        tc_kind = "estimated"  # names and ops are evidence, not counters
    basis["tensor_core_pct"] = Basis(tc_kind, f"{tc_basis}: {tc_how}")
    # Copies.
    pageable = is_pageable(mc)
    mbytes = int(mc["bytes"].clip(lower=0).sum()) if not mc.empty else 0
    basis["memcpy_bytes"] = Basis("trace", "sum of memcpy bytes args")
    basis["pageable_memcpy_count"] = Basis("trace", "memcpy names/kinds with Pageable host memory")
    copy_us = float(mc["dur"].sum()) if not mc.empty else 0.0
    copy_gbps = mbytes / copy_us / 1e3 if copy_us > 0 and mbytes > 0 else None
    basis["copy_gbps"] = (
        Basis("trace", "memcpy bytes ÷ memcpy time")
        if copy_gbps is not None
        else Basis("unknown", "no memcpy with bytes")
    )
    mcs = mc["ts"].to_numpy(dtype="float64")
    mce = mcs + mc["dur"].to_numpy(dtype="float64")
    memcpy_time_pct = (busy_pct(mcs, mce, span_us) or 0.0) if len(mcs) else 0.0

    short = short_kernel_pct(k)
    basis["short_kernel_pct"] = Basis(
        "trace", f"kernels shorter than {SHORT_KERNEL_US:g} µs, by count"
    )
    delay = launches.median_launch_delay_us(k)
    basis["median_launch_delay_us"] = (
        Basis("trace", "median of kernel start − launch call start")
        if delay is not None
        else Basis("unknown", "kernels not linked to their launch calls")
    )

    # Idle gaps per stream.
    cpu = trace.cpu_ops[trace.cpu_ops["rank"] == rank] if not trace.cpu_ops.empty else trace.cpu_ops
    gaps = idle.stream_gaps(ev)
    gaps = idle.name_cpu_work(gaps, cpu, rt)
    hw, kw, ot, idle_us = idle.breakdown(gaps)
    basis["idle"] = Basis(
        "trace",
        f"per-stream gaps: host_wait if launched after the previous event ended, kernel_wait "
        f"if shorter than {idle.KERNEL_WAIT_US:g} µs, else other; shares of idle time",
    )
    # What the host did while the whole device sat idle (all streams merged): per-stream
    # gaps overlap each other, device-level ones add up to at most the span.
    dev_gaps = idle.name_cpu_work(idle.stream_gaps(ev.assign(stream=-1)), cpu, rt)
    named = dev_gaps[dev_gaps["cpu_work"] != ""]
    gap_work = named.groupby("cpu_work")["dur"].sum().to_dict() if not named.empty else {}

    # Input pipeline and syncs.
    steps = trace.steps[trace.steps["rank"] == rank] if not trace.steps.empty else trace.steps
    dl_pct, dl_how = inputs.dataloader_pct(cpu, steps, _cpu_window(cpu, t0, t1))
    basis["dataloader_pct"] = Basis("trace" if dl_pct is not None else "unknown", dl_how)
    calls = syncs.sync_calls(rt, cpu)
    calls = (
        calls[(calls["ts"] < t1) & (calls["ts"] + calls["dur"] > t0)] if not calls.empty else calls
    )
    sync_pct = 0.0
    if span_us > 0 and not calls.empty:
        cs = np.clip(calls["ts"].to_numpy(dtype="float64"), t0, t1)
        ce = np.clip((calls["ts"] + calls["dur"]).to_numpy(dtype="float64"), t0, t1)
        # .item() encloses its own cudaStreamSynchronize: count host time once.
        sync_pct = union_length(cs, ce) / span_us * 100.0
    basis["sync_pct"] = Basis(
        "trace", "host time in synchronize calls and .item() (union, within the span) ÷ GPU span"
    )

    # Peaks and roofline.
    peak = (
        peaks.lookup(name, total_mem if total_mem > 0 else None, vendor)
        if vendor == "nvidia"
        else None
    )
    roof = roofline.roofline(cpu, k, trace.cpu_ops, peak, tc.flags)
    # Classes after the roofline: a kernel launched inside a memory-bound op is memory
    # evidence its name may not give.
    memory_evidence = roofline_memory_evidence(k, cpu, trace.cpu_ops, roof)
    cls = kernel_classes(k["name"].astype(str), tc.flags, memory_evidence)
    class_pct = class_shares(kdur, cls["cls"].to_numpy())
    achieved_tflops = achieved_gbps = None
    peak_tf = peak_gb = None
    if not roof.empty and span_us > 0:
        achieved_tflops = float(roof["flops"].sum()) / span_us / 1e6
        achieved_gbps = float(roof["bytes"].sum()) / span_us / 1e3
        shapes = "2mkn" in str(roof["basis"].iloc[0])
        basis["achieved_tflops"] = Basis(
            "estimated" if shapes else "trace",
            f"{'matmul FLOPs from input shapes' if shapes else 'with_flops FLOPs'} of "
            f"{int(roof['count'].sum())} ops ÷ GPU span",
        )
        basis["achieved_gbps"] = Basis(
            "estimated", "bytes of the FLOP-counted ops from input shapes ÷ GPU span"
        )
        key = str(roof.groupby("dtype")["total_us"].sum().idxmax())
        peak_tf = peaks.peak_tflops(peak, key) if key else None
        if peak_tf is not None and peak is not None:
            basis["peak_tflops"] = Basis(
                "trace", f"device name {name!r} matched to the {peak.source}: {key} dense peak"
            )
        elif peak is not None:
            why = (
                f"the {peak.source} has no {key} peak for {name!r}"
                if key
                else "the dtype of the FLOP-counted ops is unknown"
            )
            basis["peak_tflops"] = Basis("unknown", why)
    else:
        why = "no ops with FLOP counts (profile with with_flops=True, record_shapes=True)"
        basis["achieved_tflops"] = Basis("unknown", why)
        basis["achieved_gbps"] = Basis("unknown", why)
        if peak is not None:
            basis["peak_tflops"] = Basis("unknown", why)
    if peak is not None:
        peak_gb = peak.mem_gbps
        basis["peak_gbps"] = Basis(
            "trace", f"device name {name!r} matched to the {peak.source}: memory bandwidth"
        )
    else:
        why = (
            f"device {name!r} is not in the peak table"
            if vendor == "nvidia"
            else f"no peak table for vendor {vendor!r}"
        )
        basis["peak_gbps"] = Basis("unknown", why)
        basis["peak_tflops"] = Basis("unknown", why)

    m = DeviceMetrics(
        rank=rank,
        device=device,
        name=name,
        vendor=vendor,
        sm_count=sm_count,
        compute_capability=cc,
        gpu_span_us=span_us,
        kernel_count=len(k),
        memcpy_count=len(mc),
        memset_count=len(ms),
        kernel_busy_pct=kernel_busy,
        gpu_busy_pct=gpu_busy,
        sm_efficiency_pct=sm_eff,
        occupancy_pct=occ,
        tensor_core_pct=tc_pct,
        tensor_core_basis=tc_basis,
        memcpy_bytes=mbytes,
        pageable_memcpy_count=int(pageable.sum()) if len(pageable) else 0,
        short_kernel_pct=short,
        idle=IdleBreakdown(hw, kw, ot, idle_us),
        achieved_tflops=achieved_tflops,
        peak_tflops=peak_tf,
        achieved_gbps=achieved_gbps,
        peak_gbps=peak_gb,
        median_launch_delay_us=delay,
        copy_gbps=copy_gbps,
        dataloader_pct=dl_pct,
        sync_pct=sync_pct,
        basis=basis,
    )
    if measured is not None:
        how = f"NVML samples inside the GPU span ({measured.count})"
        for fld, val, label in (
            ("nvml_util_pct", measured.util_gpu, "utilization.gpu"),
            ("sm_active_pct", measured.sm_util, "GPM SM activity"),
            ("tensor_active_pct", measured.tensor_util, "GPM tensor activity"),
            ("dram_bw_pct", measured.dram_bw_util, "GPM DRAM bandwidth"),
        ):
            setattr(m, fld, val)
            basis[fld] = (
                Basis("measured", f"{label}, mean of {how}")
                if val is not None
                else Basis("unknown", f"{label} not sampled on this GPU")
            )
    else:
        why = "no NVML samples overlap this trace" if samples is not None else "no NVML samples"
        for fld in ("nvml_util_pct", "sm_active_pct", "tensor_active_pct", "dram_bw_pct"):
            basis[fld] = Basis("unknown", why)

    names = k["name"].astype(str)
    simt_ev = tensorcores.name_evidence(names, "nvidia") if vendor == "nvidia" else None
    simt_gemm = 0.0
    if simt_ev is not None and ktime > 0:
        gemm_like = matches(names, re.compile(r"gemm|gemv|xmma", re.IGNORECASE))
        simt_gemm = float(kdur[(simt_ev < 0) & gemm_like].sum() / ktime * 100.0)
    ccv = tensorcores._cc(cc)
    launch_call = launches.mean_launch_call_us(rt)
    sig = Signals(
        metrics=m,
        start_us=t0,
        end_us=t1,
        class_pct=class_pct,
        memcpy_time_pct=memcpy_time_pct,
        gap_work_us={str(a): float(b) for a, b in gap_work.items()},
        largest_gaps=dev_gaps.nlargest(5, "dur") if not dev_gaps.empty else dev_gaps,
        roofline=roof.assign(rank=rank, device=device) if not roof.empty else roof,
        simt_gemm_pct=simt_gemm,
        tc_capable=vendor == "nvidia" and ccv is not None and ccv >= 7.0,
        launch_call_us=launch_call,
        mean_kernel_us=float(kdur.mean()) if len(kdur) else None,
        median_kernel_us=float(np.median(kdur)) if len(kdur) else None,
        peak=peak,
        measured=measured,
        tc_how=tc_how,
        pageable_bytes=int(mc.loc[pageable.to_numpy(), "bytes"].clip(lower=0).sum())
        if len(pageable)
        else 0,
        copy_us=copy_us,
        sync_calls=calls,
    )
    return sig, cls, gaps


def _cpu_window(cpu: pd.DataFrame, t0: float, t1: float) -> tuple[float, float] | None:
    if cpu.empty:
        return (t0, t1) if t1 > t0 else None
    s = cpu["ts"].to_numpy(dtype="float64")
    e = s + cpu["dur"].to_numpy(dtype="float64")
    return float(np.min(s)), float(np.max(e))
