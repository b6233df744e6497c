"""Joining ranks' tables: the reader's column-by-column join against pandas' own.

A folder's ranks are joined in numpy (``reader._joined``); the reference here is what the
reader did before, and what it still does when ranks' columns differ: each rank's frame with
its times shifted and its ``op_index`` renumbered, then ``pd.concat``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from nbprof.trace import read
from nbprof.trace import reader as reader_mod
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


def reference(table: str, parts: list[tuple[pd.DataFrame, float, int]]) -> pd.DataFrame:
    shifted = [reader_mod._shifted(f, shift, offset) for f, shift, offset in parts]
    return tb.typed(table, pd.concat(shifted, ignore_index=True))


def columns_of(frame: pd.DataFrame) -> dict[str, np.ndarray]:
    return {str(c): frame[c].to_numpy() for c in frame.columns}


@pytest.mark.parametrize("as_columns", [(True, True), (True, False), (False, False)])
def test_joined_columns_are_pandas_concat_of_the_shifted_frames(
    tmp_path: Path, as_columns: tuple[bool, bool]
) -> None:
    a = rank_frames(tmp_path, "a.json", kernels=2)
    b = rank_frames(tmp_path, "b.json", kernels=3)
    # Rank b started 12.5 µs after rank a, and its op rows follow a's 2 ops.
    shift_b, offset_b = 12.5, len(a["cpu_ops"])
    assert offset_b == 2
    for table in ("kernels", "memcpy", "cpu_ops", "annotations", "steps", "devices"):
        frames = [(a[table], 0.0, 0), (b[table], shift_b, offset_b)]
        parts: list[reader_mod._Part] = [
            (columns_of(f) if c else f, s, o)
            for (f, s, o), c in zip(frames, as_columns, strict=True)
        ]
        got = tb.typed(table, reader_mod._joined(table, parts))
        want = reference(table, frames)
        pd.testing.assert_frame_equal(got, want, check_exact=True)
        assert list(got.dtypes) == list(want.dtypes)
        assert isinstance(got.index, pd.RangeIndex)
    # What the join did, in numbers: b's kernels start 12.5 µs later, their ops past a's.
    got = reader_mod._joined("kernels", [(a["kernels"], 0.0, 0), (b["kernels"], 12.5, 2)])
    tail = got.iloc[len(a["kernels"]) :]
    np.testing.assert_array_equal(tail["ts"].to_numpy(), b["kernels"]["ts"].to_numpy() + 12.5)
    idx = b["kernels"]["op_index"].to_numpy()
    assert sorted(idx.tolist()) == [-1, 1, 1, 1]
    np.testing.assert_array_equal(tail["op_index"].to_numpy(), np.where(idx >= 0, idx + 2, -1))


def test_ranks_whose_columns_differ_are_aligned_by_pandas(tmp_path: Path) -> None:
    a = rank_frames(tmp_path, "a.json", kernels=2)["kernels"]
    b = rank_frames(tmp_path, "b.json", kernels=3)["kernels"]
    # A rank whose stream column is another dtype (a cache of another version, say).
    b = b.astype({"stream": np.float64})
    got = tb.typed("kernels", reader_mod._joined("kernels", [(a, 0.0, 0), (b, 5.0, 2)]))
    want = reference("kernels", [(a, 0.0, 0), (b, 5.0, 2)])
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    assert got["stream"].dtype == np.int64
