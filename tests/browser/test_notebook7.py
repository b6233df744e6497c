"""nbprof's notebook output in Notebook 7 (the ``notebook`` package), in headless Chromium.

Notebook 7 is built from JupyterLab's components but has its own page per notebook, its own
toolbar and no status bar, so the harness's notebook driver needs a few changes here; the
checks on the dashboard are the JupyterLab tests' own. Screenshots go to tests/artifacts/.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from lab_harness import (
    NOTEBOOK7,
    Lab,
    LabServer,
    NotebookUI,
    browsing,
    missing_requirements,
    serving,
    wait_for,
    write_notebook,
)
from test_jupyterlab import (
    CORPUS_TRACE,
    GPUPROF_CELL,
    assert_no_error_outputs,
    assert_panel,
    assert_timeline,
    assert_zooms,
    dashboards,
    shoot,
)

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(missing_requirements() is not None, reason=str(missing_requirements())),
]

#: Errors Notebook 7 itself raises while its page loads, before any output of ours exists.
NOTEBOOK7_KNOWN_ERRORS: tuple[tuple[str, str], ...] = (
    (
        r"reading 'schema'\)[\s\S]*notebook_core",
        # A race in the shortcuts settings plugin at start-up; nothing to do with outputs.
        "https://github.com/jupyter/notebook/issues/7862",
    ),
)


class Notebook7UI(NotebookUI):
    """A notebook open in Notebook 7: same menus and cell classes as JupyterLab, but no
    status bar to read the kernel's state from and no tab to show unsaved changes."""

    def wait_kernel_idle(self, timeout_ms: float) -> None:
        # The toolbar's indicator reads "idle" before any kernel exists; the server knows
        # when a kernel is connected and idle.
        def connected_and_idle() -> bool:
            for session in self.server._api("GET", "/api/sessions"):
                if session["path"] == self.name and session.get("kernel"):
                    k = self.server._api("GET", f"/api/kernels/{session['kernel']['id']}")
                    return k["execution_state"] == "idle" and k["connections"] > 0
            return False

        wait_for(connected_and_idle, timeout_ms / 1000, "a connected, idle kernel")
        self.page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").wait_for(
            timeout=timeout_ms
        )

    def save(self) -> None:
        """File > Save Notebook, then wait until the file on disk has every cell's result."""
        shown = self.execution_counts()
        self._click_menu("File", "Save Notebook")

        def written() -> bool:
            try:
                cells = [c for c in self.saved().cells if c.cell_type == "code"]
            except Exception:  # mid-write: read again
                return False
            return [f"[{c.execution_count}]:" for c in cells] == shown

        wait_for(written, 30.0, "the saved notebook to hold the run's outputs")


@pytest.fixture(scope="module")
def notebook7_server(
    browser_requirements: None,
    tmp_path_factory: pytest.TempPathFactory,
    corpus_or_none: Path | None,
) -> Iterator[LabServer]:
    pytest.importorskip("notebook", minversion="7", reason="needs the notebook 7 package")
    with serving(tmp_path_factory.mktemp("notebook7"), corpus_or_none, NOTEBOOK7) as server:
        yield server


@pytest.fixture
def notebook7(notebook7_server: LabServer, chromium: Browser) -> Iterator[Lab]:
    with browsing(notebook7_server, chromium, NOTEBOOK7_KNOWN_ERRORS) as lab:
        yield lab


@pytest.mark.corpus
def test_dashboard_renders_and_zooms_in_notebook7(notebook7: Lab, corpus: Path) -> None:
    trace = corpus / CORPUS_TRACE
    if not trace.exists():
        pytest.skip(f"{CORPUS_TRACE} not in the corpus")
    name = "notebook7.ipynb"
    write_notebook(
        notebook7.root / name,
        ["%load_ext nbprof", GPUPROF_CELL, f"import nbprof\nnbprof.load({str(trace)!r}).show()"],
    )
    page = notebook7.page
    nb = Notebook7UI(page, notebook7.server, name).open()
    # The checkpoint label in the toolbar is Notebook 7's own (JupyterLab has none).
    assert page.locator(".jp-NotebookCheckpoint").count() == 1, "not Notebook 7's page"
    nb.run_all()
    assert_no_error_outputs(nb)

    # %%gpuprof on CPU torch: the panel says there was no GPU, and the run is drawn.
    from nbprof.capture import NO_GPU_NOTE

    out = nb.output_area(1)
    assert dashboards(out).count() == 1
    assert_panel(dashboards(out))
    assert NO_GPU_NOTE in (dashboards(out).text_content() or "")
    assert_timeline(page, out)
    assert_zooms(page, out)

    import nbprof

    expected = nbprof.load(trace).diagnosis.verdict
    out = nb.output_area(2)
    assert dashboards(out).count() == 1
    assert_panel(dashboards(out), verdict=expected.summary or None)
    assert_timeline(page, out)
    shoot(page, out, "notebook7-dashboard.png")
    assert_zooms(page, out)
    notebook7.errors.assert_none()

    # The same outputs in a notebook this server never signed (a colleague's file, a
    # download): Notebook 7 does not run their scripts, and the diagnosis must still read.
    import nbformat

    doc = nb.saved()
    doc.metadata["copied"] = True  # another content hash: no longer signed as trusted
    nbformat.write(doc, str(notebook7.root / "untrusted.ipynb"))
    copy = Notebook7UI(page, notebook7.server, "untrusted.ipynb").open()
    assert "Not Trusted" in page.locator(".jp-NotebookTrustedStatus").inner_text()
    out = copy.output_area(2)
    assert_panel(dashboards(out), verdict=expected.summary or None)
    assert out.locator(".nbp-timeline canvas").count() == 0, "an untrusted output ran script"
    shoot(page, out, "notebook7-untrusted.png")
    notebook7.errors.assert_none()
