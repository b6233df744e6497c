"""A per-op roofline from the trace's own FLOP counts and tensor shapes.

FLOPs come from ``with_flops`` (op arg ``Flops``); bytes are *estimated* from
``record_shapes`` (inputs, plus the output of matrix products, or an output the size of
the largest input otherwise), so achieved GB/s and arithmetic intensity are estimates and
say so. GPU time is the summed duration of the kernels launched while the op ran on its
thread. An op is compute-bound when its intensity is at or above the device's ridge point
(peak FLOP/s ÷ peak bytes/s), memory-bound below it, unknown without peaks.
"""

from __future__ import annotations

import functools
import json
import logging
import math
from typing import Any

import numpy as np
import pandas as pd

from nbprof.analysis import _frames, _group
from nbprof.analysis._text import matches, name_pattern, text_column
from nbprof.analysis.model import ROOFLINE_TABLE
from nbprof.analysis.peaks import Peak, peak_tflops
from nbprof.trace.model import frame_from_arrays

logger = logging.getLogger(__name__)

ROOFLINE_COLUMNS: tuple[str, ...] = ROOFLINE_TABLE.names

_SIZES = {
    "double": 8, "float": 4, "c10::Half": 2, "c10::BFloat16": 2, "long int": 8, "int": 4,
    "short int": 2, "signed char": 1, "unsigned char": 1, "bool": 1,
    "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1, "c10::Float8_e4m3fnuz": 1,
    "c10::Float8_e5m2fnuz": 1, "c10::complex<float>": 8, "c10::complex<double>": 16,
}  # fmt: skip
_DTYPE = {
    "double": "fp64", "float": "fp32", "c10::Half": "fp16", "c10::BFloat16": "bf16",
    "signed char": "int8", "c10::Float8_e4m3fn": "fp8", "c10::Float8_e5m2": "fp8",
    "c10::Float8_e4m3fnuz": "fp8", "c10::Float8_e5m2fnuz": "fp8",
}  # fmt: skip
_MATMUL = name_pattern(r"aten::(?:mm|addmm|bmm|baddbmm|matmul|_addmm_activation|linear)$")


def _load(text: str) -> list[Any]:
    if not text:
        return []
    try:
        v = json.loads(text)
    except ValueError:
        return []
    return v if isinstance(v, list) else []


#: Shape texts up to this many characters in all have their answers remembered (the ops
#: of a model repeat their shapes every step and on every rank of a job, and parsing the
#: JSON text is most of the roofline's cost on a small rank); longer ones are worked out
#: each time, so the memory is a few MB at most whatever the trace.
_MEMO_TEXT = 4096


def _memoable(*texts: object) -> bool:
    return all(type(t) is str for t in texts) and sum(len(str(t)) for t in texts) <= _MEMO_TEXT


def op_bytes_dtype(name: str, dims_text: str, types_text: str) -> tuple[float, str]:
    """Estimated bytes moved by one op and its compute dtype ("" unknown)."""
    if _memoable(name, dims_text, types_text):
        return _op_bytes_dtype_memo(name, dims_text, types_text)
    return _op_bytes_dtype(name, dims_text, types_text)


def _op_bytes_dtype(name: str, dims_text: str, types_text: str) -> tuple[float, str]:
    dims, types = _load(dims_text), _load(types_text)
    total, largest, dtype, elem = 0.0, 0.0, "", 0
    shapes: list[list[int]] = []
    for d, t in zip(dims, types, strict=False):
        size = _SIZES.get(str(t))
        if size is None or not isinstance(d, list) or not d:
            continue
        if not all(isinstance(x, int) for x in d):
            continue
        n = float(math.prod(d)) * size
        total += n
        largest = max(largest, n)
        shapes.append(d)
        if not dtype:
            dtype, elem = _DTYPE.get(str(t), ""), size
    if _MATMUL.search(name) and len(shapes) >= 2:
        # Output of (.., m, k) x (.., k, n) is (.., m, n); addmm's first input is the bias.
        a, b = (shapes[-2], shapes[-1]) if len(shapes) >= 3 else (shapes[0], shapes[1])
        if len(a) >= 2 and len(b) >= 2:
            rows = float(math.prod(a[:-1]))
            cols = b[0] if name.endswith("linear") else b[-1]  # linear's weight is (n, k)
            total += rows * cols * max(elem, 1)
        else:
            total += largest
    else:
        total += largest
    return total, dtype


_op_bytes_dtype_memo = functools.lru_cache(maxsize=1024)(_op_bytes_dtype)


def matmul_flops(name: str, dims_text: str) -> float:
    """2·m·k·n (times the batch) for a matrix product from its input shapes; NaN otherwise."""
    if _memoable(name, dims_text):
        return _matmul_flops_memo(name, dims_text)
    return _matmul_flops(name, dims_text)


