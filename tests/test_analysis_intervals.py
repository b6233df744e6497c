"""The interval algebra: its binary-search fast path agrees with the sweep, exactly."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from nbprof.analysis import intervals as iv

raw = st.lists(st.tuples(st.integers(0, 200), st.integers(0, 30)), min_size=0, max_size=25)


def _set(pairs: list[tuple[int, int]]) -> iv.Set:
    s = np.array([a for a, _ in pairs], dtype="float64")
    return iv.merge(s, s + np.array([n for _, n in pairs], dtype="float64"))


def _units(a: iv.Set) -> set[int]:
    """The unit cells [t, t+1) a set covers (its ends are integers)."""
    return {t for s, e in zip(*a, strict=True) for t in range(int(s), int(e))}


def _same(x: iv.Set, y: iv.Set) -> bool:
    return all(u.dtype == v.dtype and np.array_equal(u, v) for u, v in zip(x, y, strict=True))


def test_hand_built_sets() -> None:
    a = (np.array([0.0, 20.0]), np.array([10.0, 30.0]))
    b = (np.array([5.0]), np.array([25.0]))
    # Overlaps: [max(0,5), min(10,25)) and [max(20,5), min(30,25)).
    assert _same(iv.intersect(a, b), (np.array([5.0, 20.0]), np.array([10.0, 25.0])))
    # a less b: [0, 5) and [25, 30).
    assert _same(iv.subtract(a, b), (np.array([0.0, 25.0]), np.array([5.0, 30.0])))
    # b spans a's hole [10, 20): that part of b is not in a.
    assert _same(iv.subtract(b, a), (np.array([10.0]), np.array([20.0])))
    # Pieces from two touching intervals of a come back as one interval, as merge makes.
    touching = (np.array([0.0, 10.0]), np.array([10.0, 20.0]))
    assert _same(iv.intersect(touching, (np.array([5.0]), np.array([15.0]))),
                 (np.array([5.0]), np.array([15.0])))  # fmt: skip
    assert iv.total(iv.intersect(a, (np.array([10.0]), np.array([20.0])))) == 0.0


def test_merge_keeps_each_block_end() -> None:
    # [0,4) holds [1,2): the block ends at 4, not at the last interval's end 2; [5,6) is
    # a block of its own; [6,7) touches it and joins it.
    s, e = iv.merge(np.array([0.0, 1.0, 5.0, 6.0]), np.array([4.0, 2.0, 6.0, 7.0]))
    assert s.tolist() == [0.0, 5.0] and e.tolist() == [4.0, 7.0]


@settings(max_examples=150, deadline=None)
@given(raw, raw)
def test_fast_path_matches_sweep_and_unit_counts(p: list[tuple[int, int]],
                                                 q: list[tuple[int, int]]) -> None:  # fmt: skip
    a, b = _set(p), _set(q)
    both, only = iv.intersect(a, b), iv.subtract(a, b)
    if len(a[0]) and len(b[0]):
        assert _same(both, iv._sweep(a, b, True, True))
        assert _same(only, iv._sweep(a, b, True, False))
    assert _units(both) == _units(a) & _units(b)
    assert _units(only) == _units(a) - _units(b)
    assert iv.total(both) == len(_units(a) & _units(b))


def test_describe_cuts_a_gap_as_the_set_algebra_does() -> None:
    from nbprof.analysis.stalls import _length, _take

    # Gap [0, 10) less [2, 4) and [6, 20): inside [2, 4), [6, 10); outside [0, 2), [4, 6).
    inside, outside = _take([(0.0, 10.0)], [2.0, 6.0], [4.0, 20.0])
    assert inside == [(2.0, 4.0), (6.0, 10.0)] and outside == [(0.0, 2.0), (4.0, 6.0)]
    assert _length(inside) == 2.0 + 4.0 and _length(outside) == 2.0 + 2.0
    assert _take([(0.0, 10.0)], [], []) == ([], [(0.0, 10.0)])


@settings(max_examples=150, deadline=None)
@given(raw, raw)
def test_take_matches_intersect_and_subtract(p: list[tuple[int, int]],
                                             q: list[tuple[int, int]]) -> None:  # fmt: skip
    from nbprof.analysis.stalls import _length, _take

    a, b = _set(p), _set(q)
    pieces = list(zip(a[0].tolist(), a[1].tolist(), strict=True))
    inside, outside = _take(pieces, b[0].tolist(), b[1].tolist())
    both, only = iv.intersect(a, b), iv.subtract(a, b)
    assert inside == list(zip(both[0].tolist(), both[1].tolist(), strict=True))
    assert outside == list(zip(only[0].tolist(), only[1].tolist(), strict=True))
    assert _length(inside) == iv.total(both) and _length(outside) == iv.total(only)


calls = st.lists(
    st.tuples(st.integers(0, 100), st.integers(0, 30), st.sampled_from(["a", "b", "c"])),
    max_size=20,
)


@settings(max_examples=200, deadline=None)
@given(calls, st.integers(0, 120), st.integers(0, 40), st.sampled_from([0.0, 3.0, 25.0]))
def test_covering_in_python_matches_numpy(
    rows: list[tuple[int, int, str]], a: int, length: int, at_least: float
) -> None:
    """The plain-Python search names the same call as the numpy one: the name covering
    most of [a, b], the first in sorted order on a tie, "" below ``at_least``."""
    from nbprof.analysis.stalls import _Calls

    s = np.array([r[0] for r in rows], dtype="float64") + 0.5
    e = s + np.array([r[1] for r in rows], dtype="float64")
    c = _Calls(s, e, np.array([r[2] for r in rows], dtype=str))
    assert c._lists is not None
    got = c.covering(float(a), float(a + length), at_least)
    c._lists = None  # the numpy search
    assert got == c.covering(float(a), float(a + length), at_least)


def test_covering_by_hand() -> None:
    """[0, 10): "a" covers 2 + 3 = 5 (two calls), "b" covers 5 (one): a tie, so "a" (first
    in sorted order); asked for at least 6 of the gap, neither."""
    from nbprof.analysis.stalls import _Calls

    s, e = np.array([-1.0, 4.0, 5.0]), np.array([2.0, 7.0, 12.0])
    c = _Calls(s, e, np.array(["a", "a", "b"]))
    assert c.covering(0.0, 10.0) == "a"
    assert c.covering(0.0, 10.0, at_least=6.0) == ""
    assert c.covering(8.0, 10.0) == "b"  # only "b" reaches past 7
    # A missing end orders differently in a list search: the numpy search answers.
    d = _Calls(s, np.array([2.0, np.nan, 12.0]), np.array(["a", "a", "b"]))
    assert d._lists is None


def _charged_by_name(
    s: np.ndarray, e: np.ndarray, names: np.ndarray, blocked: iv.Set
) -> dict[str, float]:
    """The charge as first written: each name's calls merged, then intersected."""
    own: dict[str, iv.Set] = {}
    for n in dict.fromkeys(names.tolist()):
        m = names == n
        own[n] = iv.intersect(iv.merge(s[m], e[m]), blocked)
    out: dict[str, float] = {}
    taken: iv.Set = iv.EMPTY
    for n in sorted(own, key=lambda k: -iv.total(own[k])):
        mine = iv.subtract(own[n], taken)
        if iv.total(mine) > 0:
            out[n] = iv.total(mine)
            taken = iv.merge(
                np.concatenate((taken[0], mine[0])), np.concatenate((taken[1], mine[1]))
            )
    return out


