"""Which kernels ran on Tensor Cores (NVIDIA) or matrix cores (AMD), and on what evidence.

Kernel names change every GPU generation, so a name list alone goes stale (a Blackwell
trace reads 0% with a Volta-era list: pytorch/kineto#1041). Evidence is combined, strongest
first:

1. ``measured``: hardware counters in the trace (CUPTI metrics on Tensor Core pipes).
2. ``kernel_names``: names that say Tensor Core (positive) or say plain FP32 / SIMT
   (negative); the patterns span Volta through Blackwell, flash attention and CUTLASS.
3. ``ops``: the kernel was launched by a Tensor-Core-eligible op (mm, addmm, bmm, linear,
   conv, attention) whose inputs are half, bfloat16, fp8 or int8: catches names no list
   knows yet.

A GPU with compute capability below 7.0 has no Tensor Cores at all; an AMD GPU gets only
matrix-core (MFMA) name evidence and never an NVIDIA claim.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from nbprof.analysis import _frames
from nbprof.analysis._text import Names, matches, name_column, name_pattern, text_column
from nbprof.analysis.model import TensorCoreBasis

logger = logging.getLogger(__name__)

_SM_XMMA = r"sm(?:75|80|86|87|89|90a?|100a?|120)_xmma"
# Positive evidence. Each alternative names the generation it comes from. No pattern that
# sees a name may take more than linear time in it (tests/test_hostile_names.py).
_TC_NVIDIA = name_pattern(
    r"|".join(
        (
            r"[hsid]884",  # Volta cuBLAS/cuDNN: volta_h884gemm, volta_s884cudnn
            r"hmma",  # Volta/Turing HMMA kernels
            r"[hsid]1688",  # Turing/Ampere: turing_s1688gemm, ampere_h1688gemm
            r"[hsid]16816",  # Ampere: ampere_s16816gemm, sm80_xmma s16816
            r"i8816",  # Turing/Ampere integer tensor op
            r"imma",  # integer MMA kernels
            r"tensorop",  # CUTLASS / cuBLAS tensorop_*, cutlass_tensorop_*
            # "A.*B" is searched as "A, then anything but another A, then B": the same
            # texts (B can start inside no A), scanned once from one A instead of to the
            # end of the name from every repeat of A (quadratic in a name of repeats).
            _SM_XMMA + r"(?:(?!" + _SM_XMMA + r").)*(?:tf32|bf16|f16|fp16|e4m3|e5m2|i8|int8)",
            r"xmma_(?:(?!xmma_).)*(?:tf32|bf16|f16|fp16|e4m3|e5m2|int8)",  # xmma, TC type
            r"wgmma",  # Hopper warpgroup MMA
            r"gmma",  # Hopper CUTLASS sm90 gmma kernels
            r"nvjet",  # cuBLAS Hopper/Blackwell JIT GEMMs (nvjet_hsh, nvjet_tst)
            r"tcgen05",  # Blackwell 5th-gen Tensor Core instructions
            r"bmm_(?:(?!bmm_)\w)*e[45]m[23]",  # Blackwell block-scaled GEMMs (bmm_MxE4m3)
            r"fmha",  # fused multi-head attention (fmhaSm100a, fmha_cutlass)
            r"flash_(?:fwd|bwd)",  # FlashAttention 2/3
            r"flash::",  # FlashAttention templates
            # s16816 can start at the last "s" of a later "cutlass": "cutlass16816".
            r"cutlass(?:(?!cutlass).)*(?:_tf32|_bf16|_f16|_s8|_e4m3|h16816|s16816|tensor"
            r"|cutlass16816)",
            r"implicit_?gemm(?:(?!implicit_?gemm).)*(?:tensor|hmma|xmma|1688|16816|884)",
            r"\bsm9\d_",  # CUTLASS 3 sm90 kernels run on Tensor Cores
        )
    ),
    re.IGNORECASE,
)
# Negative evidence: SIMT / plain-FP32 GEMMs and GEMVs never touch Tensor Cores.
_NOT_TC = name_pattern(
    r"simt|sgemm|gemv|gemmSN|nvjet_sss|gemmk1|"
    # B ("_f32...") can start at the "_" that ends a later A: "sm90_xmma_f32f32...".
    r"sm\d+_xmma_(?:(?!sm\d+_xmma_)\w)*(?:_|sm\d+_xmma_)f32f32_f32f32_f32",
    re.IGNORECASE,
)
# A pure-f32 xmma kernel with no tf32 after it: ``xmma_\w*_f32f32_f32(?!.*tf32)``, searched
# once per line. The lookahead is true only after the last "tf32", so only the last
# xmma_..._f32f32_f32 of a line decides: found from the line's first "xmma_" by jumping to
# its last one that is followed by one (atomic groups: no second try from any other
# start, where each try would scan to the end of the line again).
_F32_XMMA = name_pattern(
    r"(?:\A|(?<=\n))(?>[^\n]*?xmma_)"
    r"(?>(?:[^\n]*xmma_)?(?:(?!xmma_)\w)*(?:_|xmma_)f32f32_f32)(?![^\n]*tf32)",
    re.IGNORECASE,
)
# AMD matrix cores (MFMA) by name only.
_MFMA = name_pattern(r"mfma|_MT\d+x\d+x\d+_MI|Cijk_(?:(?!Cijk_).)*(?:_|Cijk_)MI\d+", re.IGNORECASE)
# Kernels an eligible op launches around its GEMM: layout transforms, epilogues, fills.
_HELPER = name_pattern(
    r"elementwise|vectorized|reduce|reduction|transpose|nchwToNhwc|nhwcToNchw|copy|fill|"
    r"splitKreduce|memset|cast|convert|softmax|norm|scal|bias|gather|scatter|index",
    re.IGNORECASE,
)
_ELIGIBLE_OP = re.compile(
    r"aten::(?:mm|addmm|bmm|baddbmm|matmul|linear|_addmm_activation|addbmm|"
    r"conv\w*|cudnn_convolution\w*|_convolution|scaled_dot_product\w*|"
    r"_scaled_dot_product\w*|_flash_attention\w*|_efficient_attention\w*|_scaled_mm|"
    r"_int_mm)\b",
)
_TC_DTYPE = re.compile(r"Half|BFloat16|Float8|float8|e4m3|e5m2|signed char|int8", re.I)
# CUPTI metric names that count Tensor Core pipe activity.
_TC_METRIC = name_pattern(r"tensor|hmma|imma|mma", re.IGNORECASE)


@dataclass(frozen=True)
class TensorCoreResult:
    """Per-kernel flags (aligned with the kernels frame) and the basis actually used."""

    flags: np.ndarray  # bool, one per kernel
    basis: TensorCoreBasis
    how: str


def name_evidence(names: Names, vendor: str = "nvidia") -> np.ndarray:
    """+1 names say Tensor/matrix cores, -1 they say not, 0 they say nothing. Per name."""
    if vendor == "amd":
        pos = matches(names, _MFMA)
        neg = np.zeros(len(names), dtype=bool)
    else:
        pos = matches(names, _TC_NVIDIA)
        neg = matches(names, _NOT_TC) | matches(names, _F32_XMMA)
    # Negative markers (simt, sgemm, pure f32 xmma) override generic positives such as a
    # bare sm90_ prefix: cutlass_simt_* kernels carry both.
    return np.where(neg, -1, np.where(pos, 1, 0)).astype("int64")


def op_evidence(kernels: pd.DataFrame, cpu_ops: pd.DataFrame) -> np.ndarray:
    """True where the launching op is Tensor-Core-eligible and its inputs are a TC dtype."""
    n = len(kernels)
    out = np.zeros(n, dtype=bool)
    if n == 0 or cpu_ops.empty:
        return out
    idx = _frames.column(kernels, "op_index", "int64")
    valid = (idx >= 0) & (idx < len(cpu_ops))
    if not valid.any():
        return out
    # Op names matched on the whole column (factorized once per analysis, for every
    # pattern asked of them), read at the rows.
    at = idx[valid]
    eligible = matches(name_column(cpu_ops, "name"), _ELIGIBLE_OP)[at]
    # Input types only here: matched on the launching ops' alone (a few of the ops).
    ops, back = np.unique(at, return_inverse=True)
    types = _frames.column(cpu_ops, "input_types", object)[ops]  # matched as its Series
    tc_type = matches(types, _TC_DTYPE)[back]
    helper = matches(name_column(kernels, "name"), _HELPER)[valid]
    out[np.flatnonzero(valid)] = eligible & tc_type & ~helper
    return out


def measured_names(counters: pd.DataFrame) -> tuple[set[str], set[str]] | None:
    """Kernel names counters show on / off the Tensor Core pipes; None without such counters."""
    if counters.empty:
        return None
    tc = counters[matches(counters["metric"], _TC_METRIC)]
    if tc.empty:
        return None
    per = tc.groupby("name")["value"].sum()
    return set(per[per > 0].index), set(per[per <= 0].index)


def classify(
    kernels: pd.DataFrame,
    cpu_ops: pd.DataFrame,
    *,
    vendor: str,
    compute_capability: str | None,
    counters: pd.DataFrame | None = None,
) -> TensorCoreResult:
    """Flag each kernel of one device and say which evidence decided."""
    n = len(kernels)
    none = np.zeros(n, dtype=bool)
    if vendor not in ("nvidia", "amd"):
        return TensorCoreResult(none, "unknown", f"vendor {vendor!r}: no evidence rules")
    cc = cc_value(compute_capability)
    if vendor == "nvidia" and cc is not None and cc < 7.0:
        return TensorCoreResult(
            none, "kernel_names", f"compute capability {compute_capability} < 7.0: no Tensor Cores"
        )
    if n == 0:
        return TensorCoreResult(none, "unknown", "no kernels in the trace")
    if counters is not None and vendor == "nvidia":
        m = measured_names(counters)
        if m is not None:
            on, _off = m
            flags = kernels["name"].isin(on).to_numpy()
            return TensorCoreResult(flags, "measured", "CUPTI Tensor Core pipe counters")
    ev = name_evidence(text_column(kernels, "name"), vendor)
    flags = ev > 0
    if vendor == "amd":
        # Matrix-core evidence on AMD is the name only; silence is not a "no".
        if flags.any():
            return TensorCoreResult(flags, "kernel_names", "AMD MFMA (matrix core) kernel names")
        return TensorCoreResult(flags, "unknown", "AMD GPU: no MFMA kernel names seen")
    by_op = op_evidence(kernels, cpu_ops) & (ev == 0)
    flags = flags | by_op
    kt = _frames.column(kernels, "dur", "float64")
    name_time = float(kt[ev > 0].sum())
    op_time = float(kt[by_op].sum())
    decided = ev != 0
    if name_time == 0 and op_time == 0 and not decided.any():
        return TensorCoreResult(flags, "unknown", "no kernel name or op says either way")
    if op_time > name_time:
        return TensorCoreResult(
            flags, "ops", "launched by mm/conv/attention ops with half/bf16/fp8/int8 inputs"
        )
    how = "Tensor Core kernel names (xmma/wgmma/nvjet/884/1688/16816/flash...)"
    if op_time > 0:
        how += " plus launching ops in Tensor Core dtypes"
    if name_time == 0:
        how = "no kernel name shows Tensor Core use; SIMT/FP32 GEMM names seen"
    return TensorCoreResult(flags, "kernel_names", how)


def cc_value(text: str | None) -> float | None:
    """A compute capability as a number ("8.6" -> 8.6); None when absent or unreadable."""
    try:
        return float(text) if text else None
    except ValueError:
        return None
