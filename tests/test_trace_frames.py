"""Frames made straight from columns (``model.frame_from_arrays``) against pandas' own
constructor, which is also the way taken where pandas lacks the direct one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from nbprof.trace import model, read
from nbprof.trace.model import SCHEMA, TABLES
from tests.golden import KinetoBuilder


def public_way(columns: dict[str, np.ndarray]) -> pd.DataFrame:
    """What the reader built before: text columns as object Series, the rest as they are."""
    return pd.DataFrame(
        {
            c: pd.Series(a, dtype=object, copy=False) if a.dtype == object else a
            for c, a in columns.items()
        },
        copy=False,
    )


def check_same(got: pd.DataFrame, want: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(got, want, check_exact=True, check_index_type=True)
    assert list(got.columns) == list(want.columns)
    assert list(got.dtypes) == list(want.dtypes)
    assert isinstance(got.index, pd.RangeIndex) and isinstance(want.index, pd.RangeIndex)


@pytest.fixture
def trace_columns(tmp_path: Path) -> dict[str, dict[str, np.ndarray]]:
    b = KinetoBuilder()
    b.step(1, 0.0, 400.0)
    b.cpu_op("aten::mm", 10.0, 80.0, dims=[[2, 3]], types=["float"])
    b.kernel("gemm", 100.0, 4.0, launch_ts=20.0)
    b.memcpy(200.0, 10.0, 4096)
    t = read(b.write(tmp_path), progress=False)
    return {
        table: {str(c): getattr(t, table)[c].to_numpy() for c in TABLES[table]} for table in TABLES
    }


PATHS = ["blocks", "arrays", "public"]


def take_path(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make frames the ``path`` way: from their blocks (the default), through pandas' private
    path from arrays (a pandas whose block internals moved), or the public constructor (a
    pandas without either)."""
    if path != "blocks":
        monkeypatch.setattr(model, "_internals", lambda: None)
    if path == "public":
        monkeypatch.setattr(pd.DataFrame, "_from_arrays", None, raising=False)


