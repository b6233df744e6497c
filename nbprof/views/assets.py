"""The front-end files shipped as package data (nbprof/views/js/): read once, as text."""

from __future__ import annotations

from functools import cache
from importlib import resources

#: The scripts a dashboard page needs, in load order (each defines part of globalThis.nbprof).
SCRIPTS = ("lod.js", "timeline.js", "embed.js")


@cache
def asset(name: str) -> str:
    """The text of ``nbprof/views/js/<name>``."""
    return resources.files("nbprof.views").joinpath("js").joinpath(name).read_text(encoding="utf-8")


def scripts() -> str:
    """The dashboard's scripts, concatenated (one inline <script> per page is enough)."""
    return "\n".join(asset(n) for n in SCRIPTS)
