"""The timeline's Bokeh figures: the main plot with its axes, glyphs and tooltips, and the
overview strip. Every glyph the browser draws reads a source that starts empty (fields.py
SOURCES); js/timeline.mjs fills them from the timeline document.
"""

from __future__ import annotations

from typing import Any

from nbprof.views._style import GAP_CAUSES, GAP_HATCH
from nbprof.views.timeline.fields import DETAIL_KINDS, SOURCES, Source, tooltip_html
from nbprof.views.timeline.rows import RankGroup, RowLayout, plot_height

#: Left and right borders (px) shared by the timeline, the sample chart and the overview,
#: so their plot areas start and end at the same x (js/bokeh.mjs alignFrames widens all
#: three to the widest y axis once the lane labels are measured).
MIN_BORDER_LEFT = 60
MIN_BORDER_RIGHT = 16
MAIN = "nbprof-timeline"
OVERVIEW = "nbprof-overview"
#: The wheel zoom: it needs Ctrl until the reader clicks into the plot (js/wheel.mjs), so
#: that the wheel scrolls the notebook past the timeline.
WHEEL = "nbprof-wheel-zoom"

#: Hover tool name per kind of event row.
HOVER_NAMES: dict[str, str] = {
    "kernel": "nbprof-hover-events",
    "gpu": "nbprof-hover-copies",
    "runtime": "nbprof-hover-runtime",
    "cpu": "nbprof-hover-cpu",
}


def rank_axis_name(k: int) -> str:
    return f"nbprof-rank-axis-{k}"


def empty_source(src: Source) -> Any:
    from bokeh.models import ColumnDataSource

    return ColumnDataSource({c: [] for c in src.columns}, name=src.name)


def tick_formatter() -> Any:
    """Axis ticks in s / ms / µs, formatted by the browser (js/format.mjs fmtTime)."""
    from bokeh.models import CustomJSTickFormatter

    from nbprof.views.assets import asset

    return CustomJSTickFormatter(code=asset("ticks.js"))


def x_range(span: float) -> tuple[Any, tuple[float, float]]:
    """The shared x range over the whole run with 1% either side, and its bounds."""
    from bokeh.models import Range1d

    pad = span * 0.01
    full = (-pad, span + pad)
    return Range1d(*full, bounds=full, min_interval=1e-3), full


def main_figure(xr: Any, lay: RowLayout, groups: list[RankGroup], n_axes: int, ticks: Any) -> Any:
    """The main plot: its rows as y ticks, a time axis above and below, and, with ranks,
    a pool of time axes along rank headers and the lines between folded ranks."""
    from bokeh.models import ColumnDataSource, FixedTicker, LinearAxis, Range1d, WheelZoomTool
    from bokeh.plotting import figure

    n_rows = max(len(lay.rows), 1)
    wheel = WheelZoomTool(dimensions="width", modifiers={"ctrl": True}, name=WHEEL)
    p = figure(
        x_range=xr,
        y_range=Range1d(n_rows - 0.5, -0.5),
        height=plot_height(n_rows),
        sizing_mode="stretch_width",
        tools=["xpan", wheel, "xbox_zoom", "reset", "save"],
        active_scroll=wheel,
        active_drag="xbox_zoom",
        x_axis_label="time since the first event",
        toolbar_location="above",
        output_backend="canvas",
        min_border_left=MIN_BORDER_LEFT,
        min_border_right=MIN_BORDER_RIGHT,
        name=MAIN,
    )
    labelled = [(y, label) for y, (label, _kind, _g) in enumerate(lay.rows) if label]
    p.yaxis.ticker = FixedTicker(ticks=[y for y, _ in labelled])
    p.yaxis.major_label_overrides = dict(labelled)
    p.xaxis.formatter = ticks
    # The time axis on top as well: on a tall timeline one of the two is always in view.
    p.add_layout(LinearAxis(formatter=ticks, name="nbprof-top-axis"), "above")
    # Ranks: a time axis along each rank's header row (also the line between ranks), and
    # on rulers in long runs of rows, so one is in view on every screen of a tall
    # timeline; the browser moves them as ranks fold.
    for k in range(n_axes):
        at = lay.axes[k] if k < len(lay.axes) else 0.0
        p.add_layout(
            LinearAxis(formatter=ticks, fixed_location=at, visible=k < len(lay.axes),
                       major_label_text_font_size="10px", name=rank_axis_name(k)),
            "below",
        )  # fmt: skip
    if groups:
        sep = SOURCES.separators
        p.hspan(
            y="y", line_color="#8c959f", line_width=1, line_alpha=0.9,
            source=ColumnDataSource({"y": list(lay.separators)}, name=sep.name),
            name="nbprof-rank-separator-glyphs",
        )  # fmt: skip
    p.ygrid.grid_line_color = None
    p.xgrid.grid_line_alpha = 0.4
    p.outline_line_color = None
    return p


