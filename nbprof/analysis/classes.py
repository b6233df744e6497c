"""Kernel classes the timeline colours by: tensor_core, compute, memory, communication, other.

A class is a claim about what limited a kernel, so each needs evidence:

- ``communication``: collectives and expert-parallel exchanges, by the words of their
  names: NCCL/RCCL/MSCCL, NVSHMEM, DeepEP (``deep_ep::intranode::dispatch``,
  ``notify_dispatch``, ``combine``), pplx, PyTorch symmetric memory, vLLM's and
  TensorRT-LLM's custom all-reduce. A kernel no name rule knows that behaves like one is
  reported as *possibly* communication (:func:`possible_comm`), never counted as compute;
- ``tensor_core``: the Tensor Core evidence of :mod:`nbprof.analysis.tensorcores`;
- ``compute``: GEMM, convolution, attention (prefill, forward/backward) and FFT families;
- ``memory``: kernel families that are bandwidth-bound by construction (PyTorch's
  elementwise/reduce/copy/fill/cat/index/softmax/norm/pool kernels, Triton pointwise and
  reduction kernels, cuDNN/MIOpen layout and batch-norm helpers, CUB scans and sorts,
  optimizer multi-tensor kernels, decode attention over a KV cache), or a kernel launched
  by an op the roofline placed below the ridge point (``memory_evidence``);
- ``other``: everything else. Custom extensions and unfamiliar names land here rather
  than in ``memory``: nothing about an unknown name says what bounds it.

Families are matched on the words of the kernel's own name (:func:`kernel_identity`,
:func:`~nbprof.analysis._text.name_tokens`), never on substrings: ``_typeConvert`` is no
convolution, ``reshape_and_cache_flash`` and ``flashinfer::`` sampling kernels are no flash
attention, and a MoE finalize templated on CUTLASS types is no GEMM.
"""

from __future__ import annotations

import functools
import logging
import re
from typing import Any

import numpy as np
import pandas as pd

from nbprof.analysis import _frames, _group, roofline
from nbprof.analysis._text import (
    Names,
    equals,
    has_bigram,
    matches,
    name_column,
    name_pattern,
    text_codes,
    token_matches,
)
from nbprof.analysis.model import TOP_KERNELS_TABLE

logger = logging.getLogger(__name__)

#: Every class ``kernel_classes`` can return, in the order the timeline stacks them.
CLASSES: tuple[str, ...] = ("tensor_core", "compute", "memory", "communication", "other")

#: Kernel-name words (see ``name_tokens``) that name a collective on their own:
#: collectives, DeepEP's intranode / internode (and low-latency ``internode_ll``)
#: namespaces, pplx-kernels' own, TensorRT-LLM's Lamport all-reduce.
_COMM_WORDS = frozenset({
    "allreduce", "allgather", "reducescatter", "alltoall", "alltoallv", "sendrecv",
    "multimem", "intranode", "internode", "pplx", "lamport",
})  # fmt: skip
#: Name prefixes of communication libraries' kernels (the word's start): NCCL, RCCL,
#: MSCCL and MSCCL++, NVSHMEM (nvshmem_, nvshmemi_, nvshmemx_).
_COMM_PREFIXES = ("nccl", "rccl", "msccl", "nvshmem")
#: Adjacent word pairs that name a collective: ``all_reduce``, ``one_shot`` (PyTorch
#: symmetric-memory all-reduce), ``deep_ep`` (DeepEP's namespace), ``notify_dispatch``,
#: ``symmetric_memory`` (PyTorch's c10d::symmetric_memory kernels) ...
_COMM_PAIRS = frozenset({
    ("all", "reduce"), ("all", "gather"), ("reduce", "scatter"), ("all", "to"),
    ("send", "recv"), ("one", "shot"), ("two", "shot"), ("deep", "ep"),
    ("notify", "dispatch"), ("notify", "combine"), ("symmetric", "memory"),
    ("custom", "ar"),
})  # fmt: skip
#: Words that name matrix math (GEMM/GEMV, convolution, FFT, attention, MMA instructions).
_COMPUTE_WORDS = frozenset({
    "conv", "winograd", "fft", "fprop", "dgrad", "wgrad", "xmma", "gmma", "wgmma", "hmma",
    "imma", "wmma", "mfma", "nvjet", "cijk", "matmul", "bmm", "mm", "addmm", "baddbmm",
    "attention", "attn", "fmha", "mha", "scudnn", "hcudnn", "dcudnn", "tensorop", "884",
    "1688", "16816", "161616", "8816",
})  # fmt: skip
_COMPUTE_PAIRS = frozenset({("triton", "tem"), ("mat", "mul"), ("flash", "fwd"),
                            ("flash", "bwd"), ("flash", "attn"), ("flash", "attention"),
                            ("flash", "decoding")})  # fmt: skip
