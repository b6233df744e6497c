"""Hand-built traces and diagnoses for the view tests and the timeline benchmark.

Nothing here calls the reader or the analysis: the views are tested against the contract
(nbprof.trace.model, nbprof.analysis.model) with numbers chosen by hand.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from nbprof.analysis.model import Basis, DeviceMetrics, Diagnosis, Finding, IdleBreakdown, Verdict
from nbprof.result import Profile
from nbprof.telemetry.model import Samples
from nbprof.trace.model import Trace, empty_table

HOSTILE = ("<img src=x onerror=alert(1)>", "<script>alert(2)</script>")

_NAMES = (
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1",
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>",
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>",
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
    "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128>>",
    "void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 4>",
    "triton_poi_fused_add_mul_0",
    "volta_sgemm_128x64_nn",
)
_CLS = (
    "tensor_core",
    "memory",
    "memory",
    "communication",
    "tensor_core",
    "memory",
    "memory",
    "compute",
)


def _frame(name: str, cols: dict[str, object]) -> pd.DataFrame:
    """A table with the contract's columns and dtypes; columns not given get "unknown"."""
    base = empty_table(name)
    df = pd.DataFrame(cols)
    for c in base.columns:
        if c not in df:
            kind = base[c].dtype.kind
            df[c] = -1 if kind in "iu" else (np.nan if kind == "f" else "")
    # Text is a Categorical of the values given (the empty table's has no categories).
    typed = {
        c: "category" if isinstance(base[c].dtype, pd.CategoricalDtype) else base[c].dtype
        for c in base.columns
        if base[c].dtype != object
    }
    return df[list(base.columns)].astype(typed)


def metrics(device: str = "0", rank: int = 0, **kw: object) -> DeviceMetrics:
    basis = {
        "kernel_busy_pct": Basis("trace", "union of kernel intervals ÷ GPU span"),
        "gpu_busy_pct": Basis("trace", "kernels, memcpys and memsets"),
        "sm_efficiency_pct": Basis("estimated", "grid size ÷ SM count per kernel"),
        "tensor_core_pct": Basis("estimated", "kernel names"),
        "achieved_tflops": Basis("estimated", "matmul FLOPs from input shapes ÷ GPU span"),
        "peak_tflops": Basis("estimated", "datasheet peak for the device"),
    }
    d: dict[str, object] = dict(
        rank=rank,
        device=device,
        name="NVIDIA H100 80GB HBM3",
        vendor="nvidia",
        sm_count=132,
        compute_capability="9.0",
        gpu_span_us=1000.0,
        kernel_count=4,
        memcpy_count=1,
        memset_count=0,
        kernel_busy_pct=91.5,
        gpu_busy_pct=92.5,
        sm_efficiency_pct=47.25,
        occupancy_pct=63.9,
        tensor_core_pct=36.6,
        tensor_core_basis="kernel_names",
        memcpy_bytes=4096,
        pageable_memcpy_count=1,
        short_kernel_pct=25.0,
        idle=IdleBreakdown(host_wait_pct=70.0, kernel_wait_pct=20.0, other_pct=10.0, idle_us=85.0),
        achieved_tflops=123.25,
        peak_tflops=989.0,
        basis=basis,
    )
    d.update(kw)
    return DeviceMetrics(**d)  # type: ignore[arg-type]