@settings(max_examples=200, deadline=None)
@given(calls, raw)
def test_charged_cuts_all_calls_at_once_as_each_name_alone(
    rows: list[tuple[int, int, str]], p: list[tuple[int, int]]
) -> None:
    import pandas as pd

    from nbprof.analysis.stalls import _charged

    s = np.array([r[0] for r in rows], dtype="float64") * 0.5
    e = s + np.array([r[1] for r in rows], dtype="float64")
    names = np.array([r[2] for r in rows], dtype=object)
    blocked = _set(p)
    calls = pd.DataFrame({"ts": s, "dur": e - s, "name": pd.Series(names, dtype=object)})
    got = _charged(calls, blocked)
    want = _charged_by_name(s, e, names, blocked) if len(rows) else {}
    assert list(got.items()) == list(want.items())


def test_clip_pairs_are_every_overlap_in_order() -> None:
    # Intervals meeting at most one of b's (the shortcut) and several (the runs).
    rng = np.random.default_rng(9)
    for _ in range(500):
        k, m = int(rng.integers(0, 20)), int(rng.integers(0, 20))
        s = rng.random(k) * 100
        e = s + rng.random(k) * rng.choice([0.5, 5.0, 50.0])
        bs = rng.random(m) * 100
        b = iv.merge(bs, bs + rng.random(m) * rng.choice([0.5, 5.0, 50.0]))
        ps, pe, at = iv.clip(s, e, b)
        want = [
            (max(s[i], b[0][j]), min(e[i], b[1][j]), i)
            for i in range(k)
            for j in range(len(b[0]))
            if b[1][j] > s[i] and b[0][j] < e[i]
        ]
        assert list(zip(ps.tolist(), pe.tolist(), at.tolist(), strict=True)) == want