#: Wrapper kernels whose first template argument names the real kernel
#: (``cutlass::Kernel<cutlass_80_tensorop_s1688gemm_...>``).
_WRAPPERS = frozenset({"kernel", "kernel2", "device_kernel", "kernelwrapper"})
_HEAD_END = re.compile(r"[<(]")


@functools.lru_cache(maxsize=1 << 16)
def kernel_identity(name: str) -> str:
    """The part of a kernel name that says what the kernel is: its qualified name without
    template arguments or parameters, or, for a generic wrapper (``cutlass::Kernel``), the
    wrapped kernel's name. Template arguments name the types a kernel is built from
    (``cutlass::gemm::GemmShape`` in a MoE finalize, ``CUDAFunctor_add`` in an elementwise
    kernel), not what the kernel does."""
    text = name.strip()
    if text.startswith("void "):
        text = text[5:]
    m = _HEAD_END.search(text)
    head = text[: m.start()] if m else text
    last = head.rsplit("::", 1)[-1].strip().lower()
    if m and m.group() == "<" and last in _WRAPPERS:
        inner = text[m.end() :]
        depth, cut = 0, len(inner)
        for i, ch in enumerate(inner):
            if ch in "<(":
                depth += 1
            elif ch in ">)":
                if depth == 0:
                    cut = i
                    break
                depth -= 1
            elif ch == "," and depth == 0:
                cut = i
                break
        return inner[:cut].strip() or head
    return head


def _is_decode_attention(tokens: tuple[str, ...]) -> bool:
    """Attention over a KV cache for one new token per sequence (decode, vLLM's paged
    attention): it reads the whole cache for a few FLOPs per byte, so it is memory-bound,
    unlike prefill attention."""
    if "prefill" in tokens:
        return False
    if "decode" in tokens and bool({"attention", "attn", "kv", "mha", "mqa", "gqa"} & set(tokens)):
        return True
    return has_bigram(tokens, frozenset({("paged", "attention")}))


def _is_compute(tokens: tuple[str, ...]) -> bool:
    if _is_decode_attention(tokens):
        return False
    for t in tokens:
        if t in _COMPUTE_WORDS or t.endswith(("gemm", "gemv")) or t.startswith(("gemm", "gemv")):
            return True
        if t.startswith(("convolution", "convolve")):
            return True
    if has_bigram(tokens, _COMPUTE_PAIRS):
        return True
    # FlashInfer / vLLM attention: a prefill or decode kernel over a KV cache.
    return "kv" in tokens and ("prefill" in tokens or "decode" in tokens)


def _is_comm(tokens: tuple[str, ...]) -> bool:
    if tokens[:1] == ("triton",) and tokens[1:2] in (("poi",), ("red",), ("per",)):
        return False  # Inductor's generated pointwise/reduction kernels, named by their ops
    if any(t.startswith(_COMM_PREFIXES) or t in _COMM_WORDS for t in tokens):
        return True
    if has_bigram(tokens, _COMM_PAIRS):
        return True
    # vLLM's custom all-reduce: cross_device_reduce_1stage / _2stage.
    return any(tokens[i : i + 3] == ("cross", "device", "reduce") for i in range(len(tokens)))


def _is_memory_by_words(tokens: tuple[str, ...]) -> bool:
    return _is_moe_helper(tokens) or _is_decode_attention(tokens)


