"""A multi-rank job's dashboard in JupyterLab 4 and headless Chromium.

``nbprof.load`` of the corpus' 8 DLRM ranks gives a ``Job``; its cell's output must show the
job verdict, the rank table (8 rows), the rank x step heatmap and the rank-grouped timeline,
whose ranks fold and unfold on the buttons above it, and whose hover tooltips keep
answering after a wheel zoom and after a box zoom (on the 8-rank view in JupyterLab they
once stopped). Screenshots go to tests/artifacts/.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from lab_harness import (
    Lab,
    artifact,
    bokeh_plots,
    missing_requirements,
    plot_named,
    wait_for,
)

if TYPE_CHECKING:
    from playwright.sync_api import Locator, Page

pytestmark = [
    pytest.mark.browser,
    pytest.mark.corpus,
    pytest.mark.skipif(missing_requirements() is not None, reason=str(missing_requirements())),
]

JOB = "param__dlrm_kineto_8ranks"
RENDER_TIMEOUT_S = 60.0

#: The API js/timeline.js leaves on the job's timeline element.
_API = "(el) => el._nbprof"
_RANGE = """(el) => { const r = el._nbprof.doc.get_model_by_name('nbprof-timeline').x_range;
  return [r.start, r.end]; }"""
#: Page coordinates of the timeline's data frame, the plot scrolled into view first (the
#: notebook scrolls inside JupyterLab's own panel, not the page).
_FRAME = """(el) => { const a = el._nbprof, m = a.doc.get_model_by_name('nbprof-timeline');
  const v = nbprof.timeline.viewsOf(a.doc).find(v => v.model === m && v.frame);
  v.el.scrollIntoView({block: 'center'});
  const c = v.canvas_view.el.getBoundingClientRect(), f = v.frame.bbox;
  return {x: c.x + f.left, y: c.y + f.top, width: f.width, height: f.height,
          rows: Math.round(m.y_range.start + 0.5)}; }"""
#: Bokeh tooltips now shown, searched inside Bokeh's shadow roots.
_VISIBLE_TIPS = """() => { const out = [];
  const walk = (root) => { for (const e of root.querySelectorAll('*')) {
    if (e.shadowRoot) { walk(e.shadowRoot); }
    if (e.classList.contains('bk-tooltip-content') && e.offsetParent !== null) {
      const r = e.getBoundingClientRect();
      if (r.width > 0) { out.push(e.textContent); } } } };
  walk(document); return out; }"""


def _frame(page: Page, tl: Locator) -> dict[str, float]:
    tl.evaluate(_FRAME)  # scrolls; the second read sees the settled layout
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => r(null)))")
    return dict(tl.evaluate(_FRAME))


def _hover(page: Page, x: float, y: float) -> list[str]:
    page.mouse.move(x, y)
    page.mouse.move(x + 1, y)
    page.wait_for_timeout(200)
    return list(page.evaluate(_VISIBLE_TIPS))


def _rows_answering(page: Page, tl: Locator, want: int = 3) -> list[str]:
    """Hover along the timeline's rows, top to bottom; stop once ``want`` rows have shown a
    tooltip. Returns one tooltip text per answering row."""
    f = _frame(page, tl)
    seen: list[str] = []
    for j in range(int(f["rows"])):
        y = f["y"] + f["height"] * (j + 0.5) / f["rows"]
        for i in range(1, 30):
            tips = _hover(page, f["x"] + f["width"] * i / 30, y)
            if tips:
                seen.append(tips[0])
                break
        if len(seen) >= want:
            break
    page.mouse.move(0, 0)
    return seen


def _wait_range(page: Page, tl: Locator, cond: str, ref: list[float], what: str) -> list[Any]:
    """Wait until the x range satisfies ``cond`` (JS, of ``now`` and ``ref``)."""
    wait_for(
        lambda: bool(
            tl.evaluate(f"(el, ref) => {{ const now = ({_RANGE})(el); return {cond}; }}", ref)
        ),
        RENDER_TIMEOUT_S / 2,
        what,
    )
    return list(tl.evaluate(_RANGE))


def test_job_dashboard_folds_ranks_and_hovers_after_zooms(lab: Lab, corpus: Path) -> None:
    folder = corpus / JOB
    if not folder.is_dir():
        pytest.skip(f"no {JOB} in the corpus")
    import nbprof

    expected = nbprof.load(folder)
    assert type(expected).__name__ == "Job"
    nb = lab.notebook("job.ipynb", [f"import nbprof\njob = nbprof.load({str(folder)!r})\njob"])
    nb.run_all()
    assert nb.error_outputs() == [], "the cell raised"
    page = lab.page
    out = nb.output_area(0)
    dash = out.locator("div.nbprof.nbp-job")
    assert dash.count() == 1, "no job dashboard in the output"

    # What the job dashboard opens with: the verdict, one table row a rank, the heatmap.
    assert (dash.locator(".nbp-verdict p").first.inner_text().strip()
            == expected.diagnosis.verdict.summary)  # fmt: skip
    assert dash.locator("table.nbp-ranks tr").count() == 1 + len(expected.diagnosis.ranks) == 9
    wait_for(
        lambda: any(p["name"] == "nbprof-job-heatmap" for p in bokeh_plots(page, out)),
        RENDER_TIMEOUT_S,
        "the rank x step heatmap",
    )
    tl = out.locator(".nbp-timeline[data-nbp-ready]")
    tl.wait_for(timeout=RENDER_TIMEOUT_S * 1000)
    plot_named(page, "nbprof-timeline", out)

    # Fold, then unfold, every rank with the buttons above the timeline: folded, each rank
    # is one row (plus the time axis rows); unfolded, every lane of every rank has its own.
    # The 8 ranks open unfolded, so folding first is what shows the buttons work.
    assert tl.get_attribute("data-nbp-collapsed") == ""
    shown = _frame(page, tl)["rows"]
    dash.locator('[data-nbp-ranks="fold"]').click()
    wait_for(lambda: tl.get_attribute("data-nbp-collapsed") == "0,1,2,3,4,5,6,7", 10,
             "all 8 ranks to fold")  # fmt: skip
    folded = _frame(page, tl)["rows"]
    dash.locator('[data-nbp-ranks="unfold"]').click()
    wait_for(lambda: tl.get_attribute("data-nbp-collapsed") == "", 10, "the ranks to unfold")
    unfolded = _frame(page, tl)["rows"]
    assert folded < unfolded == shown, (folded, unfolded, shown)

    # Tooltips answer on several rows before any zoom ...
    assert len(_rows_answering(page, tl)) >= 3, "no tooltips on the job timeline"

    # ... after a wheel zoom about the cursor (the plot clicked into first: until then the
    # wheel scrolls the notebook) ...
    before = list(tl.evaluate(_RANGE))
    f = _frame(page, tl)
    page.mouse.click(f["x"] + f["width"] * 0.5, f["y"] + f["height"] * 0.5)
    page.mouse.wheel(0, -800)
    wheeled = _wait_range(page, tl, "now[1] - now[0] < ref[1] - ref[0]", before, "a wheel zoom")
    assert before[0] <= wheeled[0] < wheeled[1] <= before[1]
    assert len(_rows_answering(page, tl)) >= 3, "tooltips stopped after a wheel zoom"

    # ... and after a box zoom over the middle of the frame.
    f = _frame(page, tl)
    y = f["y"] + f["height"] * 0.5
    page.mouse.move(f["x"] + f["width"] * 0.3, y)
    page.mouse.down()
    page.mouse.move(f["x"] + f["width"] * 0.6, y, steps=8)
    page.mouse.up()
    boxed = _wait_range(page, tl, "now[1] - now[0] < 0.5 * (ref[1] - ref[0])", wheeled,
                        "a box zoom")  # fmt: skip
    span = wheeled[1] - wheeled[0]
    assert boxed[0] == pytest.approx(wheeled[0] + 0.3 * span, abs=0.03 * span)
    assert boxed[1] == pytest.approx(wheeled[0] + 0.6 * span, abs=0.03 * span)
    tips = _rows_answering(page, tl)
    assert len(tips) >= 3, "tooltips stopped after a box zoom"
    tl.screenshot(path=str(artifact("job-8ranks-zoomed.png")))
    lab.errors.assert_none()


#: The element the notebook scrolls in (JupyterLab scrolls its own panel, not the page):
#: the nearest scrolling ancestor of the timeline, and how far it is scrolled.
_SCROLLER = """(el) => { let e = el.parentElement;
  while (e && !(/(auto|scroll)/.test(getComputedStyle(e).overflowY)
                && e.scrollHeight > e.clientHeight)) { e = e.parentElement; }
  return e ? e.scrollTop : null; }"""


#: _FRAME where the timeline is now, not scrolled into view.
_FRAME_HERE = _FRAME.replace("v.el.scrollIntoView({block: 'center'});", "")


def _wheel_over_plot(page: Page, tl: Locator, dy: float, centre: bool = True) -> tuple[Any, Any]:
    """One wheel turn over the timeline's frame (scrolled to the middle of the notebook
    first, with ``centre``): (scroll position, x range) before and after it settled."""
    f = _frame(page, tl) if centre else dict(tl.evaluate(_FRAME_HERE))
    page.mouse.move(f["x"] + f["width"] * 0.5, f["y"] + f["height"] * 0.3)
    before = (tl.evaluate(_SCROLLER), list(tl.evaluate(_RANGE)))
    page.mouse.wheel(0, dy)
    page.wait_for_timeout(600)
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => r(null)))")
    return before, (tl.evaluate(_SCROLLER), list(tl.evaluate(_RANGE)))


def test_the_wheel_scrolls_the_notebook_until_the_plot_is_clicked(lab: Lab, corpus: Path) -> None:
    """The 8-rank view opens unfolded and fills the screen: a wheel turn over it must scroll
    the notebook past it. Clicked into (or with Ctrl/⌘ held), the wheel zooms instead."""
    folder = corpus / JOB
    if not folder.is_dir():
        pytest.skip(f"no {JOB} in the corpus")
    below = "print('\\n'.join(f'line {i}' for i in range(300)))"
    nb = lab.notebook("wheel.ipynb", [f"import nbprof\nnbprof.load({str(folder)!r})", below])
    nb.run_all()
    assert nb.error_outputs() == [], "a cell raised"
    page = lab.page
    out = nb.output_area(0)
    tl = out.locator(".nbp-timeline[data-nbp-ready]")
    tl.wait_for(timeout=RENDER_TIMEOUT_S * 1000)
    assert tl.get_attribute("data-nbp-wheel") == "page"
    hint = tl.locator(".nbp-wheel-page")
    assert hint.is_visible() and not tl.locator(".nbp-wheel-zoom").is_visible()
    assert "scrolls the page" in hint.inner_text() and "Ctrl/⌘" in hint.inner_text()

    # Not clicked into: the notebook scrolls (down, then up), the timeline stays put.
    for dy in (500, -500):
        (top0, r0), (top1, r1) = _wheel_over_plot(page, tl, dy)
        assert top0 is not None and (top1 - top0) * dy > 0, (dy, top0, top1)
        assert abs(top1 - top0) > 100, (dy, top0, top1)
        assert r1 == r0, "the wheel zoomed a timeline nobody clicked into"

    # Clicked into: the wheel zooms, and the notebook stays where it is.
    f = _frame(page, tl)
    page.mouse.click(f["x"] + f["width"] * 0.5, f["y"] + f["height"] * 0.3)
    wait_for(lambda: tl.get_attribute("data-nbp-wheel") == "zoom", 10, "the click to arm it")
    assert tl.locator(".nbp-wheel-zoom").is_visible() and not hint.is_visible()
    assert "zooms" in tl.locator(".nbp-wheel-zoom").inner_text()
    (top0, r0), (top1, r1) = _wheel_over_plot(page, tl, -500, centre=False)
    assert top1 == top0, "the notebook scrolled under a zooming timeline"
    assert r1[1] - r1[0] < r0[1] - r0[0], "the wheel did not zoom after a click"

    # A click elsewhere gives the wheel back to the notebook.
    nb.output_area(1).click()
    wait_for(lambda: tl.get_attribute("data-nbp-wheel") == "page", 10, "the click outside")
    (top0, r0), (top1, r1) = _wheel_over_plot(page, tl, 500)
    assert top1 > top0 and r1 == r0

    # With Ctrl (Bokeh's wheel zoom) or ⌘ (nbprof's) held, the wheel zooms without a click.
    for key in ("Control", "Meta"):
        f = _frame(page, tl)
        page.mouse.move(f["x"] + f["width"] * 0.5, f["y"] + f["height"] * 0.3)
        page.keyboard.down(key)
        try:
            (top0, r0), (top1, r1) = _wheel_over_plot(page, tl, -500, centre=False)
        finally:
            page.keyboard.up(key)
        assert top1 == top0, key
        assert r1[1] - r1[0] < r0[1] - r0[0], f"{key} + wheel did not zoom"
    assert tl.get_attribute("data-nbp-wheel") == "page"
    lab.errors.assert_none()