def small_profile(
    *,
    hostile: bool = False,
    samples: bool = False,
    origin: bool = True,
    notes: list[str] | None = None,
) -> Profile:
    """Four kernels on two streams, a copy, CPU ops, a step, an idle gap, and a diagnosis."""
    names = list(_NAMES[:4])
    op = "aten::mm"
    if hostile:
        names[1], names[2] = HOSTILE
        op = HOSTILE[0]
    kernels = _frame(
        "kernels",
        {
            "rank": [0, 0, 0, 0],
            "device": ["0"] * 4,
            "stream": [7, 7, 7, 13],
            "name": names,
            "ts": [100.0, 300.0, 400.0, 150.0],
            "dur": [150.0, 50.0, 5.0, 600.0],
            "correlation": [1, 2, 3, 4],
            "grid": [264, 66, 1, -1],
            "block": [128, 256, 32, -1],
            "registers": [-1] * 4,
            "shared_mem": [-1] * 4,
            "occupancy": [50.0, 100.0, 3.1, float("nan")],
            "blocks_per_sm": [2.0, 0.5, 0.01, float("nan")],
            "launch_ts": [90.0, 280.0, 390.0, 140.0],
            "launch_name": ["cudaLaunchKernel"] * 4,
            "op": [op, "aten::add", "aten::sum", "nccl:all_reduce"],
            "op_index": [0, 1, 2, -1],
        },
    )
    memcpy = _frame(
        "memcpy",
        {
            "rank": [0],
            "device": ["0"],
            "stream": [7],
            "name": ["Memcpy HtoD (Pageable -> Device)"],
            "ts": [50.0],
            "dur": [40.0],
            "correlation": [5],
            "bytes": [4096],
            "kind": ["HtoD"],
            "src": ["Pageable"],
            "dst": ["Device"],
            "launch_ts": [45.0],
            "launch_name": ["cudaMemcpyAsync"],
            "op": ["aten::copy_"],
            "op_index": [-1],
        },
    )
    cpu_ops = _frame(
        "cpu_ops",
        {
            "rank": [0, 0, 0, 0],
            "pid": [1] * 4,
            "tid": [1] * 4,
            "name": [op, "aten::add", "aten::sum", "aten::linear"],
            "ts": [80.0, 270.0, 385.0, 80.0],
            "dur": [20.0, 15.0, 10.0, 5.0],
            "external_id": [1, 2, 3, 4],
            "flops": [1e9, 0, 0, 0],
            "input_dims": [""] * 4,
            "input_types": [""] * 4,
            "depth": [0, 0, 0, 1],
        },
    )
    runtime = _frame(
        "runtime",
        {
            "rank": [0] * 3,
            "pid": [1] * 3,
            "tid": [1] * 3,
            "name": ["cudaLaunchKernel", "cudaLaunchKernel", "cudaDeviceSynchronize"],
            "ts": [90.0, 280.0, 700.0],
            "dur": [5.0, 5.0, 100.0],
            "correlation": [1, 2, -1],
            "cat": ["cuda_runtime", "cuda_runtime", "cuda_sync"],
        },
    )
    steps = _frame(
        "steps",
        {"rank": [0], "step": [0], "name": ["ProfilerStep#0"], "ts": [40.0], "dur": [800.0]},
    )
    devices = _frame(
        "devices",
        {
            "rank": [0],
            "device": ["0"],
            "name": ["NVIDIA H100 80GB HBM3"],
            "vendor": ["nvidia"],
            "sm_count": [132],
            "compute_capability": ["9.0"],
            "total_memory": [80 << 30],
            "max_threads_per_sm": [2048],
        },
    )
    trace = Trace(
        source="hand-built.json",
        event_count=14,
        origin_ns=1_700_000_000_000_000_000 if origin else None,
        kernels=kernels,
        memcpy=memcpy,
        cpu_ops=cpu_ops,
        runtime=runtime,
        steps=steps,
        devices=devices,
    )
    gaps = pd.DataFrame(
        {
            "rank": [0],
            "device": ["0"],
            "stream": [7],
            "start": [250.0],
            "end": [300.0],
            "dur": [50.0],
            "cause": ["host_wait"],
            "cpu_work": [HOSTILE[1] if hostile else "aten::item"],
        }
    )
    kc = pd.DataFrame(
        {
            "cls": ["tensor_core", "memory", "memory", "communication"],
            "tensor_core": [True, False, False, False],
        },
        index=kernels.index,
    )
    top = pd.DataFrame(
        {
            "name": [names[3], names[0], names[1], names[2]],
            "count": [1, 1, 1, 1],
            "total_us": [600.0, 150.0, 50.0, 5.0],
            "mean_us": [600.0, 150.0, 50.0, 5.0],
            "pct": [74.5, 18.6, 6.2, 0.6],
            "cls": ["communication", "tensor_core", "memory", "memory"],
            "tensor_core": [False, True, False, False],
        }
    )
    finding = Finding(
        id="pageable_memcpy",
        severity="high",
        title="Copies from pageable memory",
        detail=f"1 HtoD copy came from pageable memory (op {op}).",
        evidence={"pageable_memcpy_count": 1, "memcpy_bytes": 4096},
        fix="Pin the host tensors so copies run asynchronously.",
        code=f"loader = DataLoader(ds, pin_memory=True)  # {op}",
        device="0",
    )
    diag = Diagnosis(
        source={"path": "hand-built.json", "events": 14},
        devices=[metrics()],
        verdict=Verdict("transfer_bound", f"Copies dominate ({op})."),
        findings=[
            finding,
            Finding("info_note", "info", "A note", "Just so.", {}, "Nothing to do."),
        ],
        tables={"kernel_class": kc, "top_kernels": top, "idle_gaps": gaps},
        explanation="nvidia-smi says 91.5 % as a kernel ran; only 47.25 % of SMs had work.",
    )
    smp = None
    if samples:
        t = 1_700_000_000_000_000_000 + np.arange(0, 1_000_000, 100_000, dtype=np.int64)
        frame = Samples.empty().frame.reindex(range(len(t)))
        frame["time_ns"] = t
        frame["gpu"] = 0
        frame["util_gpu"] = np.linspace(0, 100, len(t))
        frame["sm_util"] = np.linspace(0, 50, len(t))
        smp = Samples(
            frame=frame.astype({"time_ns": "int64", "gpu": "int64"}), source="replay: x.parquet"
        )
    p = Profile(trace, smp, notes=notes)
    p.__dict__["diagnosis"] = diag  # bypass analysis: the views are tested on their own
    return p


