"""Datasheet peaks: dense TFLOP/s per data type and memory bandwidth, matched by name.

Dense numbers only (NVIDIA and AMD datasheets print "with sparsity" figures at twice
these). A device this table does not know gets ``None`` and says so: never a guess from a
similar name. FP16/BF16 on GeForce parts are the FP32-accumulate rates PyTorch uses.

ROCm traces often name an Instinct GPU "AMD Radeon Graphics", or not at all; such a GPU
is recognised by what its properties do say (compute units and memory), and only where
exactly one model of the table has both (:func:`identify` says which and how).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field

from nbprof import units

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
    #: The ``tflops`` key of FP32 matrix products run on the matrix units: TF32 on NVIDIA
    #: Tensor Cores; AMD's matrix cores run FP32 itself, at their own rate.
    fp32_matrix_key: str = "tf32"


# fmt: off
_V100_SXM2 = Peak(
    # NVIDIA Tesla V100 datasheet (Jan 2018), SXM2 column: 7.8 FP64, 15.7 FP32,
    # 125 Tensor TFLOPS (FP16 in, FP32 accumulate), 900 GB/s HBM2.
    "V100 SXM2", {"fp64": 7.8, "fp32": 15.7, "fp16": 125.0}, 900.0,
    "NVIDIA Tesla V100 datasheet (SXM2)",
)
# NVIDIA DGX Station datasheet: four Tesla V100 at 500 TFLOPS mixed precision in all, 125
# per GPU: the SXM2 part's clocks, so its SXM2 figures (15.7 FP32, 900 GB/s) hold.
_V100_DGXS = Peak(
    "V100 DGXS", {"fp64": 7.8, "fp32": 15.7, "fp16": 125.0}, 900.0,
    "NVIDIA DGX Station and Tesla V100 (SXM2) datasheets",
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
# NVIDIA H800 Tensor Core GPU datasheet (dense = half the sparse figures), SXM: FP64 1
# (1 Tensor), FP32 67, TF32 494.5, BF16/FP16 989.5, FP8 1,979, INT8 1,979, 3.35 TB/s; PCIe:
# FP64 0.8, FP32 51, TF32 378, BF16/FP16 756.5, FP8 1,513, INT8 1,513, 2 TB/s.
_H800_SXM = Peak(
    "H800 SXM", {"fp64": 1.0, "fp32": 67.0, "tf32": 494.5, "fp16": 989.5, "bf16": 989.5,
                 "fp8": 1979.0, "int8": 1979.0}, 3350.0, "NVIDIA H800 datasheet (SXM)",
)
_H800_PCIE = Peak(
    "H800 PCIe", {"fp64": 0.8, "fp32": 51.0, "tf32": 378.0, "fp16": 756.5, "bf16": 756.5,
                  "fp8": 1513.0, "int8": 1513.0}, 2000.0, "NVIDIA H800 datasheet (PCIe)",
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
# NVIDIA Turing architecture whitepaper, appendix table for GeForce RTX 2080 Ti (reference
# clocks; the Founders Edition is 6% faster): FP32 13.4, FP16 Tensor with FP32 accumulate
# 53.8, INT8 215.2 TOPS, 616 GB/s GDDR6. Turing has no TF32 or BF16.
_RTX2080TI = Peak(
    "RTX 2080 Ti", {"fp32": 13.4, "fp16": 53.8, "int8": 215.2}, 616.0,
    "NVIDIA Turing architecture whitepaper",
)

# AMD Instinct datasheets. The matrix-core figures ("fp32_matrix", fp16, bf16, fp8, int8)
# are what GEMMs can reach; "fp32" is the vector rate.
# MI300X: FP64 vector 81.7, FP32 vector 163.4, FP32 matrix 163.4, TF32 653.7, FP16/BF16
# 1,307.4, FP8 2,614.9, INT8 2,614.9 (dense), 304 CUs, 192 GB HBM3 at 5.3 TB/s.
_MI300X_COMPUTE = {"fp64": 81.7, "fp32": 163.4, "fp32_matrix": 163.4, "tf32": 653.7,
                   "fp16": 1307.4, "bf16": 1307.4, "fp8": 2614.9, "int8": 2614.9}
_MI300X = Peak("AMD Instinct MI300X", _MI300X_COMPUTE, 5300.0, "AMD Instinct MI300X datasheet",
               fp32_matrix_key="fp32_matrix")
# MI325X: the MI300X's compute, 256 GB HBM3E at 6 TB/s.
_MI325X = Peak("AMD Instinct MI325X", _MI300X_COMPUTE, 6000.0, "AMD Instinct MI325X datasheet",
               fp32_matrix_key="fp32_matrix")
# MI210: 104 CUs, FP64 vector 22.6, FP32 vector 22.6, FP32 matrix 45.3, FP16/BF16 181.0,
# INT8 181.0, 64 GB HBM2e at 1.6 TB/s. An MI250 is two such dies (GCDs; 208 CUs, 45.3 /
# 90.5 / 362.1, 128 GB at 3.2 TB/s in its datasheet), each its own device with exactly
# half of it: one GCD and an MI210 have the same peaks.
_MI210_MI250 = Peak(
    "AMD Instinct MI210 or one MI250 GCD",
    {"fp64": 22.6, "fp32": 22.6, "fp32_matrix": 45.3, "fp16": 181.0, "bf16": 181.0,
     "int8": 181.0}, 1600.0, "AMD Instinct MI210 and MI250 datasheets (an MI250 is two GCDs)",
    fp32_matrix_key="fp32_matrix",
)
# MI250X: 220 CUs, FP32 vector 47.9, FP32 matrix 95.7, FP16/BF16 383, INT8 383, 128 GB at
# 3.2 TB/s: per GCD (110 CUs, 64 GB) half of each.
_MI250X_GCD = Peak(
    "AMD Instinct MI250X (one GCD)",
    {"fp64": 23.95, "fp32": 23.95, "fp32_matrix": 47.85, "fp16": 191.5, "bf16": 191.5,
     "int8": 191.5}, 1600.0, "AMD Instinct MI250X datasheet (half: one of its two GCDs)",
    fp32_matrix_key="fp32_matrix",
)
# fmt: on

#: The model number in the device name, the compute units one device of it has, its peaks.
_AMD_NAMES: tuple[tuple[str, int, Peak], ...] = (
    ("MI300X", 304, _MI300X), ("MI325X", 304, _MI325X), ("MI210", 104, _MI210_MI250),
    ("MI250", 104, _MI210_MI250), ("MI250X", 110, _MI250X_GCD),
)  # fmt: skip
#: AMD models by (compute units, memory range in GiB): what a ROCm device's properties
#: say when its name does not. Each pair fits one row of the table only.
_AMD_BY_SHAPE: tuple[tuple[int, float, float, Peak], ...] = (
    (304, 176.0, 200.0, _MI300X),
    (304, 240.0, 264.0, _MI325X),
    (104, 60.0, 68.0, _MI210_MI250),
    (110, 60.0, 68.0, _MI250X_GCD),
)

_GIB = 1024**3
# "H100.*NVL" retried the rest of the name from every "H100" in it: quadratic. "H100, then
# anything but another H100, then NVL" matches the same names, in one pass.
_NVL = re.compile(r"H100(?:(?!H100).)*NVL|H200(?:(?!H200).)*NVL|GH200")


def lookup(
    name: str,
    total_memory: int | None = None,
    vendor: str = "nvidia",
    sm_count: int | None = None,
) -> Peak | None:
    """The peaks of the device called ``name``; None when the table does not know it."""
    return identify(name, total_memory, vendor, sm_count)[0]


def identify(
    name: str,
    total_memory: int | None = None,
    vendor: str = "nvidia",
    sm_count: int | None = None,
) -> tuple[Peak | None, str]:
    """The peaks of a device and how it was recognised ("" when it was not): by its name,
    or, for an AMD GPU the trace does not name, by its compute units and memory."""
    mem_gb = total_memory / _GIB if total_memory and total_memory > 0 else None
    if vendor == "amd":
        return _amd(name, mem_gb, sm_count)
    if vendor != "nvidia" or not name:
        return None, ""
    p = _nvidia(name.upper(), mem_gb)
    return p, (f"device name {name!r}" if p is not None else "")


def _nvidia(n: str, mem_gb: float | None) -> Peak | None:
    if re.search(r"V100S|V100-FHHL", n):
        return None  # other clocks and bandwidths than the V100s in the table
    if "V100" in n:
        if "DGXS" in n:
            return _V100_DGXS
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
    if "H800" in n:
        if "NVL" in n:
            return None
        return _H800_PCIE if "PCIE" in n else _H800_SXM  # "NVIDIA H800" is the SXM5 part
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
    if re.search(r"RTX 2080 TI\b", n) and "LAPTOP" not in n and "MAX-Q" not in n:
        return _RTX2080TI
    return None


def _amd(name: str, mem_gb: float | None, cus: int | None) -> tuple[Peak | None, str]:
    n = name.upper()
    # "AMD Instinct MI250X/MI250" names two models: its CUs tell which.
    named = [(c, p) for model, c, p in _AMD_NAMES if re.search(rf"\b{model}\b", n)]
    if len({id(p) for _, p in named}) == 1:
        c, p = named[0]
        if cus is not None and cus != c:
            return None, ""  # a partition of the GPU (CPX/TPX modes): a share of its peaks
        return p, f"device name {name!r}"
    # "AMD Instinct MI250X/MI250", "AMD Radeon Graphics", "gfx90a", "": the name leaves the
    # model open; the compute units and memory a ROCm device reports may close it.
    if cus is None or mem_gb is None:
        return None, ""
    fits = [p for c, lo, hi, p in _AMD_BY_SHAPE if c == cus and lo <= mem_gb <= hi]
    if len(fits) != 1:
        return None, ""
    said = f"the trace names it {name!r}" if name else "the trace gives no device name"
    return fits[0], (
        f"recognised from its {cus} CUs and {units.gib(mem_gb * _GIB)} of memory, which of the "
        f"peak "
        f"table's GPUs only the {fits[0].model} has ({said})"
    )


def peak_tflops(peak: Peak | None, dtype: str) -> float | None:
    """Dense peak for ``dtype`` ("fp32", "tf32", "fp16", "bf16", "fp8", "int8", "fp64")."""
    if peak is None:
        return None
    return peak.tflops.get(dtype)
