"""The NVML sample chart under the timeline: GPU activity read while the code ran, on the
timeline's time axis."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from nbprof.views.timeline.figures import MIN_BORDER_LEFT, MIN_BORDER_RIGHT
from nbprof.views.timeline.store import TimelineData

if TYPE_CHECKING:
    from nbprof.result import Profile


def samples_figure(
    profile: Profile, data: TimelineData, x_range: Any, ticks: Any, notes: list[str]
) -> Any:
    """A chart of the profile's NVML percentages per GPU sharing ``x_range``, or None
    (no samples, or no wall-clock origin to place them by: then ``notes`` says so)."""
    from bokeh.models import ColumnDataSource, HoverTool, Legend, Range1d
    from bokeh.plotting import figure

    from nbprof.telemetry.model import METRICS

    samples = profile.samples
    if samples is None or not len(samples):
        return None
    if profile.trace.origin_ns is None:
        notes.append(
            "NVML samples not drawn: the trace gives no wall-clock origin to align them with."
        )
        return None
    from nbprof.telemetry import metric_series

    f = samples.frame
    origin = np.int64(profile.trace.origin_ns)
    fig = figure(
        x_range=x_range,
        y_range=Range1d(0, 105),
        height=190,
        sizing_mode="stretch_width",
        tools="",
        toolbar_location=None,
        y_axis_label="%",
        min_border_left=MIN_BORDER_LEFT,
        min_border_right=MIN_BORDER_RIGHT,
        name="nbprof-samples",
    )
    fig.title.text = f"NVML samples ({samples.source})"
    fig.xaxis.formatter = ticks
    colours = iter(_SAMPLE_COLOURS * 4)
    renderers = []
    items = []
    for gpu in sorted(f["gpu"].unique().tolist()):
        for metric, (label, unit, basis) in METRICS.items():
            if unit != "%" or metric not in f:
                continue
            # Per metric, rows where it is missing dropped: driver-buffered utilization rows
            # sit between the others as NaN, and Bokeh breaks a line at every NaN.
            t_ns, y = metric_series(samples, gpu, metric)
            if not len(y):
                continue
            # Subtract in int64: epoch nanoseconds (~1.7e18) lose ~256 ns as float64.
            x = (t_ns - origin) / 1000.0 - data.t0
            src = ColumnDataSource({"x": x, "y": y})
            r = fig.line(
                "x",
                "y",
                source=src,
                line_width=1.5,
                color=next(colours),
                name=f"nbprof-sample-{metric}-{gpu}",
            )
            r.tags = [f"GPU {gpu}: {label} ({basis})"]
            renderers.append(r)
            items.append((f"GPU {gpu} {label}", [r]))
    if not renderers:
        return None
    # The legend above the plot, in a row: inside it would cover the lines, and beside it
    # would make this plot area narrower than the timeline's.
    legend = Legend(
        items=items, orientation="horizontal", click_policy="hide", label_text_font_size="9px",
        location="top_left", name="nbprof-samples-legend",
    )  # fmt: skip
    fig.add_layout(legend, "above")
    for r in renderers:
        fig.add_tools(HoverTool(renderers=[r], tooltips=[(r.tags[0], "@y{0.0} %")], mode="vline"))
    return fig


#: NVML sample lines: distinct from each other and readable on light and dark backgrounds.
_SAMPLE_COLOURS = ["#e08a00", "#3f8fd0", "#bc2d5a", "#0fa6b0", "#922ed7", "#7ba022"]