@pytest.mark.parametrize("path", PATHS)
def test_frames_from_columns_are_pandas_frames(
    trace_columns: dict[str, dict[str, np.ndarray]], path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    take_path(path, monkeypatch)
    for table, cols in trace_columns.items():
        got = model.frame_from_arrays(cols)
        check_same(got, public_way(cols))
        # Text stays object, not pandas' inferred string dtype.
        for c, a in cols.items():
            assert got[c].dtype == a.dtype, (table, c)


def _contiguous(values: Any) -> bool:
    return bool(values.flags.c_contiguous) if isinstance(values, np.ndarray) else True


def _layout(df: pd.DataFrame) -> list[tuple[str, list[int], str, bool]]:
    return [
        (type(b).__name__, b.mgr_locs.as_array.tolist(), str(b.dtype), _contiguous(b.values))
        for b in df._mgr.blocks
    ]


def test_frames_from_blocks_are_pandas_own(
    trace_columns: dict[str, dict[str, np.ndarray]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The blocks made directly are the ones pandas' path from arrays makes: same types,
    same columns in each, same order, consolidated alike."""
    n = 5
    cases: list[dict[str, Any]] = [
        *trace_columns.values(),
        {
            "a": np.arange(n),
            "b": np.ones(n),
            "c": np.array(list("abcde"), dtype=object),
            "d": np.arange(n),
            "e": np.zeros(n, bool),
        },
        {
            "x": pd.array(list("abcde"), dtype="string"),
            "y": np.arange(n),
            "z": pd.array(list("vwxyz"), dtype="string"),
            "w": np.arange(n, dtype="int32"),
        },
        {"a": np.arange(0), "b": np.array([], dtype=object)},
        {"t": np.arange(n).astype("datetime64[ns]")},  # not covered: pandas' path
        {"u": np.array(list("abcde"))},  # fixed-width text: pandas' path
    ]
    for cols in cases:
        got = model.frame_from_arrays(dict(cols))
        with monkeypatch.context() as m:
            m.setattr(model, "_internals", lambda: None)
            want = model.frame_from_arrays(dict(cols))
        check_same(got, want)
        assert _layout(got) == _layout(want)
        assert got._mgr.is_consolidated() == want._mgr.is_consolidated()
        for c, a in cols.items():  # the frame holds copies of NumPy arrays, as pandas' does
            if isinstance(a, np.ndarray) and a.dtype.kind in "if":
                assert not np.shares_memory(got[c].to_numpy(), a)
        got.columns.name = "changed"  # each frame's names are its own
        assert model.frame_from_arrays(dict(cols)).columns.name is None
    with pytest.raises(ValueError):
        model.frame_from_arrays({"a": np.arange(3), "b": np.arange(4)})


@pytest.mark.parametrize("path", PATHS)
def test_empty_tables_keep_the_contract(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    take_path(path, monkeypatch)
    for t in SCHEMA:
        got = t.empty()
        want = pd.DataFrame({c.name: pd.Series(dtype=c.dtype) for c in t.columns})
        check_same(got, want)
        assert len(got) == 0 and list(got.columns) == list(t.names)


def test_big_frames_handed_over_keep_their_arrays(monkeypatch: pytest.MonkeyPatch) -> None:
    """From SPLIT_ROWS rows, a frame of arrays handed over (``own=True``) holds each array
    itself, one block per column: the same frame as pandas', no copy. An array that is a
    view of other memory is copied, so the frame keeps nothing else alive. Smaller frames,
    and frames of arrays not handed over, are made as before."""
    monkeypatch.setattr(model, "SPLIT_ROWS", 8)
    n = 10
    buffer = np.arange(3 * n, dtype=np.int64)
    cols: dict[str, Any] = {
        "ts": np.arange(n) / 4.0,
        "name": np.array([f"k<{i}>" for i in range(n)], dtype=object),
        "stream": np.arange(n, dtype=np.int64),
        "view": buffer[n : 2 * n],  # a view of a bigger array
        "rank": np.zeros(n, np.int32),
        "dur": np.ones(n),
        "s": pd.array([str(i) for i in range(n)], dtype="string"),
    }
    got = model.frame_from_arrays(dict(cols), own=True)
    check_same(
        got, public_way({c: np.asarray(a) for c, a in cols.items() if c != "s"}).assign(s=cols["s"])
    )
    assert len(got._mgr.blocks) == len(cols)
    for c in ("ts", "name", "stream", "rank", "dur"):
        assert np.shares_memory(got[c].to_numpy(), cols[c]), c
    assert not np.shares_memory(got["view"].to_numpy(), buffer)
    # Not handed over, or below SPLIT_ROWS: copied into a block per dtype, as pandas does.
    for frame in (
        model.frame_from_arrays(dict(cols)),
        model.frame_from_arrays({c: a[:5] for c, a in cols.items()}, own=True),
    ):
        assert frame._mgr.is_consolidated()
        assert not np.shares_memory(frame["ts"].to_numpy(), cols["ts"])
    # Something _from_blocks leaves to pandas (dates) is left to it here too.
    dated = {"t": np.arange(n).astype("datetime64[ns]"), "x": np.arange(n)}
    check_same(model.frame_from_arrays(dict(dated), own=True), pd.DataFrame(dated))


def test_split_tables_read_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A trace's tables held one block per column read as the ones copied into blocks."""
    b = KinetoBuilder()
    b.step(1, 0.0, 400.0)
    for i in range(12):
        b.cpu_op("aten::mm", 10.0 + i, 0.5, dims=[[2, 3]], types=["float"])
        b.kernel(f"gemm<{i}>", 100.0 + 5 * i, 4.0, launch_ts=10.2 + i)
    path = b.write(tmp_path)
    monkeypatch.setattr(model, "SPLIT_ROWS", 4)
    split = read(path, progress=False)
    monkeypatch.setattr(model, "SPLIT_ROWS", 1 << 30)
    whole = read(path, progress=False)
    assert len(split.kernels._mgr.blocks) == len(split.kernels.columns)
    for table in TABLES:
        check_same(getattr(split, table), getattr(whole, table))
