"""nbprof's notebook output as a user sees it: JupyterLab 4 in headless Chromium.

Each test writes a notebook, runs it with Run > Run All Cells, and checks what rendered:
the diagnosis panel's verdict, the Bokeh timeline's canvas, that zooming moves the visible
range, that trace-supplied names stay text, and that the page raised no errors.
Screenshots go to tests/artifacts/.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from lab_harness import (
    Lab,
    NotebookUI,
    artifact,
    bokeh_plots,
    missing_requirements,
    plot_named,
    timeline_lanes,
    tooltip_texts,
    wait_for,
)

if TYPE_CHECKING:
    from playwright.sync_api import Locator, Page

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(missing_requirements() is not None, reason=str(missing_requirements())),
]

REPO = Path(__file__).resolve().parents[2]
#: A modest real trace (A100 AlexNet, 25 kB gzipped): quick to load, a few hundred kernels.
CORPUS_TRACE = "hta__critical_path_alexnet__benchmark_result_2869224_1695835535_trace.json.gz"
RENDER_TIMEOUT_S = 30.0

#: Names an attacker could plant in a trace: each would run script if inserted as HTML.
HOSTILE = (
    "<img src=x onerror=window.__xss=1>",
    "<script>window.__xss=1</script>",
    '"><svg onload=window.__xss=1>',
)

GPUPROF_CELL = """\
%%gpuprof -o run
import torch
a = torch.randn(256, 256)
for _ in range(8):
    a = torch.tanh(a @ a / 16)
"""


# -- checks shared by the tests ------------------------------------------------------
def dashboards(output: Locator) -> Locator:
    return output.locator("div.nbprof")


def assert_no_error_outputs(nb: NotebookUI) -> None:
    assert nb.error_outputs() == [], "a cell raised"
    counts = nb.execution_counts()
    assert all(c.startswith("[") and c[1:-2].isdigit() for c in counts), f"not all ran: {counts}"


def assert_panel(dash: Locator, verdict: str | None = None) -> str:
    """The diagnosis panel's headline is shown (and says ``verdict`` when given)."""
    headline = dash.locator(".nbp-verdict h2")
    headline.scroll_into_view_if_needed()
    assert headline.is_visible()
    text = headline.inner_text().strip()
    assert text, "empty verdict headline"
    if verdict is not None:
        assert text == verdict
    return text


def assert_timeline(page: Page, output: Locator) -> dict[str, Any]:
    """The Bokeh timeline inside ``output`` rendered into a canvas of nonzero size."""
    output.locator(".nbp-timeline").first.scroll_into_view_if_needed()

    def drawn() -> bool:
        plots = [p for p in bokeh_plots(page, output) if p["name"] == "nbprof-timeline"]
        return bool(plots) and bool(plots[0]["canvas"]) and plots[0]["canvas"]["width"] > 0

    wait_for(drawn, RENDER_TIMEOUT_S, "the timeline's canvas")
    plot = plot_named(page, "nbprof-timeline", output)
    assert plot["canvas"]["height"] > 0 and plot["renderers"] > 0
    assert plot["x_end"] > plot["x_start"]
    # The same canvas as the DOM has it (Playwright's CSS engine pierces Bokeh's shadow roots).
    box = output.locator(".nbp-timeline canvas").first.bounding_box()
    assert box is not None and box["width"] > 0 and box["height"] > 0
    return plot


def _frame_point(plot: dict[str, Any], fx: float, fy: float = 0.5) -> tuple[float, float]:
    """Page coordinates of a point in the plot's data frame (fractions of its size)."""
    c, f = plot["canvas"], plot["frame"]
    return c["x"] + f["x"] + f["width"] * fx, c["y"] + f["y"] + f["height"] * fy