def _is_moe_helper(tokens: tuple[str, ...]) -> bool:
    # Mixture-of-experts routing: permuting, gathering and summing expert outputs.
    return "moe" in tokens and bool(
        {"finalize", "permute", "unpermute", "routing", "align", "sort", "topk"} & set(tokens)
    )


def is_collective(names: Names) -> np.ndarray:
    """Communication kernels by the words of their names: NCCL/RCCL/MSCCL collectives,
    NVSHMEM, DeepEP and pplx dispatch/combine, symmetric-memory and custom all-reduce
    kernels (``multimem_all_reduce``, ``one_shot_all_reduce``, ``cross_device_reduce``)."""
    return token_matches(names, _is_comm, kernel_identity)


def possible_comm(
    streams: np.ndarray,
    dur: np.ndarray,
    grid: np.ndarray,
    cls: np.ndarray,
    sm_count: int | None,
) -> np.ndarray:
    """Kernels that behave as communication kernels do, though no name rule knows them:
    what a custom collective or expert-parallel exchange looks like on the timeline.

    A communication kernel runs on a stream of its own beside the compute (so that it can
    overlap it), and it launches few blocks (a handful of channels, a few SMs set aside)
    that run long (they wait for peers and move data at link speed, not at the SMs').
    A kernel is *possibly communication* when all of it holds:

    - its class is ``other`` (no name rule knows it);
    - its stream runs no kernel a name rule calls compute, memory or Tensor Core work, and
      other streams run kernels: a dedicated stream beside the compute. (Whether its
      kernels did overlap the compute is not asked: communication nothing overlapped,
      exposed, is the kind that matters most.)
    - its grid is smaller than the GPU's SM count (it cannot fill the GPU), and it runs
      longer than the median kernel of the other streams.

    Each alone is weak (a side-stream prefetch, a small latency-bound kernel); together
    they are the shape of communication, but still no proof: the caller reports these as
    possibly communication, never as collectives."""
    n = len(dur)
    out = np.zeros(n, dtype=bool)
    if not n or sm_count is None or sm_count <= 0:
        return out
    cls = np.asarray(cls, dtype=object)
    other = cls == "other"
    known_work = np.isin(cls, ["tensor_core", "compute", "memory"])
    small = (grid > 0) & (grid < sm_count)
    for s in np.unique(streams[other & small]):
        mine = streams == s
        if known_work[mine].any() or mine.all():
            continue  # not a dedicated stream, or the only one
        long = dur > float(np.median(dur[~mine]))
        out |= mine & other & small & long
    return out


# Families whose names could also hit the compute words (an Inductor pointwise kernel fused
# around an "mm" op, a cuBLAS split-K reduction) but that never do the matrix math themselves.
_MEMORY_FIRST = name_pattern(
    r"^triton_(?:poi|red|per)_|"
    r"at::native::(?:\w+_)?elementwise_kernel|at::native::reduce_kernel|"
    # "cublas", word characters but no second "cublas" (one scan per word, not one per
    # repeat), "::": the texts cublas\w*:: matches.
    r"splitKreduce|cublasLt::epilogue|cublas(?:(?!cublas)\w)*::(?:scal|axpy|copy|swap)",
    re.IGNORECASE,
)
_MEMORY = name_pattern(
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
    r"rotary|act_and_mul|silu_and_mul|reshape_and_cache|typeConvert|bounds_check_indices|"
    # cuBLAS / cuBLASLt helpers around a GEMM: dot products, GEMV reductions, epilogues.
    r"^(?:void )?dot_kernel|reduce_1Block_kernel|epilogue::impl",
    re.IGNORECASE,
)


