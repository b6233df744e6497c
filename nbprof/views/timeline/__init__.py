"""The zoomable Bokeh timeline: GPU streams, CPU threads, steps, idle gaps, NVML samples.

Python prepares the data and the figures; the browser decides what to draw. A build is:

- events.py: the profile's (or a job's) events, in lanes; store.py packs them;
- gaps.py: the analysis' idle gaps on those lanes;
- rows.py: the rows (lanes grouped by rank, folded or not) and the plot's height;
- figures.py (+ samples.py): the Bokeh figures, whose drawn sources start empty;
- document.py: the timeline document, everything the browser draws them from, its
  sources and tooltip and details-pane rows declared in fields.py.

At first paint and on every change of the x range the browser (nbprof/views/js) fills the
sources with the exact events of the window when at most ``cap`` are there, else with a
per-lane aggregate (busy fraction per time bin, dominant class) of at most ``agg_cap``
bars. The binning is level of detail for drawing, not a metric.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from nbprof.views._style import CLASSES, GAP_CAUSES
from nbprof.views.timeline import fields
from nbprof.views.timeline.document import SCHEMA, Column, Models, TimelineDoc
from nbprof.views.timeline.events import collect, collect_job
from nbprof.views.timeline.fields import (
    DETAIL_KINDS,
    SOURCES,
    TOOLTIP_MAX_HEIGHT_PX,
    TOOLTIP_MAX_PX,
    tooltip_html,
)
from nbprof.views.timeline.figures import MAIN, WHEEL, rank_axis_name
from nbprof.views.timeline.gaps import MAX_GAPS, encode_gaps, gap_table, gaps_on_lanes
from nbprof.views.timeline.rows import (
    AXIS_EVERY,
    LANE_PX,
    MAX_PLOT_PX,
    MIN_PLOT_PX,
    PlotSize,
    RankGroup,
    axis_labels,
    axis_pool,
    first_folds,
    plot_height,
    rank_groups,
    row_layout,
)
from nbprof.views.timeline.store import Lane, TimelineData, encode_links, encode_ticks

if TYPE_CHECKING:
    from bokeh.models import LayoutDOM

    from nbprof.result import Profile

__all__ = [
    "DEFAULT_AGG_CAP",
    "DEFAULT_CAP",
    "DETAIL_KINDS",
    "LANE_PX",
    "MAX_GAPS",
    "MAX_PLOT_PX",
    "MIN_PLOT_PX",
    "TOOLTIP_MAX_HEIGHT_PX",
    "TOOLTIP_MAX_PX",
    "Lane",
    "Timeline",
    "TimelineData",
    "TimelineDoc",
    "build",
    "collect",
    "collect_job",
    "plot_height",
    "tooltip_html",
]

#: Exact events drawn at most (else the aggregate is shown).
DEFAULT_CAP = 20_000
#: Aggregate bars drawn at most (lanes x bins).
DEFAULT_AGG_CAP = 24_000
MAX_BINS = 800
OVERVIEW_BINS = 300
#: Height of a bar, in rows.
BAR_HEIGHT = 0.8


@dataclass
class Timeline:
    #: main plot, NVML tracks (when drawn) and the overview strip, in one Column
    layout: LayoutDOM
    #: the same plots, for embedding as separate roots of one document (see dashboard)
    figures: list[Any]
    data: TimelineData
    #: what the browser draws the figures from
    doc: TimelineDoc
    #: class keys present in the trace (for the legend)
    classes: list[str]
    #: idle gap causes shaded (for the legend)
    gap_causes: list[str]
    notes: list[str] = field(default_factory=list)

    @property
    def meta(self) -> dict[str, Any]:
        """The timeline document as JSON, what the page's payload carries (its columns
        name :attr:`parts`)."""
        return self.doc.wire[0]

    @property
    def parts(self) -> list[bytes]:
        """The deflated columns :attr:`meta` names (wire.py)."""
        return self.doc.wire[1]


def build(
    profile: Profile | None,
    *,
    cap: int = DEFAULT_CAP,
    agg_cap: int = DEFAULT_AGG_CAP,
    data: TimelineData | None = None,
    idle_gaps: pd.DataFrame | None = None,
) -> Timeline:
    """The timeline as Bokeh figures (main plot, optional NVML tracks, overview strip) and
    the document the browser draws them from.

    Without a ``profile`` (a job's timeline, :func:`collect_job`), ``data`` holds the
    events and ``idle_gaps`` the gaps to shade (the analysis' ``idle_gaps`` columns)."""
    from bokeh.layouts import column

    from nbprof.views.timeline import figures
    from nbprof.views.timeline.samples import samples_figure

    if data is None:
        if profile is None:
            raise ValueError("build() needs a profile or its data")
        data = collect(profile)
    notes = list(data.notes)
    groups = rank_groups(data.lanes)
    lane_axis = axis_labels(data.lanes, bool(groups))
    # A big job starts with its ranks folded: one row each, unfolded on a click.
    collapsed = first_folds(groups, lane_axis)
    lay = row_layout(groups, lane_axis, collapsed, AXIS_EVERY)
    n_axes = axis_pool(groups, len(data.lanes))
    gaps = (
        gap_table(profile, data, notes)
        if profile is not None
        else gaps_on_lanes(idle_gaps, data, notes)
    )

    ticks = figures.tick_formatter()
    xr, full = figures.x_range(data.span)
    p = figures.main_figure(xr, lay, groups, n_axes, ticks)
    figures.add_gap_shading(p)
    figures.add_hover_tools(p, figures.add_drawn_glyphs(p))
    parts: list[Any] = [p]
    if profile is not None:
        samples = samples_figure(profile, data, xr, ticks, notes)
        if samples is not None:
            parts.append(samples)
    parts.append(figures.overview_figure(xr, full, max(len(data.lanes), 1), ticks))

    if not data.event_count:
        notes.append("The trace has no events to draw on a timeline.")
    present = sorted({int(c) for c in data.sigs["cls"].tolist()}) if len(data.sigs) else []
    keys = list(CLASSES)
    return Timeline(
        layout=column(*parts, sizing_mode="stretch_width", name="nbprof-timeline-layout"),
        figures=parts,
        data=data,
        doc=document_of(data, gaps, groups, lane_axis, collapsed, n_axes, cap, agg_cap),
        classes=[keys[i] for i in present],
        gap_causes=[c for c in GAP_CAUSES if (gaps["cause"] == c).any()],
        notes=notes,
    )


def document_of(
    data: TimelineData,
    gaps: pd.DataFrame,
    groups: list[RankGroup],
    lane_axis: list[str],
    collapsed: list[bool],
    n_axes: int,
    cap: int,
    agg_cap: int,
) -> TimelineDoc:
    """The timeline document of ``data`` and its idle ``gaps`` (gaps.py columns)."""
    dx, dd, tick = encode_ticks(data)
    n_sigs = len(data.sigs)
    sig_type = np.uint16 if n_sigs <= np.iinfo(np.uint16).max + 1 else np.uint32
    link = data.link if len(data.link) == data.event_count else np.full(data.event_count, -1)
    sigs = data.sigs
    text = ("name", "short", "grid", "block", "occ", "op", "extra")
    return TimelineDoc(
        schema=SCHEMA,
        tick=tick,
        offsets=data.lane_offsets.tolist(),
        maxdur=data.lane_maxdur(),
        lanes=[ln.label for ln in data.lanes],
        lane_axis=lane_axis,
        events={
            "dx": Column(dx),
            "dd": Column(dd),
            "sig": Column(data.sig.astype(sig_type)),
            "dl": Column(encode_links(link, data.lane_offsets)),
        },
        sigs={
            "cls": Column(sigs["cls"].to_numpy(dtype=np.uint8)),
            "bytes": Column(sigs["bytes"].to_numpy(dtype=np.float64)),
            **{c: Column.of_text(sigs[c].astype(str)) for c in text},
        },
        gaps={k: Column(v) for k, v in encode_gaps(gaps, tick).items()},
        colors=fields.CLASS_COLOURS,
        labels=fields.CLASS_LABELS,
        tips=fields.CLASS_TIPS,
        gap_causes=list(GAP_CAUSES),
        gap_labels=[label for label, _ in GAP_CAUSES.values()],
        cpu_work=list(gaps.attrs.get("cpu_labels", [])),
        cap=int(cap),
        agg_cap=int(agg_cap),
        max_bins=MAX_BINS,
        overview_bins=OVERVIEW_BINS,
        bar=BAR_HEIGHT,
        groups=groups,
        collapsed=collapsed,
        axis_every=AXIS_EVERY,
        plot=PlotSize(),
        sources=SOURCES,
        pane={kind: fields.pane_rows(kind) for kind in DETAIL_KINDS},
        models=Models(
            figure=MAIN, rank_axes=[rank_axis_name(k) for k in range(n_axes)], wheel=WHEEL
        ),
    )
