"""Joining ranks' tables: the reader's column-by-column join against pandas' own.

A folder's ranks are joined column by column (``tables.joined``), text as codes moved onto
the union of the ranks' values; the reference here is each rank's frame with its times
shifted and its ``op_index`` renumbered, then ``pd.concat``, its text made categorical
again (pandas joins Categoricals of different categories as objects).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from nbprof.trace import read
from nbprof.trace import tables as tb
from nbprof.trace.model import TABLES
from tests.golden import KinetoBuilder


def rank_frames(tmp_path: Path, name: str, kernels: int) -> dict[str, pd.DataFrame]:
    b = KinetoBuilder()
    b.step(1, 0.0, 400.0)
    parent = b.cpu_op("aten::linear", 10.0, 80.0)
    assert parent
    b.cpu_op("aten::mm", 20.0, 50.0)
    for i in range(kernels):  # launched inside aten::mm (op row 1)
        b.kernel(f"gemm{i}", 100.0 + 10 * i, 4.0, launch_ts=30.0 + i)
    b.kernel("outside", 200.0, 4.0)  # launched at 195 µs, inside no op: op_index -1
    b.memcpy(300.0, 10.0, 4096)
    t = read(b.write(tmp_path, name), progress=False)
    return {table: getattr(t, table) for table in TABLES}


def reference(parts: list[tuple[pd.DataFrame, float, int]]) -> pd.DataFrame:
    shifted = [tb._shifted(f, shift, offset) for f, shift, offset in parts]
    out = pd.concat(shifted, ignore_index=True)
    for c in out.columns:
        if all(c in f and isinstance(f[c].dtype, pd.CategoricalDtype) for f, _, _ in parts):
            values = out[c].astype(object)
            kinds = pd.Index(sorted(set(values)), dtype=object)
            out[c] = pd.Categorical(values, categories=kinds)
    return out


def check(got: pd.DataFrame, want: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    assert list(got.dtypes) == list(want.dtypes)
    assert isinstance(got.index, pd.RangeIndex)


def test_joined_columns_are_pandas_concat_of_the_shifted_frames(tmp_path: Path) -> None:
    a = rank_frames(tmp_path, "a.json", kernels=2)
    b = rank_frames(tmp_path, "b.json", kernels=3)
    # Rank b started 12.5 µs after rank a, and its op rows follow a's 2 ops.
    shift_b, offset_b = 12.5, len(a["cpu_ops"])
    assert offset_b == 2
    for table in ("kernels", "memcpy", "cpu_ops", "annotations", "steps", "devices"):
        frames = [(a[table], 0.0, 0), (b[table], shift_b, offset_b)]
        got = tb.joined(table, [(tb.columns_of(f), s, o) for f, s, o in frames])
        check(got, reference(frames))
    # What the join did, in numbers: b's kernels start 12.5 µs later, their ops past a's,
    # and the names of both ranks are one sorted set of categories.
    parts = [(tb.columns_of(a["kernels"]), 0.0, 0), (tb.columns_of(b["kernels"]), 12.5, 2)]
    got = tb.joined("kernels", parts)
    tail = got.iloc[len(a["kernels"]) :]
    np.testing.assert_array_equal(tail["ts"].to_numpy(), b["kernels"]["ts"].to_numpy() + 12.5)
    idx = b["kernels"]["op_index"].to_numpy()
    assert sorted(idx.tolist()) == [-1, 1, 1, 1]
    np.testing.assert_array_equal(tail["op_index"].to_numpy(), np.where(idx >= 0, idx + 2, -1))
    assert got["name"].cat.categories.tolist() == ["gemm0", "gemm1", "gemm2", "outside"]


def test_ranks_whose_columns_differ_are_aligned_by_pandas(tmp_path: Path) -> None:
    a = rank_frames(tmp_path, "a.json", kernels=2)["kernels"]
    b = rank_frames(tmp_path, "b.json", kernels=3)["kernels"]
    # A rank with a column the other lacks (a cache of another version, say), and whose
    # stream column is another dtype.
    b = b.astype({"stream": np.float64}).assign(extra=1.5)
    got = tb.joined("kernels", [(tb.columns_of(a), 0.0, 0), (tb.columns_of(b), 5.0, 2)])
    want = reference([(a, 0.0, 0), (b.astype({"stream": np.int64}), 5.0, 2)])
    check(got, want)
    assert got["stream"].dtype == np.int64
    assert isinstance(got["name"].dtype, pd.CategoricalDtype)
