"""The live gauge as a user watches it: JupyterLab in headless Chromium, while cells run.

The kernel's NVML is the emulated C library of ``tests/emulated_nvml.py`` beneath the real
pynvml (an H100 whose readings move on a 3 s wave), so the magic, the sampler thread, the
widget's comm and the page all run as on a GPU machine. Each test reads the gauge's
rendered numbers from the page repeatedly while a cell is busy, and records when the page
received each update (a MutationObserver, on the page's own clock).
"""

from __future__ import annotations

import itertools
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from lab_harness import Lab, NotebookUI, artifact, missing_requirements

if TYPE_CHECKING:
    from playwright.sync_api import Locator, Page

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(missing_requirements() is not None, reason=str(missing_requirements())),
]

TESTS = Path(__file__).resolve().parents[1]

#: The first cell: the emulated driver beneath pynvml, torch imported before any timing.
SETUP = f"""\
import sys, time
sys.path.insert(0, {str(TESTS)!r})
import pynvml, torch
import emulated_nvml as em
driver = em.Driver([em.h100(0, script=em.moving)])
driver.install(pynvml)
%load_ext nbprof
"""
#: The same with an A100 beside the H100: a GPU whose GPM panels say why they are empty.
SETUP_TWO = SETUP.replace(
    "em.h100(0, script=em.moving)]", "em.h100(0, script=em.moving), em.a100(1)]"
)

BUSY = """\
t0 = time.time()
while time.time() - t0 < {seconds}:
    torch.ones(64).sum()
    time.sleep(0.05)
"""

#: Records, on the page's clock, each time a gauge picture is put in the page (ipywidgets'
#: HTML view replaces its content on every value change).
_OBSERVE_JS = """
() => {
    window.__gauge = [];
    const seen = new WeakSet();
    const obs = new MutationObserver(() => {
        for (const g of document.querySelectorAll('.nbprof-gauge')) {
            if (seen.has(g)) continue;
            seen.add(g);
            const v = g.querySelector('.nbg-value[data-metric="util_gpu"]');
            window.__gauge.push({t: performance.now(), util: v ? v.textContent : null});
        }
    });
    obs.observe(document.body, {childList: true, subtree: true});
}
"""

_READ_JS = """
(root) => {
    const g = root.querySelector('.nbprof-gauge');
    if (!g) return null;
    const values = {};
    for (const v of g.querySelectorAll('.nbg-value')) values[v.dataset.metric] = v.textContent;
    const points = {};
    for (const p of g.querySelectorAll('.nbg-panel')) {
        const svg = p.querySelector('svg');
        const m = p.querySelector('.nbg-value').dataset.metric;
        if (svg) points[m] = Number(svg.dataset.points);
    }
    const clock = g.querySelector('.nbg-clock');
    return {values, points, elapsed: Number(g.dataset.elapsedS),
            clock: clock ? clock.textContent : '', state: g.dataset.state};
}
"""


def start_run_all(nb: NotebookUI) -> None:
    """Run > Run All Cells without waiting: the test watches the page while cells run."""
    nb._click_menu("Run", "Run All Cells")


def wait_run_over(nb: NotebookUI, timeout_ms: float = 150_000) -> None:
    nb.page.wait_for_function(
        """() => {
            const prompts = [...document.querySelectorAll(
                '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-CodeCell '
                + '.jp-InputPrompt')].map(p => (p.textContent || '').trim());
            return prompts.length > 0 && !prompts.some(p => p.includes('*'))
                && prompts.every(p => /\\[\\d+\\]/.test(p));
        }""",
        timeout=timeout_ms,
        polling=250,
    )
    nb.wait_kernel_idle(timeout_ms)


def read_gauge(page: Page, output: Locator) -> dict[str, Any] | None:
    handle = output.element_handle()
    return page.evaluate(_READ_JS, handle) if handle is not None else None


def watch(
    page: Page, output: Locator, until: Any, timeout_s: float = 60.0, every_s: float = 0.2
) -> list[dict[str, Any]]:
    """Read the gauge in ``output`` every ``every_s`` until ``until()`` holds."""
    readings: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not until():
        r = read_gauge(page, output)
        if r is not None:
            readings.append(r)
        page.wait_for_timeout(every_s * 1000)
    return readings


def updates(page: Page) -> list[dict[str, Any]]:
    return list(page.evaluate("() => window.__gauge || []"))


def gaps_s(events: list[dict[str, Any]]) -> list[float]:
    t = [e["t"] / 1000 for e in events]
    return [b - a for a, b in itertools.pairwise(t)]


