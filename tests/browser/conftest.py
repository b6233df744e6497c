"""Fixtures for the real-browser tests: a headless JupyterLab and Debian's Chromium.

The server gets its own HOME and Jupyter folders in a temporary directory so that nothing
from the machine's user settings leaks in, and it is always shut down (kernels included).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from lab_harness import CHROMIUM, Lab, LabServer, browsing, missing_requirements, serving

if TYPE_CHECKING:
    from playwright.sync_api import Browser


@pytest.fixture(scope="session")
def browser_requirements() -> None:
    reason = missing_requirements()
    if reason is not None:
        pytest.skip(reason)


@pytest.fixture(scope="session")
def corpus_or_none(request: pytest.FixtureRequest) -> Path | None:
    """The real-trace corpus (same lookup as the ``corpus`` fixture), or None when absent."""
    try:
        return Path(request.getfixturevalue("corpus"))
    except pytest.skip.Exception:
        return None


@pytest.fixture(scope="module")
def lab_server(
    browser_requirements: None,
    tmp_path_factory: pytest.TempPathFactory,
    corpus_or_none: Path | None,
) -> Iterator[LabServer]:
    with serving(tmp_path_factory.mktemp("jupyterlab"), corpus_or_none) as server:
        yield server


# Module scope, not session: a sync Playwright keeps its event loop installed while it
# runs, and any later test module that starts its own would be refused.
@pytest.fixture(scope="module")
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
    with browsing(lab_server, chromium) as lab:
        yield lab
