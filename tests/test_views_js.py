"""The front-end code (nbprof/views/js): its Node unit tests, a syntax check and a lint.

Runs under README's `python -m pytest` so CI runs it; skipped where Node is absent.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from js_draw import need_node

from nbprof.views import assets

JS = Path(assets.__file__).resolve().parent / "js"
TESTS = Path(__file__).resolve().parent / "js"
FILES = sorted(JS.glob("*.js"))


def test_node_unit_tests_pass() -> None:
    node = need_node()
    r = subprocess.run(
        [node, "--test", *sorted(str(p) for p in TESTS.glob("*.test.js"))],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert re.search(r"^# pass [1-9]\d*$", r.stdout, re.M), r.stdout[-2000:]
    assert re.search(r"^# fail 0$", r.stdout, re.M)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_scripts_parse(path: Path) -> None:
    node = need_node()
    r = subprocess.run([node, "--check", str(path)], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr


#: What the front end must never do, as (pattern, why).
_FORBIDDEN = (
    (r"\.innerHTML\s*=", "trace names go into the page as text (textContent), never markup"),
    (r"\binsertAdjacentHTML\b|\bdocument\.write\b", "no markup from strings"),
    (r"\beval\s*\(|new Function\s*\(", "no code from strings"),
    (r"\bconsole\.log\b", "no debugging output left in the page's console"),
    (r"https?://", "nothing is fetched from the network (air-gapped clusters, Binder)"),
)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_scripts_lint(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    for pattern, why in _FORBIDDEN:
        assert not re.search(pattern, text), f"{path.name}: {pattern}: {why}"
    if path.name != "ticks.js":  # a function body Bokeh wraps, not a script
        assert '"use strict";' in text, f"{path.name}: strict mode"
    for n, line in enumerate(text.splitlines(), 1):
        assert len(line) <= 100, f"{path.name}:{n}: line longer than 100 characters"
        assert line == line.rstrip(), f"{path.name}:{n}: trailing whitespace"


def test_every_script_the_dashboard_loads_ships_as_package_data() -> None:
    for name in (*assets.SCRIPTS, "loader.js", "ticks.js", "nbprof.css"):
        assert (JS / name).is_file(), name
        assert assets.asset(name)
    text = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    assert '"views/js/*.js"' in text and '"views/js/*.css"' in text
