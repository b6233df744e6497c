"""Datasheet peaks: dense TFLOP/s per data type and memory bandwidth, matched by name.

Dense numbers only (NVIDIA datasheets print "with sparsity" figures at twice these). A
device this table does not know gets ``None`` and says so: never a guess from a similar
name. FP16/BF16 on GeForce parts are the FP32-accumulate rates PyTorch uses.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Peak:
    """Peaks of one GPU model. ``tflops`` maps dtype -> dense TFLOP/s (int8: TOPS)."""

    model: str
    tflops: dict[str, float]
    mem_gbps: float
    source: str
    tensor_cores: bool = True
    notes: list[str] = field(default_factory=list)


# fmt: off
_V100_SXM2 = Peak(
    # NVIDIA Tesla V100 datasheet (Jan 2018), SXM2 column: 7.8 FP64, 15.7 FP32,
    # 125 Tensor TFLOPS (FP16 in, FP32 accumulate), 900 GB/s HBM2.
    "V100 SXM2", {"fp64": 7.8, "fp32": 15.7, "fp16": 125.0}, 900.0,
    "NVIDIA Tesla V100 datasheet (SXM2)",
)
_V100_PCIE = Peak(
    # Same datasheet, PCIe column: 7 FP64, 14 FP32, 112 Tensor TFLOPS, 900 GB/s.
    "V100 PCIe", {"fp64": 7.0, "fp32": 14.0, "fp16": 112.0}, 900.0,
    "NVIDIA Tesla V100 datasheet (PCIe)",
)
# NVIDIA A100 Tensor Core GPU datasheet (2021): FP64 9.7 (19.5 with Tensor Cores), FP32 19.5,
# TF32 156, BF16/FP16 312, INT8 624 (dense). SXM and PCIe list the same compute peaks;
# bandwidth: 40GB 1,555 GB/s (both), 80GB SXM 2,039 GB/s, 80GB PCIe 1,935 GB/s.
_A100_COMPUTE = {"fp64": 19.5, "fp32": 19.5, "tf32": 156.0, "fp16": 312.0, "bf16": 312.0,
                 "int8": 624.0}
_A100_40 = Peak("A100 40GB", _A100_COMPUTE, 1555.0, "NVIDIA A100 datasheet (40GB, SXM/PCIe)")
_A100_80_SXM = Peak("A100 80GB SXM", _A100_COMPUTE, 2039.0, "NVIDIA A100 datasheet (80GB SXM)")
_A100_80_PCIE = Peak("A100 80GB PCIe", _A100_COMPUTE, 1935.0, "NVIDIA A100 datasheet (80GB PCIe)")
# NVIDIA H100 Tensor Core GPU datasheet: SXM FP64 34 (67 Tensor), FP32 67, TF32 494.5,
# BF16/FP16 989.5, FP8 1,979, INT8 1,979 (dense = half the sparse figures), 3.35 TB/s.
_H100_SXM = Peak(
    "H100 SXM", {"fp64": 67.0, "fp32": 67.0, "tf32": 494.5, "fp16": 989.5, "bf16": 989.5,
                 "fp8": 1979.0, "int8": 1979.0}, 3350.0, "NVIDIA H100 datasheet (SXM)",
)
# Same datasheet, PCIe: FP64 26 (51 Tensor), FP32 51, TF32 378, BF16/FP16 756.5,
# FP8 1,513, INT8 1,513, 2 TB/s.
_H100_PCIE = Peak(
    "H100 PCIe", {"fp64": 51.0, "fp32": 51.0, "tf32": 378.0, "fp16": 756.5, "bf16": 756.5,
                  "fp8": 1513.0, "int8": 1513.0}, 2000.0, "NVIDIA H100 datasheet (PCIe)",
)
# NVIDIA H200 Tensor Core GPU datasheet, H200 SXM: same compute as H100 SXM, 4.8 TB/s HBM3e.
_H200 = Peak(
    "H200 SXM", {"fp64": 67.0, "fp32": 67.0, "tf32": 494.5, "fp16": 989.5, "bf16": 989.5,
                 "fp8": 1979.0, "int8": 1979.0}, 4800.0, "NVIDIA H200 datasheet (SXM)",
)
# NVIDIA HGX B200 datasheet (per GPU, dense = half the sparse figures): TF32 1.1 PF,
# FP16/BF16 2.25 PF, FP8 4.5 PF, INT8 4.5 POPS, FP64 40 TF, 8 TB/s HBM3e. The datasheet
# prints no FP32 (non-tensor) figure, so fp32 stays unknown rather than guessed.
_B200 = Peak(
    "B200", {"fp64": 40.0, "tf32": 1100.0, "fp16": 2250.0, "bf16": 2250.0, "fp8": 4500.0,
             "int8": 4500.0}, 8000.0, "NVIDIA HGX B200 datasheet",
)
# NVIDIA L4 datasheet: FP32 30.3, TF32 60, BF16/FP16 121, FP8 242.5, INT8 242.5 (dense),
# 300 GB/s.
_L4 = Peak(
    "L4", {"fp32": 30.3, "tf32": 60.0, "fp16": 121.0, "bf16": 121.0, "fp8": 242.5,
           "int8": 242.5}, 300.0, "NVIDIA L4 datasheet",
)
# NVIDIA T4 datasheet: FP32 8.1, mixed FP16/FP32 65, INT8 130 TOPS, 320 GB/s.
_T4 = Peak("T4", {"fp32": 8.1, "fp16": 65.0, "int8": 130.0}, 320.0, "NVIDIA T4 datasheet")
# NVIDIA A10 datasheet: FP32 31.2, TF32 62.5, BF16/FP16 125, INT8 250 (dense), 600 GB/s.
_A10 = Peak(
    "A10", {"fp32": 31.2, "tf32": 62.5, "fp16": 125.0, "bf16": 125.0, "int8": 250.0}, 600.0,
    "NVIDIA A10 datasheet",
)
# NVIDIA Ada Lovelace architecture whitepaper, appendix table for GeForce RTX 4090: FP32
# 82.6, TF32 82.6, FP16/BF16 with FP32 accumulate 165.2, FP8 with FP32 accumulate 330.3,
# INT8 660.6 (dense), 1,008 GB/s GDDR6X.
_RTX4090 = Peak(
    "RTX 4090", {"fp32": 82.6, "tf32": 82.6, "fp16": 165.2, "bf16": 165.2, "fp8": 330.3,
                 "int8": 660.6}, 1008.0, "NVIDIA Ada Lovelace architecture whitepaper",
)
# fmt: on

_GIB = 1024**3
# "H100.*NVL" retried the rest of the name from every "H100" in it: quadratic. "H100, then
# anything but another H100, then NVL" matches the same names, in one pass.
_NVL = re.compile(r"H100(?:(?!H100).)*NVL|H200(?:(?!H200).)*NVL|GH200")


def lookup(name: str, total_memory: int | None = None, vendor: str = "nvidia") -> Peak | None:
    """The peaks of the device called ``name``; None when the table does not know it."""
    if vendor != "nvidia" or not name:
        return None
    n = name.upper()
    mem_gb = (total_memory or -1) / _GIB if total_memory and total_memory > 0 else None
    if re.search(r"V100S|V100-DGXS|V100-FHHL", n):
        return None  # other clocks and bandwidths than the two V100s in the table
    if "V100" in n:
        if "SXM2" in n or "SXM" in n:
            return _V100_SXM2
        if "PCIE" in n:
            return _V100_PCIE
        return None
    if "A100" in n:
        if "80GB" in n or (mem_gb is not None and mem_gb > 60):
            if "PCIE" in n:
                return _A100_80_PCIE
            if "SXM" in n:
                return _A100_80_SXM
            return None  # 80GB of unknown form factor: bandwidth differs
        if "40GB" in n or (mem_gb is not None and mem_gb < 48):
            return _A100_40
        return None
    if _NVL.search(n):
        return None
    if "H100" in n:
        if "PCIE" in n:
            return _H100_PCIE
        if "SXM" in n or "HBM3" in n:  # "NVIDIA H100 80GB HBM3" is the SXM5 part
            return _H100_SXM
        return None
    if "H200" in n:
        return _H200
    if re.search(r"\bB200\b", n):
        return _B200
    if re.search(r"\bL4\b", n):
        return _L4
    if re.search(r"\bT4\b", n):
        return _T4
    if re.search(r"\bA10\b", n):
        return _A10
    if re.search(r"RTX 4090\b", n) and "LAPTOP" not in n and " D" not in n:
        return _RTX4090
    return None


def peak_tflops(peak: Peak | None, dtype: str) -> float | None:
    """Dense peak for ``dtype`` ("fp32", "tf32", "fp16", "bf16", "fp8", "int8", "fp64")."""
    if peak is None:
        return None
    return peak.tflops.get(dtype)
