"""Blocking copies: a copy call counts when it returned at or after its copy ended."""

from __future__ import annotations

import numpy as np
import pandas as pd

from nbprof.analysis import syncs


def _runtime(rows: list[tuple[int, str, float, float, int]]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "rank": pd.Series([r[0] for r in rows], dtype="int32"),
            "pid": pd.Series([1] * len(rows), dtype="int64"),
            "tid": pd.Series([2] * len(rows), dtype="int64"),
            "name": pd.Series([r[1] for r in rows], dtype=object),
            "ts": [r[2] for r in rows],
            "dur": [r[3] for r in rows],
            "correlation": pd.Series([r[4] for r in rows], dtype="int64"),
            "cat": pd.Series(["cuda_runtime"] * len(rows), dtype=object),
        }
    )


def _memcpy(rows: list[tuple[int, int, float, float, str, int]]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "rank": pd.Series([r[0] for r in rows], dtype="int32"),
            "correlation": pd.Series([r[1] for r in rows], dtype="int64"),
            "ts": [r[2] for r in rows],
            "dur": [r[3] for r in rows],
            "kind": pd.Series([r[4] for r in rows], dtype=object),
            "bytes": pd.Series([r[5] for r in rows], dtype="int64"),
        }
    )


def test_blocking_copies_by_the_end_times() -> None:
    rt = _runtime([
        (0, "cudaMemcpyAsync", 0.0, 10.0, 7),   # returns at 10, its copy ends at 9: waited
        (0, "cudaMemcpyAsync", 20.0, 2.0, 8),   # returns at 22, its copy ends at 30: did not
        (1, "cudaMemcpy", 40.0, 5.0, 7),        # rank 1's correlation 7: its own copy, 45 >= 45
        (0, "cudaLaunchKernel", 50.0, 5.0, 9),  # no copy call
    ])  # fmt: skip
    mc = _memcpy([
        (0, 7, 5.0, 4.0, "DtoH", 64), (0, 8, 25.0, 5.0, "HtoD", 32),
        (1, 7, 41.0, 4.0, "", 16), (0, -1, 0.0, 100.0, "DtoD", 8),
    ])  # fmt: skip
    got = syncs.blocking_copies(rt, mc)
    assert got["name"].tolist() == ["cudaMemcpyAsync (DtoH)", "cudaMemcpy (copy)"]
    assert got["rank"].tolist() == [0, 1] and got["bytes"].tolist() == [64, 16]
    assert got["ts"].tolist() == [0.0, 40.0] and got["dur"].tolist() == [10.0, 5.0]
    assert got["kind"].tolist() == ["DtoH", "copy"]
    # The same rows as pandas' inner merge on (rank, correlation) gives.
    calls = rt[rt["name"].str.startswith("cudaMemcpy")]
    pd.testing.assert_frame_equal(got, syncs._blocking_copies_merged(calls, mc), check_exact=True)


def test_one_call_with_two_copies_gives_a_row_each() -> None:
    rt = _runtime([(0, "cudaMemcpy", 0.0, 20.0, 3)])
    mc = _memcpy([(0, 3, 1.0, 2.0, "HtoD", 8), (0, 3, 5.0, 2.0, "DtoH", 4)])
    got = syncs.blocking_copies(rt, mc)
    assert got["name"].tolist() == ["cudaMemcpy (HtoD)", "cudaMemcpy (DtoH)"]
    pd.testing.assert_frame_equal(got, syncs._blocking_copies_merged(rt, mc), check_exact=True)


def test_copies_are_joined_to_their_calls_by_number_as_by_dict() -> None:
    rng = np.random.default_rng(2)
    for n_copies, n_calls in ((2000, 1500), (1024, 0), (600, 600), (3000, 10)):
        c_rank = rng.integers(0, 3, n_copies).astype("int32")
        c_corr = rng.integers(-3, 400, n_copies).astype("int64")
        h_rank = rng.integers(-1, 4, n_calls).astype("int32")
        h_corr = rng.integers(-5, 420, n_calls).astype("int64")
        want = syncs._joined_by_dict(c_rank, c_corr, h_rank, h_corr)
        got = syncs._joined_by_number(c_rank, c_corr, h_rank, h_corr)
        if n_copies + n_calls < 1024 or not n_calls:
            assert got is None
            continue
        assert got is not None
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, w)
            assert g.dtype == w.dtype
    huge = np.array([2**62] * 1024, dtype="int64")  # numbers past 62 bits: the dict joins
    assert (
        syncs._joined_by_number(np.zeros(1024, "int32"), huge, np.zeros(4, "int32"), huge[:4])
        is None
    )