def synthetic_profile(n_kernels: int, *, streams: int = 2, seed: int = 0) -> Profile:
    """A training-loop-like trace: ``n_kernels`` kernels, one launch call each, top-level
    ops, steps and idle gaps, with kernel classes (as analysis would give) and a diagnosis."""
    rng = np.random.default_rng(seed)
    kind = rng.integers(0, len(_NAMES), n_kernels)
    dur = np.round(rng.lognormal(np.log(8.0), 1.0, n_kernels), 3)
    gap = np.round(rng.exponential(3.0, n_kernels), 3)
    stream = rng.integers(0, streams, n_kernels) + 7
    ts = np.zeros(n_kernels)
    for s in range(streams):
        m = stream == s + 7
        ts[m] = np.cumsum(dur[m] + gap[m]) - dur[m]
    grid = np.array([264, 1024, 132, 8, 512, 64, 4096, 66])[kind]
    block = np.array([384, 128, 512, 256, 128, 256, 128, 256])[kind]
    occ = np.array([12.5, 100.0, 50.0, 25.0, 18.75, 100.0, 75.0, 37.5])[kind]
    ops = np.array(
        [
            "aten::mm",
            "aten::add",
            "aten::sum",
            "nccl:all_reduce",
            "aten::_flash_attention_forward",
            "aten::cat",
            "triton",
            "aten::mm",
        ]
    )
    names = np.array(_NAMES, dtype=object)
    kernels = pd.DataFrame(
        {
            "rank": np.zeros(n_kernels, np.int32),
            "device": "0",
            "stream": stream.astype(np.int64),
            "name": names[kind],
            "ts": ts,
            "dur": dur,
            "correlation": np.arange(n_kernels, dtype=np.int64),
            "grid": grid.astype(np.int64),
            "block": block.astype(np.int64),
            "registers": np.int64(-1),
            "shared_mem": np.int64(-1),
            "occupancy": occ,
            "blocks_per_sm": grid / 132.0,
            "launch_ts": ts - 5.0,
            "launch_name": "cudaLaunchKernel",
            "op": ops[kind],
            "op_index": np.arange(n_kernels, dtype=np.int64) // 10,
        }
    )
    order = np.argsort(ts, kind="stable")
    lts = np.sort(ts - 5.0)
    runtime = pd.DataFrame(
        {
            "rank": np.zeros(n_kernels, np.int32),
            "pid": np.int64(1),
            "tid": np.int64(1),
            "name": "cudaLaunchKernel",
            "ts": lts,
            "dur": np.full(n_kernels, 2.5),
            "correlation": order.astype(np.int64),
            "cat": "cuda_runtime",
        }
    )
    n_ops = max(1, n_kernels // 10)
    op_ts = lts[::10][:n_ops] - 1.0
    op_dur = np.diff(np.append(op_ts, op_ts[-1] + 50.0)) * 0.9
    cpu_ops = pd.DataFrame(
        {
            "rank": np.zeros(n_ops, np.int32),
            "pid": np.int64(1),
            "tid": np.int64(1),
            "name": ops[rng.integers(0, len(ops), n_ops)],
            "ts": op_ts,
            "dur": op_dur,
            "external_id": np.arange(n_ops, dtype=np.int64),
            "flops": np.nan,
            "input_dims": "",
            "input_types": "",
            "depth": np.zeros(n_ops, np.int32),
        }
    )
    end = float((ts + dur).max())
    n_steps = 10
    steps = pd.DataFrame(
        {
            "rank": np.zeros(n_steps, np.int32),
            "step": np.arange(n_steps, dtype=np.int64),
            "name": [f"ProfilerStep#{i}" for i in range(n_steps)],
            "ts": np.linspace(0, end, n_steps, endpoint=False),
            "dur": np.full(n_steps, end / n_steps * 0.99),
        }
    )
    trace = Trace(source=f"synthetic-{n_kernels}", event_count=2 * n_kernels + n_ops, origin_ns=0,
                  kernels=kernels, runtime=runtime, cpu_ops=cpu_ops, steps=steps)  # fmt: skip
    cls = np.array(_CLS, dtype=object)[kind]
    kc = pd.DataFrame({"cls": cls, "tensor_core": cls == "tensor_core"}, index=kernels.index)
    # Gaps: between consecutive kernels on a stream, as analysis' idle_gaps would list them.
    gaps = []
    for s in range(streams):
        k = kernels[kernels["stream"] == s + 7].sort_values("ts")
        st = (k["ts"] + k["dur"]).to_numpy()[:-1]
        en = k["ts"].to_numpy()[1:]
        g = pd.DataFrame(
            {"rank": 0, "device": "0", "stream": s + 7, "start": st, "end": en, "dur": en - st}
        )
        g["cause"] = np.where(g["dur"] < 5, "kernel_wait", "host_wait")
        g["cpu_work"] = "aten::item"
        gaps.append(g)
    diag = Diagnosis(
        source={"path": trace.source, "events": trace.event_count},
        devices=[metrics(kernel_count=n_kernels, gpu_span_us=end)],
        verdict=Verdict("launch_bound", "Many short kernels."),
        findings=[],
        tables={"kernel_class": kc, "idle_gaps": pd.concat(gaps, ignore_index=True)},
    )
    p = Profile(trace)
    p.__dict__["diagnosis"] = diag
    return p