def assert_live(readings: list[dict[str, Any]]) -> None:
    """At least 5 readings; the numbers change; the history grows; the clock runs."""
    assert len(readings) >= 5, readings
    utils = [r["values"]["util_gpu"] for r in readings]
    assert len(set(utils)) >= 3, f"nvidia-smi's number did not move: {utils}"
    sm = [r["values"]["sm_util"] for r in readings]
    assert len(set(sm)) >= 3, f"SM activity did not move: {sm}"
    pts = [r["points"].get("util_gpu", 0) for r in readings]
    assert pts[-1] > pts[0] and pts == sorted(pts), f"history did not grow: {pts}"
    elapsed = [r["elapsed"] for r in readings]
    assert elapsed[-1] - elapsed[0] >= 2.0 and elapsed == sorted(elapsed), elapsed
    assert re.fullmatch(r"\d+:\d\d elapsed", readings[-1]["clock"]), readings[-1]["clock"]


def shoot(page: Page, locator: Locator, name: str) -> Path:
    path = artifact(name)
    locator.scroll_into_view_if_needed()
    locator.screenshot(path=str(path))
    return path


# -- tests ----------------------------------------------------------------------------------


def test_gpuprof_gauge_moves_while_the_cell_runs_then_the_dashboard_replaces_it(
    lab: Lab,
) -> None:
    nb = lab.notebook("gauge-gpuprof.ipynb", [SETUP, "%%gpuprof\n" + BUSY.format(seconds=5)])
    page = lab.page
    page.evaluate(_OBSERVE_JS)
    start_run_all(nb)
    out = nb.output_area(1)
    out.locator(".nbprof-gauge").first.wait_for(timeout=120_000)
    first_shot = False

    def over() -> bool:
        nonlocal first_shot
        if not first_shot and out.locator(".nbprof-gauge").count():
            r = read_gauge(page, out)
            if r and r["elapsed"] >= 2.5:
                shoot(page, out, "gauge-gpuprof-live.png")
                first_shot = True
        return out.locator("div.nbprof").count() > 0

    readings = watch(page, out, over)
    wait_run_over(nb)
    assert_live([r for r in readings if r["state"] == "live"])
    # The dashboard took the gauge's place: one output, no gauge left behind.
    assert out.locator(".jp-OutputArea-child").count() == 1
    assert out.locator("div.nbprof").count() == 1
    assert out.locator(".nbprof-gauge").count() == 0
    nb.save()
    assert nb.error_outputs() == []
    # Updated at the sampling period (0.25 s), not every other one.
    events = [e for e in updates(page) if e["util"] is not None]
    gaps = sorted(gaps_s(events))
    median = gaps[len(gaps) // 2]
    print(f"gpuprof gauge: {len(events)} updates, median gap {median:.3f} s, max {gaps[-1]:.3f} s")
    assert median <= 0.35, gaps
    lab.errors.assert_none()


def test_standalone_gauge_keeps_moving_beside_other_cells(lab: Lab) -> None:
    cells = [
        SETUP,
        "import nbprof\ng = nbprof.gauge(period_s=0.25)\ng",
        BUSY.format(seconds=4),
        "%%gpuprof --no-gauge\n" + BUSY.format(seconds=4),
        "g.stop()",
    ]
    nb = lab.notebook("gauge-alone.ipynb", cells)
    page = lab.page
    page.evaluate(_OBSERVE_JS)
    start_run_all(nb)
    out = nb.output_area(1)
    out.locator(".nbprof-gauge").first.wait_for(timeout=120_000)

    def stopped() -> bool:
        r = read_gauge(page, out)
        return r is not None and r["state"] == "stopped"

    readings = watch(page, out, stopped, timeout_s=90)
    wait_run_over(nb)
    assert_live([r for r in readings if r["state"] == "live"][:25])
    final = read_gauge(page, out)
    assert final is not None and final["state"] == "stopped"
    shoot(page, out, "gauge-alone-stopped.png")
    events = [e for e in updates(page) if e["util"] is not None]
    gaps = gaps_s(events)
    print(f"standalone gauge: {len(events)} updates, largest gaps {sorted(gaps)[-3:]}")
    # It kept moving through the other cells, the gauge-less %%gpuprof one included
    # (profiler start and stop, the dashboard's build). A quiet machine shows gaps under
    # 0.7 s; a busy shared CI box stretches some to ~3 s; the freeze to catch was ~7 s.
    assert max(gaps) < 5.0, sorted(gaps)[-5:]
    nb.save()
    assert nb.error_outputs() == []
    lab.errors.assert_none()


#: WCAG 2 contrast of every piece of text in the gauge against what is painted behind it
#: (computed colours; translucent text and backgrounds composited as the browser does).
_CONTRAST_JS = """
(root) => {
    const parse = (c) => {
        const m = c.match(/rgba?\\(([^)]+)\\)/);
        if (!m) return [0, 0, 0, 0];
        const p = m[1].split(/[ ,\\/]+/).filter(Boolean).map(Number);
        return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
    };
    const over = (top, under) => {
        const a = top[3] + under[3] * (1 - top[3]);
        if (a === 0) return [0, 0, 0, 0];
        const mix = (i) => (top[i] * top[3] + under[i] * under[3] * (1 - top[3])) / a;
        return [mix(0), mix(1), mix(2), a];
    };
    const background = (el) => {
        const layers = [];
        for (let e = el; e; e = e.parentElement) {
            const c = parse(getComputedStyle(e).backgroundColor);
            if (c[3] > 0) layers.push(c);
            if (c[3] >= 1) break;
        }
        let bg = [255, 255, 255, 1];  // the canvas, under everything
        for (const c of layers.reverse()) bg = over(c, bg);
        return bg;
    };
    const lum = (c) => {
        const f = (v) => {
            v /= 255;
            return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
        };
        return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]);
    };
    const g = root.querySelector('.nbprof-gauge');
    const out = [];
    for (const el of g.querySelectorAll('*')) {
        const own = [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
        if (!own || el.closest('svg')) continue;
        const st = getComputedStyle(el);
        const bg = background(el);
        const fg = over(parse(st.color), bg);
        const [a, b] = [lum(fg), lum(bg)];
        const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
        const size = parseFloat(st.fontSize);
        const large = size >= 24 || (size >= 18.66 && Number(st.fontWeight) >= 700);
        out.push({text: el.textContent.trim().slice(0, 40), ratio, need: large ? 3 : 4.5,
                  color: st.color, bg: `rgb(${bg.slice(0, 3).map(Math.round).join(',')})`});
    }
    return {items: out, surface: lum(background(g))};
}
"""


def contrast(page: Page, output: Locator) -> dict[str, Any]:
    return page.evaluate(_CONTRAST_JS, output.element_handle())


def use_theme(page: Page, theme: str, light: bool) -> None:
    """Settings > Theme > ``theme``, as a user switches it."""
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile("^Settings$")).click()
    label = page.locator(".lm-Menu-itemLabel", has_text=re.compile("^Theme$"))
    page.locator(".lm-Menu-item", has=label).hover()
    pick = page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{re.escape(theme)}$"))
    page.locator(".lm-Menu-item", has=pick).click()
    want = "true" if light else "false"
    page.wait_for_function(f"() => document.body.dataset.jpThemeLight === '{want}'")
    page.wait_for_timeout(500)  # the theme's stylesheet applied