def _matmul_flops(name: str, dims_text: str) -> float:
    if not _MATMUL.search(name):
        return math.nan
    shapes = [d for d in _load(dims_text) if isinstance(d, list) and len(d) >= 2]
    shapes = [d for d in shapes if all(isinstance(x, int) for x in d)]
    if len(shapes) < 2:
        return math.nan
    a, b = shapes[-2], shapes[-1]
    if name.endswith("linear"):  # weight is (n, k)
        return 2.0 * float(math.prod(a[:-1])) * a[-1] * b[0]
    if a[-1] != b[-2]:
        return math.nan
    batch = float(math.prod(a[:-2])) if len(a) > 2 else 1.0
    return 2.0 * batch * a[-2] * a[-1] * b[-1]


_matmul_flops_memo = functools.lru_cache(maxsize=1024)(_matmul_flops)


def with_flops(cpu_ops: pd.DataFrame) -> tuple[pd.DataFrame, bool]:
    """The ops with a FLOP count: the trace's own (``with_flops``) or, when the trace has
    none, matrix products estimated from ``record_shapes``. The flag says which."""
    if cpu_ops.empty:
        return cpu_ops, False
    fl = _frames.column(cpu_ops, "flops", "float64")
    if (fl > 0).any():
        return cpu_ops, False
    # Shapes are read (as text) for the matrix products only.
    rows = np.flatnonzero(matches(text_column(cpu_ops, "name"), _MATMUL))
    dims = _frames.column(cpu_ops, "input_dims")[rows].tolist()
    rows = rows[np.array([str(d) != "" for d in dims], dtype=bool)] if len(rows) else rows
    cand = cpu_ops.iloc[rows]
    if cand.empty:
        return cand, True
    est = [matmul_flops(n, d) for n, d in zip(cand["name"], cand["input_dims"], strict=True)]
    return cand.assign(flops=np.asarray(est, dtype="float64")), True


def outermost_flops_ops(cpu_ops: pd.DataFrame) -> pd.DataFrame:
    """CPU ops with a FLOP count that are not nested in another such op on their thread."""
    if cpu_ops.empty:
        return cpu_ops
    f = cpu_ops[_frames.column(cpu_ops, "flops", "float64") > 0]
    if f.empty:
        return f
    keep = _outermost(
        _frames.column(f, "ts", "float64"),
        _frames.column(f, "dur", "float64"),
        *(_frames.column(f, c) for c in ("rank", "pid", "tid")),
    )
    return f.iloc[keep]


def _outermost(
    ts: np.ndarray, dur: np.ndarray, rank: np.ndarray, pid: np.ndarray, tid: np.ndarray
) -> np.ndarray:
    """Positions of the ops not nested in another on their thread, by thread, then start
    (stable, NaN starts last, as sort_values puts them)."""
    order = np.lexsort((ts, tid, pid, rank))
    ts, rank, pid, tid = ts[order], rank[order], pid[order], tid[order]
    end = ts + dur[order]
    same = np.concatenate(
        ([False], (rank[1:] == rank[:-1]) & (pid[1:] == pid[:-1]) & (tid[1:] == tid[:-1]))
    )
    # Running max of ends within each thread (threads are contiguous runs now).
    run_end = end.copy()
    starts = np.flatnonzero(~same)
    for a, b in zip(starts, np.concatenate((starts[1:], [len(end)])), strict=True):
        run_end[a:b] = np.fmax.accumulate(end[a:b])
    run_end[np.isnan(end)] = np.nan  # as pandas' cummax leaves a missing end
    prev_end = np.concatenate(([-np.inf], run_end[:-1]))
    nested = same & (ts < prev_end)
    return order[~nested]