def test_describe_names_the_first_of_equal_shares() -> None:
    """The largest share names the gap's host work, the first in the order blocked,
    capture, fetch, setup, rest on a tie (what max over them in that order gives); the
    time after a block is named after what the host did then, never the block."""
    from nbprof.analysis.stalls import HostActivity

    def calls(*rows: tuple[float, float, str]) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "ts": np.array([r[0] for r in rows], dtype="float64"),
                "dur": np.array([r[1] for r in rows], dtype="float64"),
                "name": np.array([r[2] for r in rows], dtype=object),
            }
        )

    none = calls()
    # [0, 10): blocked in [0, 5), the rest [5, 10): a tie, blocked first.
    host = HostActivity(calls((0.0, 5.0, "sync")), iv.EMPTY, none, none)
    assert host.describe(0.0, 10.0) == "blocked in sync"
    # [5, 15): after the block, all the host's own work (no op recorded).
    assert host.describe(5.0, 15.0) == "python"
    # Set-up over [20, 25) and nothing over [25, 30): a tie, set-up first.
    host = HostActivity(none, iv.EMPTY, calls((20.0, 5.0, "cudaMalloc")), none)
    assert host.describe(20.0, 30.0) == "set-up: cudaMalloc"
    # The rest larger: named after no op (none recorded).
    assert host.describe(20.0, 31.0) == "python"
    # A DataLoader fetch over the whole gap.
    fetch = (np.array([40.0]), np.array([50.0]))
    assert HostActivity(none, fetch, none, none).describe(40.0, 50.0) == "DataLoader __next__"
    # Input work named by its own call when it is not the DataLoader's.
    tok = calls((40.0, 10.0, "tokenizers/implementations/base.py(10): encode_batch"))
    named = HostActivity(none, fetch, none, none, iv.EMPTY, tok)
    assert (
        named.describe(40.0, 50.0) == "input: tokenizers/implementations/base.py(10): encode_batch"
    )


cause_values = st.sampled_from([0.0, 1.0, 2.5, -1.0, np.inf, np.nan])


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 9).flatmap(lambda k: st.lists(
    st.lists(cause_values, min_size=k, max_size=k), min_size=1, max_size=8)))  # fmt: skip
def test_first_largest_is_argmax_of_the_stack(rows: list[list[float]]) -> None:
    """Each gap's main cause is the first of the largest, a NaN counting as largest:
    what ``np.vstack(values).argmax(axis=0)`` gives, without stacking every cause."""
    from nbprof.analysis.stalls import _first_largest

    values = [np.array(r) for r in rows]
    expected = np.vstack(values).argmax(axis=0)
    assert _first_largest(values).tolist() == expected.tolist()


def test_first_largest_by_hand() -> None:
    """Per position: 2.0 beats 1.0 (second array); a tie of 3.0 goes to the first; the
    NaN in the third array outranks the 5.0 before it, as argmax takes it."""
    from nbprof.analysis.stalls import _first_largest

    got = _first_largest(
        [np.array([1.0, 3.0, 5.0]), np.array([2.0, 3.0, 0.0]), np.array([0.0, 1.0, np.nan])]
    )
    assert got.tolist() == [1, 0, 2]


def test_call_names_are_the_frames_own_text_objects() -> None:
    """Names read as the frame holds them (no fixed-width copy at the longest name's width,
    no new object per call); names that are not text read as str() of them, as NumPy's
    conversion to text gave them."""
    from nbprof.analysis.stalls import _call_names

    long = "void at::native::elementwise_kernel<128, 4>" * 3
    calls = pd.DataFrame({"name": np.array([long, "b", long], dtype=object)})
    got = _call_names(calls)
    assert got.dtype == object
    assert got[0] is calls["name"].iloc[0] and got[2] is got[0]
    odd = pd.DataFrame({"name": np.array(["x", None, 3, np.nan], dtype=object)})
    assert _call_names(odd).tolist() == ["x", "None", "3", "nan"]
    assert _call_names(odd).tolist() == odd["name"].to_numpy(str).tolist()


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 400), st.integers(1, 60), st.sampled_from("abcd")),
             min_size=70, max_size=300),
    st.integers(0, 300), st.integers(50, 400), st.sampled_from([0.0, 40.0]),
)  # fmt: skip
def test_covering_over_many_calls_matches_the_plain_sum(
    rows: list[tuple[int, int, str]], a: int, length: int, at_least: float
) -> None:
    """A window over more calls than the plain-Python loop takes on (an idle spell across
    a step's ops) is weighed by numpy: the same name as adding each name's overlaps in
    start order and taking the first, in sorted order, of those covering the most."""
    from nbprof.analysis.stalls import _NUMPY_FROM, _Calls

    s = np.array([r[0] for r in rows], dtype="float64") + 0.25
    e = s + np.array([r[1] for r in rows], dtype="float64")
    names = np.array([r[2] for r in rows], dtype=object)
    c = _Calls(s, e, names)
    lo, hi = float(a), float(a + length)
    by: dict[str, float] = {}
    for i in np.argsort(s, kind="stable").tolist():
        if e[i] > lo and s[i] < hi:
            by[names[i]] = by.get(names[i], 0.0) + (min(e[i], hi) - max(s[i], lo))
    most = max(by.values(), default=-1.0)
    expected = next((n for n in sorted(by) if by[n] == most), "")
    expected = expected if most >= at_least else ""
    assert c.covering(lo, hi, at_least) == expected
    c._lists = None  # the numpy search from the start
    assert c.covering(lo, hi, at_least) == expected
    assert len(rows) > _NUMPY_FROM
    # More calls than plain lists are kept for: numpy from the first call whose running
    # end reaches the window.
    from nbprof.analysis import stalls

    keep, stalls._LISTS_UP_TO = stalls._LISTS_UP_TO, 16
    try:
        big = _Calls(s, e, names)
    finally:
        stalls._LISTS_UP_TO = keep
    assert big._lists is None and big._reach_at is not None
    assert big.covering(lo, hi, at_least) == expected
