"""Frames made straight from columns (``model.frame_from_arrays``) against pandas' own
constructor, which is also the way taken where pandas lacks the direct one."""

from __future__ import annotations

from pathlib import Path

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


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "fallback"])
def test_frames_from_columns_are_pandas_frames(
    trace_columns: dict[str, dict[str, np.ndarray]], direct: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not direct:
        # A pandas without the direct constructor: the public one is used.
        monkeypatch.setattr(pd.DataFrame, "_from_arrays", None, raising=False)
    for table, cols in trace_columns.items():
        got = model.frame_from_arrays(cols)
        check_same(got, public_way(cols))
        # Text stays object, not pandas' inferred string dtype.
        for c, a in cols.items():
            assert got[c].dtype == a.dtype, (table, c)


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "fallback"])
def test_empty_tables_keep_the_contract(direct: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if not direct:
        monkeypatch.setattr(pd.DataFrame, "_from_arrays", None, raising=False)
    for t in SCHEMA:
        got = t.empty()
        want = pd.DataFrame({c.name: pd.Series(dtype=c.dtype) for c in t.columns})
        check_same(got, want)
        assert len(got) == 0 and list(got.columns) == list(t.names)
