"""The timeline's level-of-detail callback, in headless Chromium (no Jupyter needed).

Skipped without Debian's Chromium or the playwright package. Screenshots land in
$NBPROF_ARTIFACTS (default: pytest's tmp_path) so a person can look at them.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from test_views_data import HOSTILE, small_profile, synthetic_profile

from nbprof.views import dashboard, report, timeline

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

CHROMIUM = "/usr/bin/chromium"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's /usr/bin/chromium"),
]

_READY = """() => {
  if (!(window.Bokeh && Bokeh.index)) { return false; }
  const views = Object.values(Bokeh.index);
  return views.length > 0 && views.every(v => v.has_finished());
}"""

_COUNTS = """() => {
  const d = Bokeh.documents[Bokeh.documents.length - 1];
  return [d.get_model_by_name('nbprof-detail').get_length(),
          d.get_model_by_name('nbprof-aggregate').get_length()];
}"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


def _artifacts(tmp_path: Path) -> Path:
    d = Path(os.environ.get("NBPROF_ARTIFACTS", tmp_path))
    d.mkdir(parents=True, exist_ok=True)
    return d


def _open(browser: Browser, path: Path) -> tuple[Page, list[str], list[str]]:
    page = browser.new_page(viewport={"width": 1300, "height": 900})
    errors: list[str] = []
    dialogs: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(path.as_uri())
    page.wait_for_function(_READY, polling="raf", timeout=60_000)
    return page, errors, dialogs


def test_zoom_swaps_the_aggregate_for_exact_events(browser: Browser, tmp_path: Path) -> None:
    path = tmp_path / "large.html"
    path.write_text(report.render(synthetic_profile(30_000)), encoding="utf-8")
    page, errors, _ = _open(browser, path)
    detail, agg = page.evaluate(_COUNTS)
    assert detail == 0 and 0 < agg <= timeline.DEFAULT_AGG_CAP
    page.evaluate(
        """() => { const f = Bokeh.documents[0].get_model_by_name('nbprof-timeline');
        const s = f.x_range.start, e = f.x_range.end;
        f.x_range.setv({start: s + (e - s) * 0.5, end: s + (e - s) * 0.501}); }"""
    )
    page.wait_for_function(f"() => ({_COUNTS})()[0] > 0", polling="raf", timeout=10_000)
    detail, agg = page.evaluate(_COUNTS)
    assert 0 < detail <= timeline.DEFAULT_CAP and agg == 0
    page.screenshot(path=str(_artifacts(tmp_path) / "timeline_zoomed.png"))
    # and back out: the aggregate returns, still bounded
    page.evaluate(
        """() => { const f = Bokeh.documents[0].get_model_by_name('nbprof-timeline');
        f.x_range.setv({start: f.x_range.bounds[0], end: f.x_range.bounds[1]}); }"""
    )
    page.wait_for_function(f"() => ({_COUNTS})()[1] > 0", polling="raf", timeout=10_000)
    detail, agg = page.evaluate(_COUNTS)
    assert detail == 0 and 0 < agg <= timeline.DEFAULT_AGG_CAP
    assert errors == []
    page.close()


def test_two_dashboards_in_one_page_and_hostile_names_run_nothing(
    browser: Browser, tmp_path: Path
) -> None:
    # Two display outputs as a notebook would place them, each with its own Bokeh copy.
    a = dashboard.mimebundle(small_profile(hostile=True, samples=True))["text/html"]
    b = dashboard.mimebundle(small_profile())["text/html"]
    path = tmp_path / "two.html"
    path.write_text(
        f'<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>'
        f'<div class="output">{a}</div><div class="output">{b}</div></body></html>',
        encoding="utf-8",
    )
    page, errors, dialogs = _open(browser, path)
    page.wait_for_timeout(300)
    rendered = page.evaluate(
        """() => [...document.querySelectorAll('.nbp-timeline')].map(
            el => [...el.querySelectorAll('*')].filter(e => e.shadowRoot).length)"""
    )
    assert len(rendered) == 2 and all(n > 0 for n in rendered)
    assert page.evaluate("() => document.querySelectorAll('img').length") == 0
    assert errors == [] and dialogs == []
    page.screenshot(path=str(_artifacts(tmp_path) / "two_dashboards.png"), full_page=True)
    page.close()
    if os.environ.get("NBPROF_ARTIFACTS"):
        shutil.copy(path, _artifacts(tmp_path) / "two.html")


def test_nbconvert_html_export_keeps_the_dashboard(browser: Browser, tmp_path: Path) -> None:
    nbformat = pytest.importorskip("nbformat")
    nbconvert = pytest.importorskip("nbconvert")
    nb = nbformat.v4.new_notebook()
    for p in (small_profile(hostile=True), small_profile(samples=True)):
        cell = nbformat.v4.new_code_cell("prof")
        cell.outputs = [nbformat.v4.new_output("display_data", data=dashboard.mimebundle(p))]
        nb.cells.append(cell)
    body, _ = nbconvert.HTMLExporter().from_notebook_node(nb)
    path = tmp_path / "export.html"
    path.write_text(body, encoding="utf-8")

    # Offline, as on an air-gapped machine: nothing of ours may need the network.
    context = browser.new_context(viewport={"width": 1300, "height": 900})
    context.route("http*://**", lambda route: route.abort())
    page = context.new_page()
    errors: list[str] = []
    dialogs: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(path.as_uri())
    page.wait_for_function(
        """() => { const t = [...document.querySelectorAll('.nbp-timeline')];
        const drawn = el => [...el.querySelectorAll('*')].some(e => e.shadowRoot);
        return t.length === 2 && t.every(drawn); }""",
        timeout=60_000,
    )
    assert errors == [] and dialogs == []
    page.screenshot(path=str(_artifacts(tmp_path) / "nbconvert_export.png"))
    context.close()

    # Where scripts never run (untrusted or script-free viewers) the diagnosis still reads.
    static = browser.new_context(java_script_enabled=False)
    page = static.new_page()
    page.goto(path.as_uri())
    verdicts = page.locator(".nbp-verdict").all_inner_texts()
    assert len(verdicts) == 2 and "Copies dominate (<img src=x onerror=alert(1)>)." in verdicts[0]
    assert "91.5" in page.locator(".nbp-card").first.inner_text()
    static.close()


