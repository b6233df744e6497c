"""Kernel classes the timeline colours by: tensor_core, compute, memory, communication, other.

A class is a claim about what limited a kernel, so each needs evidence:

- ``communication``: NCCL/RCCL collective names;
- ``tensor_core``: the Tensor Core evidence of :mod:`nbprof.analysis.tensorcores`;
- ``compute``: GEMM, convolution, attention and FFT kernel families;
- ``memory``: kernel families that are bandwidth-bound by construction (PyTorch's
  elementwise/reduce/copy/fill/cat/index/softmax/norm/pool kernels, Triton pointwise and
  reduction kernels, cuDNN/MIOpen layout and batch-norm helpers, CUB scans and sorts,
  optimizer multi-tensor kernels), or a kernel launched by an op the roofline placed below
  the ridge point (``memory_evidence``);
- ``other``: everything else. Custom extensions and unfamiliar names land here rather
  than in ``memory``: nothing about an unknown name says what bounds it.
"""

from __future__ import annotations

import logging
import re

import numpy as np
import pandas as pd

from nbprof.analysis._text import matches

logger = logging.getLogger(__name__)

#: Every class ``kernel_classes`` can return, in the order the timeline stacks them.
CLASSES: tuple[str, ...] = ("tensor_core", "compute", "memory", "communication", "other")

_COMM = re.compile(r"nccl|rccl|all_?reduce|all_?gather|reduce_?scatter|alltoall|sendrecv", re.I)
_COMPUTE = re.compile(
    r"gemm|gemv|conv|winograd|implicit|fft|attention|fmha|flash|xmma|cutlass|wgmma|dgrad|"
    r"wgrad|fprop|scudnn|hcudnn|"
    r"gmma|nvjet|Cijk|mfma|matmul|_mm_|triton_tem|dot_|bmm|cublas|hmma|884|1688|16816",
    re.IGNORECASE,
)
# Families whose names could also hit _COMPUTE (an Inductor pointwise kernel fused around
# an "mm" op, a cuBLAS split-K reduction) but that never do the matrix math themselves.
_MEMORY_FIRST = re.compile(
    r"^triton_(?:poi|red|per)_|"
    r"at::native::(?:\w+_)?elementwise_kernel|at::native::reduce_kernel|"
    r"splitKreduce|cublasLt::epilogue|cublas\w*::(?:scal|axpy|copy|swap)",
    re.IGNORECASE,
)
_MEMORY = re.compile(
    # PyTorch (CUDA and ROCm builds share these names).
    r"elementwise|reduce_kernel|multi_tensor_apply|CatArray|direct_copy|copy_kernel|"
    r"FillFunctor|fill_kernel|index_?select|indexSelect|index_?put|indexing_backward|"
    r"index_fill|index_copy|index_add|gather|scatter|embedding|EmbeddingBag|"
    r"softmax|SoftMax|log_softmax|layer_?norm|LayerNorm|rms_?norm|RMSNorm|group_?norm|"
    r"GroupNorm|batch_?norm|BatchNorm|RowwiseMoments|GammaBeta|ComputeFusedParams|"
    r"Welford|transpose|permute|nchwToNhwc|nhwcToNchw|nchw2nhwc|nhwc2nchw|"
    r"max_pool|avg_pool|adaptive_(?:avg|average|max)_pool|dropout|upsample|im2col|col2im|"
    r"ClassNLLCriterion|nll_loss|cross_entropy|masked_(?:fill|scatter)|nonzero|"
    r"radixSort|RadixSort|bitonicSort|gatherTopK|scan_innermost|scan_outer|"
    r"linearize_index|compute_grad_weight|krn_partials|renorm|"
    r"amp_foreach|amp_update_scale|AdamFunctor|adam|sgd|lamb|"
    # Triton (Inductor pointwise / reduction / persistent reduction).
    r"triton_(?:poi|red|per)_|"
    # cuDNN / MIOpen helpers that move or normalise data, never the convolution itself.
    r"cudnn::bn_|bn_fw|bn_bw|scalePackedTensor|computeOffsets|computeBOffsets|"
    r"MIOpenBatchNorm|MIOpenSoftmax|SubTensorOp|OpTensorFwdBias|transpose_NCHW|"
    # CUB, FBGEMM and ROCm runtime copies/fills.
    r"cub::Device(?:Scan|Reduce|RadixSort|Select|Compact|Segmented|Histogram|For)|"
    r"split_embedding|permute_pooled_embs|__amd_rocclr_(?:copy|fill)|"
    r"rotary|act_and_mul|silu_and_mul|reshape_and_cache",
    re.IGNORECASE,
)


