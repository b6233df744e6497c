"""Op nesting and launch links, checked against a plain stack-based reference; nesting both
by the accelerator's walk (``_nest.c``, where built) and by numpy's sorted searches."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from nbprof.trace import accel, links
from nbprof.trace.links import link_launches

needs_walk = pytest.mark.skipif(accel._accel is None, reason="nbprof.trace._accel is not built")


@contextlib.contextmanager
def numpy_only() -> Iterator[None]:
    """links without its C walk, as an install without a C compiler has it."""
    walk = accel._accel
    accel._accel = None  # type: ignore[assignment]
    try:
        yield
    finally:
        accel._accel = walk


def nest(
    pid: np.ndarray, tid: np.ndarray, s: np.ndarray, e: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """links.nest, checked to give what the numpy path gives (depths' and parents' values
    and dtypes) for the same rows."""
    depth, parent = links.nest(pid, tid, s, e)
    with numpy_only():
        want_depth, want_parent = links.nest(pid, tid, s, e)
    assert depth.dtype == want_depth.dtype and parent.dtype == want_parent.dtype
    assert depth.tolist() == want_depth.tolist()
    assert parent.tolist() == want_parent.tolist()
    return depth, parent


def innermost_ops(*args: np.ndarray) -> np.ndarray:
    """links.innermost_ops, checked to give what the numpy path gives."""
    got = links.innermost_ops(*args)
    with numpy_only():
        want = links.innermost_ops(*args)
    assert got.dtype == want.dtype and got.tolist() == want.tolist()
    return got


def nests_in_c(th: np.ndarray, s: np.ndarray, e: np.ndarray) -> bool:
    """Whether the C walk nests these rows (False: they are left to numpy)."""
    assert accel._accel is not None
    n = len(s)
    pid = np.zeros(n, np.int64)
    return accel._accel.nest(pid, th, s, e, np.empty(n, np.int32), np.empty(n, np.int64))


def finds_in_c(
    th: np.ndarray, s: np.ndarray, e: np.ndarray, parent: np.ndarray, t: np.ndarray
) -> bool:
    """Whether the C walk finds these calls' ops (False: they are left to numpy)."""
    assert accel._accel is not None
    pid, q_th = np.zeros(len(s), np.int64), np.zeros(len(t), np.int64)
    out = np.empty(len(t), np.int64)
    return accel._accel.innermost(pid, th, s, e, parent, q_th, q_th, t, out)