_WALK = """(test) => { const out = [];
  const walk = (root) => { for (const e of root.querySelectorAll('*')) {
    if (e.shadowRoot) { walk(e.shadowRoot); }
    if (test(e)) { out.push(e.textContent); } } };
  walk(document); return out; }"""


def test_hover_shows_hostile_kernel_names_as_text(browser: Browser, tmp_path: Path) -> None:
    path = tmp_path / "hostile.html"
    path.write_text(report.render(small_profile(hostile=True)), encoding="utf-8")
    page, errors, dialogs = _open(browser, path)
    # Screen position of the kernel named "<img ...>" on its GPU stream.
    x, y = page.evaluate(
        """(name) => {
        const v = Object.values(Bokeh.index).find(v => v.model.name === 'nbprof-timeline');
        v.el.scrollIntoView();
        const d = v.model.document.get_model_by_name('nbprof-detail').data;
        const i = d.name.findIndex((n, k) => n === name && d.lane[k].startsWith('GPU'));
        const r = v.el.getBoundingClientRect();
        return [r.left + v.frame.x_scale.compute((d.left[i] + d.right[i]) / 2),
                r.top + v.frame.y_scale.compute((d.top[i] + d.bottom[i]) / 2)]; }""",
        HOSTILE[0],
    )
    page.mouse.move(x, y)
    page.mouse.move(x + 1, y)
    page.wait_for_timeout(300)
    tips = page.evaluate(f"() => ({_WALK})(e => [...e.classList].some(c => c.includes('tooltip')))")
    assert any(HOSTILE[0] in t and "Tensor" not in t and "aten::add" in t for t in tips), tips
    assert page.evaluate(f"() => ({_WALK})(e => e.tagName === 'IMG').length") == 0
    assert errors == [] and dialogs == []
    page.screenshot(path=str(_artifacts(tmp_path) / "hover_hostile.png"))
    page.close()


_VISIBLE_TIPS = """() => { const out = [];
  const walk = (root) => { for (const e of root.querySelectorAll('*')) {
    if (e.shadowRoot) { walk(e.shadowRoot); }
    if ([...e.classList].includes('bk-tooltip-content') && e.offsetParent !== null) {
      const r = e.getBoundingClientRect();
      if (r.width > 0) { out.push([e.textContent, r.width]); } } } };
  walk(document); return out; }"""

_POS = """([name, lane]) => {
  const v = Object.values(Bokeh.index).find(v => v.model.name === 'nbprof-timeline');
  v.el.scrollIntoView();
  const d = v.model.document.get_model_by_name(lane ? 'nbprof-detail' : 'nbprof-gap-hover').data;
  const i = lane ? d.name.findIndex((n, k) => n === name && d.lane[k].startsWith(lane)) : 0;
  const r = v.el.getBoundingClientRect();
  return [r.left + v.frame.x_scale.compute((d.left[i] + d.right[i]) / 2),
          r.top + v.frame.y_scale.compute((d.top[i] + d.bottom[i]) / 2)]; }"""


def _hover(page, name: str, lane: str) -> list[list]:
    x, y = page.evaluate(_POS, [name, lane])
    page.mouse.move(x, y)
    page.mouse.move(x + 1, y)
    page.wait_for_timeout(300)
    return page.evaluate(_VISIBLE_TIPS)


def test_one_narrow_tooltip_per_point_with_the_fields_of_its_row(
    browser: Browser, tmp_path: Path
) -> None:
    p = small_profile()
    long = "void ns::kernel<" + ", ".join(f"ns::Functor{i}<float>" for i in range(40)) + ">(int)"
    p.trace.kernels.loc[0, "name"] = long
    # A gap over the kernel at 400-405 µs and beyond: hovered where no event is drawn.
    p.diagnosis.tables["idle_gaps"].loc[0, ["start", "end"]] = [395.0, 750.0]
    path = tmp_path / "tips.html"
    path.write_text(report.render(p), encoding="utf-8")
    page, errors, _ = _open(browser, path)
    tips = _hover(page, long, "GPU")
    assert len(tips) == 1, tips
    text, width = tips[0]
    assert "ns::kernel<…>(…)" in text and long in text and "grid × block" in text
    assert width <= timeline.TOOLTIP_MAX_PX + 20
    page.screenshot(path=str(_artifacts(tmp_path) / "hover_long_name.png"))
    tips = _hover(page, "aten::mm", "CPU")
    assert len(tips) == 1 and "aten::mm" in tips[0][0], tips
    assert not any(k in tips[0][0] for k in ("grid", "occupancy", "launched by", "—"))
    tips = _hover(page, "", "")  # the first hoverable piece of an idle gap
    assert len(tips) == 1 and "idle:" in tips[0][0], tips
    assert errors == []
    page.close()
