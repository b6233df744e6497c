"""The dashboard as a notebook user lives with it, in JupyterLab 4 and headless Chromium.

BokehJS comes once per page (the load bundle) and each dashboard output stays small; a saved
notebook renders again when reopened; an output whose loader was cleared says how to draw
it, and draws once the loader is back; keyboard shortcuts on the timeline are the
timeline's, not JupyterLab's; the dark theme keeps every text readable. Screenshots go to
tests/artifacts/.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from lab_harness import Lab, NotebookUI, artifact, missing_requirements, wait_for
from test_jupyterlab import assert_no_error_outputs, dashboards

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(missing_requirements() is not None, reason=str(missing_requirements())),
]

REPO = Path(__file__).resolve().parents[2]
LOAD_MIME = "application/javascript"  # nbprof's load bundle (dashboard.loader_bundle)
#: The targets of the dashboard's notebook footprint (10k-kernel synthetic trace).
MAX_OUTPUT_BYTES = 250_000
MAX_NOTEBOOK_BYTES = 1_500_000
DASHBOARDS = 5

SETUP = f"""\
import sys
sys.path.insert(0, {str(REPO / "tests")!r})
from views_data import synthetic_profile
prof = synthetic_profile(10_000)
"""


def _drawn(page: Page) -> int:
    return int(
        page.evaluate(
            """() => document.querySelectorAll(
                '.jp-NotebookPanel:not(.lm-mod-hidden) .nbp-timeline[data-nbp-ready]').length"""
        )
    )


def _wait_drawn(page: Page, n: int, timeout_s: float = 90.0) -> None:
    wait_for(lambda: _drawn(page) >= n, timeout_s, f"{n} timelines drawn")


def _outputs(nb: dict) -> list[dict]:
    return [o for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])]


def _sign(lab: Lab, path: Path) -> None:
    """Sign ``path`` with this server's notebook secret, as JupyterLab does on save."""
    import nbformat
    from nbformat.sign import NotebookNotary

    nb = nbformat.read(path, as_version=4)
    NotebookNotary(data_dir=str(lab.server.base / "jupyter_data")).sign(nb)
    nbformat.write(nb, str(path))


def _run_cell(nb: NotebookUI, index: int) -> None:
    cell = nb.cells().nth(index)
    cell.locator(".jp-InputPrompt").click()
    nb.page.keyboard.press("Shift+Enter")
    wait_for(lambda: "*" not in cell.locator(".jp-InputPrompt").inner_text(), 60, "the cell to run")


def test_bokehjs_once_small_outputs_reopen_and_a_cleared_loader(lab: Lab) -> None:
    page = lab.page
    cells = ["%load_ext nbprof", SETUP, *(["prof.show()"] * DASHBOARDS)]
    nb = lab.notebook("five.ipynb", cells)
    nb.run_all()
    assert_no_error_outputs(nb)
    _wait_drawn(page, DASHBOARDS)

    saved_path = lab.root / "five.ipynb"
    raw = json.loads(saved_path.read_text(encoding="utf-8"))
    outs = _outputs(raw)
    loaders = [o for o in outs if LOAD_MIME in o.get("data", {})]
    # %load_ext loads BokehJS, once; no dashboard carries it.
    assert len(loaders) == 1, [list(o.get("data", {})) for o in outs]
    htmls = [o["data"]["text/html"] for o in outs if "nbprof" in str(o.get("data", {}))
             and "text/html" in o.get("data", {})]  # fmt: skip
    assert len(htmls) == DASHBOARDS
    sizes = [len("".join(h).encode()) for h in htmls]
    assert all(s <= MAX_OUTPUT_BYTES for s in sizes), sizes
    total = saved_path.stat().st_size
    assert total <= MAX_NOTEBOOK_BYTES, total
    (artifact("notebook-sizes.json")).write_text(
        json.dumps({"dashboard_output_bytes": sizes, "notebook_bytes": total}), encoding="utf-8"
    )
    lab.errors.assert_none()

    # Reopened (signed when saved, so trusted): every timeline draws again.
    again = lab.open("five.ipynb")
    _wait_drawn(page, DASHBOARDS)
    assert again.page.locator(".nbp-needs-bokeh").count() == 0

    # The loaders cleared (a user's Clear Outputs on those cells): each dashboard says how
    # to draw it...
    for c in raw["cells"]:
        c["outputs"] = [o for o in c.get("outputs", []) if LOAD_MIME not in o.get("data", {})]
    raw["cells"].append(
        {"cell_type": "code", "metadata": {}, "source": "%reload_ext nbprof", "outputs": [],
         "execution_count": None, "id": "reload-cell"}
    )  # fmt: skip
    cleared = lab.root / "cleared.ipynb"
    cleared.write_text(json.dumps(raw), encoding="utf-8")
    _sign(lab, cleared)
    nb2 = lab.open("cleared.ipynb")
    notes = nb2.page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .nbp-needs-bokeh")
    wait_for(lambda: notes.count() == DASHBOARDS, 30, "the 'how to draw' notes")
    assert "%reload_ext nbprof" in notes.first.inner_text()
    shot = dashboards(nb2.output_area(2)).first
    shot.scroll_into_view_if_needed()
    shot.screenshot(path=str(artifact("notebook-loader-cleared.png")))
    # ...and draws once the user runs what it says.
    _run_cell(nb2, len(cells))
    _wait_drawn(page, DASHBOARDS)
    assert notes.count() == 0
    lab.errors.assert_none()