def assert_zooms(page: Page, output: Locator) -> None:
    """Clicked into, a wheel turn over the timeline zooms in about the cursor; a drag zooms
    to the box."""
    output.locator(".nbp-timeline").first.scroll_into_view_if_needed()
    before = plot_named(page, "nbprof-timeline", output)
    assert before["active_scroll"] == "WheelZoomTool", before["tools"]
    page.mouse.click(*_frame_point(before, 0.5))
    page.mouse.wheel(0, -600)

    def changed(ref: dict[str, Any]) -> bool:
        now = plot_named(page, "nbprof-timeline", output)
        return (now["x_start"], now["x_end"]) != (ref["x_start"], ref["x_end"])

    wait_for(lambda: changed(before), RENDER_TIMEOUT_S, "the wheel to change the x range")
    wheeled = plot_named(page, "nbprof-timeline", output)
    assert wheeled["x_end"] - wheeled["x_start"] < before["x_end"] - before["x_start"]
    assert before["x_start"] <= wheeled["x_start"] < wheeled["x_end"] <= before["x_end"]

    # Box zoom (the active drag): drag over the middle fifth of the frame, from coordinates
    # read just before (a loaded machine may still be laying the page out). A drag that a
    # busy page dropped is tried once more; a box zoom that never works still fails.
    for attempt in range(2):
        page.evaluate("() => new Promise(r => requestAnimationFrame(() => r(null)))")
        now = plot_named(page, "nbprof-timeline", output)
        y = _frame_point(now, 0.4, 0.5)[1]
        page.mouse.move(_frame_point(now, 0.4)[0], y)
        page.mouse.down()
        page.wait_for_timeout(50)
        page.mouse.move(_frame_point(now, 0.6)[0], y, steps=12)
        page.mouse.up()
        try:
            wait_for(lambda: changed(wheeled), RENDER_TIMEOUT_S / 2, "the box zoom")
            break
        except TimeoutError as e:
            page.screenshot(path=str(artifact(f"box-zoom-timeout-{attempt}.png")))
            if attempt == 1:
                raise TimeoutError(f"{e}; dragged over {_frame_point(now, 0.4)} in {now}") from e
    boxed = plot_named(page, "nbprof-timeline", output)
    span = wheeled["x_end"] - wheeled["x_start"]
    assert boxed["x_start"] == pytest.approx(
        wheeled["x_start"] + 0.4 * span, rel=0, abs=0.02 * span
    )
    assert boxed["x_end"] == pytest.approx(wheeled["x_start"] + 0.6 * span, rel=0, abs=0.02 * span)


def shoot(page: Page, locator: Locator, name: str) -> Path:
    """Screenshot one output into tests/artifacts/, growing the window to fit it whole
    (JupyterLab scrolls the notebook inside a fixed-size page, so a tall element would
    otherwise come out clipped)."""
    path = artifact(name)
    size = page.viewport_size or {"width": 1400, "height": 1000}
    box = locator.bounding_box()
    if box is not None and box["height"] + 200 > size["height"]:
        page.set_viewport_size({"width": size["width"], "height": int(box["height"]) + 250})
    try:
        locator.scroll_into_view_if_needed()
        page.evaluate("() => new Promise(r => requestAnimationFrame(() => r(null)))")
        locator.screenshot(path=str(path))
    finally:
        page.set_viewport_size(size)
    return path


def hover_lanes(page: Page, output: Locator, labels: tuple[str, ...]) -> list[str]:
    """Hover along the timeline lanes whose label starts with one of ``labels``; return
    the tooltip texts seen."""
    output.locator(".nbp-timeline").first.scroll_into_view_if_needed()
    seen: list[str] = []
    for lane in timeline_lanes(page, output, "nbprof-timeline"):
        if not lane["label"].startswith(labels):
            continue
        for i in range(1, 20):
            page.mouse.move(lane["x0"] + (lane["x1"] - lane["x0"]) * i / 20, lane["y"])
            seen += tooltip_texts(page)
    page.mouse.move(0, 0)
    return seen


