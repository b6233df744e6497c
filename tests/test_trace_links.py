"""Op nesting and launch links, checked against a plain stack-based reference."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from nbprof.trace.links import innermost_ops, link_launches, nest


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
        # Innermost: the deepest containing interval; at equal depth, the later one.
        best = max(containing, key=lambda i: (want_depth[i], i)) if containing else -1
        assert got[k] == best, (ivs, queries[k])


def test_link_launches_first_call_wins_and_sync_records_are_skipped() -> None:
    rt_corr = np.array([5, 7, 5, 9, 3])
    launcher = np.array([True, False, True, True, True])
    got = link_launches(np.array([5, 7, 9, -1, 42]), rt_corr, launcher)
    assert got.tolist() == [0, -1, 3, -1, -1]