def roofline_bounds(
    kernels: pd.DataFrame,
    ops: pd.DataFrame,
    all_cpu_ops: pd.DataFrame,
    roof: pd.DataFrame,
    flop_ops: pd.DataFrame | None = None,
) -> np.ndarray:
    """Per kernel, the roofline bound of the FLOP-counted op it was launched in:
    ``"compute"``, ``"memory"`` or ``""`` (no such op, or its rows disagree).

    ``ops`` are the roofline's candidate CPU ops (one rank), ``all_cpu_ops`` the frame
    ``kernels.op_index`` points into, ``roof`` the ``ops_roofline`` table built from them.
    An op name counts only when every roofline row of that name has the same bound (an op
    whose FP32 and BF16 calls fall on both sides of the ridge is no evidence either way).
    ``flop_ops``: the outermost FLOP-counted ops of ``ops``
    (:func:`nbprof.analysis.roofline.flop_ops`) when the caller has them already.
    """
    out = np.full(len(kernels), "", dtype=object)
    if kernels.empty or roof.empty or ops.empty or all_cpu_ops.empty:
        return out
    seen: dict[str, set[str]] = {}
    for op, b in zip(_list(roof, "op"), _list(roof, "bound"), strict=True):
        if b in ("compute", "memory") and isinstance(op, str):
            seen.setdefault(op, set()).add(b)
    bound_of = {op: next(iter(b)) for op, b in seen.items() if len(b) == 1}
    if not bound_of:
        return out
    outer = flop_ops if flop_ops is not None else roofline.flop_ops(ops)[0]
    if not outer.empty:
        names = _frames.column(outer, "name").tolist()
        keep = np.fromiter(
            (type(n) is str and n in bound_of for n in names), dtype=bool, count=len(names)
        )
        outer = outer if keep.all() else outer.iloc[np.flatnonzero(keep)]
    if outer.empty:
        return out
    idx = _frames.column(kernels, "op_index", "int64")
    launch = _frames.column(kernels, "launch_ts", "float64")
    ok = (idx >= 0) & (idx < len(all_cpu_ops)) & ~np.isnan(launch)
    if not ok.any():
        return out
    k_pid = _frames.column(all_cpu_ops, "pid")[np.where(ok, idx, 0)]
    k_tid = _frames.column(all_cpu_ops, "tid")[np.where(ok, idx, 0)]
    all_ts = _frames.column(outer, "ts", "float64")
    all_end = all_ts + _frames.column(outer, "dur", "float64")
    all_bound = np.array([bound_of[str(n)] for n in _list(outer, "name")], dtype=object)
    threads, code = _group.codes(list(zip(_list(outer, "pid"), _list(outer, "tid"), strict=True)))
    for i, (pid, tid) in enumerate(threads):
        # Outermost ops on one thread never overlap: the op holding a launch is the last
        # one starting at or before it, if it has not ended yet.
        at = np.flatnonzero(code == i)
        at = at[np.argsort(all_ts[at], kind="stable")]
        o_ts, o_end, o_bound = all_ts[at], all_end[at], all_bound[at]
        sel = np.flatnonzero(ok & (k_pid == pid) & (k_tid == tid))
        if not len(sel):
            continue
        j = np.searchsorted(o_ts, launch[sel], side="right") - 1
        inside = (j >= 0) & (launch[sel] <= o_end[np.clip(j, 0, None)])
        out[sel[inside]] = o_bound[j[inside]]
    return out


def _list(df: pd.DataFrame, name: str) -> list[Any]:
    """``df[name].tolist()``, read from the frame's array where it stores a NumPy one (the
    same values) rather than through a Series."""
    values = _frames.stored_array(df, name)
    return values.tolist() if type(values) is np.ndarray else df[name].tolist()


def roofline_memory_evidence(
    kernels: pd.DataFrame,
    ops: pd.DataFrame,
    all_cpu_ops: pd.DataFrame,
    roof: pd.DataFrame,
) -> np.ndarray:
    """Kernels launched inside an op the roofline placed below the ridge point: the
    ``memory_evidence`` that :func:`kernel_classes` accepts."""
    return roofline_bounds(kernels, ops, all_cpu_ops, roof) == "memory"


#: The classes a kernel can have, as the objects its class column holds.
_CLASS_WORDS = np.array(
    ["communication", "tensor_core", "compute", "memory", "other"], dtype=object
)


