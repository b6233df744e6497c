"""The dashboard's front end in headless Chromium, on standalone pages (no Jupyter needed):
level of detail, hover, pin-on-click, search, keyboard zoom, alignment, dark theme.

Skipped without Debian's Chromium or the playwright package. Screenshots land in
tests/artifacts/ (git-ignored) so a person can look at them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from views_data import HOSTILE, small_profile, synthetic_profile

from nbprof.views import dashboard, report, timeline

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's /usr/bin/chromium"),
]

#: The API js/timeline.mjs leaves on each .nbp-timeline element, and its drawn sources.
_API = "(k) => document.querySelectorAll('.nbp-timeline')[k]._nbprof"
_COUNTS = f"""(k) => {{ const a = ({_API})(k), g = n => a.doc.get_model_by_name(n);
  const det = ['kernel', 'gpu', 'runtime', 'cpu'].reduce(
    (s, t) => s + g('nbprof-detail-' + t).get_length(), 0);
  return [det, g('nbprof-aggregate').get_length(), g('nbprof-marks').get_length()]; }}"""
_RANGE = f"(k) => {{ const a = ({_API})(k); const r = a.doc.get_model_by_name('nbprof-timeline')"
_RANGE += ".x_range; return [r.start, r.end]; }"


def artifact(name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS / name


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


def _open(
    browser: Browser, path: Path, width: int = 1300, dark: bool = False, n: int = 1
) -> tuple[Page, list[str]]:
    page = browser.new_page(
        viewport={"width": width, "height": 900}, color_scheme="dark" if dark else "light"
    )
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("dialog", lambda d: (errors.append("dialog " + d.message), d.dismiss()))
    page.goto(path.as_uri())
    page.wait_for_function(
        f"() => document.querySelectorAll('.nbp-timeline[data-nbp-ready]').length === {n}",
        timeout=60_000,
    )
    page.wait_for_timeout(200)
    return page, errors


def _write(tmp_path: Path, name: str, profile: Any) -> Path:
    path = tmp_path / name
    path.write_text(report.render(profile), encoding="utf-8")
    return path


def _frame(page: Page, name: str = "nbprof-timeline", k: int = 0) -> dict[str, float]:
    """Page coordinates of a plot's data frame."""
    return page.evaluate(
        f"""([name, k]) => {{ const a = ({_API})(k), m = a.doc.get_model_by_name(name);
        const v = nbprof.timeline.viewsOf(a.doc).find(v => v.model === m && v.frame);
        const c = v.canvas_view.el.getBoundingClientRect(), f = v.frame.bbox;
        return {{x: c.x + f.left, y: c.y + f.top, width: f.width, height: f.height}}; }}""",
        [name, k],
    )


def _event_point(page: Page, name: str, lane_prefix: str, k: int = 0) -> tuple[float, float]:
    """Page coordinates of the middle of the drawn event ``name`` on a lane."""
    return tuple(
        page.evaluate(
            f"""([name, lane, k]) => {{ const a = ({_API})(k);
            const m = a.doc.get_model_by_name('nbprof-timeline');
            const v = nbprof.timeline.viewsOf(a.doc).find(v => v.model === m && v.frame);
            v.el.scrollIntoView({{block: 'center'}});
            for (const t of ['kernel', 'gpu', 'runtime', 'cpu']) {{
              const d = a.doc.get_model_by_name('nbprof-detail-' + t).data;
              const i = d.name.findIndex((n, j) => n === name && d.lane[j].startsWith(lane));
              if (i < 0) continue;
              const c = v.canvas_view.el.getBoundingClientRect();
              return [c.left + v.frame.x_scale.compute((d.left[i] + d.right[i]) / 2),
                      c.top + v.frame.y_scale.compute((d.top[i] + d.bottom[i]) / 2)]; }}
            return null; }}""",
            [name, lane_prefix, k],
        )
    )


_VISIBLE_TIPS = """() => { const out = [];
  const walk = (root) => { for (const e of root.querySelectorAll('*')) {
    if (e.shadowRoot) { walk(e.shadowRoot); }
    if ([...e.classList].includes('bk-tooltip-content') && e.offsetParent !== null) {
      const r = e.getBoundingClientRect();
      if (r.width > 0) { out.push([e.textContent, r.width, r.height]); } } } };
  walk(document); return out; }"""