def test_timeline_keys_are_the_timeline_s_not_jupyterlab_s(lab: Lab) -> None:
    page = lab.page
    nb = lab.notebook("keys.ipynb", [SETUP, "prof.show()"])
    nb.run_all()
    _wait_drawn(page, 1)
    n_cells = nb.cells().count()
    tl = nb.output_area(1).locator(".nbp-timeline")
    tl.scroll_into_view_if_needed()
    box = tl.locator(".nbp-root-main").bounding_box()
    assert box is not None
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    rng = "(e) => { const r = e._nbprof.doc.get_model_by_name('nbprof-timeline').x_range;"
    rng += " return r.end - r.start; }"
    before = tl.evaluate(rng)
    for key in ("w", "w", "a", "s", "d"):
        page.keyboard.press(key)
    page.keyboard.press("w")
    after = tl.evaluate(rng)
    assert after < before, "W/S zoom the timeline"
    # In JupyterLab's command mode A inserts a cell above and S saves: not here.
    assert nb.cells().count() == n_cells
    page.keyboard.press("0")
    assert tl.evaluate(rng) == pytest.approx(before)
    lab.errors.assert_none()


def _themes_file(lab: Lab) -> Path:
    return (
        lab.server.base
        / "jupyter_config"
        / "lab"
        / "user-settings"
        / "@jupyterlab"
        / "apputils-extension"
        / "themes.jupyterlab-settings"
    )


def test_dark_theme_keeps_panel_timeline_and_samples_readable(lab: Lab) -> None:
    from test_views_browser import contrast

    settings = _themes_file(lab)
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps({"theme": "JupyterLab Dark"}))
    try:
        page = lab.page
        cells = [
            "import sys\n"
            f"sys.path.insert(0, {str(REPO / 'tests')!r})\n"
            "from views_data import small_profile\n"
            "small_profile(samples=True).show()"
        ]
        nb = lab.notebook("dark.ipynb", cells)
        assert page.evaluate("() => document.body.dataset.jpThemeLight") == "false"
        nb.run_all()
        _wait_drawn(page, 1)
        dash = dashboards(nb.output_area(0)).first
        bg = dash.evaluate("e => getComputedStyle(e).backgroundColor")
        for sel in (".nbp-verdict h2", ".nbp-card .nbp-q", ".nbp-basis", ".nbp-kv span",
                    ".nbp-legend", ".nbp-search input"):  # fmt: skip
            fg = dash.locator(sel).first.evaluate("e => getComputedStyle(e).color")
            assert contrast(fg, bg) >= 4.5, (sel, fg, bg)
        colours = dash.locator(".nbp-timeline").evaluate(
            """e => e._nbprof.doc.roots().filter(f => f.x_range !== undefined).map(f => [
                f.name, f.background_fill_color,
                [...f.left, ...f.below].filter(m => m.major_label_text_color)
                    .map(m => m.major_label_text_color),
                f.title ? f.title.text_color : null])"""
        )
        names = {c[0] for c in colours}
        assert {"nbprof-timeline", "nbprof-samples", "nbprof-overview"} <= names
        for name, plot_bg, labels, title in colours:
            assert contrast(plot_bg, bg) < 1.5, f"{name}: plot background is not the page's"
            for c in [*labels, title]:
                if c:
                    assert contrast(c, plot_bg) >= 4.5, (name, c, plot_bg)
        dash.scroll_into_view_if_needed()
        page.set_viewport_size({"width": 1400, "height": 2200})
        dash.screenshot(path=str(artifact("notebook-dark.png")))
        lab.errors.assert_none()
    finally:
        settings.unlink()