def gpu_time_per_op(
    ops: pd.DataFrame,
    kernels: pd.DataFrame,
    cpu_ops: pd.DataFrame,
    mask: np.ndarray | None = None,
) -> np.ndarray:
    """Summed duration of the kernels launched within each op, on the op's thread
    (only the kernels where ``mask`` is true, when given)."""
    out = np.zeros(len(ops))
    if ops.empty or kernels.empty:
        return out
    idx = _frames.column(kernels, "op_index", "int64")
    ok = (
        (idx >= 0)
        & (idx < len(cpu_ops))
        & ~np.isnan(_frames.column(kernels, "launch_ts", "float64"))
    )
    if not ok.any():
        return out
    # Plain arrays, not a DataFrame and a groupby: an op's sum is a slice of one cumulative
    # sum per thread, and pandas' per-group overhead is most of the cost on a small rank.
    pid = _frames.column(cpu_ops, "pid")[idx[ok]]
    tid = _frames.column(cpu_ops, "tid")[idx[ok]]
    launch = _frames.column(kernels, "launch_ts", "float64")[ok]
    dur = (
        _frames.column(kernels, "dur", "float64")
        * (1.0 if mask is None else np.asarray(mask, dtype="float64"))
    )[ok]
    order = np.lexsort((launch, tid, pid))
    pid, tid, launch, dur = pid[order], tid[order], launch[order], dur[order]
    cut = np.flatnonzero((pid[1:] != pid[:-1]) | (tid[1:] != tid[:-1])) + 1
    o_ts = _frames.column(ops, "ts", "float64")
    o_end = o_ts + _frames.column(ops, "dur", "float64")
    o_pid, o_tid = _frames.column(ops, "pid"), _frames.column(ops, "tid")
    for a, b in zip(np.concatenate(([0], cut)), np.concatenate((cut, [len(pid)])), strict=True):
        sel = np.flatnonzero((o_pid == pid[a]) & (o_tid == tid[a]))
        if not len(sel):
            continue
        csum = np.concatenate(([0.0], np.cumsum(dur[a:b])))
        lo = np.searchsorted(launch[a:b], o_ts[sel], side="left")
        hi = np.searchsorted(launch[a:b], o_end[sel], side="right")
        out[sel] = csum[hi] - csum[lo]
    return out


def flop_ops(cpu_ops: pd.DataFrame) -> tuple[pd.DataFrame, bool]:
    """The outermost ops with a FLOP count (:func:`with_flops`, then
    :func:`outermost_flops_ops`), and whether their FLOPs were estimated from shapes: what
    the roofline and the per-kernel bounds both start from."""
    fast = _flop_ops_by_arrays(cpu_ops)
    if fast is not None:
        return fast
    cand, estimated = with_flops(cpu_ops)
    return outermost_flops_ops(cand), estimated


#: The ops' columns :func:`flop_ops` reads.
_NEEDED = frozenset({"flops", "name", "input_dims", "ts", "dur", "rank", "pid", "tid"})


def _flop_ops_by_arrays(cpu_ops: pd.DataFrame) -> tuple[pd.DataFrame, bool] | None:
    """:func:`flop_ops` on the columns' arrays, the one frame built at the end: the
    candidates' frame, its FLOPs assigned and its outermost rows each copied every column
    of the ops, which on a small rank cost more than finding the rows. The same rows,
    columns and types, numbered from 0 (nothing reads the ops' labels). None where a
    column is neither a plain array nor a Categorical (its type is pandas' to keep) or
    there are no ops."""
    names = list(cpu_ops.columns)
    stored = [_frames.stored_array(cpu_ops, c) for c in names]
    # A trace's text is a Categorical: its rows taken keep its categories, as iloc keeps them.
    if cpu_ops.empty or not all(type(a) in (np.ndarray, pd.Categorical) for a in stored):
        return None
    arrays = dict(zip(names, stored, strict=True))
    if not _NEEDED <= arrays.keys() or arrays["flops"].dtype != "float64":
        return None
    fl = arrays["flops"]
    estimated = not bool((fl > 0).any())
    if not estimated:
        rows = np.flatnonzero(fl > 0)
        flops = fl[rows]
    else:
        # Shapes are read (as text) for the matrix products only.
        rows = np.flatnonzero(matches(text_column(cpu_ops, "name"), _MATMUL))
        dims = arrays["input_dims"][rows].tolist()
        rows = rows[np.array([str(d) != "" for d in dims], dtype=bool)] if len(rows) else rows
        est = [
            matmul_flops(n, d)
            for n, d in zip(
                arrays["name"][rows].tolist(), arrays["input_dims"][rows].tolist(), strict=True
            )
        ]
        flops = np.asarray(est, dtype="float64")
        counted = flops > 0
        rows, flops = rows[counted], flops[counted]
    if len(rows):
        keep = _outermost(
            np.asarray(arrays["ts"], dtype="float64")[rows],
            np.asarray(arrays["dur"], dtype="float64")[rows],
            *(arrays[c][rows] for c in ("rank", "pid", "tid")),
        )
        rows, flops = rows[keep], flops[keep]
    cols = {c: (flops if c == "flops" else a[rows]) for c, a in arrays.items()}
    return frame_from_arrays(cols), estimated


