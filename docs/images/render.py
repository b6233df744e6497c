"""Render README's screenshots from a real trace: ``python docs/images/render.py``.

Writes docs/images/dashboard.png (the whole dashboard of the H100 Qwen inference trace) and
docs/images/timeline-zoomed.png (its timeline zoomed in, a kernel pinned with its launch
call linked), from the standalone report opened in Debian's Chromium. Needs the trace corpus
(``NBPROF_TRACE_CORPUS`` or ../shared/traces) and the playwright package.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
TRACE = "tracelens__h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
WIDTH = 1400


def main() -> None:
    sys.path.insert(0, str(REPO))
    from playwright.sync_api import sync_playwright

    import nbprof

    corpus = Path(os.environ.get("NBPROF_TRACE_CORPUS", REPO.parent / "shared" / "traces"))
    prof = nbprof.load(corpus / TRACE)
    page_path = Path(tempfile.mkdtemp()) / "report.html"
    prof.to_html(page_path)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": WIDTH, "height": 1000}, device_scale_factor=1)
        page.goto(page_path.as_uri())
        page.wait_for_selector(".nbp-timeline[data-nbp-ready]", timeout=60_000)
        page.wait_for_timeout(500)
        page.locator("div.nbprof").screenshot(path=str(HERE / "dashboard.png"))
        # Search for the GEMMs and step to one mid-run: zoomed to it, pinned, its launch
        # call outlined and linked.
        box = page.locator(".nbp-search input")
        box.fill("gemm")
        page.wait_for_timeout(400)
        box.press("Enter")
        api = "document.querySelector('.nbp-timeline')._nbprof"
        page.evaluate(f"() => {{ const a = {api}; a.state.cursor = 119; a.step(1); }}")
        page.wait_for_timeout(600)
        page.locator(".nbp-timeline").screenshot(path=str(HERE / "timeline-zoomed.png"))
        browser.close()
    print("wrote", HERE / "dashboard.png", HERE / "timeline-zoomed.png")


if __name__ == "__main__":
    main()