@st.composite
def laminar(draw: st.DrawFn) -> list[tuple[int, int, int]]:
    """Properly nested intervals (thread, start, end) on a few threads, zero-length allowed."""
    out: list[tuple[int, int, int]] = []

    def fill(thread: int, lo: int, hi: int, budget: int) -> None:
        t = lo
        while t < hi and budget > 0 and draw(st.booleans()):
            a = draw(st.integers(t, hi))
            b = draw(st.integers(a, hi))
            out.append((thread, a, b))
            budget -= 1
            if b > a:
                fill(thread, a, b, budget // 2)
            t = b if b > a else a + 1

    for thread in range(draw(st.integers(1, 3))):
        fill(thread, 0, draw(st.integers(0, 60)), 12)
    return out


def reference(ivs: list[tuple[int, int, int]]) -> tuple[list[int], list[int]]:
    """Depth and parent by the definition: enclosing = started earlier (in sorted order) on
    the same thread and still open after this one starts."""
    depth, parent = [], []
    for i, (th, s, _e) in enumerate(ivs):
        enc = [j for j, (th2, _s2, e2) in enumerate(ivs[:i]) if th2 == th and e2 > s]
        depth.append(len(enc))
        parent.append(max(enc) if enc else -1)
    return depth, parent


@settings(max_examples=150, deadline=None)
@given(laminar(), st.lists(st.tuples(st.integers(0, 2), st.integers(0, 60)), max_size=20))
# An op ending at the instant its sibling (here of no duration) starts: the instant is the
# sibling's, although the op that ended is nested deeper.
@example(ivs=[(0, 0, 1), (0, 0, 1), (0, 1, 1)], queries=[(0, 1)])
def test_nest_and_innermost_match_the_reference(
    ivs: list[tuple[int, int, int]], queries: list[tuple[int, int]]
) -> None:
    ivs.sort(key=lambda v: (v[1], -v[2]))
    th = np.array([v[0] for v in ivs], np.int64)
    s = np.array([v[1] for v in ivs], np.float64)
    e = np.array([v[2] for v in ivs], np.float64)
    depth, parent = nest(np.zeros_like(th), th, s, e)
    want_depth, want_parent = reference(ivs)
    assert depth.tolist() == want_depth
    assert parent.tolist() == want_parent

    q_th = np.array([q[0] for q in queries], np.int64)
    q_t = np.array([q[1] for q in queries], np.float64)
    got = innermost_ops(np.zeros_like(th), th, s, e, parent, np.zeros_like(q_th), q_th, q_t)
    for k, (qt, qv) in enumerate(queries):
        containing = [i for i, (t2, a, b) in enumerate(ivs) if t2 == qt and a <= qv <= b]
        # Innermost: the containing interval that started last (at equal starts, the later
        # in sorted order, which nests in the earlier). Where one op ends at the instant its
        # sibling starts, both contain it, and the instant is the starting one's: what a call
        # made then was issued from. In a chain of nested ops this is the deepest.
        best = max(containing, key=lambda i: (ivs[i][1], i)) if containing else -1
        assert got[k] == best, (ivs, queries[k])


def test_link_launches_first_call_wins_and_sync_records_are_skipped() -> None:
    rt_corr = np.array([5, 7, 5, 9, 3])
    launcher = np.array([True, False, True, True, True])
    got = link_launches(np.array([5, 7, 9, -1, 42]), rt_corr, launcher)
    assert got.tolist() == [0, -1, 3, -1, -1]


def reference_any(ivs: list[tuple[int, float, float]]) -> tuple[list[int], list[int]]:
    """Depth and parent for any intervals, nested or not, by nest()'s definition: depth =
    earlier rows (in sorted order) on the thread still open after this one starts; parent =
    the last earlier row on the thread one level up."""
    depth: list[int] = []
    parent: list[int] = []
    for i, (th, s, _e) in enumerate(ivs):
        d = sum(1 for th2, _s2, e2 in ivs[:i] if th2 == th and e2 > s)
        up = [j for j in range(i) if ivs[j][0] == th and depth[j] == d - 1]
        depth.append(d)
        parent.append(up[-1] if d and up else -1)
    return depth, parent


def walk_reference(
    ivs: list[tuple[int, float, float]], parent: list[int], th: int, t: float
) -> int:
    """innermost_ops by its definition: the latest op on the thread starting at or before
    ``t``, then up the parents while the op has ended before ``t``."""
    cur = max((i for i, (th2, s, _e) in enumerate(ivs) if th2 == th and s <= t), default=-1)
    while cur >= 0 and ivs[cur][2] < t:
        cur = parent[cur]
    return cur


# Few distinct times, so that many intervals share a start, an end, or both (zero-length
# ones included), and overlaps that do not nest.
_TIMES = st.integers(0, 6).map(float)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 2), _TIMES, st.integers(0, 4).map(float)), max_size=40),
    st.lists(st.tuples(st.integers(0, 3), st.integers(-1, 12).map(lambda v: v / 2)), max_size=20),
)
def test_nest_matches_the_reference_on_any_intervals(
    raw: list[tuple[int, float, float]], queries: list[tuple[int, float]]
) -> None:
    ivs = sorted(((th, s, s + d) for th, s, d in raw), key=lambda v: (v[1], -v[2]))
    th = np.array([v[0] for v in ivs], np.int64)
    s = np.array([v[1] for v in ivs], np.float64)
    e = np.array([v[2] for v in ivs], np.float64)
    depth, parent = nest(np.zeros_like(th), th, s, e)
    want_depth, want_parent = reference_any(ivs)
    assert depth.tolist() == want_depth
    assert parent.tolist() == want_parent
    q_th = np.array([q[0] for q in queries], np.int64)
    q_t = np.array([q[1] for q in queries], np.float64)
    got = innermost_ops(np.zeros_like(th), th, s, e, parent, np.zeros_like(q_th), q_th, q_t)
    assert got.tolist() == [walk_reference(ivs, want_parent, qt, qv) for qt, qv in queries]


@pytest.mark.parametrize("walk_steps", [0, 1, 32])
def test_deep_walks_jump_exactly(monkeypatch: pytest.MonkeyPatch, walk_steps: int) -> None:
    """Past the level-by-level steps, innermost_ops jumps up the tree (binary lifting): the
    same answers, also where ends do not grow towards the root (ops that overlap without
    nesting)."""
    rng = np.random.default_rng(7)
    n = 300
    s = np.sort(rng.integers(0, 40, n)).astype(np.float64)
    e = s + rng.integers(0, 30, n)
    order = np.lexsort((-(e - s), s))
    s, e = s[order], e[order]
    th = rng.integers(0, 2, n)
    depth, parent = nest(np.zeros(n, np.int64), th, s, e)
    assert depth.max() > 32  # deep enough for the jumps to matter
    ivs = [(int(a), float(b), float(c)) for a, b, c in zip(th, s, e, strict=True)]
    q_th = rng.integers(0, 2, 200)
    q_t = rng.integers(0, 80, 200).astype(np.float64)
    monkeypatch.setattr(links, "_WALK_STEPS", walk_steps)
    got = innermost_ops(np.zeros(n, np.int64), th, s, e, parent, np.zeros(200, np.int64), q_th, q_t)
    want = [
        walk_reference(ivs, parent.tolist(), int(a), float(b))
        for a, b in zip(q_th, q_t, strict=True)
    ]
    assert got.tolist() == want


