"""nbprof.compare's output in JupyterLab, in headless Chromium: both timelines draw on one
time scale, and zooming either one moves the other to the same window.

Runs the corpus DataLoader pair (ResNet50 on a V100, ``num_workers=0`` then ``=4``);
screenshots go to tests/artifacts/.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from lab_harness import Lab, bokeh_plots, missing_requirements, wait_for
from test_jupyterlab import shoot

pytestmark = [
    pytest.mark.browser,
    pytest.mark.corpus,
    pytest.mark.skipif(missing_requirements() is not None, reason=str(missing_requirements())),
]

WORKERS_0 = "kineto-tbplugin__resnet50_num_workers_0__worker0.1623143089861.pt.trace.json.gz"
WORKERS_4 = "kineto-tbplugin__resnet50_num_workers_4__worker0.1623212756351.pt.trace.json.gz"
RENDER_TIMEOUT_S = 60.0


def _main_plot(lab: Lab, side: str) -> dict[str, Any]:
    within = lab.page.locator(f".nbp-cmp-timeline.nbp-cmp-{side}")
    plots = [p for p in bokeh_plots(lab.page, within) if p["name"] == "nbprof-timeline"]
    assert len(plots) == 1, f"expected one {side} timeline, found {len(plots)}"
    return plots[0]


def _window(lab: Lab) -> tuple[float, float, float, float]:
    b, a = _main_plot(lab, "before"), _main_plot(lab, "after")
    return b["x_start"], b["x_end"], a["x_start"], a["x_end"]


def _frame_point(plot: dict[str, Any], fx: float) -> tuple[float, float]:
    c, f = plot["canvas"], plot["frame"]
    return c["x"] + f["x"] + f["width"] * fx, c["y"] + f["y"] + f["height"] * 0.5


def _assert_linked(w: tuple[float, float, float, float], offset: float) -> None:
    """The after range is the before range moved by ``offset`` (its origin's shift)."""
    b0, b1, a0, a1 = w
    span = b1 - b0
    assert a1 - a0 == pytest.approx(span, rel=1e-6)
    assert a0 - b0 == pytest.approx(offset, abs=1e-6 * span)


def test_both_timelines_draw_and_zoom_together(lab: Lab, corpus: Path) -> None:
    cell = (
        "import nbprof\n"
        f"cmp = nbprof.compare({str(corpus / WORKERS_0)!r}, {str(corpus / WORKERS_4)!r})\n"
        "cmp"
    )
    nb = lab.notebook("compare.ipynb", [cell])
    nb.run_all()
    assert nb.error_outputs() == []
    page = lab.page
    out = nb.output_area(0)
    view = out.locator("div.nbp-compare")
    assert view.count() == 1
    assert "The GPU waited on the DataLoader for 28.5% of the span before and 0.3% after" in (
        view.locator(".nbp-cmp-summary").inner_text()
    )
    assert view.locator(".nbp-cmp-verdicts .nbp-verdict").count() == 2

    # Both main plots drawn into canvases of real size.
    view.locator(".nbp-cmp-timeline").first.scroll_into_view_if_needed()

    def drawn() -> bool:
        try:
            plots = [_main_plot(lab, s) for s in ("before", "after")]
        except AssertionError:
            return False
        return all(p["canvas"] and p["canvas"]["width"] > 0 for p in plots)

    wait_for(drawn, RENDER_TIMEOUT_S, "both timelines' canvases")
    for side in ("before", "after"):
        plot = _main_plot(lab, side)
        assert plot["canvas"]["height"] > 0 and plot["renderers"] > 0
        assert plot["x_end"] > plot["x_start"]
        box = view.locator(f".nbp-cmp-{side} .nbp-timeline canvas").first.bounding_box()
        assert box is not None and box["width"] > 0 and box["height"] > 0
    # The same left and right edges: the same instant at the same x in both plots.
    wait_for(lambda: view.get_attribute("data-nbp-aligned") == "1", RENDER_TIMEOUT_S,
             "the plot areas to align")  # fmt: skip
    edges = []
    for side in ("before", "after"):
        plot = _main_plot(lab, side)
        left = plot["canvas"]["x"] + plot["frame"]["x"]
        edges.append((left, left + plot["frame"]["width"]))
    assert edges[0] == pytest.approx(edges[1], abs=2), edges
    first = _window(lab)
    offset = first[2] - first[0]  # the after run's origin, relative to the before run's
    _assert_linked(first, offset)
    shoot(page, view, "compare.png")

    # A wheel turn over the before timeline zooms it, and the after one follows.
    before_box = view.locator(".nbp-cmp-before .nbp-timeline").first
    before_box.scroll_into_view_if_needed()
    before = _main_plot(lab, "before")
    page.mouse.move(*_frame_point(before, 0.3))
    page.keyboard.down("Control")  # the wheel zooms with Ctrl held, else scrolls the page
    page.mouse.wheel(0, -600)
    page.keyboard.up("Control")
    wait_for(lambda: _window(lab) != first, RENDER_TIMEOUT_S, "the wheel to zoom")
    zoomed = _window(lab)
    assert zoomed[1] - zoomed[0] < first[1] - first[0]
    wait_for(lambda: abs((_window(lab)[2] - _window(lab)[0]) - offset) < 1e-3, 10, "the link")
    _assert_linked(_window(lab), offset)

    # A box zoom on the after timeline moves the before one.
    view.locator(".nbp-cmp-after .nbp-timeline").first.scroll_into_view_if_needed()
    after = _main_plot(lab, "after")
    ref = _window(lab)
    x0, y = _frame_point(after, 0.4)
    x1, _ = _frame_point(after, 0.6)
    page.mouse.move(x0, y)
    page.mouse.down()
    page.mouse.move(x1, y, steps=8)
    page.mouse.up()
    wait_for(lambda: _window(lab) != ref, RENDER_TIMEOUT_S, "the box zoom")
    boxed = _window(lab)
    width = ref[3] - ref[2]
    assert boxed[2] == pytest.approx(ref[2] + 0.4 * width, abs=0.02 * width)
    assert boxed[3] == pytest.approx(ref[2] + 0.6 * width, abs=0.02 * width)
    _assert_linked(boxed, offset)
    shoot(page, view, "compare-zoomed.png")
    lab.errors.assert_none()