def _hover(page: Page, x: float, y: float) -> list[list[Any]]:
    page.mouse.move(x, y)
    page.mouse.move(x + 1, y)
    page.wait_for_timeout(250)
    return page.evaluate(_VISIBLE_TIPS)


def test_zoom_swaps_the_aggregate_for_exact_events(browser: Browser, tmp_path: Path) -> None:
    page, errors = _open(browser, _write(tmp_path, "large.html", synthetic_profile(30_000)))
    detail, agg, _ = page.evaluate(_COUNTS, 0)
    assert detail == 0 and 0 < agg <= timeline.DEFAULT_AGG_CAP
    page.evaluate(
        f"""() => {{ const a = ({_API})(0), [s, e] = a.full;
        a.setRange(s + (e - s) * 0.5, s + (e - s) * 0.501); }}"""
    )
    page.wait_for_function(f"() => ({_COUNTS})(0)[0] > 0", polling="raf", timeout=10_000)
    detail, agg, _ = page.evaluate(_COUNTS, 0)
    assert 0 < detail <= timeline.DEFAULT_CAP and agg == 0
    page.screenshot(path=str(artifact("page-timeline-zoomed.png")))
    page.evaluate(f"() => {{ const a = ({_API})(0); a.setRange(...a.full); }}")
    page.wait_for_function(f"() => ({_COUNTS})(0)[1] > 0", polling="raf", timeout=10_000)
    detail, agg, _ = page.evaluate(_COUNTS, 0)
    assert detail == 0 and 0 < agg <= timeline.DEFAULT_AGG_CAP
    assert errors == []
    page.close()


def test_two_dashboards_in_one_page_and_hostile_names_run_nothing(
    browser: Browser, tmp_path: Path
) -> None:
    # One load bundle, then two small outputs, as a notebook places them.
    a = dashboard.fragment(small_profile(hostile=True, samples=True), include_bokeh_js=False)
    b = dashboard.fragment(small_profile(), include_bokeh_js=False)
    path = tmp_path / "two.html"
    path.write_text(
        f'<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>'
        f"<script>{dashboard.loader_js()}</script>"
        f'<div class="output">{a}</div><div class="output">{b}</div></body></html>',
        encoding="utf-8",
    )
    page, errors = _open(browser, path, n=2)
    assert page.evaluate("() => document.querySelectorAll('img').length") == 0
    assert errors == []
    page.screenshot(path=str(artifact("page-two-dashboards.png")), full_page=True)
    page.close()


def test_dashboards_before_the_loader_draw_once_it_runs(browser: Browser, tmp_path: Path) -> None:
    """A saved notebook can render a dashboard before the output that loads BokehJS."""
    a = dashboard.fragment(small_profile(), include_bokeh_js=False)
    path = tmp_path / "late.html"
    path.write_text(
        f'<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>{a}'
        f"<script>{dashboard.loader_js()}</script></body></html>",
        encoding="utf-8",
    )
    page, errors = _open(browser, path)
    assert page.locator(".nbp-needs-bokeh").count() == 0
    assert errors == []
    page.close()


def test_without_bokehjs_the_output_says_how_to_draw_it(browser: Browser, tmp_path: Path) -> None:
    a = dashboard.fragment(small_profile(), include_bokeh_js=False)
    path = tmp_path / "cleared.html"
    path.write_text(
        f'<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>{a}</body></html>',
        encoding="utf-8",
    )
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    note = page.locator(".nbp-needs-bokeh")
    note.wait_for(timeout=15_000)
    assert "%reload_ext nbprof" in note.inner_text()
    assert page.locator(".nbp-verdict h2").is_visible()  # the diagnosis reads regardless
    # ...and it draws as soon as a loader runs (what %reload_ext nbprof publishes).
    page.add_script_tag(content=dashboard.loader_js())
    page.wait_for_selector(".nbp-timeline[data-nbp-ready]", timeout=30_000)
    assert note.count() == 0
    assert errors == []
    page.close()


