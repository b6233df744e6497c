"""The small-table grouping helpers give exactly what pandas' groupby gives."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import example, given, settings
from hypothesis import strategies as st

from nbprof.analysis import _group, _text

# Finite values whose sums stay inside float64's range, and NaN (missing): with an infinity
# or past the range pandas itself changed its answer (2.0 gives NaN, 3.x inf), so those
# sums are held to float addition instead, below.
floats = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False, min_value=-1e300, max_value=1e300),
    st.sampled_from([1e16, 1.0, -1e16, 0.1, 1e-300, 3.0, np.nan]),
)


def test_hand_built_groups() -> None:
    uniq, code = _group.codes(["b", "a", "b", "c"])
    assert uniq == ["b", "a", "c"] and code.tolist() == [0, 1, 0, 2]
    uniq, code = _group.codes(["b", "a", "b", "c"], sort=True)
    assert uniq == ["a", "b", "c"] and code.tolist() == [1, 0, 1, 2]
    assert _group.counts(code, 3).tolist() == [1, 2, 1]
    # 1 + 1 + 2**53 in float64: pandas gives 2**53 when the rows come grouped in order
    # (its np.add.reduceat path), 2**53 + 2 when not (its compensated Cython sum).
    big = 2.0**53
    if _group._REDUCEAT:
        assert _group.sums(np.array([0, 0, 0]), np.array([1.0, 1.0, big]), 1).tolist() == [big]
    got = _group.sums(np.array([0, 1, 0, 0]), np.array([1.0, 5.0, 1.0, big]), 2)
    assert got.tolist() == [big + 2.0, 5.0]
    assert _group.sums(np.array([0, 0]), np.array([np.nan, 2.0]), 2).tolist() == [2.0, 0.0]
    assert _group.any_true(np.array([0, 1, 1]), np.array([False, False, True]), 3).tolist() == [
        False, True, False,
    ]  # fmt: skip
    assert _group.all_text(np.array(["a", "b"], dtype=object))
    assert not _group.all_text(np.array(["a", None], dtype=object))
    assert _group.all_text(np.array([], dtype=object))  # nothing missing: as all() says
    # Only str itself: a NumPy str_ or a number is not a trace's text.
    assert not _group.all_text(np.array([np.str_("a")], dtype=object))
    assert not _group.all_text(np.array(["a", 1.5], dtype=object))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abcd"), floats, st.booleans()), max_size=40))
@example([("a", 1.0, False), ("a", 1.0, False), ("a", 2.0**53, False)])
@example([("a", 1.0, False), ("b", 1.0, False), ("a", 2.0**53, False), ("a", 1.0, False)])
@example([("b", 3.0, False), ("a", -0.0, True), ("b", 2.0**52, False), ("a", 7.0, False)])
@example([("b", 3.0, False), ("a", 2.0**52, False), ("b", 0.5, False), ("a", 2.0**52, False)])
def test_matches_pandas_groupby(rows: list[tuple[str, float, bool]]) -> None:
    keys = [k for k, _, _ in rows]
    vals = np.array([v for _, v, _ in rows], dtype="float64")
    flags = np.array([f for _, _, f in rows], dtype=bool)
    df = pd.DataFrame({"k": pd.Series(keys, dtype=object), "v": vals, "f": flags})
    for sort in (False, True):
        g = df.groupby("k", sort=sort).agg(n=("v", "size"), s=("v", "sum"), f=("f", "any"))
        uniq, code = _group.codes(keys, sort=sort)
        assert uniq == list(g.index)
        n = len(uniq)
        assert _group.counts(code, n).tolist() == g["n"].tolist()
        np.testing.assert_array_equal(_group.sums(code, vals, n), g["s"].to_numpy())
        assert _group.any_true(code, flags, n).tolist() == g["f"].tolist()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(-(2**40), 2**40)), max_size=40))
def test_whole_numbers_sum_as_pandas_does(rows: list[tuple[int, int]]) -> None:
    keys = [f"k{k}" for k, _ in rows]
    vals = np.array([v for _, v in rows], dtype="float64")
    g = pd.DataFrame({"k": pd.Series(keys, dtype=object), "v": vals}).groupby("k", sort=False)
    uniq, code = _group.codes(keys)
    np.testing.assert_array_equal(_group.sums(code, vals, len(uniq)), g["v"].sum().to_numpy())


def test_a_sum_past_the_float64_range_or_with_an_infinity_is_infinite() -> None:
    """Two values near float64's maximum add up to inf, and inf plus anything finite stays
    inf, as float addition gives (pandas 3.x agrees; 2.0 gave NaN): the compensation made
    NaN by the overflow restarts at 0."""
    half_max = 8.98846567431158e307
    got = _group.sums(np.array([1, 1, 0, 1]), np.array([half_max, half_max, 0.0, 0.0]), 2)
    assert got.tolist() == [0.0, np.inf]
    got = _group.sums(np.array([0, 1, 0, 1]), np.array([np.inf, -np.inf, 0.0, 2.0]), 2)
    assert got.tolist() == [np.inf, -np.inf]


def test_text_columns_are_grouped_by_their_codes() -> None:
    # A trace's text column (a Categorical) is asked of its categories only; an object
    # column, or a Categorical with missing values, answers as a look at every row does.
    n = _group.BY_ADDRESS + 7
    words = [f"name{i % 5}" for i in range(20)]
    rows = [words[(i * 7) % 20] for i in range(n)]
    for odd in (None, np.nan, np.str_("name1"), 1.5):
        for values in (rows, [*rows[:-1], odd]):
            arr = np.array(values, dtype=object)
            assert _group.all_text(arr) == all(type(v) is str for v in values)
            cat = pd.Categorical(arr) if odd is None or odd is np.nan else None
            if cat is not None:
                assert _group.all_text(cat) == all(type(v) is str for v in values)
            codes, uniq = _text._factorize(pd.Series(arr))
            want_codes, want_uniq = pd.factorize(pd.Series(arr), use_na_sentinel=False)
            np.testing.assert_array_equal(codes, want_codes)
            assert list(uniq) == list(want_uniq)
    for values in (np.array(rows, dtype=object), pd.Categorical(rows)):
        code, distinct = _group.factorized(values)
        assert [distinct[c] for c in code.tolist()] == rows
        assert sorted(set(distinct)) == sorted(set(rows))
    assert _group.factorized(np.array([], dtype=object))[1] == []


def test_device_pairs_are_the_rows_pairs() -> None:
    from nbprof.analysis import _distinct_pairs

    rng = np.random.default_rng(3)
    devices = [str(i) for i in range(5)]
    n = _group.BY_ADDRESS + 10
    for size in (n, 3):
        ranks = rng.integers(-2, 3, size).astype("int32")
        devs = pd.Categorical([devices[j] for j in rng.integers(0, 5, size)])
        got = _distinct_pairs(ranks, devs)
        assert got is not None
        assert sorted(got) == sorted(set(zip(ranks.tolist(), list(devs), strict=True)))
    # Not a Categorical, ranks that are not integers: the tuples are hashed by the caller.
    assert _distinct_pairs(np.zeros(3, "int32"), np.array(["0"] * 3, dtype=object)) is None
    assert _distinct_pairs(np.zeros(n), pd.Categorical(["0"] * n)) is None


def test_largest_first_is_the_stable_descending_sort() -> None:
    rng = np.random.default_rng(5)
    n = _group.BY_ADDRESS + 500
    cases = [
        rng.integers(0, 5, n).astype(float),  # many ties
        np.round(rng.exponential(10, n), 1),
        rng.choice([0.0, -0.0, np.inf, -np.inf, 1.0, 2.5, 1e308], n),  # -0.0 ties 0.0
        rng.random(n),
        rng.random(10),
        np.zeros(0),
    ]
    for d in cases:
        want = np.argsort(-d, kind="stable")
        got = _group.largest_first(d)
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype
