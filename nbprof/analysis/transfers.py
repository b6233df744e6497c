"""Copies between host and device: direction, pageable vs pinned, achieved bandwidth.

Bandwidth is only meaningful per direction and memory kind: a device-to-device copy runs
at HBM speed (hundreds of GB/s), a pinned host-to-device copy at PCIe/NVLink speed, a
pageable one at whatever the host's staging memcpy manages. Summing all bytes over all
copy time mixes them into a number that describes none.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from nbprof.analysis import _frames, _group
from nbprof.analysis._text import Names, matches, name_column
from nbprof.analysis.model import COPIES_TABLE

logger = logging.getLogger(__name__)

COPY_COLUMNS: tuple[str, ...] = COPIES_TABLE.names


def pageable_mask(memcpy: pd.DataFrame) -> np.ndarray:
    """Per copy: is either side pageable host memory (the name or the columns say so)."""
    if memcpy.empty:
        return np.zeros(0, dtype=bool)
    src, dst = _frames.column(memcpy, "src"), _frames.column(memcpy, "dst")
    return (
        (src == "Pageable") | (dst == "Pageable") | matches(name_column(memcpy, "name"), "Pageable")
    )


def is_pageable(memcpy: pd.DataFrame) -> pd.Series:
    """A copy is pageable when either side is pageable host memory (name or columns say so)."""
    if memcpy.empty:
        return pd.Series(dtype=bool)
    return pd.Series(pageable_mask(memcpy), index=memcpy.index)


def _sorted_groups(rank: np.ndarray, keys: Sequence[Names]) -> tuple[list[Any], np.ndarray] | None:
    """``_group.codes`` of the rows' (rank, *keys) tuples, sorted, for integer ranks and
    keys of text only: each column's sorted distinct values first (a Categorical's codes
    read as they are), then the rows' places in them as one number, whose order is the
    tuples' order. A trace's copies are a few groups of thousands of rows, and hashing a
    tuple per row was most of the table; None where the numbers would not fit in 62 bits."""
    if rank.dtype.kind not in "iu" or not len(rank):
        return None
    r_uniq, r_code = np.unique(rank, return_inverse=True)
    values: list[list[Any]] = [r_uniq.tolist()]
    places: list[np.ndarray] = [np.asarray(r_code, dtype=np.int64).reshape(-1)]
    for k in keys:
        by_code, distinct = _group.factorized(k)
        text = sorted(set(distinct))
        at = {t: i for i, t in enumerate(text)}
        values.append(text)
        places.append(np.array([at[o] for o in distinct], dtype=np.int64)[by_code])
    if math.prod(len(v) for v in values) >= 1 << 62:
        return None
    number = places[0]
    for v, p in zip(values[1:], places[1:], strict=True):
        number = number * len(v) + p
    uniq_number, code = np.unique(number, return_inverse=True)
    uniq: list[Any] = []
    for x in uniq_number.tolist():
        parts = []
        for v in reversed(values):
            x, i = divmod(x, len(v))
            parts.append(v[i])
        uniq.append(tuple(reversed(parts)))
    return uniq, np.asarray(code, dtype=np.int64).reshape(-1)


def _tuple_groups(rank: np.ndarray, keys: Sequence[Names]) -> tuple[list[Any], np.ndarray]:
    """:func:`_sorted_groups`' answer from the rows' tuples, each text held by the object
    of its first row (the one :func:`_sorted_groups` keeps of equal texts)."""
    cols = []
    for k in keys:
        first: dict[Any, Any] = {}
        cols.append([first.setdefault(v, v) for v in k.tolist()])
    return _group.codes(list(zip(rank.tolist(), *cols, strict=True)), sort=True)


def copies_table(memcpy: pd.DataFrame) -> pd.DataFrame:
    """One row per (rank, device, direction, src, dst)."""
    if memcpy.empty:
        return _frames.empty(COPY_COLUMNS)
    pageable = pageable_mask(memcpy)
    b = _frames.column(memcpy, "bytes")
    nbytes = np.maximum(b, 0) if b.dtype.kind == "i" else memcpy["bytes"].clip(lower=0).to_numpy()
    keys = [name_column(memcpy, c) for c in ("device", "kind", "src", "dst")]
    if all(_group.all_text(k) for k in keys) and nbytes.dtype.kind == "i":
        rank = _frames.column(memcpy, "rank")
        # By numbers for a long table; a short one's tuples are grouped sooner than its
        # columns are factorized (16 copies: 10 us against 116).
        long = len(rank) >= _group.BY_ADDRESS
        got = _sorted_groups(rank, keys) if long else None
        uniq, code = got if got is not None else _tuple_groups(rank, keys)
        n = len(uniq)
        cols = list(zip(*uniq, strict=True))
        total_b = np.zeros(n, dtype="int64")
        np.add.at(total_b, code, nbytes.astype("int64"))
        tot = _group.sums(code, _frames.column(memcpy, "dur", "float64"), n)
        if not np.isnan(tot).any():
            # Built once, in its final order (largest total first, ties in group order,
            # as the stable sort below puts them).
            order = np.argsort(-tot, kind="stable")
            return _frames.frame(
                {
                    "rank": np.array(cols[0], dtype=rank.dtype)[order],
                    **{
                        c: np.array(v, dtype=object)[order]
                        for c, v in zip(("device", "kind", "src", "dst"), cols[1:], strict=True)
                    },
                    "count": _group.counts(code, n)[order],
                    "bytes": total_b[order],
                    "total_us": tot[order],
                    "gbps": _rate(total_b.astype("float64"), tot)[order],
                    "pageable": _group.any_true(code, pageable, n)[order],
                }
            )
        out = _frames.frame(
            {
                "rank": np.array(cols[0], dtype=rank.dtype),
                **{
                    c: np.array(v, dtype=object)
                    for c, v in zip(("device", "kind", "src", "dst"), cols[1:], strict=True)
                },
                "count": _group.counts(code, n),
                "bytes": total_b,
                "total_us": tot,
                "pageable": _group.any_true(code, pageable, n),
            }
        )
    else:  # missing keys: pandas' groupby keeps them as their own groups
        df = memcpy.assign(pageable=pageable, nbytes=nbytes)
        g = df.groupby(["rank", "device", "kind", "src", "dst"], sort=True, dropna=False)
        out = g.agg(
            count=("dur", "size"),
            bytes=("nbytes", "sum"),
            total_us=("dur", "sum"),
            pageable=("pageable", "any"),
        ).reset_index()
    out["gbps"] = _rate(
        _frames.column(out, "bytes", "float64"), _frames.column(out, "total_us", "float64")
    )
    out = out.sort_values("total_us", ascending=False, kind="stable").reset_index(drop=True)
    return out[list(COPY_COLUMNS)]


def _rate(nbytes: np.ndarray, us: np.ndarray) -> np.ndarray:
    """GB/s. A zero or subnormal duration is below the trace's resolution: the rate over it
    is unknown (NaN), not a division warning or an infinite GB/s."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        rate = nbytes / us / 1e3
    return np.where((us > 0) & np.isfinite(rate), rate, np.nan)