def kernel_classes(
    names: Names,
    tensor_core: np.ndarray,
    memory_evidence: np.ndarray | None = None,
    *,
    index: pd.Index | None = None,
) -> pd.DataFrame:
    """``cls`` and ``tensor_core`` per kernel, index aligned with ``names``.

    ``memory_evidence`` (optional, aligned with ``names``) marks kernels launched by an op
    the roofline called memory-bound: that makes an otherwise unrecognised kernel
    ``memory``; it never overrides a name that says GEMM, convolution or collective.
    ``index`` is the rows' index where ``names`` is an array (a Series brings its own).
    """
    if isinstance(names, pd.Series):
        index = names.index
    elif index is None:
        index = pd.RangeIndex(len(names))
    if len(names) == 0:
        return pd.DataFrame(
            {"cls": pd.Series(dtype="object"), "tensor_core": pd.Series(dtype=bool)},
            index=index,
        )
    is_comm = token_matches(names, _is_comm, kernel_identity)
    mem_first = matches(names, _MEMORY_FIRST)
    is_comp = token_matches(names, _is_compute, kernel_identity) & ~mem_first
    is_mem = (
        mem_first
        | matches(names, _MEMORY)
        | token_matches(names, _is_memory_by_words, kernel_identity)
    )
    if memory_evidence is not None:
        is_mem = is_mem | np.asarray(memory_evidence, dtype=bool)
    # Tensor Core evidence names GEMM families; a kernel whose own name says it moves
    # memory (an elementwise kernel templated on a CUTLASS type) does no matrix math.
    tc = np.asarray(tensor_core, dtype=bool) & ~is_comm & (is_comp | ~is_mem)
    # Each kernel's class picked from the five words as objects: selecting the words
    # themselves makes fixed-width text, and a str object of every kernel's from it.
    cls = _CLASS_WORDS[np.select([is_comm, tc, is_comp, is_mem], [0, 1, 2, 3], default=4)]
    return _frames.constructed({"cls": cls, "tensor_core": tc}, index=index)


def class_shares(durations: np.ndarray, cls: np.ndarray) -> dict[str, float]:
    """Share of kernel time (%) per class, every class of :data:`CLASSES` present."""
    d = np.asarray(durations, dtype="float64")
    total = float(d.sum())
    if total <= 0:
        return {}
    c = np.asarray(cls, dtype=object)
    return {k: float(d[equals(c, k)].sum() / total * 100.0) for k in CLASSES}


def top_kernels(kernels: pd.DataFrame, classes: pd.DataFrame, n: int = 20) -> pd.DataFrame:
    """The kernels that took the most GPU time, by name."""
    cols = list(TOP_KERNELS_TABLE.names)
    if kernels.empty:
        return _frames.empty(cols)
    names = name_column(kernels, "name")
    if not _group.all_text(names):
        return _top_kernels_grouped(kernels, classes, n)
    dur = _frames.column(kernels, "dur", "float64")
    uniq, code = text_codes(names)
    k = len(uniq)
    count = _group.counts(code, k)
    total_us = _group.sums(code, dur, k)
    cls_of = _frames.column(classes, "cls")
    # Each name's first row (codes number the names in order of first appearance).
    cls = cls_of[np.unique(code, return_index=True)[1]]
    if not _group.all_text(cls):  # "first" skips missing classes: pandas knows how
        return _top_kernels_grouped(kernels, classes, n)
    total = float(np.nansum(dur))  # pandas' sum: a missing duration adds nothing
    pct = total_us / total * 100.0 if total > 0 else np.full(k, np.nan)
    order = np.argsort(-total_us, kind="stable")[:n]
    g = {
        "name": np.array(uniq, dtype=object)[order],
        "count": count[order],
        "total_us": total_us[order],
        "mean_us": total_us[order] / count[order],
        "pct": pct[order],
        "cls": cls[order],
        "tensor_core": _group.any_true(code, _frames.column(classes, "tensor_core", bool), k)[
            order
        ],
    }
    return _frames.frame({c: g[c] for c in cols})


def _top_kernels_grouped(kernels: pd.DataFrame, classes: pd.DataFrame, n: int) -> pd.DataFrame:
    """:func:`top_kernels` by pandas' groupby, for names or classes with missing values."""
    df = pd.DataFrame(
        {
            "name": _frames.column(kernels, "name"),
            "dur": _frames.column(kernels, "dur", "float64"),
            "cls": _frames.column(classes, "cls"),
            "tensor_core": _frames.column(classes, "tensor_core"),
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
    return g[list(TOP_KERNELS_TABLE.names)]
