"""What the browser writes into each drawn source, and what the tooltips and the details
pane say about an event: declared once here, emitted in the timeline document
(document.py) for the browser (js/fields.mjs fills the columns and the pane from it).

A row's text names values in braces: ``"{grid} × {block}"``, ``"{dur:us}"`` (a value and
its format). The values of an event are the columns of its signature (name, short, grid,
block, occ, op, extra, bytes) and what js/fields.mjs derives: i, start, end, dur, kind
(its class's label), lane (its lane's label), rate, partner, partner_lane and
launch_to_start; of an aggregate bar and an idle gap, the columns of their sources. A row
whose values are missing (no partner, no size) is left out of the pane. The tooltips are
Bokeh templates made from the same rows; Bokeh HTML-escapes every @field in them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nbprof.views._style import CLASSES, GAP_CAUSES, TIP_KINDS

#: The hover kinds of events (kernel, gpu, runtime, cpu): one drawn source each, so each
#: tooltip shows only the fields that apply.
DETAIL_KINDS = tuple(dict.fromkeys(TIP_KINDS.values()))

GEOMETRY = ("left", "right", "bottom", "top")


@dataclass(frozen=True)
class Source:
    """A data source the browser fills (empty in the Bokeh document): its model's name
    and its columns."""

    name: str
    columns: tuple[str, ...]


@dataclass(frozen=True)
class Sources:
    """Every source the browser fills, by its role."""

    #: Exact events, one source per hover kind.
    detail: dict[str, Source]
    #: Per lane and time bin, when too many events are in view.
    aggregate: Source
    #: The parts of idle gaps where no glyph is drawn (their tooltip answers there).
    gap_hover: Source
    #: Idle-gap shading, one source per cause.
    gap_shading: dict[str, Source]
    gap_labels: Source
    bar_labels: Source
    #: Search matches, the pinned event and its partner, the line between them.
    marks: Source
    pinned: Source
    link: Source
    overview: Source
    #: Lines between folded ranks.
    separators: Source


TEXT = ("x", "y", "text")
#: What an exact event's glyph holds: its geometry and colour, then what its tooltip shows
#: (and i, its index in the event columns).
DETAIL_COLUMNS = (
    *GEOMETRY, "color", "i", "name", "short", "kind", "dur", "grid", "block", "occ", "op",
    "extra", "lane",
)  # fmt: skip
SOURCES = Sources(
    detail={kind: Source(f"nbprof-detail-{kind}", DETAIL_COLUMNS) for kind in DETAIL_KINDS},
    aggregate=Source("nbprof-aggregate", (*GEOMETRY, "color", "busy", "events", "kind", "lane")),
    gap_hover=Source("nbprof-gap-hover", (*GEOMETRY, "dur", "cause_label", "cpu_work", "lane")),
    gap_shading={cause: Source(f"nbprof-gaps-{cause}", GEOMETRY) for cause in GAP_CAUSES},
    gap_labels=Source("nbprof-gap-labels", TEXT),
    bar_labels=Source("nbprof-bar-labels", TEXT),
    marks=Source("nbprof-marks", GEOMETRY),
    pinned=Source("nbprof-pinned", GEOMETRY),
    link=Source("nbprof-link", ("x0", "y0", "x1", "y1")),
    overview=Source("nbprof-overview-bars", (*GEOMETRY, "color")),
    separators=Source("nbprof-rank-separators", ("y",)),
)


@dataclass(frozen=True)
class Row:
    """One line of a tooltip and of the details pane: a label and a text naming values."""

    label: str
    text: str
    #: The hover kinds it applies to (empty: all).
    kinds: tuple[str, ...] = ()
    tooltip: bool = True
    pane: bool = True

    def applies(self, kind: str) -> bool:
        return not self.kinds or kind in self.kinds


#: What an event's tooltip (the short form) and its details pane (click it) say, in order.
EVENT_ROWS: tuple[Row, ...] = (
    Row("class", "{kind}"),
    Row("duration", "{dur:us}"),
    Row("start", "{start:us} after the first event", tooltip=False),
    Row("grid × block", "{grid} × {block}", kinds=("kernel",)),
    Row("occupancy", "{occ}", kinds=("kernel",)),
    Row("launched by (CPU op)", "{op}", kinds=("kernel", "gpu"), tooltip=False),
    Row("size", "{extra}", kinds=("gpu",)),
    Row("rate", "{rate:gbps} (size ÷ duration)", kinds=("gpu",), tooltip=False),
    Row("category", "{extra}", kinds=("runtime",)),
    Row("lane", "{lane}"),
    Row(
        "launch call",
        "{partner} on {partner_lane}, {launch_to_start:us} before this started",
        kinds=("kernel", "gpu"),
        tooltip=False,
    ),
    Row(
        "launched",
        "{partner} on {partner_lane}, started {launch_to_start:us} after this call began",
        kinds=("runtime",),
        tooltip=False,
    ),
)
AGGREGATE_ROWS: tuple[Row, ...] = (
    Row("busy in this bin (from the trace)", "{busy:pct}", pane=False),
    Row("events starting here", "{events}", pane=False),
    Row("mostly", "{kind}", pane=False),
    Row("lane", "{lane}", pane=False),
)
GAP_ROWS: tuple[Row, ...] = (
    Row("duration", "{dur:us1}", pane=False),
    Row("CPU meanwhile", "{cpu_work}", pane=False),
    Row("lane", "{lane}", pane=False),
)

#: Formats a row may name, as Bokeh tooltip formats (the pane's are js/fields.mjs FORMATS;
#: "gbps" is the pane's only).
BOKEH_FORMATS = {"us": "{0,0.000} µs", "us1": "{0,0.0} µs", "pct": "{0.0} %"}

_VALUE = re.compile(r"\{(\w+)(?::(\w+))?\}")

#: Tooltip size caps: a name wraps inside the width, and the whole tooltip never grows
#: taller than this (a tall one would cover the lanes under the cursor).
TOOLTIP_MAX_PX = 420
TOOLTIP_MAX_HEIGHT_PX = 190


def values_named(text: str) -> list[str]:
    """The values a row's text names, in order."""
    return [m.group(1) for m in _VALUE.finditer(text)]