def test_nbconvert_html_export_keeps_the_dashboard(browser: Browser, tmp_path: Path) -> None:
    nbformat = pytest.importorskip("nbformat")
    nbconvert = pytest.importorskip("nbconvert")
    nb = nbformat.v4.new_notebook()
    loader = nbformat.v4.new_code_cell("%load_ext nbprof")
    loader.outputs = [nbformat.v4.new_output("display_data", data=dashboard.loader_bundle())]
    nb.cells.append(loader)
    for p in (small_profile(hostile=True), small_profile(samples=True)):
        cell = nbformat.v4.new_code_cell("prof")
        html = dashboard.fragment(p, include_bokeh_js=False)
        cell.outputs = [
            nbformat.v4.new_output("display_data", data={"text/html": html, "text/plain": "x"})
        ]
        nb.cells.append(cell)
    body, _ = nbconvert.HTMLExporter().from_notebook_node(nb)
    path = tmp_path / "export.html"
    path.write_text(body, encoding="utf-8")

    # Offline, as on an air-gapped machine: nothing of ours may need the network.
    context = browser.new_context(viewport={"width": 1300, "height": 900})
    context.route("http*://**", lambda route: route.abort())
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    page.wait_for_function(
        "() => document.querySelectorAll('.nbp-timeline[data-nbp-ready]').length === 2",
        timeout=60_000,
    )
    assert errors == []
    page.screenshot(path=str(artifact("page-nbconvert-export.png")))
    context.close()

    # Where scripts never run (untrusted or script-free viewers) the diagnosis still reads.
    static = browser.new_context(java_script_enabled=False)
    page = static.new_page()
    page.goto(path.as_uri())
    verdicts = page.locator(".nbp-verdict").all_inner_texts()
    assert len(verdicts) == 2 and "Copies dominate (<img src=x onerror=alert(1)>)." in verdicts[0]
    assert "91.5" in page.locator(".nbp-card").first.inner_text()
    static.close()


def test_hover_shows_hostile_kernel_names_as_text(browser: Browser, tmp_path: Path) -> None:
    page, errors = _open(browser, _write(tmp_path, "hostile.html", small_profile(hostile=True)))
    tips = _hover(page, *_event_point(page, HOSTILE[0], "GPU"))
    assert any(HOSTILE[0] in t for t, _, _ in tips), tips
    assert page.evaluate("() => document.querySelectorAll('img').length") == 0
    assert errors == []
    page.close()


def test_one_bounded_tooltip_per_point_with_a_short_name(browser: Browser, tmp_path: Path) -> None:
    p = small_profile()
    long = "void ns::kernel<" + ", ".join(f"ns::Functor{i}<float>" for i in range(40)) + ">(int)"
    k = p.trace.kernels  # text is a Categorical: the new name is added first
    k["name"] = k["name"].cat.add_categories([long])
    p.trace.kernels.loc[0, "name"] = long
    # A gap over the kernel at 400-405 µs and beyond: hovered where no event is drawn.
    p.diagnosis.idle_gaps.loc[0, ["start", "end"]] = [395.0, 750.0]
    page, errors = _open(browser, _write(tmp_path, "tips.html", p))
    tips = _hover(page, *_event_point(page, long, "GPU"))
    assert len(tips) == 1, tips
    text, width, height = tips[0]
    assert "kernel<Functor0<…>" in text and long not in text and "grid × block" in text
    assert width <= timeline.TOOLTIP_MAX_PX + 20
    assert height <= timeline.TOOLTIP_MAX_HEIGHT_PX + 20
    page.screenshot(path=str(artifact("page-hover-long-name.png")))
    tips = _hover(page, *_event_point(page, "aten::mm", "main thread"))
    assert len(tips) == 1 and "aten::mm" in tips[0][0], tips
    assert not any(k in tips[0][0] for k in ("grid", "occupancy", "—"))
    assert errors == []
    page.close()


def test_click_pins_details_with_the_launch_linked(browser: Browser, tmp_path: Path) -> None:
    p = small_profile()
    page, errors = _open(browser, _write(tmp_path, "pin.html", p))
    kernel = p.trace.kernels["name"][0]
    x, y = _event_point(page, kernel, "GPU")
    page.mouse.click(x, y)
    pane = page.locator(".nbp-details")
    pane.wait_for(state="visible", timeout=5_000)
    text = pane.inner_text()
    assert "264 × 128" in text and "50 %" in text and "aten::mm" in text
    assert "launch call" in text and "cudaLaunchKernel" in text
    linked = page.evaluate(
        f"""() => {{ const a = ({_API})(0);
        return [a.doc.get_model_by_name('nbprof-pinned').get_length(),
                a.doc.get_model_by_name('nbprof-link').get_length()]; }}"""
    )
    assert linked == [2, 1], "the kernel and its launch call outlined, a line between them"
    page.screenshot(path=str(artifact("page-pinned.png")))
    page.keyboard.press("Escape")
    pane.wait_for(state="hidden", timeout=5_000)
    assert errors == []
    page.close()


