"""Frames sent between processes as their arrays give back the frames they were, and a
rank summary sent that way is the summary the worker made."""

from __future__ import annotations

import copy
import pickle
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nbprof.analysis._sent import PackedWhenSent, pack
from nbprof.analysis.rank import RankSummary
from nbprof.job import summarize_file

_KINDS = ("int64", "int32", "float64", "bool", "object", "str")


def _column(kind: str, n: int, draw: Any) -> Any:
    if kind == "object":
        words = st.one_of(st.text(max_size=8), st.none(), st.integers(), st.floats())
        return np.array(draw(st.lists(words, min_size=n, max_size=n)), dtype=object)
    if kind == "str":
        return pd.array(draw(st.lists(st.text(max_size=8), min_size=n, max_size=n)), dtype="str")
    if kind == "bool":
        return np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    if kind == "float64":
        return np.array(draw(st.lists(st.floats(), min_size=n, max_size=n)), dtype="float64")
    info = np.iinfo(kind)
    ints = st.integers(int(info.min), int(info.max))
    return np.array(draw(st.lists(ints, min_size=n, max_size=n)), dtype=kind)


@st.composite
def frames(draw: Any) -> pd.DataFrame:
    n = draw(st.integers(0, 6))
    kinds = draw(st.lists(st.sampled_from(_KINDS), min_size=1, max_size=6))
    return pd.DataFrame({f"c{i}": _column(k, n, draw) for i, k in enumerate(kinds)})


@settings(max_examples=150, deadline=None)
@given(frames())
def test_a_packed_frame_is_the_frame_again(df: pd.DataFrame) -> None:
    p = pack(df)
    assert p is not None
    back = pickle.loads(pickle.dumps(p)).frame()
    pd.testing.assert_frame_equal(back, df, check_exact=True)
    assert [str(t) for t in back.dtypes] == [str(t) for t in df.dtypes]


def test_frames_it_cannot_rebuild_are_sent_as_they_are() -> None:
    plain = pd.DataFrame({"a": [1, 2], "b": ["x", "y"]})
    assert pack(plain) is not None
    assert pack(plain.set_axis([5, 6])) is None  # rows not numbered from 0
    assert pack(pd.DataFrame([[1, 2]], columns=["a", "a"])) is None  # repeated names
    assert pack(pd.DataFrame({1: [1.0]})) is None  # a name that is not text
    named = plain.copy()
    named.columns.name = "fields"
    assert pack(named) is None
    tagged = plain.copy()
    tagged.attrs["unit"] = "us"
    assert pack(tagged) is None
    assert pack(pd.DataFrame({"t": pd.to_datetime(["2026-01-01"])})) is None  # dates
    assert pack(pd.DataFrame({"c": pd.Categorical(["a"])})) is None
    assert pack(pd.DataFrame()) is None  # no columns
    assert pack("not a frame") is None


@dataclass
class _Holder(PackedWhenSent):
    table: pd.DataFrame
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    other: int = 0

    _SENT_FRAMES = ("table", "tables")


def test_fields_stay_packed_until_read_and_survive_being_sent_again() -> None:
    t = pd.DataFrame({"a": np.arange(3), "b": np.array(["x", None, "z"], dtype=object)})
    h = _Holder(t, {"one": t.head(1), "two": t.tail(2).reset_index(drop=True)}, 7)
    sent = pickle.loads(pickle.dumps(h))
    # Nothing rebuilt yet: only the plain field is held as itself.
    assert "table" not in sent.__dict__ and "tables" not in sent.__dict__
    assert sent.other == 7
    # Sent on again unread (a Dask worker's result passed along), still the same frames.
    again = pickle.loads(pickle.dumps(sent))
    for got in (sent, again, copy.deepcopy(h)):
        pd.testing.assert_frame_equal(got.table, t)
        assert list(got.tables) == ["one", "two"]
        pd.testing.assert_frame_equal(got.tables["two"], h.tables["two"])
        assert got.other == h.other
    assert "table" in sent.__dict__  # read once, then held
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        _ = sent.nothing


def test_an_unpackable_field_is_sent_whole() -> None:
    odd = pd.DataFrame({"a": [1]}).set_axis([9])
    h = _Holder(odd, {"fine": pd.DataFrame({"a": [1]}), "odd": odd})
    sent = pickle.loads(pickle.dumps(h))
    assert "table" in sent.__dict__ and "tables" in sent.__dict__  # sent as they were
    pd.testing.assert_frame_equal(sent.table, odd)
    pd.testing.assert_frame_equal(sent.tables["odd"], odd)


def test_a_dlrm_rank_summary_is_the_same_after_it_is_sent(corpus: Path) -> None:
    path = sorted((corpus / "param__dlrm_kineto_8ranks").glob("*.json.gz"))[1]
    made = summarize_file((str(path), 200, False))
    got = pickle.loads(pickle.dumps(made))
    assert isinstance(made, RankSummary) and isinstance(got, RankSummary)
    # The panel's six tables, the steps and the 200-event timeline sample all went packed.
    assert "timeline" not in got.__dict__ and "tables" not in got.diagnosis.__dict__
    assert len(got.timeline) == 200 and len(got.diagnosis.tables) == 6
    pd.testing.assert_frame_equal(got.timeline, made.timeline, check_exact=True)
    pd.testing.assert_frame_equal(got.steps, made.steps, check_exact=True)
    for name, table in made.diagnosis.tables.items():
        pd.testing.assert_frame_equal(got.diagnosis.tables[name], table, check_exact=True)
    assert got.diagnosis.to_json() == made.diagnosis.to_json()
    # Its collectives go as plain rows: the 8 DLRM ranks' calls, each with its fields.
    assert len(got.collectives) == len(made.collectives) > 0
    for a, b in zip(got.collectives, made.collectives, strict=True):
        assert {k: v for k, v in a.items() if k != "covered"} == {
            k: v for k, v in b.items() if k != "covered"
        }