def bokeh_text(text: str, columns: tuple[str, ...]) -> str:
    """A row's text as a Bokeh tooltip template over a source with ``columns``."""

    def field(m: re.Match[str]) -> str:
        name, fmt = m.group(1), m.group(2)
        if name not in columns:
            raise ValueError(f"tooltip names {name!r}, which its source does not hold")
        if fmt is None:
            return f"@{name}"
        if fmt not in BOKEH_FORMATS:
            raise ValueError(f"tooltip format {fmt!r} has no Bokeh form")
        return f"@{name}{BOKEH_FORMATS[fmt]}"

    return _VALUE.sub(field, text)


def pane_rows(kind: str) -> list[tuple[str, str]]:
    """(label, text) of each details-pane row of an event of hover kind ``kind``."""
    return [(r.label, r.text) for r in EVENT_ROWS if r.pane and r.applies(kind)]


def tooltip_html(kind: str) -> str:
    """The hover template of a hover kind, ``"aggregate"`` or ``"gap"``.

    HTML only for the layout (size caps, wrapping); Bokeh HTML-escapes every @field in it
    (only the "{safe}" format, never used here, would insert markup), so names taken from
    the trace stay text.
    """
    if kind == "aggregate":
        title, rows, more = "zoom in for individual events", AGGREGATE_ROWS, ""
        columns = SOURCES.aggregate.columns
    elif kind == "gap":
        title, rows, more = "idle: {cause_label}", GAP_ROWS, ""
        columns = SOURCES.gap_hover.columns
    else:
        title, more = "{short}", '<div class="nbp-tip-more">click: full name, launch</div>'
        rows = tuple(r for r in EVENT_ROWS if r.tooltip and r.applies(kind))
        columns = SOURCES.detail[kind].columns
    lines = "".join(
        f'<div><span class="nbp-tip-key">{r.label}:</span> {bokeh_text(r.text, columns)}</div>'
        for r in rows
    )
    return (
        f'<div class="nbp-tip" style="max-width:{TOOLTIP_MAX_PX}px;'
        f"max-height:{TOOLTIP_MAX_HEIGHT_PX}px;overflow:hidden;white-space:normal;"
        f'overflow-wrap:anywhere;font-size:12px;line-height:1.35">'
        f'<div class="nbp-tip-title">{bokeh_text(title, columns)}</div>{lines}{more}</div>'
    )


#: Per class id (the order of CLASSES): colour, legend label, hover kind.
CLASS_COLOURS = [colour for _, colour in CLASSES.values()]
CLASS_LABELS = [label for label, _ in CLASSES.values()]
CLASS_TIPS = [TIP_KINDS[k] for k in CLASSES]
