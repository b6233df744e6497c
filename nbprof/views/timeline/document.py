"""The timeline's contract with its browser code: one typed document, written out as JSON
by :func:`to_json` and read by js/document.mjs.

The Bokeh document holds the figures and the empty sources the browser fills; everything
the browser draws them from is here: the events, their signatures and the idle gaps as
typed columns, the lanes and rank groups, the colours and labels of the classes, the
drawing policy, the columns of each source and the rows of the details pane (fields.py),
and the names of the models it fills. tests/test_views_timeline_doc.py fails when the
browser code reads a field this document does not declare, or leaves one unread.

A :class:`Column` is a typed array, sent as one deflated part of the page's pack (wire.py;
js/wire.mjs inflates it with the browser's DecompressionStream); text is
dictionary-encoded: integer codes into its distinct values.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from nbprof.views.timeline.fields import Sources
from nbprof.views.timeline.rows import PlotSize, RankGroup
from nbprof.views.timeline.wire import column_part

#: The document's format; js/document.mjs refuses any other.
SCHEMA = "nbprof.timeline/1"
#: Types a column may have (each has a JavaScript typed array).
DTYPES = ("uint8", "uint16", "uint32", "int8", "int16", "int32", "float32", "float64")


@dataclass(frozen=True)
class Column:
    """A typed column; with ``labels``, ``values`` are codes into them (text)."""

    values: np.ndarray
    labels: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.values.ndim != 1 or self.values.dtype.name not in DTYPES:
            raise TypeError(f"a column is one-dimensional, of {DTYPES}: {self.values.dtype}")

    @classmethod
    def of_text(cls, texts: Sequence[str] | pd.Series) -> Column:
        """Text as codes into its distinct values, in order of first appearance."""
        codes, uniques = pd.factorize(pd.Series(texts, dtype=object).astype(str))
        return cls(codes.astype(smallest_uint(len(uniques))), tuple(str(u) for u in uniques))

    def __len__(self) -> int:
        return len(self.values)

    def json(self, parts: list[bytes]) -> dict[str, Any]:
        """The column as the header of a pack names it; its values go to ``parts``."""
        part, shuffle = column_part(self.values)
        parts.append(part)
        out: dict[str, Any] = {
            "dtype": self.values.dtype.name,
            "length": len(self.values),
            "part": len(parts),  # part 0 of a pack is its header
            "shuffle": int(shuffle),
        }
        if self.labels is not None:
            out["labels"] = list(self.labels)
        return out


def smallest_uint(n: int) -> type[np.unsignedinteger[Any]]:
    """The narrowest unsigned type that holds 0..n-1."""
    for t in (np.uint8, np.uint16, np.uint32):
        if n <= np.iinfo(t).max + 1:
            return t
    raise ValueError(f"{n:,} distinct values do not fit a column")


#: A table of equally long columns, by name.
Table = dict[str, Column]


@dataclass(frozen=True)
class Models:
    """Names of the Bokeh models the browser changes besides the sources it fills."""

    figure: str
    #: Time axes along rank headers and rulers, moved as ranks fold.
    rank_axes: list[str]
    #: The wheel zoom tool, whose modifiers change as the plot is clicked into and left.
    wheel: str


@dataclass(frozen=True)
class TimelineDoc:
    """Everything the browser draws a timeline from (times in µs since the first event)."""

    schema: str
    #: µs per tick of the event and gap columns.
    tick: float
    #: Per lane: where its events start in the event columns (one more for the end), its
    #: longest event, its label (tooltips) and its label on the y axis.
    offsets: list[int]
    maxdur: list[float]
    lanes: list[str]
    lane_axis: list[str]
    #: Per event, in lane order and by start within a lane: dx (delta start ticks), dd
    #: (duration ticks), sig (signature id), dl (link, per-lane differences).
    events: Table
    #: Per signature: cls (class id), bytes (NaN: not a copy or memset) and its text.
    sigs: Table
    #: Per idle gap, by start: dx, dd (ticks), li (lane), cause (id), cpu (code).
    gaps: Table
    #: Per class id: colour, label, hover kind.
    colors: list[str]
    labels: list[str]
    tips: list[str]
    #: Per gap cause id: its key and its label; per CPU-work code, its label.
    gap_causes: list[str]
    gap_labels: list[str]
    cpu_work: list[str]
    #: Exact events drawn at most (else the aggregate), aggregate bars at most, bins per
    #: lane at most, bins of the overview strip, bar height in rows.
    cap: int
    agg_cap: int
    max_bins: int
    overview_bins: int
    bar: float
    #: Rank groups, which start folded, a time axis at least every this many rows.
    groups: list[RankGroup]
    collapsed: list[bool]
    axis_every: int
    plot: PlotSize
    #: The sources the browser fills, and what the details pane says per hover kind:
    #: (label, text) rows (fields.py).
    sources: Sources
    pane: dict[str, list[tuple[str, str]]]
    models: Models

    def __post_init__(self) -> None:
        n = self.offsets[-1] if self.offsets else 0
        if len(self.offsets) != len(self.lanes) + 1 or len(self.maxdur) != len(self.lanes):
            raise ValueError("a timeline document needs one offset per lane, and one more")
        for name, table, rows in (("events", self.events, n), ("sigs", self.sigs, None),
                                  ("gaps", self.gaps, None)):  # fmt: skip
            lengths = {len(c) for c in table.values()}
            if len(lengths) > 1 or (rows is not None and lengths - {rows}):
                raise ValueError(f"the {name} columns differ in length: {sorted(lengths)}")

    @cached_property
    def wire(self) -> tuple[dict[str, Any], list[bytes]]:
        """The document as the browser reads it, and the deflated parts its columns name
        (what wire.pack puts in the page)."""
        parts: list[bytes] = []
        out = to_json(self, parts)
        assert isinstance(out, dict)
        return out, parts


def to_json(value: Any, parts: list[bytes]) -> Any:
    """``value`` as JSON: dataclasses as objects of their fields, columns as parts."""
    if isinstance(value, Column):
        return value.json(parts)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name), parts) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): to_json(v, parts) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_json(v, parts) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value
