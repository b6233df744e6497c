"""Interval algebra on sorted, disjoint sets of [start, end) intervals (µs).

The time accounting of a device (what ran, what was idle, what the host was doing while
it idled) is unions, intersections and differences of interval sets: done here once,
vectorised, so every rule that needs "the part of this gap the host spent blocked" asks
the same questions the same way.

A *set* is a pair of float64 arrays ``(starts, ends)``, sorted, non-overlapping and
non-empty intervals only (``merge`` makes one from any intervals).
"""

from __future__ import annotations

import logging

import numpy as np

logger = logging.getLogger(__name__)

Set = tuple[np.ndarray, np.ndarray]

EMPTY: Set = (np.zeros(0), np.zeros(0))


def merge(starts: np.ndarray, ends: np.ndarray) -> Set:
    """The union of any intervals as a set: sorted, disjoint, zero-length ones dropped."""
    s = np.asarray(starts, dtype="float64")
    e = np.asarray(ends, dtype="float64")
    ok = ~(np.isnan(s) | np.isnan(e)) & (e > s)
    s, e = s[ok], e[ok]
    if not len(s):
        return EMPTY
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    run_end = np.maximum.accumulate(e)
    # An interval opens a new block when it starts after every earlier one ended.
    new = np.concatenate(([True], s[1:] > run_end[:-1]))
    # A block ends where the next one opens (or at the last interval); the running max of
    # ends there is the block's end.
    last = np.concatenate((new[1:], [True]))
    return s[new], run_end[last]


def total(a: Set) -> float:
    """Length covered by a set."""
    return float(np.sum(a[1] - a[0]))


def _sweep(a: Set, b: Set, keep_a: bool, keep_b: bool) -> Set:
    """The part of time where membership of a is ``keep_a`` and of b is ``keep_b``."""
    t = np.concatenate((a[0], a[1], b[0], b[1]))
    if not len(t):
        return EMPTY
    da = np.concatenate((np.ones(len(a[0])), -np.ones(len(a[1])), np.zeros(2 * len(b[0]))))
    db = np.concatenate((np.zeros(2 * len(a[0])), np.ones(len(b[0])), -np.ones(len(b[1]))))
    order = np.argsort(t, kind="stable")
    t, da, db = t[order], da[order], db[order]
    # Membership between t[i] and t[i+1]: the running counts after every change at t[i].
    in_a = np.cumsum(da)[:-1] > 0
    in_b = np.cumsum(db)[:-1] > 0
    sel = (in_a == keep_a) & (in_b == keep_b) & (np.diff(t) > 0)
    return merge(t[:-1][sel], t[1:][sel])


def _proper(a: Set) -> bool:
    """Whether a is a set as ``merge`` makes them: sorted, disjoint, non-empty intervals."""
    s, e = a
    return bool((e > s).all()) and (len(s) < 2 or bool((s[1:] > e[:-1]).all()))


def clip(starts: np.ndarray, ends: np.ndarray, b: Set) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each of any intervals (no NaN) clipped to each interval of the proper set b it
    overlaps: (starts, ends, which interval each piece is of), in the intervals' order, then
    b's; pieces of no length kept. b is sorted and disjoint, so the b intervals one
    interval meets are one contiguous run, found by binary search."""
    lo = np.searchsorted(b[1], starts, side="right")
    hi = np.searchsorted(b[0], ends, side="left")
    n = np.maximum(hi - lo, 0)
    count = int(n.sum())
    if not count:
        return np.zeros(0), np.zeros(0), np.zeros(0, dtype=np.intp)
    if int(n.max()) <= 1:
        # Each interval meets one interval of b at most (a gap and the host's time
        # around it, mostly): the pairs are those intervals, without the runs' arithmetic.
        ia = np.flatnonzero(n)
        ib = lo[ia]
        return np.maximum(starts[ia], b[0][ib]), np.minimum(ends[ia], b[1][ib]), ia
    ia = np.repeat(np.arange(len(starts)), n)
    # Index into b of every pair: lo of its interval, plus its place in that run.
    first = np.cumsum(n) - n
    ib = np.arange(count) - np.repeat(first, n) + np.repeat(lo, n)
    return np.maximum(starts[ia], b[0][ib]), np.minimum(ends[ia], b[1][ib]), ia


def _pairs(a: Set, b: Set) -> Set:
    """Time in both of two proper sets: each interval of a clipped to each interval of b it
    overlaps (:func:`clip`); the pieces come out sorted and disjoint. Much cheaper than a
    sweep on the few-interval sets most questions ask about."""
    s, e, ia = clip(a[0], a[1], b)
    if not len(ia):
        return EMPTY
    ok = e > s
    s, e = s[ok], e[ok]
    if len(s) > 1 and not bool((s[1:] > e[:-1]).all()):
        return merge(s, e)  # pieces that touch are one interval, as merge makes them
    return s, e


def _complement(b: Set) -> Set:
    """All time outside a proper set b, as a proper set (open-ended at both sides)."""
    s = np.concatenate(([-np.inf], b[1]))
    e = np.concatenate((b[0], [np.inf]))
    return s, e


def intersect(a: Set, b: Set) -> Set:
    """Time in both a and b."""
    if not len(a[0]) or not len(b[0]):
        return EMPTY
    if _proper(a) and _proper(b):
        return _pairs(a, b)
    return _sweep(a, b, True, True)


def subtract(a: Set, b: Set) -> Set:
    """Time in a but not in b."""
    if not len(a[0]) or not len(b[0]):
        return a
    if _proper(a) and _proper(b):
        return _pairs(a, _complement(b))
    return _sweep(a, b, True, False)


def gaps(a: Set, lo: float, hi: float) -> Set:
    """Time in [lo, hi) that a does not cover."""
    if hi <= lo:
        return EMPTY
    return subtract((np.array([lo]), np.array([hi])), a)


def per_interval(pieces: Set, of: Set) -> np.ndarray:
    """Length of ``pieces`` inside each interval of ``of`` (pieces must lie within ``of``)."""
    out = np.zeros(len(of[0]))
    if not len(pieces[0]) or not len(of[0]):
        return out
    idx = np.searchsorted(of[0], pieces[0], side="right") - 1
    ok = idx >= 0
    np.add.at(out, idx[ok], (pieces[1] - pieces[0])[ok])
    return out


def window(a: Set, lo: float, hi: float) -> Set:
    """The intervals of a that overlap [lo, hi), unclipped: a cheap slice (a is sorted and
    disjoint, so its starts and its ends are both sorted), for intersecting a large set
    with a short window."""
    i0 = int(np.searchsorted(a[1], lo, side="right"))
    i1 = int(np.searchsorted(a[0], hi, side="left"))
    return a[0][i0:i1], a[1][i0:i1]