def assert_readable(page: Page, output: Locator) -> dict[str, Any]:
    got = contrast(page, output)
    items = got["items"]
    assert len(items) >= 20, items  # labels, numbers, bases, notes, memory line
    bad = [i for i in items if i["ratio"] < i["need"]]
    assert not bad, bad
    return got


def test_gauge_is_readable_in_the_light_and_dark_themes(lab: Lab) -> None:
    cells = [
        SETUP_TWO,
        "import nbprof\ng = nbprof.gauge(period_s=0.25)\ng",
        "time.sleep(4)\ng.stop()",
    ]
    nb = lab.notebook("gauge-themes.ipynb", cells)
    page = lab.page
    nb.run_all()
    assert nb.error_outputs() == []
    out = nb.output_area(1)
    gauge = out.locator(".nbprof-gauge")
    assert gauge.count() == 1
    # The A100's GPM panels say why they are empty; the H100's are drawn with the gap.
    assert gauge.locator(".nbg-unavailable").count() == 3
    assert "this one is Ampere" in (gauge.text_content() or "")
    assert gauge.locator(".nbg-gap-area").count() >= 3
    light = assert_readable(page, out)
    assert light["surface"] > 0.8  # a light card on the light theme
    shoot(page, out, "gauge-light.png")
    try:
        use_theme(page, "JupyterLab Dark", light=False)
        dark = assert_readable(page, out)
        assert dark["surface"] < 0.05, dark["surface"]  # the card follows the theme
        # The big numbers are the theme's strongest text, not a grey that looks disabled.
        values = [i for i in dark["items"] if re.fullmatch(r"[\d.]+%|—", i["text"])]
        assert values and min(i["ratio"] for i in values) >= 7, values
        shoot(page, out, "gauge-dark.png")
    finally:
        use_theme(page, "JupyterLab Light", light=True)
    lab.errors.assert_none()