# -- tests ----------------------------------------------------------------------------
@pytest.mark.corpus
def test_gpuprof_and_a_corpus_trace_render_and_zoom(lab: Lab, corpus_or_none: Path | None) -> None:
    cells: list[str] = ["%load_ext nbprof", GPUPROF_CELL]
    trace = corpus_or_none / CORPUS_TRACE if corpus_or_none else None
    if trace is not None and trace.exists():
        cells.append(f"import nbprof\nnbprof.load({str(trace)!r}).show()")
    else:
        trace = None
    nb = lab.notebook("dashboard.ipynb", cells)
    nb.run_all()
    assert_no_error_outputs(nb)

    # %%gpuprof on CPU torch: the dashboard says there was no GPU, and still draws the run.
    out = nb.output_area(1)
    assert dashboards(out).count() == 1
    assert_panel(dashboards(out))
    from nbprof.capture import NO_GPU_NOTE

    assert NO_GPU_NOTE in (dashboards(out).text_content() or "")
    assert_timeline(lab.page, out)
    shoot(lab.page, out, "gpuprof-cpu.png")
    assert_zooms(lab.page, out)

    if trace is None:
        lab.errors.assert_none()
        pytest.skip("trace corpus not found: only the %%gpuprof dashboard was checked")

    import nbprof

    expected = nbprof.load(trace).diagnosis.verdict
    out = nb.output_area(2)
    assert dashboards(out).count() == 1
    assert_panel(dashboards(out), verdict=expected.summary or None)
    plot = assert_timeline(lab.page, out)
    assert plot["x_end"] > plot["x_start"]
    shoot(lab.page, out, "dashboard.png")
    assert_zooms(lab.page, out)
    shoot(lab.page, out, "dashboard-zoomed.png")
    lab.errors.assert_none()


def _hostile_trace(path: Path) -> Path:
    """A tiny Kineto trace whose op, kernel, annotation and thread names are HTML/JS."""
    base = 1_700_000_000_000_000.0
    pid, tid = 100, 100
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": HOSTILE[1]}},
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": HOSTILE[0],
            "pid": pid,
            "tid": tid,
            "ts": base,
            "dur": 400.0,
            "args": {},
        },
    ]
    corr = 1000
    for i, name in enumerate(HOSTILE * 2):
        t = 10.0 + 60.0 * i
        corr += 1
        events += [
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": name,
                "pid": pid,
                "tid": tid,
                "ts": base + t,
                "dur": 20.0,
                "args": {"External id": i + 1},
            },
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": pid,
                "tid": tid,
                "ts": base + t + 2,
                "dur": 5.0,
                "args": {"correlation": corr, "External id": i + 1},
            },
            {
                "ph": "X",
                "cat": "kernel",
                "name": name,
                "pid": 0,
                "tid": 7,
                "ts": base + t + 10,
                "dur": 40.0,
                "args": {
                    "device": 0,
                    "stream": 7,
                    "correlation": corr,
                    "External id": i + 1,
                    "grid": [264, 1, 1],
                    "block": [128, 1, 1],
                    "registers per thread": 32,
                    "shared memory": 0,
                    "est. achieved occupancy %": 50,
                },
            },
        ]
    doc = {
        "schemaVersion": 1,
        "deviceProperties": [
            {
                "id": 0,
                "name": "NVIDIA H100 80GB HBM3",
                "totalGlobalMem": 85_000_000_000,
                "computeMajor": 9,
                "computeMinor": 0,
                "numSms": 132,
                "maxThreadsPerBlock": 1024,
            }
        ],
        "traceEvents": events,
    }
    path.write_text(json.dumps(doc))
    return path


_INJECTED_JS = """
() => {
    // Elements a hostile name would have created had it been inserted as HTML, searched
    // also inside (open) shadow roots. Bokeh's own scripts carry the names as string data,
    // so a script counts only when its whole text is a payload.
    const found = [];
    const visit = (root) => {
        for (const el of root.querySelectorAll('*')) {
            const tag = el.tagName.toLowerCase();
            if (tag === 'img' && el.getAttribute('src') === 'x') found.push('img src=x');
            if (tag === 'script' && (el.textContent || '').trim() === 'window.__xss=1')
                found.push('script');
            for (const a of el.attributes) {
                if (a.name.startsWith('on') && a.value.includes('__xss'))
                    found.push(tag + ' ' + a.name);
            }
            if (el.shadowRoot) visit(el.shadowRoot);
        }
    };
    visit(document);
    return found;
}
"""


