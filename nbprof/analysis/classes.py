"""Kernel classes the timeline colours by: tensor_core, compute, memory, communication."""

from __future__ import annotations

import logging
import re

import numpy as np
import pandas as pd

from nbprof.analysis._text import matches

logger = logging.getLogger(__name__)

_COMM = re.compile(r"nccl|rccl|all_?reduce|all_?gather|reduce_?scatter|alltoall|sendrecv", re.I)
_COMPUTE = re.compile(
    r"gemm|gemv|conv|winograd|implicit|fft|attention|fmha|flash|xmma|cutlass|wgmma|dgrad|"
    r"wgrad|fprop|scudnn|hcudnn|"
    r"gmma|nvjet|Cijk|mfma|matmul|_mm_|triton_tem|dot_|bmm|cublas|hmma|884|1688|16816",
    re.IGNORECASE,
)


def kernel_classes(names: pd.Series, tensor_core: np.ndarray) -> pd.DataFrame:
    """``cls`` and ``tensor_core`` per kernel, index aligned with ``names``."""
    if len(names) == 0:
        return pd.DataFrame(
            {"cls": pd.Series(dtype="object"), "tensor_core": pd.Series(dtype=bool)},
            index=names.index,
        )
    is_comm = matches(names, _COMM)
    is_comp = matches(names, _COMPUTE)
    tc = np.asarray(tensor_core, dtype=bool)
    cls = np.where(
        is_comm,
        "communication",
        np.where(tc, "tensor_core", np.where(is_comp, "compute", "memory")),
    )
    return pd.DataFrame({"cls": cls, "tensor_core": tc & ~is_comm}, index=names.index)


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
