"""A real kernel's dashboard survives ``jupyter nbconvert --to html``, offline.

tests/test_views_browser.py exports hand-built display bundles; this runs the notebook a
user would (nbclient, a fresh kernel, ``nbprof.load(<corpus trace>).show()``), so what is
exported is exactly what the kernel published. Skipped without Chromium, Playwright,
nbclient/nbconvert or the corpus. Screenshots go to tests/artifacts/.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from lab_harness import artifact, kernel_env, missing_requirements, write_notebook
from test_jupyterlab import CORPUS_TRACE

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = [
    pytest.mark.browser,
    pytest.mark.corpus,
    pytest.mark.skipif(missing_requirements() is not None, reason=str(missing_requirements())),
]

#: A cold kernel on a loaded 2-core CI machine; the cell itself loads a 25 kB trace.
EXECUTE_TIMEOUT_S = 120

_TIMELINE_DRAWN = """() => {
    // Bokeh draws inside nested open shadow roots: look for a painted canvas at any depth.
    const painted = (root) => [...root.querySelectorAll('*')].some(e =>
        (e.tagName === 'CANVAS' && e.width > 0 && e.height > 0)
        || (e.shadowRoot !== null && painted(e.shadowRoot)));
    const t = document.querySelector('.nbp-timeline');
    return t !== null && painted(t);
}"""


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory, corpus: Path) -> Iterator[Path]:
    """The corpus dashboard, run in a fresh kernel and exported with HTMLExporter."""
    nbclient = pytest.importorskip("nbclient")
    nbconvert = pytest.importorskip("nbconvert")
    import nbformat

    trace = corpus / CORPUS_TRACE
    if not trace.exists():
        pytest.skip(f"{CORPUS_TRACE} not in the corpus")
    base = tmp_path_factory.mktemp("nbconvert")
    src = write_notebook(
        base / "export.ipynb", [f"import nbprof\nnbprof.load({str(trace)!r}).show()"]
    )
    nb = nbformat.read(src, as_version=4)
    env = kernel_env(base)
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # the kernel inherits this process's environment
    try:
        nbclient.NotebookClient(nb, timeout=EXECUTE_TIMEOUT_S, kernel_name="python3").execute(
            cwd=str(base)
        )
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    errors = [o for o in nb.cells[0].outputs if o.get("output_type") == "error"]
    assert errors == [], errors
    body, _ = nbconvert.HTMLExporter().from_notebook_node(nb)
    path = base / "export.html"
    path.write_text(body, encoding="utf-8")
    yield path


def _expected_verdict(corpus: Path) -> str:
    import nbprof

    return nbprof.load(corpus / CORPUS_TRACE).diagnosis.verdict.summary


def test_export_draws_the_timeline_offline(exported: Path, chromium: Browser, corpus: Path) -> None:
    # Nothing may come from the network: an exported report is read on air-gapped machines.
    context = chromium.new_context(viewport={"width": 1300, "height": 900})
    context.route(re.compile(r"^https?://"), lambda route: route.abort())
    page = context.new_page()
    errors: list[str] = []
    requested: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requested.append(r.url))
    try:
        page.goto(exported.as_uri())
        page.wait_for_function(_TIMELINE_DRAWN, timeout=60_000)
        assert page.locator(".nbp-verdict h2").inner_text().strip() == _expected_verdict(corpus)
        assert errors == []
        page.locator("div.nbprof").first.screenshot(path=str(artifact("nbconvert-corpus.png")))
    finally:
        context.close()
    # nbconvert's own template asks a CDN for RequireJS and MathJax; nbprof asks for nothing.
    remote = [u for u in requested if not u.startswith(("file:", "data:", "blob:"))]
    assert not [u for u in remote if "bokeh" in u.lower()], remote


def test_export_reads_without_javascript(exported: Path, chromium: Browser, corpus: Path) -> None:
    # Viewers that never run scripts (untrusted, sanitizing, or mail clients) still get the
    # diagnosis as text.
    context = chromium.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto(exported.as_uri())
        verdict = page.locator(".nbp-verdict h2")
        assert verdict.is_visible()
        assert verdict.inner_text().strip() == _expected_verdict(corpus)
        assert page.locator(".nbp-card").count() > 0
        assert page.locator(".nbp-card").first.is_visible()
    finally:
        context.close()
