"""The frame shortcuts of the analysis give what the pandas calls they stand for give."""

from __future__ import annotations

import numpy as np
import pandas as pd

from nbprof.analysis import _frames, _joined, _largest_first


def test_empty_frames_are_typed_and_never_shared() -> None:
    a = _frames.empty_typed((("rank", "int32"), ("name", "object"), ("ts", "float64")))
    expected = pd.DataFrame(
        {"rank": pd.Series(dtype="int32"), "name": pd.Series(dtype="object"),
         "ts": pd.Series(dtype="float64")}
    )  # fmt: skip
    pd.testing.assert_frame_equal(a, expected)
    a["extra"] = []  # a caller's change stays in its own copy
    b = _frames.empty_typed((("rank", "int32"), ("name", "object"), ("ts", "float64")))
    assert list(b.columns) == ["rank", "name", "ts"]
    assert list(_frames.empty(["x", "y"], "float64").dtypes) == [np.float64, np.float64]


def test_largest_first_is_pandas_stable_sort() -> None:
    # Already largest first (ties in order): the frame itself.
    done = pd.DataFrame({"dur": [5.0, 3.0, 3.0, 1.0], "k": ["a", "b", "c", "d"]})
    assert _largest_first(done) is done
    # Not sorted, with a tie (3.0 at rows 0 and 2) and a missing value (pandas puts it last).
    for dur in ([3.0, 1.0, 3.0, 5.0], [3.0, np.nan, 3.0, 5.0]):
        df = pd.DataFrame({"dur": dur, "k": ["a", "b", "c", "d"]})
        got = _largest_first(df)
        want = df.sort_values("dur", ascending=False, kind="stable").reset_index(drop=True)
        pd.testing.assert_frame_equal(got, want)
        assert got["k"].tolist() == ["d", "a", "c", "b"]
    # Rows not numbered from 0: renumbered, as reset_index does.
    shifted = done.set_axis([7, 8, 9, 10])
    pd.testing.assert_frame_equal(_largest_first(shifted), done)


def test_joined_is_concat() -> None:
    a = pd.DataFrame({"x": [1, 2]})
    assert _joined([a]) is a
    b = pd.DataFrame({"x": [3]}, index=[5])
    pd.testing.assert_frame_equal(_joined([b]), pd.DataFrame({"x": [3]}))
    pd.testing.assert_frame_equal(_joined([a, b]), pd.DataFrame({"x": [1, 2, 3]}))
