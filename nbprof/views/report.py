"""The standalone report: the dashboard as one HTML file that works offline from file://."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from nbprof.views._style import esc
from nbprof.views.dashboard import fragment

if TYPE_CHECKING:
    from nbprof.result import Profile

logger = logging.getLogger(__name__)

_PAGE_CSS = (
    "html,body{margin:0;padding:0}body{padding:12px 20px;background:#ffffff}"
    "@media (prefers-color-scheme:dark){body{background:#0d1117}}"
)


def render(profile: Profile) -> str:
    """A complete HTML document: panel, legend and timeline, BokehJS and nbprof's scripts
    inline (one self-contained file)."""
    body = fragment(profile, include_bokeh_js=True)
    title = f"nbprof · {profile.trace.source}"
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{esc(title)}</title>\n<style>{_PAGE_CSS}</style>\n</head>\n"
        f"<body>\n{body}\n</body>\n</html>\n"
    )
