"""Fixtures for the real-browser tests: a headless JupyterLab and Debian's Chromium.

The server gets its own HOME and Jupyter folders in a temporary directory so that nothing
from the machine's user settings leaks in, and it is always shut down (kernels included).
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from lab_harness import CHROMIUM, Lab, LabServer, PageErrors

if TYPE_CHECKING:
    from playwright.sync_api import Browser

logger = logging.getLogger(__name__)


def _missing() -> str | None:
    if not CHROMIUM.exists():
        return f"{CHROMIUM} not found (install Debian's chromium package)"
    for module, why in (
        ("playwright", "playwright (python) is not installed"),
        ("jupyterlab", "jupyterlab is not installed"),
        ("nbformat", "nbformat is not installed"),
    ):
        if importlib.util.find_spec(module) is None:
            return why
    return None


@pytest.fixture(scope="session")
def browser_requirements() -> None:
    reason = _missing()
    if reason is not None:
        pytest.skip(f"browser tests need Chromium, Playwright and JupyterLab: {reason}")


@pytest.fixture(scope="session")
def corpus_or_none(request: pytest.FixtureRequest) -> Path | None:
    """The real-trace corpus (same lookup as the ``corpus`` fixture), or None when absent."""
    try:
        return Path(request.getfixturevalue("corpus"))
    except pytest.skip.Exception:
        return None


@pytest.fixture(scope="session")
def lab_server(
    browser_requirements: None,
    tmp_path_factory: pytest.TempPathFactory,
    corpus_or_none: Path | None,
) -> Iterator[LabServer]:
    extra = {"NBPROF_TRACE_CORPUS": str(corpus_or_none)} if corpus_or_none else {}
    server = LabServer.start(tmp_path_factory.mktemp("jupyterlab"), extra)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def chromium(browser_requirements: None) -> Iterator[Browser]:
    from playwright.sync_api import sync_playwright

    pw = sync_playwright().start()
    try:
        # Playwright's own browser download is unavailable here: use the system Chromium.
        # --no-sandbox: the tests run as root, where Chromium's sandbox refuses to start.
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()
    finally:
        pw.stop()


@pytest.fixture
def lab(lab_server: LabServer, chromium: Browser) -> Iterator[Lab]:
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    errors = PageErrors()
    errors.attach(page)
    try:
        yield Lab(lab_server, page, errors)
    finally:
        context.close()
        lab_server.shutdown_kernels()
        if errors.allowed:
            logger.info("benign console errors: %s", errors.allowed)