def test_search_highlights_and_steps_through_matches(browser: Browser, tmp_path: Path) -> None:
    page, errors = _open(browser, _write(tmp_path, "search.html", synthetic_profile(5_000)))
    box = page.locator(".nbp-search input")
    box.fill("gemm")
    page.wait_for_function(f"() => ({_COUNTS})(0)[2] > 0", timeout=10_000)
    count = page.locator(".nbp-search-count").inner_text()
    assert "matches" in count and int(count.split()[0].replace(",", "")) > 10
    before = page.evaluate(_RANGE, 0)
    box.press("Enter")
    page.wait_for_function(f"() => ({_COUNTS})(0)[0] > 0", polling="raf", timeout=10_000)
    after = page.evaluate(_RANGE, 0)
    assert after[1] - after[0] < before[1] - before[0], "Enter zooms to the first match"
    assert "of" in page.locator(".nbp-search-count").inner_text()
    assert "gemm" in page.locator(".nbp-details").inner_text().lower()
    page.screenshot(path=str(artifact("page-search.png")))
    assert errors == []
    page.close()


def test_keyboard_zoom_pan_and_reset(browser: Browser, tmp_path: Path) -> None:
    page, errors = _open(browser, _write(tmp_path, "keys.html", synthetic_profile(2_000)))
    page.locator(".nbp-timeline").focus()
    full = page.evaluate(_RANGE, 0)
    page.keyboard.press("w")
    page.keyboard.press("w")
    zoomed = page.evaluate(_RANGE, 0)
    assert zoomed[1] - zoomed[0] == pytest.approx((full[1] - full[0]) * 0.36, rel=1e-6)
    page.keyboard.press("d")
    panned = page.evaluate(_RANGE, 0)
    assert panned[0] > zoomed[0] and panned[1] - panned[0] == pytest.approx(zoomed[1] - zoomed[0])
    page.keyboard.press("s")
    assert page.evaluate(_RANGE, 0)[1] - page.evaluate(_RANGE, 0)[0] > panned[1] - panned[0]
    page.keyboard.press("0")
    assert page.evaluate(_RANGE, 0) == pytest.approx(full)
    assert errors == []
    page.close()


def test_timeline_and_sample_chart_share_their_x_extent(browser: Browser, tmp_path: Path) -> None:
    page, errors = _open(browser, _write(tmp_path, "align.html", small_profile(samples=True)))
    page.wait_for_timeout(300)
    main = _frame(page)
    for name in ("nbprof-samples", "nbprof-overview"):
        other = _frame(page, name)
        assert abs(other["x"] - main["x"]) <= 2, (name, other, main)
        assert abs(other["x"] + other["width"] - main["x"] - main["width"]) <= 2, name
    assert errors == []
    page.close()


def _luminance(rgb: tuple[float, float, float]) -> float:
    def lin(c: float) -> float:
        c /= 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (lin(c) for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: str, b: str) -> float:
    """WCAG contrast ratio of two CSS colours as getComputedStyle gives them (rgb()/#hex)."""

    def parse(c: str) -> tuple[float, float, float]:
        c = c.strip()
        if c.startswith("#"):
            h = c[1:] if len(c) > 4 else "".join(ch * 2 for ch in c[1:4])
            return tuple(int(h[i : i + 2], 16) for i in (0, 2, 4))  # type: ignore[return-value]
        nums = [float(x) for x in c[c.index("(") + 1 : c.index(")")].replace("/", ",").split(",")]
        return nums[0], nums[1], nums[2]

    la, lb = sorted((_luminance(parse(a)), _luminance(parse(b))))
    return (lb + 0.05) / (la + 0.05)


_PLOT_COLOURS = f"""(k) => {{ const a = ({_API})(k);
  return a.doc.roots().filter(f => f.x_range !== undefined).map(f => ({{
    name: f.name, bg: f.background_fill_color,
    labels: [...f.left, ...f.below].filter(m => m.major_label_text_color)
      .map(m => m.major_label_text_color),
    title: f.title ? f.title.text_color : null }})); }}"""