def roofline(
    cpu_ops: pd.DataFrame,
    kernels: pd.DataFrame,
    all_cpu_ops: pd.DataFrame,
    peak: Peak | None,
    tensor_core: np.ndarray,
    flops: tuple[pd.DataFrame, bool] | None = None,
) -> pd.DataFrame:
    """One row per op name: FLOPs, estimated bytes, GPU time, achieved rates and bound.

    ``cpu_ops`` are the candidate ops (already limited to one rank); ``all_cpu_ops`` is the
    frame ``kernels.op_index`` points into. ``tensor_core`` flags the kernels that ran on
    Tensor Cores: an FP32 op whose kernels mostly did is held to the TF32 peak. ``flops``
    is :func:`flop_ops` of ``cpu_ops`` when the caller has it already.
    """
    ops, estimated = flops if flops is not None else flop_ops(cpu_ops)
    flops_src = "FLOPs 2mkn from input shapes" if estimated else "FLOPs from the trace"
    if ops.empty:
        return _frames.empty(ROOFLINE_COLUMNS)
    gpu_us = gpu_time_per_op(ops, kernels, all_cpu_ops)
    tc_us = gpu_time_per_op(ops, kernels, all_cpu_ops, tensor_core)
    keep = np.flatnonzero(gpu_us > 0)
    if not len(keep):
        return _frames.empty(ROOFLINE_COLUMNS)
    gpu_us, tc_us = gpu_us[keep], tc_us[keep]
    names = _frames.column(ops, "name")[keep]
    est = [
        op_bytes_dtype(n, d, t)
        for n, d, t in zip(
            names.tolist(),
            _frames.column(ops, "input_dims")[keep].tolist(),
            _frames.column(ops, "input_types")[keep].tolist(),
            strict=True,
        )
    ]
    dtypes = np.array([d for _, d in est], dtype=object)
    tf32 = (dtypes == "fp32") & (tc_us > 0.5 * gpu_us)
    dtypes[tf32] = "tf32"
    op_flops = _frames.column(ops, "flops", "float64")[keep]
    if _group.all_text(names):
        # Grouped in plain Python: the same sums pandas' groupby gives, without its fixed
        # cost on the few ops of a rank.
        uniq, code = _group.codes(list(zip(names.tolist(), dtypes.tolist(), strict=True)))
        n = len(uniq)
        keys = list(zip(*uniq, strict=True))
        cols: dict[str, Any] = {
            "op": np.array(keys[0], dtype=object),
            "dtype": np.array(keys[1], dtype=object),
            "count": _group.counts(code, n),
            "flops": _group.sums(code, op_flops, n),
            "bytes": _group.sums(code, np.array([b for b, _ in est], dtype="float64"), n),
            "total_us": _group.sums(code, gpu_us, n),
        }
    else:  # missing names: pandas drops them from the groups
        rows = ops.iloc[keep].assign(gpu_us=gpu_us, nbytes=[b for b, _ in est], dtype=dtypes)
        by = rows.groupby(["name", "dtype"], sort=False)
        g = by[["flops", "nbytes", "gpu_us"]].sum()
        g.insert(0, "count", by.size())
        g = g.rename(columns={"nbytes": "bytes", "gpu_us": "total_us"}).reset_index()
        g = g.rename(columns={"name": "op"})
        cols = {c: g[c] for c in g.columns}
    t = np.asarray(cols["total_us"], dtype="float64")
    fl = np.asarray(cols["flops"], dtype="float64")
    by = np.asarray(cols["bytes"], dtype="float64")
    cols["tflops"] = fl / t / 1e6
    cols["gbps"] = np.where(by > 0, by / t / 1e3, np.nan)
    cols["intensity"] = np.where(by > 0, fl / np.where(by > 0, by, 1), np.nan)
    bounds, bases = [], []
    for dtype, inten in zip(list(cols["dtype"]), cols["intensity"].tolist(), strict=True):
        key = dtype
        pf = peak_tflops(peak, key) if key else None
        if pf is None or peak is None or not np.isfinite(inten):
            bounds.append("unknown")
            bases.append(f"estimated: {flops_src}, bytes from input shapes; no peak")
            continue
        ridge = pf * 1e12 / (peak.mem_gbps * 1e9)
        bounds.append("compute" if inten >= ridge else "memory")
        bases.append(
            f"estimated: {flops_src}, bytes from input shapes; ridge {ridge:.0f} "
            f"FLOP/B ({key} {pf:g} TFLOP/s, {peak.mem_gbps:g} GB/s, {peak.source})"
        )
    cols["bound"] = np.array(bounds, dtype=object)
    cols["basis"] = np.array(bases, dtype=object)
    if isinstance(cols["op"], pd.Series) or np.isnan(t).any():
        # pandas' groups (their key columns keep their types), or missing totals, which
        # pandas' sort puts last.
        g = pd.DataFrame({c: cols[c] for c in ROOFLINE_COLUMNS})
        return g.sort_values("total_us", ascending=False, kind="stable").reset_index(drop=True)
    # Largest total first, ties in group order (what the stable sort gives).
    order = np.argsort(-t, kind="stable")
    return _frames.frame({c: np.asarray(cols[c])[order] for c in ROOFLINE_COLUMNS})
