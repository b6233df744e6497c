"""Analysis: pure functions from a :class:`~nbprof.trace.model.Trace` to a Diagnosis.

``analyze`` is the one entry point; each module beside it does one job (utilization,
Tensor Cores, peaks, roofline, the host's launches, the GPU span's time accounting, idle
gaps, transfers, syncs, the input pipeline, the verdict, findings, the explanation).
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pandas as pd

from nbprof.analysis import _frames, _group, explain, findings, verdict
from nbprof.analysis._text import name_column
from nbprof.analysis.classes import top_kernels
from nbprof.analysis.device import Signals, analyze_device
from nbprof.analysis.idle import IDLE_COLUMNS
from nbprof.analysis.model import Diagnosis, Verdict
from nbprof.analysis.roofline import ROOFLINE_COLUMNS
from nbprof.analysis.stalls import GAP_COLUMNS
from nbprof.analysis.syncs import syncs_table
from nbprof.analysis.transfers import copies_table
from nbprof.telemetry.model import Samples
from nbprof.trace.model import Trace

logger = logging.getLogger(__name__)

__all__ = ["analyze"]


def device_keys(trace: Trace) -> list[tuple[int, str]]:
    """(rank, device) of every device that ran at least one GPU event, sorted."""
    keys: set[tuple[int, str]] = set()
    for f in (trace.kernels, trace.memcpy, trace.memset):
        if not f.empty:
            ranks, devices = _frames.column(f, "rank"), name_column(f, "device")
            found = _distinct_pairs(ranks, devices)
            pairs = (
                found
                if found is not None
                else set(zip(ranks.tolist(), devices.tolist(), strict=True))
            )
            keys.update((int(r), str(d)) for r, d in pairs)
    return sorted(keys, key=lambda k: (k[0], _devkey(k[1])))


def _distinct_pairs(ranks: np.ndarray, devices: Any) -> list[tuple[Any, Any]] | None:
    """The distinct (rank, device) pairs of a table's rows, from the devices' codes (a
    trace's device column is a Categorical): one number per row, where a tuple per row
    hashed into a set was most of finding a large trace's devices. None for ranks that are
    not integers or devices that are not categorical."""
    if not isinstance(devices, pd.Categorical) or ranks.dtype.kind not in "iu":
        return None
    by_code, values = _group.factorized(devices)
    if len(by_code) and by_code.min() < 0:
        return None
    r = ranks.astype(np.int64)
    lo, hi, m = int(r.min()), int(r.max()), max(len(values), 1)
    if (hi - lo + 1) * m >= 1 << 62:
        return None
    number = pd.unique((r - lo) * m + by_code)  # any order: the keys are a set
    return [(lo + x // m, values[x % m]) for x in number.tolist()]


def _devkey(d: str) -> tuple[int, str]:
    return (int(d), "") if d.isdigit() else (1 << 30, d)


def _empty(cols: tuple[str, ...] | list[str]) -> pd.DataFrame:
    return _frames.empty(cols)


def analyze(trace: Trace, samples: Samples | None = None) -> Diagnosis:
    """Diagnose ``trace`` (and the NVML ``samples`` recorded with it, when given)."""
    return analyze_signals(trace, samples)[0]


def analyze_signals(
    trace: Trace, samples: Samples | None = None
) -> tuple[Diagnosis, list[Signals]]:
    """:func:`analyze`, and the per-device signals it was read from (for callers that go
    on from the same views, such as a rank's summary in a job)."""
    return _analyze(trace, samples)


def _analyze(trace: Trace, samples: Samples | None) -> tuple[Diagnosis, list[Signals]]:
    source: dict[str, object] = {"path": trace.source, "events": int(trace.event_count)}
    if trace.notes:
        source["notes"] = list(trace.notes)
    keys = device_keys(trace)
    signals: list[Signals] = []
    cls_parts: list[pd.DataFrame] = []
    gap_parts: list[pd.DataFrame] = []
    for rank, device in keys:
        sig, cls, gaps = analyze_device(trace, rank, device, samples)
        signals.append(sig)
        cls_parts.append(cls)
        if not gaps.empty:
            gap_parts.append(gaps)
    tables = _tables(trace, signals, cls_parts, gap_parts)
    devices = [s.metrics for s in signals]
    v: Verdict = verdict.decide(trace, signals)
    found = findings.build(trace, signals)
    text = explain.explain(trace, signals)
    logger.debug("analysed %s: %d devices, verdict %s", trace.source, len(devices), v.bottleneck)
    diag = Diagnosis(
        source=source,
        devices=devices,
        verdict=v,
        findings=found,
        tables=tables,
        explanation=text,
    )
    return diag, signals


def _tables(
    trace: Trace,
    signals: list[Signals],
    cls_parts: list[pd.DataFrame],
    gap_parts: list[pd.DataFrame],
) -> dict[str, pd.DataFrame]:
    k = trace.kernels
    one = cls_parts[0] if len(cls_parts) == 1 else None
    if (
        one is not None
        and len(k)
        and one.index.equals(k.index)
        and _frames.dtype_of(one, "tensor_core") == np.dtype(bool)
        and not pd.isna(_frames.column(one, "cls")).any()
    ):  # one device with every kernel, each classified: the table as it is
        cls = one
    elif cls_parts and len(k):
        cls = pd.concat(cls_parts).reindex(k.index)
        # Kernels outside every analysed device have no class evidence.
        cls["cls"] = cls["cls"].fillna("other")
        cls["tensor_core"] = cls["tensor_core"].fillna(False).astype(bool)
    else:
        cls = pd.DataFrame(
            {"cls": pd.Series(dtype="object"), "tensor_core": pd.Series(dtype=bool)}, index=k.index
        )
    span = max(s.end_us for s in signals) - min(s.start_us for s in signals) if signals else 0.0
    roofs = [s.roofline for s in signals if not s.roofline.empty]
    # Blocking calls once per rank (every device of a rank sees the same host).
    by_rank = {s.metrics.rank: s.blocking for s in signals}
    parts = list(by_rank.values())
    # One rank's calls as they are: the table reads only their names and durations.
    calls = (
        pd.concat(parts, ignore_index=True)
        if len(parts) > 1
        else parts[0]
        if parts
        else pd.DataFrame()
    )
    stalls = [s.accounting.gaps for s in signals if not s.accounting.gaps.empty]
    return {
        "kernel_class": cls,
        "top_kernels": top_kernels(k, cls),
        "idle_gaps": _largest_first(_joined(gap_parts)) if gap_parts else _empty(IDLE_COLUMNS),
        "stalls": _largest_first(_joined(stalls)) if stalls else _empty(GAP_COLUMNS),
        "ops_roofline": _joined(roofs) if roofs else _empty(ROOFLINE_COLUMNS),
        "copies": copies_table(trace.memcpy),
        "syncs": syncs_table(calls, span),  # pct is NaN over an empty span
    }


def _joined(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """``pd.concat(parts, ignore_index=True)``; one part numbered from 0 is itself (frames
    are never modified in place)."""
    if len(parts) == 1 and _frames.numbered(parts[0]):
        return parts[0]
    return pd.concat(parts, ignore_index=True)


def _largest_first(df: pd.DataFrame) -> pd.DataFrame:
    """Rows by ``dur``, largest first, ties in their order: the frame itself when they are
    so already (a device's whole-device gaps come sorted)."""
    d = _frames.column(df, "dur")
    if (
        _frames.numbered(df)
        and d.dtype == "float64"
        and not np.isnan(d).any()
        and (d[1:] <= d[:-1]).all()
    ):
        return df
    return df.sort_values("dur", ascending=False, kind="stable").reset_index(drop=True)
