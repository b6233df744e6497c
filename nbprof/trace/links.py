"""Links between tables: GPU activity -> its launch call -> the CPU op that made the call.

* Correlation: Kineto writes ``args.correlation`` on both the runtime call and the GPU event.
  Traces without it carry flow events instead (``ph`` "s" at the call, "f" at the GPU event,
  the same ``id``, category ``ac2g`` or ``async``); :func:`fill_from_flows` recovers the
  correlation from them.
* Launch: the runtime/driver call with the same correlation (:func:`link_launches`).
* Op: the innermost CPU op on the call's thread whose span contains the call's start
  (:func:`innermost_ops`), found with sorted searches and jumps up the nesting tree: a
  fixed number of numpy steps however deep the ops nest, no Python step per event (or by
  the accelerator's walk, :mod:`nbprof.trace.accel`).

:func:`link` adds these links to a rank's tables.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import numpy as np

from nbprof.trace import accel
from nbprof.trace.text import Text

if TYPE_CHECKING:
    import pandas as pd
else:
    from nbprof._lazy import pandas as pd

logger = logging.getLogger(__name__)


def _thread_codes(pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """A dense code per distinct (pid, tid) pair (hash factorizations, no tuples)."""
    lo, hi = -(2**31), 2**31
    if len(pid) and pid.min() >= lo and pid.max() < hi and tid.min() >= lo and tid.max() < hi:
        # Ids of 32 bits (every real trace's, and the codes of text ids) pack into one key:
        # one factorization, where the general way takes three. Codes come in order of
        # first appearance either way, so they are the same codes.
        p, t = pid.astype(np.int64, copy=False), tid.astype(np.int64, copy=False)
        codes, _ = pd.factorize((p << 32) | (t - lo))
        return codes.astype(np.int64)
    pc, _ = pd.factorize(pid)
    tc, tu = pd.factorize(tid)
    codes, _ = pd.factorize(pc.astype(np.int64) * max(len(tu), 1) + tc)
    return codes.astype(np.int64)


def _start_ranks(starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct start times ascending, each row's index among them).

    Ranks are what gets packed with the thread into one int64 key: times are floats, and
    adding a thread offset to them could merge two of them.
    """
    if len(starts) and (starts[1:] >= starts[:-1]).all():
        # Already sorted (ops are): no sort needed.
        new = np.empty(len(starts), bool)
        new[0] = True
        np.not_equal(starts[1:], starts[:-1], out=new[1:])
        return starts[new], np.cumsum(new) - 1
    distinct, rank = np.unique(starts, return_inverse=True)
    return distinct, rank.reshape(-1).astype(np.int64)