#: Copy kinds in the order they are listed: host copies first, then on-device ones.
COPY_KINDS = (
    "HtoD pageable", "HtoD pinned", "HtoD", "DtoH pageable", "DtoH pinned", "DtoH", "DtoD",
    "PtoP", "HtoH", "other",
)  # fmt: skip


def copy_kind(kind: str, src: str, dst: str) -> str:
    """``"HtoD pageable"``, ``"DtoH pinned"``, ``"DtoD"``...: direction and host memory."""
    if kind in ("HtoD", "DtoH"):
        host = src if kind == "HtoD" else dst
        if host in ("Pageable", "Pinned"):
            return f"{kind} {host.lower()}"
        return kind
    return kind if kind in ("DtoD", "PtoP", "HtoH") else "other"


def copies_by_kind(memcpy: pd.DataFrame) -> list[dict[str, object]]:
    """One entry per copy kind: kind, count, bytes (None when no copy of that kind has a
    byte count), us (summed copy time), gbps (bytes ÷ time; None when either is unknown)."""
    if memcpy.empty:
        return []
    kinds = [
        copy_kind(str(k), str(a), str(b))
        for k, a, b in zip(
            _frames.column(memcpy, "kind").tolist(),
            _frames.column(memcpy, "src").tolist(),
            _frames.column(memcpy, "dst").tolist(),
            strict=True,
        )
    ]
    kind_of = np.array(kinds, dtype=object)
    all_bytes = _frames.column(memcpy, "bytes", "int64")
    all_dur = _frames.column(memcpy, "dur", "float64")
    out: list[dict[str, object]] = []
    present = set(kinds)
    for kind in [k for k in COPY_KINDS if k in present]:
        m = kind_of == kind
        b, dur = all_bytes[m], all_dur[m]
        known = b >= 0
        nbytes = int(b[known].sum()) if known.any() else None
        us = float(np.nansum(dur))  # a missing duration adds nothing, as pandas' sum skips it
        # The rate uses only the copies whose bytes are known, over their own time.
        known_us = float(dur[known].sum())
        gbps = nbytes / known_us / 1e3 if nbytes is not None and known_us > 0 else None
        out.append(
            {"kind": kind, "count": int(m.sum()), "bytes": nbytes, "us": us,
             "gbps": gbps if gbps is None or np.isfinite(gbps) else None}
        )  # fmt: skip
    return out