def roofline_memory_evidence(
    kernels: pd.DataFrame,
    ops: pd.DataFrame,
    all_cpu_ops: pd.DataFrame,
    roof: pd.DataFrame,
) -> np.ndarray:
    """Kernels launched inside an op the roofline placed below the ridge point.

    ``ops`` are the roofline's candidate CPU ops (one rank), ``all_cpu_ops`` the frame
    ``kernels.op_index`` points into, ``roof`` the ``ops_roofline`` table built from them.
    An op name counts only when every roofline row of that name is ``memory`` (an op whose
    FP32 and BF16 calls fall on both sides of the ridge is no evidence either way). This is
    the ``memory_evidence`` that :func:`kernel_classes` accepts.
    """
    from nbprof.analysis.roofline import outermost_flops_ops, with_flops

    out = np.zeros(len(kernels), dtype=bool)
    if kernels.empty or roof.empty or ops.empty or all_cpu_ops.empty:
        return out
    bound = roof.groupby("op")["bound"].agg(lambda b: bool((b == "memory").all()))
    mem_names = set(bound[bound].index)
    if not mem_names:
        return out
    cand, _ = with_flops(ops)
    outer = outermost_flops_ops(cand)
    outer = outer[outer["name"].isin(mem_names)] if not outer.empty else outer
    if outer.empty:
        return out
    idx = kernels["op_index"].to_numpy(dtype="int64")
    launch = kernels["launch_ts"].to_numpy(dtype="float64")
    ok = (idx >= 0) & (idx < len(all_cpu_ops)) & ~np.isnan(launch)
    if not ok.any():
        return out
    k_pid = all_cpu_ops["pid"].to_numpy()[np.where(ok, idx, 0)]
    k_tid = all_cpu_ops["tid"].to_numpy()[np.where(ok, idx, 0)]
    for (pid, tid), grp in outer.groupby(["pid", "tid"], sort=False):
        # Outermost ops on one thread never overlap: the op holding a launch is the last
        # one starting at or before it, if it has not ended yet.
        grp = grp.sort_values("ts", kind="stable")
        o_ts = grp["ts"].to_numpy(dtype="float64")
        o_end = o_ts + grp["dur"].to_numpy(dtype="float64")
        sel = np.flatnonzero(ok & (k_pid == pid) & (k_tid == tid))
        if not len(sel):
            continue
        j = np.searchsorted(o_ts, launch[sel], side="right") - 1
        inside = (j >= 0) & (launch[sel] <= o_end[np.clip(j, 0, None)])
        out[sel[inside]] = True
    return out


def kernel_classes(
    names: pd.Series,
    tensor_core: np.ndarray,
    memory_evidence: np.ndarray | None = None,
) -> pd.DataFrame:
    """``cls`` and ``tensor_core`` per kernel, index aligned with ``names``.

    ``memory_evidence`` (optional, aligned with ``names``) marks kernels launched by an op
    the roofline called memory-bound: that makes an otherwise unrecognised kernel
    ``memory``; it never overrides a name that says GEMM, convolution or collective.
    """
    if len(names) == 0:
        return pd.DataFrame(
            {"cls": pd.Series(dtype="object"), "tensor_core": pd.Series(dtype=bool)},
            index=names.index,
        )
    is_comm = matches(names, _COMM)
    mem_first = matches(names, _MEMORY_FIRST)
    is_comp = matches(names, _COMPUTE) & ~mem_first
    is_mem = mem_first | matches(names, _MEMORY)
    if memory_evidence is not None:
        is_mem = is_mem | np.asarray(memory_evidence, dtype=bool)
    tc = np.asarray(tensor_core, dtype=bool)
    cls = np.select(
        [is_comm, tc, is_comp, is_mem],
        ["communication", "tensor_core", "compute", "memory"],
        default="other",
    ).astype(object)
    return pd.DataFrame({"cls": cls, "tensor_core": tc & ~is_comm}, index=names.index)


def class_shares(durations: np.ndarray, cls: np.ndarray) -> dict[str, float]:
    """Share of kernel time (%) per class, every class of :data:`CLASSES` present."""
    d = np.asarray(durations, dtype="float64")
    total = float(d.sum())
    if total <= 0:
        return {}
    c = np.asarray(cls, dtype=object)
    return {k: float(d[c == k].sum() / total * 100.0) for k in CLASSES}


def top_kernels(kernels: pd.DataFrame, classes: pd.DataFrame, n: int = 20) -> pd.DataFrame:
    """The kernels that took the most GPU time, by name."""
    cols = ["name", "count", "total_us", "mean_us", "pct", "cls", "tensor_core"]
    if kernels.empty:
        return pd.DataFrame({c: pd.Series(dtype="object") for c in cols})
    df = pd.DataFrame(
        {
            "name": kernels["name"].to_numpy(),
            "dur": kernels["dur"].to_numpy(dtype="float64"),
            "cls": classes["cls"].to_numpy(),
            "tensor_core": classes["tensor_core"].to_numpy(),
        }
    )
    g = df.groupby("name", sort=False).agg(
        count=("dur", "size"), total_us=("dur", "sum"), cls=("cls", "first"),
        tensor_core=("tensor_core", "any"),
    ).reset_index()  # fmt: skip
    total = float(df["dur"].sum())
    g["mean_us"] = g["total_us"] / g["count"]
    g["pct"] = g["total_us"] / total * 100.0 if total > 0 else np.nan
    g = g.sort_values("total_us", ascending=False, kind="stable").head(n).reset_index(drop=True)
    return g[cols]
