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


PATHS = ["arrays", "public"]


def take_path(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make frames the ``path`` way: through pandas' private constructor from arrays (the
    default), or the public constructor (a pandas without the private one)."""
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


def test_the_private_constructor_makes_the_public_ones_frames(
    trace_columns: dict[str, dict[str, np.ndarray]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Frames from pandas' private constructor are the public one's: same values and
    types; each frame's column names are its own, and arrays not handed over are copied."""
    n = 5
    cases: list[dict[str, Any]] = [
        *trace_columns.values(),
        {
            "a": np.arange(n),
            "b": np.ones(n),
            "c": np.array(list("abcde"), dtype=object),
            "d": pd.Categorical(list("abcab")),
            "e": np.zeros(n, bool),
        },
        {"x": pd.array(list("abcde"), dtype="string"), "w": np.arange(n, dtype="int32")},
        {"a": np.arange(0), "b": np.array([], dtype=object)},
        {"t": np.arange(n).astype("datetime64[ns]")},
    ]
    for cols in cases:
        got = model.frame_from_arrays(dict(cols))
        with monkeypatch.context() as m:
            take_path("public", m)
            want = model.frame_from_arrays(dict(cols))
        check_same(got, want)
        for c, a in cols.items():
            if isinstance(a, np.ndarray) and a.dtype.kind in "if":
                assert not np.shares_memory(got[c].to_numpy(), a)
        got.columns.name = "changed"
        assert model.frame_from_arrays(dict(cols)).columns.name is None


@pytest.mark.parametrize("path", PATHS)
def test_empty_tables_keep_the_contract(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    take_path(path, monkeypatch)
    for t in SCHEMA:
        got = t.empty()
        want = pd.DataFrame({c.name: pd.Series(dtype=c.dtype) for c in t.columns})
        check_same(got, want)
        assert len(got) == 0 and list(got.columns) == list(t.names)