def _runs(sorted_keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each element of a sorted array: where its run of equal values starts and ends."""
    n = len(sorted_keys)
    head = np.empty(n, bool)
    head[:1] = True
    np.not_equal(sorted_keys[1:], sorted_keys[:-1], out=head[1:])
    heads = np.flatnonzero(head)
    lengths = np.diff(np.append(heads, n))
    return np.repeat(heads, lengths), np.repeat(np.append(heads[1:], n), lengths)


def nest(
    pid: np.ndarray, tid: np.ndarray, s: np.ndarray, e: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Nesting of intervals per thread: (depth, parent).

    Rows must already be sorted by start ascending, end descending (a parent before its
    children). ``depth`` is the number of intervals on the same thread that started earlier
    and are still open when the row starts (0 = top level); an interval ending exactly when
    another starts does not enclose it. ``parent`` is the row of the innermost enclosing
    interval (-1 at top level): the last row before it on its thread one level up.

    A fixed number of sorts and sorted searches over every thread at once (times packed
    with their thread into one int64 key), whatever the depth: thousands of ops sharing one
    timestamp nest thousands deep, and a pass per level would be quadratic.
    """
    if len(s) == 0:
        return np.zeros(0, np.int32), np.zeros(0, np.int64)
    if accel.walks(pid, tid, s, e):
        got = accel.nest(pid, tid, s, e)
        if got is not None:
            return got
    return _nest_sorted(_thread_codes(pid, tid), s, e)


def _nest_sorted(codes: np.ndarray, s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`nest` by sorts and sorted searches, for rows of any order (the C walk takes
    only rows by start ascending, end descending, with no end before its start), with
    ``codes`` the rows' threads (:func:`_thread_codes`)."""
    n = len(s)
    depth = np.zeros(n, np.int64)
    parent = np.full(n, -1, np.int64)
    order = np.argsort(codes, kind="stable")
    gc = codes[order]
    pos = np.arange(n)
    # In the thread-grouped order: each row's thread's first row, and its place there.
    group_start, _ = _runs(gc)
    place = pos - group_start
    distinct, rank = _start_ranks(s)
    # An end's rank is that of the first start at or after it: end <= a start exactly when
    # its rank is at most that start's.
    span = len(distinct) + 1
    start_key = gc * span + rank[order]
    end_key = np.sort(gc * span + np.searchsorted(distinct, e[order], side="left"))
    # Rows of the thread that have ended by this row's start (end <= start).
    ended = np.searchsorted(end_key, start_key, side="right") - group_start
    # Zero-length intervals starting at the same instant sort after the others that start
    # then; those at or after this row's place were counted as "ended" above but never
    # started before it: take them back out. start_key is sorted (by thread, then start),
    # so the rows sharing a row's thread and start are one run of it, and a row's
    # correction is the fewer of its run's zero-length rows and the rows from it to the
    # run's end. Only the runs holding a zero-length row have one: they are found by
    # searching those rows' keys, not by marking every run of the whole table.
    zero_keys = start_key[s[order] == e[order]]
    if len(zero_keys):
        zeros_in_run = np.searchsorted(zero_keys, start_key, side="right") - np.searchsorted(
            zero_keys, start_key, side="left"
        )
        has = np.flatnonzero(zeros_in_run)
        run_end = np.searchsorted(start_key, start_key[has], side="right")
        ended[has] -= np.minimum(zeros_in_run[has], run_end - has)
    gdepth = place - ended
    # Parent: the last row before this one at depth d-1 on the same thread. Rows ordered by
    # (depth, row) make that one sorted search for all rows (depths fit a radix sort).
    small = gdepth.astype(np.int16) if gdepth.max() < 2**15 else gdepth
    by_level = np.argsort(small, kind="stable")
    level_key = gdepth[by_level] * (n + 1) + by_level
    # The nested rows come last in this order, and their queries (depth-1, row) are then
    # ascending too, which a sorted search runs through fastest.
    first = int(np.searchsorted(level_key, n + 1, side="left"))
    nested = by_level[first:]
    k = np.searchsorted(level_key, level_key[first:] - (n + 1), side="left") - 1
    cand = by_level[np.maximum(k, 0)]
    ok = (k >= 0) & (gdepth[cand] == gdepth[nested] - 1) & (gc[cand] == gc[nested])
    gparent = np.full(n, -1, np.int64)
    gparent[nested[ok]] = cand[ok]
    depth[order] = gdepth
    parent[order] = np.where(gparent >= 0, order[np.maximum(gparent, 0)], -1)
    return depth.astype(np.int32), parent


#: Steps up the nesting tree taken one level at a time before :func:`_first_open_ancestor`
#: takes over: real traces nest a few dozen levels deep, and the level-by-level walk needs
#: no tables.
_WALK_STEPS = 32


def innermost_ops(
    op_pid: np.ndarray,
    op_tid: np.ndarray,
    op_s: np.ndarray,
    op_e: np.ndarray,
    parent: np.ndarray,
    q_pid: np.ndarray,
    q_tid: np.ndarray,
    q_t: np.ndarray,
) -> np.ndarray:
    """For each query (thread, time), the row of the innermost op containing it, else -1.

    Ops are sorted as :func:`nest` wants and ``parent`` is its result.
    """
    out = np.full(len(q_t), -1, np.int64)
    if len(op_s) == 0 or len(q_t) == 0:
        return out
    if accel.walks(op_pid, op_tid, op_s, op_e, parent, q_pid, q_tid, q_t):
        got = accel.innermost(op_pid, op_tid, op_s, op_e, parent, q_pid, q_tid, q_t)
        if got is not None:
            return got
    n = len(op_s)
    both = _thread_codes(np.concatenate([op_pid, q_pid]), np.concatenate([op_tid, q_tid]))
    codes, q_codes = both[:n], both[n:]
    order = np.argsort(codes, kind="stable")
    gc = codes[order]
    # The latest op of the query's thread starting at or before it: one sorted search over
    # (thread, start) keys for every thread at once.
    distinct, rank = _start_ranks(op_s)
    # A query's rank is that of the latest start at or before it (-1 before them all).
    r_q = np.searchsorted(distinct, q_t, side="right") - 1
    span = len(distinct) + 1
    k = np.searchsorted(gc * span + rank[order], q_codes * span + r_q, side="right") - 1
    hit = (k >= 0) & (gc[np.maximum(k, 0)] == q_codes)
    out[hit] = order[k[hit]]
    # That op either contains the query or has ended; walk up to the first ancestor still
    # open (one vectorised step per nesting level, then jumps when the tree is deep).
    active = np.flatnonzero(out >= 0)
    for _ in range(_WALK_STEPS):
        if not len(active):
            return out
        closed = op_e[out[active]] < q_t[active]
        if not closed.any():
            return out
        active = active[closed]
        out[active] = parent[out[active]]
        active = active[out[active] >= 0]
    if len(active):
        out[active] = _first_open_ancestor(parent, op_e, out[active], q_t[active])
    return out


def _first_open_ancestor(
    parent: np.ndarray, end: np.ndarray, node: np.ndarray, t: np.ndarray
) -> np.ndarray:
    """For each (node, t): the node or its nearest ancestor with ``end >= t``, else -1.

    Binary lifting: ``up[k]`` is the 2**k-th ancestor and ``top[k]`` the latest end among
    the 2**k nodes from a node upwards, so a query jumps over every run of ended ancestors
    in log2(depth) steps. Exact for any tree (ends need not grow towards the root). Only
    for deep trees, where the tables (one int and one float per op per level) pay off.
    """
    n = len(parent)
    root = n  # a sentinel above every root: its own parent, never open
    up = [np.where(parent >= 0, parent, root).astype(np.int64)]
    up[0] = np.append(up[0], root)
    top = [np.append(end.astype(np.float64), -np.inf)]
    while True:
        last_up, last_top = up[-1], top[-1]
        if (last_up[node] == root).all():
            break
        up.append(last_up[last_up])
        top.append(np.maximum(last_top, last_top[last_up]))
    cur = node.astype(np.int64)
    for lift, latest in zip(reversed(up), reversed(top), strict=True):
        jump = latest[cur] < t
        cur = np.where(jump, lift[cur], cur)
    return np.where(cur == root, -1, cur)


def fill_from_flows(
    corr: np.ndarray,
    pid: np.ndarray,
    tid: np.ndarray,
    ts_ns: np.ndarray,
    flow_pid: np.ndarray,
    flow_tid: np.ndarray,
    flow_ts_ns: np.ndarray,
    flow_id: np.ndarray,
) -> int:
    """Where ``corr`` is -1, take the id of a flow event at the same (pid, tid, ts).

    Returns how many were filled. ``corr`` is updated in place.
    """
    need = np.flatnonzero(corr < 0)
    if len(need) == 0 or len(flow_id) == 0:
        return 0
    flows = pd.DataFrame({"pid": flow_pid, "tid": flow_tid, "ts": flow_ts_ns, "id": flow_id})
    flows = flows.drop_duplicates(["pid", "tid", "ts"], keep="first")
    rows = pd.DataFrame({"pid": pid[need], "tid": tid[need], "ts": ts_ns[need]})
    got = rows.merge(flows, on=["pid", "tid", "ts"], how="left")["id"].to_numpy()
    ok = ~pd.isna(got)
    corr[need[ok]] = got[ok].astype(np.int64)
    return int(ok.sum())


def link_launches(
    gpu_corr: np.ndarray,
    rt_corr: np.ndarray,
    rt_is_launcher: np.ndarray,
) -> np.ndarray:
    """For each GPU event, the runtime row with the same correlation (-1 when none).

    Only launching calls count (runtime and driver API, not ``cuda_sync`` records, which
    reuse correlation ids of their own); the first call wins if ids repeat.
    """
    out = np.full(len(gpu_corr), -1, np.int64)
    cand = np.flatnonzero(rt_is_launcher & (rt_corr >= 0))
    if len(cand) == 0 or len(gpu_corr) == 0:
        return out
    keys = rt_corr[cand]
    order = np.argsort(keys, kind="stable")
    sk, si = keys[order], cand[order]
    # First occurrence of each id.
    firsts = np.concatenate([[True], sk[1:] != sk[:-1]])
    sk, si = sk[firsts], si[firsts]
    pos = np.searchsorted(sk, gpu_corr)
    pos_c = np.minimum(pos, len(sk) - 1)
    hit = (gpu_corr >= 0) & (sk[pos_c] == gpu_corr)
    out[hit] = si[pos_c[hit]]
    return out


def start_order(ts: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """``np.lexsort((-dur, ts))``: by start, longest first at equal starts.

    Ops come out of a trace nearly in start order, which a stable sort of the starts alone
    runs through at once, while lexsort's sort by duration first is a full one; where no two
    ops start together (to the ns, as in most traces) that order is already the answer.
    """
    order = np.argsort(ts, kind="stable")
    starts = ts[order]
    if np.isnan(starts[-1:]).any():  # a NaN start: lexsort's own order
        return np.lexsort((-dur, ts))
    tie = starts[1:] == starts[:-1]
    if not tie.any():
        return order
    # Ops starting together: their durations decide, longest first, then their order. Only
    # those runs are sorted again, each where it lies (a full lexsort sorts every duration).
    together = np.zeros(len(ts), bool)
    together[1:] = tie
    together[:-1] |= tie
    at = np.flatnonzero(together)
    run = np.cumsum(np.concatenate(([True], ~tie)))[at]
    rows = order[at]
    order[at] = rows[np.lexsort((-dur[rows], run))]
    return order


def link(kern: Any, mcpy: Any, mset: Any, rt: Any, ops: Any) -> None:
    """Add to the GPU tables' columns their launch call (``launch_ts``, ``launch_name``)
    and the CPU op it was made from (``op``, ``op_index``), and to the ops their
    ``depth``. The ops are put in start order, longest first at equal starts, so that a
    parent precedes its children; ``op_index`` points into that order, which is the
    table's. Columns are a rank's (:mod:`nbprof.trace.tables`), times in µs."""
    order = start_order(ops["ts"], ops["dur"])
    for k in list(ops):
        ops[k] = ops[k].take(order) if isinstance(ops[k], Text) else ops[k][order]
    op_end = ops["ts"] + ops["dur"]
    depth, parent = nest(ops["pid"], ops["tid"], ops["ts"], op_end)
    ops["depth"] = depth
    rt_op = innermost_ops(
        ops["pid"], ops["tid"], ops["ts"], op_end, parent, rt["pid"], rt["tid"], rt["ts"]
    )
    launcher = rt["cat"].hits(lambda c: c != "cuda_sync")
    for cols in (kern, mcpy, mset):
        li = link_launches(cols["correlation"], rt["correlation"], launcher)
        hit = li >= 0
        cols["launch_ts"] = np.where(
            hit, rt["ts"][np.maximum(li, 0)] if len(rt["ts"]) else np.nan, np.nan
        )
        cols["launch_name"] = rt["name"].take_or(li)
        op_index = np.full(len(li), -1, np.int64)
        op_index[hit] = rt_op[li[hit]]
        cols["op_index"] = op_index
        cols["op"] = ops["name"].take_or(op_index)


def correlate_by_flows(cols: dict[str, Any], flows: tuple[Any, Any]) -> int:
    """Fill the GPU events' and runtime calls' missing correlations from the flow events
    (``flows``: the columns of their starts and ends, see :func:`fill_from_flows`); how
    many were filled."""
    starts, ends = flows
    empty = {k: np.zeros(0, np.int64) for k in ("pid", "tid", "ts_ns", "id")}
    starts, ends = starts or empty, ends or empty
    both = {k: np.concatenate([starts[k], ends[k]]) for k in empty}
    filled = 0
    for t in ("kernels", "memcpy", "memset", "runtime"):
        c = cols[t]
        # GPU events are the flows' ends; runtime calls their starts.
        f = both if t == "runtime" else ends
        pid, tid = (c["pid"], c["tid"]) if t == "runtime" else (c["_pid"], c["_tid"])
        filled += fill_from_flows(
            c["correlation"], pid, tid, c["ts_ns"], f["pid"], f["tid"], f["ts_ns"], f["id"]
        )
    return filled