@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
def test_text_is_readable_in_both_themes(browser: Browser, tmp_path: Path, dark: bool) -> None:
    page, errors = _open(
        browser, _write(tmp_path, "theme.html", small_profile(samples=True)), dark=dark
    )
    bg = page.evaluate("() => getComputedStyle(document.querySelector('.nbprof')).backgroundColor")
    for sel in (".nbp-verdict h2", ".nbp-card .nbp-q", ".nbp-basis", ".nbp-kv span"):
        fg = page.evaluate(f"() => getComputedStyle(document.querySelector({sel!r})).color")
        assert contrast(fg, bg) >= 4.5, (sel, fg, bg)
    for plot in page.evaluate(_PLOT_COLOURS, 0):
        for c in plot["labels"]:
            assert contrast(c, plot["bg"]) >= 4.5, (plot["name"], c, plot["bg"])
    assert (_luminance_of(page, bg) < 0.1) == dark
    assert errors == []
    page.close()


def _luminance_of(page: Page, colour: str) -> float:
    c = colour[colour.index("(") + 1 : colour.index(")")].split(",")
    return _luminance((float(c[0]), float(c[1]), float(c[2])))


WIDTHS = (800, 1280, 1920, 2560)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
def test_reads_from_800_to_2560_px(
    browser: Browser, tmp_path: Path, width: int, dark: bool
) -> None:
    path = _write(tmp_path, "wide.html", small_profile(samples=True))
    page, errors = _open(browser, path, width=width, dark=dark)
    main = _frame(page)
    # The plot area takes most of the width and is tall enough to read its lanes.
    assert main["width"] >= 0.6 * (width - 80), main
    assert main["height"] / 5 >= 30, "at least 30 px per lane"
    # No card's value line wraps inside "of 989 peak": its unit stays whole.
    smalls = page.evaluate(
        """() => [...document.querySelectorAll('.nbp-card .nbp-v small')].map(
            e => e.getClientRects().length)"""
    )
    assert all(n == 1 for n in smalls), smalls
    page.screenshot(path=str(artifact(f"page-{width}-{'dark' if dark else 'light'}.png")),
                    full_page=True)  # fmt: skip
    assert errors == []
    page.close()


@pytest.mark.corpus
def test_hover_answers_after_wheel_and_box_zoom_on_eight_ranks(
    browser: Browser, tmp_path: Path, corpus: Path
) -> None:
    from nbprof import load

    page, errors = _open(
        browser,
        _write(tmp_path, "ranks.html", load(corpus / "param__dlrm_kineto_8ranks", job=False)),
    )
    f = _frame(page)
    page.evaluate(f"() => ({_API})(0).doc && document.querySelector('.nbp-root-main')"
                  ".scrollIntoView({block: 'start'})")  # fmt: skip
    f = _frame(page)
    cx, cy = f["x"] + f["width"] * 0.5, f["y"] + 40
    page.mouse.move(cx, cy)
    before = page.evaluate(_RANGE, 0)
    page.keyboard.down("Control")  # the wheel zooms with Ctrl held, else scrolls the page
    page.mouse.wheel(0, -800)
    page.keyboard.up("Control")
    page.wait_for_function(f"(b) => ({_RANGE})(0)[1] - ({_RANGE})(0)[0] < b", arg=before[1] -
                           before[0], timeout=10_000)  # fmt: skip
    page.mouse.move(f["x"] + f["width"] * 0.3, cy)
    page.mouse.down()
    page.mouse.move(f["x"] + f["width"] * 0.6, cy, steps=6)
    page.mouse.up()
    page.wait_for_timeout(400)
    boxed = page.evaluate(_RANGE, 0)
    assert boxed[1] - boxed[0] < before[1] - before[0]
    f = _frame(page)
    seen = 0
    lanes = page.evaluate(f"() => ({_API})(0).doc.get_model_by_name('nbprof-timeline')"
                          ".y_range.start + 0.5")  # fmt: skip
    for j in range(int(lanes)):
        y = f["y"] + f["height"] * (j + 0.5) / lanes
        for i in range(1, 30):
            if _hover(page, f["x"] + f["width"] * i / 30, y):
                seen += 1
                break
        if seen >= 3:
            break
    assert seen >= 3, "tooltips answer on several lanes after wheel and box zoom"
    page.screenshot(path=str(artifact("page-8ranks-zoomed.png")))
    assert errors == []
    page.close()