def test_hostile_names_stay_text(lab: Lab) -> None:
    _hostile_trace(lab.root / "hostile.json")
    record = "\n".join(
        f"    with torch.profiler.record_function({name!r}):\n        torch.ones(64) * 2"
        for name in HOSTILE
    )
    nb = lab.notebook(
        "hostile.ipynb",
        [
            "import nbprof\nnbprof.load('hostile.json').show()",
            "%load_ext nbprof",
            f"%%gpuprof\nimport torch\nif True:\n{record}",
        ],
    )
    nb.run_all()
    assert_no_error_outputs(nb)
    page = lab.page

    # A saved trace: names in the panel (top kernels table) and in the timeline's tooltips.
    out = nb.output_area(0)
    assert_timeline(page, out)
    text = dashboards(out).text_content() or ""
    for name in HOSTILE:
        assert name in text, f"{name!r} not shown as text in the panel"
    tips = "\n".join(hover_lanes(page, out, ("annotations", "GPU")))
    for name in HOSTILE:
        assert name in tips, f"{name!r} not shown as text in a tooltip"
    shoot(page, out, "hostile-names.png")

    # A live %%gpuprof run whose record_function annotations carry the names.
    live = nb.output_area(2)
    assert_timeline(page, live)
    tips = "\n".join(hover_lanes(page, live, ("annotations",)))
    assert any(name in tips for name in HOSTILE), f"annotation names not in tooltips: {tips!r}"

    assert page.evaluate("() => window.__xss") is None, "a hostile name ran script"
    assert page.evaluate(_INJECTED_JS) == []
    lab.errors.assert_none()


TEACHING = sorted((REPO / "notebooks").glob("*.ipynb"))


@pytest.mark.corpus
def test_first_teaching_notebook_runs_in_jupyterlab(lab: Lab, corpus: Path) -> None:
    # Without a GPU the lesson reads recorded traces: from the corpus (no network in CI).
    import nbformat

    assert TEACHING, "no teaching notebook in notebooks/"
    src = TEACHING[0]
    nb_doc = nbformat.read(src, as_version=4)
    for cell in nb_doc.cells:  # run from a clean slate, whatever was saved
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nbformat.write(nb_doc, str(lab.root / src.name))
    for extra in src.parent.iterdir():  # data files a notebook reads by relative path
        if extra.is_file() and extra.suffix != ".ipynb":
            shutil.copy(extra, lab.root / extra.name)

    nb = lab.open(src.name)
    nb.run_all()
    assert_no_error_outputs(nb)
    page = lab.page
    shown = 0
    for i in range(nb.cells().count()):
        out = nb.output_area(i)
        if dashboards(out).count() == 0:
            continue
        assert dashboards(out).count() == 1
        assert_panel(dashboards(out))
        if out.locator(".nbp-timeline").count():
            assert_timeline(page, out)
        shown += 1
        last = out
    assert shown > 0, f"{src.name} showed no dashboard"
    shoot(page, last, f"teaching-{src.stem}.png")
    assert not (lab.server.base / "nbprof-cache").exists(), "the lesson downloaded a trace"
    # The lesson tells readers to zoom and hover: both must work on its last dashboard.
    assert_zooms(page, last)
    lanes = timeline_lanes(page, last, "nbprof-timeline")
    gpu = [ln for ln in lanes if ln["label"].startswith("GPU")]
    assert gpu, "no GPU lane in the lesson's timeline"
    # Zoomed in, a lane is mostly empty: move along each GPU lane until the pointer is over
    # an event; a tooltip must answer there.
    answered = False
    for lane in reversed(gpu):
        for i in range(1, 40):
            page.mouse.move(lane["x0"] + (lane["x1"] - lane["x0"]) * i / 40, lane["y"])
            try:
                wait_for(lambda: bool(tooltip_texts(page)), 0.5, "a tooltip")
            except TimeoutError:
                continue
            answered = True
            break
        if answered:
            break
    assert answered, "no tooltip anywhere along the lesson's GPU lanes after zooming"
    # For the picture, a CPU op: kernels' C++ template names make very wide tooltips.
    cpu = [ln for ln in lanes if ln["label"].endswith(" ops")] or gpu
    page.mouse.move(cpu[0]["x0"] + (cpu[0]["x1"] - cpu[0]["x0"]) * 0.45, cpu[0]["y"])
    shoot(page, last.locator(".nbp-timeline").first, f"teaching-{src.stem}-zoomed.png")
    lab.errors.assert_none()
