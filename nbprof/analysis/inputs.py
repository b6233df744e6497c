"""The input pipeline: when the DataLoader fetched batches, and how much of each step.

PyTorch records a batch fetch as ``enumerate(DataLoader)#_SingleProcessDataLoaderIter.
__next__``, as a ``cpu_op`` in older releases and a ``user_annotation`` in newer ones; a
trace taken with ``with_stack=True`` adds the Python frame
``torch/utils/data/dataloader.py(...): __next__``. Any of them marks a fetch.

The input pipeline is more than the fetch: CPU preprocessing done in the training loop
itself (image transforms, tokenizers, numpy/scipy work on the batch) keeps the GPU
waiting just the same. It is recognised by what the trace shows of it: the Python frames
of those libraries (kept by the reader, ``nbprof.trace.tables.INPUT_FRAME``), and
``record_function`` ranges the user named for it (:data:`INPUT_WORDS`).
"""

from __future__ import annotations

import logging
import re

import numpy as np
import pandas as pd

from nbprof.analysis import _frames
from nbprof.analysis import intervals as iv
from nbprof.analysis._text import has_bigram, matches, name_column, name_pattern, token_matches
from nbprof.trace.model import frame_from_arrays

logger = logging.getLogger(__name__)

_DATALOADER = name_pattern(
    r"DataLoader|DataLoaderIter\.__next__|_DataLoaderIter|dataloader\.py\(\d+\): __next__",
    re.IGNORECASE,
)


def dataloader_ops(cpu_ops: pd.DataFrame, annotations: pd.DataFrame | None = None) -> pd.DataFrame:
    """The batch fetches: rank, tid, name, ts, dur, from CPU ops and CPU-side annotations."""
    parts: list[tuple[pd.DataFrame, np.ndarray]] = []
    for f in (cpu_ops, annotations):
        if f is None or f.empty:
            continue
        # Row numbers first (most ranks have no fetch): a frame only of the hits.
        hit = matches(name_column(f, "name"), _DATALOADER)
        if "on_gpu" in f:
            hit &= ~_frames.column(f, "on_gpu", bool)
        rows = np.flatnonzero(hit)
        if len(rows):
            parts.append((f, rows))
    if not parts:
        return _frames.empty_typed(
            (("rank", "int32"), ("tid", "int64"), ("name", "object"), ("ts", "float64"),
             ("dur", "float64"))
        )  # fmt: skip
    types = [[_frames.dtype_of(f, c) for c in _FETCH_COLUMNS] for f, _ in parts]
    if all(
        isinstance(t, np.dtype) and t == first
        for ts in types
        for t, first in zip(ts, types[0], strict=True)
    ):
        # NumPy columns of one type in every part: what concatenating the parts' rows
        # gives, from the columns' arrays (a frame per part, then their concatenation,
        # cost more than the rest of the search).
        return frame_from_arrays(
            {
                c: np.concatenate([_frames.column(f, c)[rows] for f, rows in parts])
                for c in _FETCH_COLUMNS
            }
        )
    return pd.concat([f.iloc[rows][list(_FETCH_COLUMNS)] for f, rows in parts], ignore_index=True)


_FETCH_COLUMNS = ("rank", "tid", "name", "ts", "dur")

#: Words of a range's name (``record_function("preprocess")``) that say it is input work.
INPUT_WORDS = frozenset({
    "preprocess", "preprocessing", "tokenize", "tokenizer", "tokenization", "collate",
    "augment", "augmentation", "transforms", "dataloader", "dataset",
})  # fmt: skip
_INPUT_PAIRS = frozenset({("load", "batch"), ("data", "loading"), ("load", "data")})
#: Python frames the reader keeps for the input pipeline: a ``file.py(N): function`` name.
_FRAME = name_pattern(r"\.py\(\d+\): ")


def _input_words(tokens: tuple[str, ...]) -> bool:
    return bool(INPUT_WORDS & set(tokens)) or has_bigram(tokens, _INPUT_PAIRS)


def input_ops(
    cpu_ops: pd.DataFrame, annotations: pd.DataFrame, fetches: pd.DataFrame
) -> pd.DataFrame:
    """The input pipeline's host calls: rank, tid, name, ts, dur of the DataLoader
    ``fetches``, the preprocessing libraries' Python frames among the CPU-side
    ``annotations``, and the ranges (annotations, top-level CPU ops) named for input work."""
    parts = [fetches] if not fetches.empty else []
    for f, top in ((annotations, False), (cpu_ops, True)):
        if f is None or f.empty:
            continue
        names = name_column(f, "name")
        hit = token_matches(names, _input_words)
        if not top:
            hit |= matches(names, _FRAME)
        if "on_gpu" in f:
            hit &= ~_frames.column(f, "on_gpu", bool)
        if top and "depth" in f:
            hit &= _frames.column(f, "depth") == 0
        # A fetch is already in; DataLoader frames are fetches.
        hit &= ~matches(names, _DATALOADER)
        rows = np.flatnonzero(hit)
        if len(rows):
            parts.append(f.iloc[rows][list(_FETCH_COLUMNS)])
    if len(parts) <= 1:
        return parts[0] if parts else fetches
    return pd.concat(parts, ignore_index=True)


def dataloader_set(fetches: pd.DataFrame) -> iv.Set:
    """The time the host spent in these calls (fetching batches, or all of the input
    pipeline's :func:`input_ops`), as an interval set."""
    if fetches.empty:
        return iv.EMPTY
    s = _frames.column(fetches, "ts", "float64")
    return iv.merge(s, s + _frames.column(fetches, "dur", "float64"))


def dataloader_pct(
    fetches: pd.DataFrame, steps: pd.DataFrame, window: tuple[float, float] | None
) -> tuple[float | None, str]:
    """Share of step time (or of ``window`` when there are no steps) spent in DataLoader."""
    if fetches.empty:
        return None, "no DataLoader __next__ ops or annotations in the trace"
    fetch = dataloader_set(fetches)
    if not steps.empty:
        ss = _frames.column(steps, "ts", "float64")
        within = iv.merge(ss, ss + _frames.column(steps, "dur", "float64"))
        how = f"DataLoader __next__ time ÷ {len(steps)} ProfilerStep(s)"
    elif window is not None and window[1] > window[0]:
        within = (np.array([window[0]]), np.array([window[1]]))
        how = "DataLoader __next__ time ÷ traced CPU span (no ProfilerStep)"
    else:
        return None, "no step or span to compare with"
    total = iv.total(within)
    if total <= 0:
        return None, "empty steps"
    return iv.total(iv.intersect(fetch, within)) / total * 100.0, how