def add_gap_shading(p: Any) -> None:
    """Idle gaps, hatched per cause under everything else, and their labels."""
    from bokeh.models import LabelSet

    for cause, (_label, colour) in GAP_CAUSES.items():
        p.quad(
            left="left", right="right", bottom="bottom", top="top", fill_color=colour,
            fill_alpha=0.22, hatch_pattern=GAP_HATCH[cause], hatch_color=colour,
            hatch_alpha=0.6, hatch_scale=8, line_color=None,
            source=empty_source(SOURCES.gap_shading[cause]),
            name=f"nbprof-gap-glyphs-{cause}",
        )  # fmt: skip
    # A label on each gap wide enough on screen to hold it.
    p.add_layout(
        LabelSet(x="x", y="y", text="text", source=empty_source(SOURCES.gap_labels),
                 text_font_size="9px", text_align="center", text_baseline="middle",
                 text_color="#7f4f24", background_fill_color="white",
                 background_fill_alpha=0.75, name="nbprof-gap-labelset")
    )  # fmt: skip


def add_drawn_glyphs(p: Any) -> dict[str, Any]:
    """The glyphs of what is in view (exact events or the aggregate), of the gaps' hover
    areas, of search matches and the pinned event; returns the hovered renderers by kind
    (DETAIL_KINDS, "aggregate", "gap")."""
    from bokeh.models import LabelSet

    quad = {"left": "left", "right": "right", "bottom": "bottom", "top": "top"}
    hovered: dict[str, Any] = {}
    # Invisible: only where a gap's tooltip may show (no event drawn there).
    hovered["gap"] = p.quad(
        **quad, fill_alpha=0.0, line_color=None, source=empty_source(SOURCES.gap_hover),
        name="nbprof-gap-hover-glyphs",
    )  # fmt: skip
    hovered["aggregate"] = p.quad(
        **quad, fill_color="color", line_color=None, fill_alpha=0.9,
        source=empty_source(SOURCES.aggregate), name="nbprof-aggregate-glyphs",
    )  # fmt: skip
    # One source and renderer per kind of event, each with the hover fields that apply.
    # No outline: a stroke widens every bar by its width, which on a zoomed-out view paints
    # short events far beyond their share of the time.
    for kind in DETAIL_KINDS:
        hovered[kind] = p.quad(
            **quad, fill_color="color", line_color=None,
            source=empty_source(SOURCES.detail[kind]), name=f"nbprof-detail-glyphs-{kind}",
        )  # fmt: skip
    # Search matches and the pinned event with its linked event, outlined on top.
    p.quad(
        **quad, fill_alpha=0.0, line_color="#f5b800", line_width=1.5,
        source=empty_source(SOURCES.marks), name="nbprof-mark-glyphs",
    )  # fmt: skip
    p.quad(
        **quad, fill_alpha=0.0, line_color="#e4004f", line_width=2.5,
        source=empty_source(SOURCES.pinned), name="nbprof-pinned-glyphs",
    )  # fmt: skip
    p.segment(
        x0="x0", y0="y0", x1="x1", y1="y1", line_color="#e4004f", line_width=2,
        line_dash="dashed", source=empty_source(SOURCES.link), name="nbprof-link-glyphs",
    )  # fmt: skip
    p.add_layout(
        LabelSet(x="x", y="y", text="text", source=empty_source(SOURCES.bar_labels),
                 text_font_size="10px", text_baseline="middle", text_color="#ffffff",
                 x_offset=3, name="nbprof-bar-labelset")
    )  # fmt: skip
    return hovered


def add_hover_tools(p: Any, hovered: dict[str, Any]) -> None:
    """One tooltip per hovered renderer, each with the rows of its kind (fields.py)."""
    from bokeh.models import HoverTool

    p.add_tools(
        *[
            HoverTool(renderers=[hovered[kind]], tooltips=tooltip_html(kind), name=name)
            for kind, name in HOVER_NAMES.items()
        ],
        HoverTool(
            renderers=[hovered["aggregate"]],
            tooltips=tooltip_html("aggregate"),
            name="nbprof-hover-aggregate",
        ),
        HoverTool(
            renderers=[hovered["gap"]], tooltips=tooltip_html("gap"), name="nbprof-hover-gaps"
        ),
    )


def overview_figure(xr: Any, full: tuple[float, float], n_lanes: int, ticks: Any) -> Any:
    """The whole run in a strip (drawn by the browser), with a box that moves ``xr``."""
    from bokeh.models import Range1d, RangeTool
    from bokeh.plotting import figure

    ov = figure(
        x_range=Range1d(*full),
        y_range=Range1d(n_lanes - 0.5, -0.5),
        height=max(75, min(120, 8 * n_lanes + 40)),
        sizing_mode="stretch_width",
        toolbar_location=None,
        tools="",
        min_border_left=MIN_BORDER_LEFT,
        min_border_right=MIN_BORDER_RIGHT,
        name=OVERVIEW,
    )
    ov.quad(
        left="left", right="right", bottom="bottom", top="top", fill_color="color",
        line_color=None, source=empty_source(SOURCES.overview),
    )  # fmt: skip
    ov.yaxis.visible = False
    ov.xaxis.formatter = ticks
    ov.ygrid.grid_line_color = None
    ov.xgrid.grid_line_color = None
    ov.title.text = "overview: drag the box to navigate"
    ov.title.text_font_size = "10px"
    ov.title.text_font_style = "normal"
    rt = RangeTool(x_range=xr)
    rt.overlay.fill_color = "#1f78b4"
    rt.overlay.fill_alpha = 0.15
    ov.add_tools(rt)
    return ov