@pytest.mark.timeout(30)
def test_many_ops_sharing_one_timestamp_nest_in_near_linear_time() -> None:
    """300k ops on one thread, all [0, 10] us: each encloses the next (depth = row), the
    worst case for a pass per nesting level (it took minutes). The timeout is a hang guard,
    ~100x what the sorted searches take."""
    n = 300_000
    s = np.zeros(n)
    e = np.full(n, 10.0)
    zeros = np.zeros(n, np.int64)
    depth, parent = nest(zeros, zeros, s, e)
    assert depth.tolist() == list(range(n))
    assert parent.tolist() == list(range(-1, n - 1))
    # A call inside every op belongs to the deepest; one after them all, to none.
    got = innermost_ops(
        zeros, zeros, s, e, parent, np.zeros(2, np.int64), np.zeros(2, np.int64),
        np.array([5.0, 20.0]),
    )  # fmt: skip
    assert got.tolist() == [n - 1, -1]


@needs_walk
def test_the_walk_takes_sorted_rows_and_leaves_the_rest_to_numpy() -> None:
    """The C walk answers for rows by start ascending, end descending, none ending before it
    starts (every trace's ops, sorted by the reader); any other rows go to numpy, which
    nest() then answers with. Calls' ops too, where the parents come before their children,
    no call time is NaN, and the walks up the tree stay short."""
    th = np.array([0, 1, 0, 0, 1])
    s = np.array([0.0, 0.0, 1.0, 1.0, 2.0])
    e = np.array([9.0, 3.0, 5.0, 1.0, 2.0])
    assert nests_in_c(th, s, e)
    depth, parent = nest(np.zeros(5, np.int64), th, s, e)
    assert depth.tolist() == [0, 0, 1, 2, 1]
    assert parent.tolist() == [-1, -1, 0, 2, 1]
    t = np.array([0.5, 1.0, 4.0, 6.0, 9.5])
    assert finds_in_c(th, s, e, parent, t)
    z = np.zeros(5, np.int64)
    assert innermost_ops(z, th, s, e, parent, z, z, t).tolist() == [0, 3, 2, 0, -1]
    unsorted = s[[2, 0, 1, 3, 4]]
    shorter_first = np.array([9.0, 3.0, 1.0, 5.0, 2.0])  # equal starts, shorter first
    backwards = np.array([9.0, 3.0, 5.0, 0.5, 2.0])  # an end before its start
    with_nan = np.array([9.0, 3.0, np.nan, 1.0, 2.0])
    for starts, ends in ((unsorted, e), (s, shorter_first), (s, backwards), (s, with_nan)):
        assert not nests_in_c(th, starts, ends)
        assert not finds_in_c(th, starts, ends, parent, t)
        nest(np.zeros(5, np.int64), th, starts, ends)  # numpy's answer, through nest()
    assert not finds_in_c(th, s, e, np.array([-1, -1, 3, 2, 1]), t)  # a parent after its child
    assert not finds_in_c(th, s, e, parent, np.array([0.5, np.nan, 4.0, 6.0, 9.5]))
    # A chain 400 deep, op k over [k, 1000 - k] ms: a call at 700.5 ms is in ops 0-299 and
    # after op 399's start, 100 steps up for each of 100 calls, past the walk's budget (64
    # a call): numpy's jumps answer.
    n = 400
    deep_s = np.arange(n, dtype=np.float64)
    deep_e = 1000.0 - deep_s
    one = np.zeros(n, np.int64)
    _, deep_parent = nest(one, one, deep_s, deep_e)
    calls = np.full(100, 700.5)
    assert not finds_in_c(one, deep_s, deep_e, deep_parent, calls)
    got = innermost_ops(one, one, deep_s, deep_e, deep_parent, one[:100], one[:100], calls)
    assert got.tolist() == [299] * 100


def test_nest_without_the_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    """An install without a C compiler nests with numpy alone, to the same answer."""
    rng = np.random.default_rng(3)
    n = 2000
    s = np.sort(rng.integers(0, 500, n)).astype(np.float64)
    e = s + rng.choice([0, 0, 1, 5, 40], n)
    order = np.lexsort((-(e - s), s))
    s, e = s[order], e[order]
    th = rng.integers(0, 4, n)
    z = np.zeros(n, np.int64)
    with_walk = links.nest(z, th, s, e)
    q_th, q_t = rng.integers(0, 5, 500), rng.uniform(-5, 560, 500)
    ops_with = links.innermost_ops(z, th, s, e, with_walk[1], z[:500], q_th, q_t)
    monkeypatch.setattr(accel, "_accel", None)
    without = links.nest(z, th, s, e)
    assert with_walk[0].tolist() == without[0].tolist()
    assert with_walk[1].tolist() == without[1].tolist()
    ops_without = links.innermost_ops(z, th, s, e, without[1], z[:500], q_th, q_t)
    assert ops_with.tolist() == ops_without.tolist()
