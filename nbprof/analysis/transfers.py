"""Copies between host and device: direction, pageable vs pinned, achieved bandwidth.

Bandwidth is only meaningful per direction and memory kind: a device-to-device copy runs
at HBM speed (hundreds of GB/s), a pinned host-to-device copy at PCIe/NVLink speed, a
pageable one at whatever the host's staging memcpy manages. Summing all bytes over all
copy time mixes them into a number that describes none.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from nbprof.analysis import _frames, _group
from nbprof.analysis._text import matches
from nbprof.analysis.model import COPIES_TABLE

logger = logging.getLogger(__name__)

COPY_COLUMNS: tuple[str, ...] = COPIES_TABLE.names


def is_pageable(memcpy: pd.DataFrame) -> pd.Series:
    """A copy is pageable when either side is pageable host memory (name or columns say so)."""
    if memcpy.empty:
        return pd.Series(dtype=bool)
    by_cols = (memcpy["src"] == "Pageable") | (memcpy["dst"] == "Pageable")
    by_name = pd.Series(matches(memcpy["name"], "Pageable"), index=memcpy.index)
    return by_cols | by_name


def copies_table(memcpy: pd.DataFrame) -> pd.DataFrame:
    """One row per (rank, device, direction, src, dst)."""
    if memcpy.empty:
        return _frames.empty(COPY_COLUMNS)
    pageable = is_pageable(memcpy).to_numpy()
    nbytes = memcpy["bytes"].clip(lower=0).to_numpy()
    keys = [memcpy[c].to_numpy() for c in ("device", "kind", "src", "dst")]
    if all(_group.all_text(k) for k in keys) and nbytes.dtype.kind == "i":
        rank = memcpy["rank"].to_numpy()
        rows = list(zip(rank.tolist(), *(k.tolist() for k in keys), strict=True))
        uniq, code = _group.codes(rows, sort=True)
        n = len(uniq)
        cols = list(zip(*uniq, strict=True))
        total_b = np.zeros(n, dtype="int64")
        np.add.at(total_b, code, nbytes.astype("int64"))
        out = pd.DataFrame(
            {
                "rank": np.array(cols[0], dtype=rank.dtype),
                **{
                    c: np.array(v, dtype=object)
                    for c, v in zip(("device", "kind", "src", "dst"), cols[1:], strict=True)
                },
                "count": _group.counts(code, n),
                "bytes": total_b,
                "total_us": _group.sums(code, memcpy["dur"].to_numpy(dtype="float64"), n),
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
    tot = out["total_us"].to_numpy(dtype="float64")
    # A zero or subnormal duration is below the trace's resolution: the rate over it is
    # unknown (NaN), not a division warning or an infinite GB/s.
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        rate = out["bytes"].to_numpy(dtype="float64") / tot / 1e3
    out["gbps"] = np.where((tot > 0) & np.isfinite(rate), rate, np.nan)
    out = out.sort_values("total_us", ascending=False, kind="stable").reset_index(drop=True)
    return out[list(COPY_COLUMNS)]


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
        for k, a, b in zip(memcpy["kind"], memcpy["src"], memcpy["dst"], strict=True)
    ]
    df = pd.DataFrame(
        {
            "kind": kinds,
            "bytes": memcpy["bytes"].to_numpy(dtype="int64"),
            "dur": memcpy["dur"].to_numpy(dtype="float64"),
        }
    )
    out: list[dict[str, object]] = []
    for kind in [k for k in COPY_KINDS if k in set(kinds)]:
        g = df[df["kind"] == kind]
        b = g["bytes"].to_numpy()
        known = b >= 0
        nbytes = int(b[known].sum()) if known.any() else None
        us = float(g["dur"].sum())
        # The rate uses only the copies whose bytes are known, over their own time.
        known_us = float(g["dur"].to_numpy()[known].sum())
        gbps = nbytes / known_us / 1e3 if nbytes is not None and known_us > 0 else None
        out.append(
            {"kind": kind, "count": len(g), "bytes": nbytes, "us": us,
             "gbps": gbps if gbps is None or np.isfinite(gbps) else None}
        )  # fmt: skip
    return out
