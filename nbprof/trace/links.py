"""Links between tables: GPU activity -> its launch call -> the CPU op that made the call.

* Correlation: Kineto writes ``args.correlation`` on both the runtime call and the GPU event.
  Traces without it carry flow events instead (``ph`` "s" at the call, "f" at the GPU event,
  the same ``id``, category ``ac2g`` or ``async``); :func:`fill_from_flows` recovers the
  correlation from them.
* Launch: the runtime/driver call with the same correlation (:func:`link_launches`).
* Op: the innermost CPU op on the call's thread whose span contains the call's start
  (:func:`innermost_ops`), found with sorted searches and pointer jumps up the nesting tree,
  one numpy step per nesting level rather than a Python step per event.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

logger = logging.getLogger(__name__)


def _thread_codes(pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """A dense code per distinct (pid, tid) pair (hash factorizations, no tuples)."""
    pc, _ = pd.factorize(pid)
    tc, tu = pd.factorize(tid)
    codes, _ = pd.factorize(pc.astype(np.int64) * max(len(tu), 1) + tc)
    return codes.astype(np.int64)


def nest(
    pid: np.ndarray, tid: np.ndarray, s: np.ndarray, e: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Nesting of intervals per thread: (depth, parent).

    Rows must already be sorted by start ascending, end descending (a parent before its
    children). ``depth`` is the number of intervals on the same thread that started earlier
    and are still open when the row starts (0 = top level); an interval ending exactly when
    another starts does not enclose it. ``parent`` is the row of the innermost enclosing
    interval (-1 at top level).
    """
    n = len(s)
    depth = np.zeros(n, np.int64)
    parent = np.full(n, -1, np.int64)
    if n == 0:
        return depth.astype(np.int32), parent
    codes = _thread_codes(pid, tid)
    order = np.argsort(codes, kind="stable")
    gc = codes[order]
    bounds = np.flatnonzero(np.diff(gc)) + 1
    starts = np.concatenate([[0], bounds])
    ends = np.concatenate([bounds, [n]])
    gs, ge = s[order], e[order]
    gdepth = np.empty(n, np.int64)
    for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
        ss, ee = gs[a:b], ge[a:b]
        p = np.arange(b - a)
        ended = np.searchsorted(np.sort(ee), ss, side="right")
        # Zero-length intervals starting at the same instant sort after the others that start
        # then; those at or after this row's place were counted as "ended" above but never
        # started before it: take them back out.
        zs = np.sort(ss[ee == ss])
        z = np.searchsorted(zs, ss, side="right") - np.searchsorted(zs, ss, side="left")
        last = np.searchsorted(ss, ss, side="right") - 1
        ended = ended - np.minimum(z, last - p + 1)
        gdepth[a:b] = p - ended
    # Parent: the last row at depth d-1 before this one, on the same thread.
    gparent = np.full(n, -1, np.int64)
    pos = np.arange(n)
    for d in range(1, int(gdepth.max()) + 1):
        here = pos[gdepth == d]
        above = pos[gdepth == d - 1]
        if len(above) == 0 or len(here) == 0:
            continue
        k = np.searchsorted(above, here, side="left") - 1
        cand = np.where(k >= 0, above[np.maximum(k, 0)], -1)
        same = (cand >= 0) & (gc[np.maximum(cand, 0)] == gc[here])
        gparent[here] = np.where(same, cand, -1)
    depth[order] = gdepth
    parent[order] = np.where(gparent >= 0, order[np.maximum(gparent, 0)], -1)
    return depth.astype(np.int32), parent


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
    n = len(op_s)
    both = _thread_codes(np.concatenate([op_pid, q_pid]), np.concatenate([op_tid, q_tid]))
    codes, q_codes = both[:n], both[n:]
    order = np.argsort(codes, kind="stable")
    gc = codes[order]
    gs = op_s[order]
    n_codes = int(both.max()) + 1
    first = np.searchsorted(gc, np.arange(n_codes), side="left")
    last = np.searchsorted(gc, np.arange(n_codes), side="right")
    q_codes = np.where(last[q_codes] > first[q_codes], q_codes, -1)  # threads without ops
    for g in np.unique(q_codes[q_codes >= 0]).tolist():
        qi = np.flatnonzero(q_codes == g)
        a, b = int(first[g]), int(last[g])
        k = np.searchsorted(gs[a:b], q_t[qi], side="right") - 1
        out[qi] = np.where(k >= 0, order[a + np.maximum(k, 0)], -1)
    # The latest op starting at or before the call either contains it or has ended; walk up
    # to the first ancestor still open (one vectorised step per nesting level).
    active = np.flatnonzero(out >= 0)
    while len(active):
        cur = out[active]
        closed = op_e[cur] < q_t[active]
        if not closed.any():
            break
        active = active[closed]
        out[active] = parent[out[active]]
        active = active[out[active] >= 0]
    return out


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
