"""The front-end code (nbprof/views/js): its Node unit tests, a syntax check, a lint, the
bundle the browser gets inline, and the row layout Python and the browser share.

Runs under README's `python -m pytest` so CI runs it; skipped where Node is absent.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from js_draw import need_node, node_eval

from nbprof.views import assets
from nbprof.views.timeline import document, rows
from nbprof.views.timeline.store import Lane

JS = Path(assets.__file__).resolve().parent / "js"
TESTS = Path(__file__).resolve().parent / "js"
MODULES = sorted(JS.glob("*.mjs"))
#: Classic scripts: Bokeh callback bodies (ticks.js, compare_*.js) and the load bundle's
#: tail (loader.js).
SCRIPTS = sorted(JS.glob("*.js"))


def test_node_unit_tests_pass() -> None:
    node = need_node()
    r = subprocess.run(
        [node, "--test", *sorted(str(p) for p in TESTS.glob("*.test.mjs"))],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert re.search(r"^# pass [1-9]\d*$", r.stdout, re.M), r.stdout[-2000:]
    assert re.search(r"^# fail 0$", r.stdout, re.M)


def test_every_module_has_unit_tests_or_is_wiring() -> None:
    """The logic lives in pure modules with their own tests; the rest wires the page."""
    wiring = {"bokeh", "compare", "compare_page", "dashboard", "embed", "pane", "theme",
              "timeline"}  # fmt: skip
    tested = {p.name.removesuffix(".test.mjs") for p in TESTS.glob("*.test.mjs")}
    assert {p.stem for p in MODULES} - wiring == tested


@pytest.mark.parametrize("path", [*MODULES, *SCRIPTS], ids=lambda p: p.name)
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
    (r"\brequire\s*\(|module\.exports", "ES modules only"),
)


@pytest.mark.parametrize("path", [*MODULES, *SCRIPTS], ids=lambda p: p.name)
def test_scripts_lint(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    for pattern, why in _FORBIDDEN:
        assert not re.search(pattern, text), f"{path.name}: {pattern}: {why}"
    if path.suffix == ".js" and path.name != "ticks.js":  # ticks.js: a body Bokeh wraps
        assert '"use strict";' in text, f"{path.name}: strict mode"
    for n, line in enumerate(text.splitlines(), 1):
        assert len(line) <= 100, f"{path.name}:{n}: line longer than 100 characters"
        assert line == line.rstrip(), f"{path.name}:{n}: trailing whitespace"


def test_every_file_the_pages_load_ships_as_package_data() -> None:
    for name in ("loader.js", "ticks.js", "compare_ticker.js", "compare_tick_labels.js",
                 "nbprof.css", "compare.css", "gauge.css"):  # fmt: skip
        assert (JS / name).is_file(), name
        assert assets.asset(name)
    for mod in assets.order((*assets.SCRIPTS, "compare_page.mjs")):
        assert (JS / mod.name).is_file(), mod.name
    text = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    assert all(f'"views/js/*.{ext}"' in text for ext in ("js", "mjs", "css"))


# -- the bundle -------------------------------------------------------------------------


def test_the_bundler_finds_what_each_module_exports() -> None:
    """assets.translate reads each module's exports as Node's own module loader does."""
    native = node_eval(
        "const out = {};"
        f"for (const f of {json.dumps([str(p) for p in MODULES])}) {{"
        "  out[f.split('/').pop()] = Object.keys(await import(f)).sort(); }"
        "console.log(JSON.stringify(out));"
    )
    assert {p.name: sorted(assets.module(p.name).exports) for p in MODULES} == native


_RUN_BUNDLE = """
import vm from "node:vm";
const [code, runs] = JSON.parse(await new Promise((ok) => {
  let s = ""; process.stdin.on("data", (c) => { s += c; }); process.stdin.on("end", () => ok(s));
}));
const seen = [];
const document = { querySelectorAll: (sel) => { seen.push(sel); return []; } };
const ctx = vm.createContext({ document, setInterval, clearInterval, setTimeout });
ctx.globalThis = ctx;
for (let k = 0; k < runs; k++) vm.runInContext(code, ctx);
const nb = ctx.nbprof;
console.log(JSON.stringify({
  globals: Object.keys(ctx).filter((k) => !["document", "setInterval", "clearInterval",
    "setTimeout", "globalThis"].includes(k)),
  parts: Object.keys(nb).sort(), timeline: Object.keys(nb.timeline).sort(),
  time: [nb.format.fmtTime(1500), nb.format.fmtTime(0.25)],
  compare: nb.compare ? Object.keys(nb.compare).sort() : null, seen }));
"""


def test_the_bundle_runs_as_one_classic_script_any_number_of_times() -> None:
    code = assets.bundle(*assets.SCRIPTS, "compare_page.mjs")
    out = node_eval(_RUN_BUNDLE, json.dumps([code, 2]))
    # It defines nothing but globalThis.nbprof, so every output can carry and run it.
    assert out["globals"] == ["nbprof"]
    assert out["parts"] == ["compare", "embed", "format", "timeline"]
    assert out["timeline"] == ["alignFrames", "attach", "viewsOf"]
    assert out["time"] == ["1.5 ms", "250 ns"]
    assert out["compare"] == ["alignBoth", "follow", "link", "linkAll"]
    # Each run embedded the page's dashboards and linked its comparisons.
    assert out["seen"].count('script[type="application/vnd.nbprof.pack"]') == 2
    assert out["seen"].count(".nbp-compare") == 2


def test_the_bundle_runs_each_module_after_those_it_imports() -> None:
    names = [m.name for m in assets.order(assets.SCRIPTS)]
    assert names[-1] == "dashboard.mjs"
    for i, name in enumerate(names):
        assert set(assets.module(name).deps) <= set(names[:i]), name
    text = assets.bundle(*assets.SCRIPTS)
    assert not re.search(r"^\s*(import|export)\b", text, re.M)


def test_the_bundle_leaves_the_files_documentation_out() -> None:
    text = assets.bundle(*assets.SCRIPTS)
    assert "Everything drawn is decided here" in assets.asset("lod.mjs")
    assert "Everything drawn is decided here" not in text
    assert len(text) < sum(len(assets.asset(m.name)) for m in assets.order(assets.SCRIPTS))


_RUN_DEFLATED = """
import vm from "node:vm";
const code = await new Promise((ok) => {
  let s = ""; process.stdin.on("data", (c) => { s += c; }); process.stdin.on("end", () => ok(s));
});
const ran = [];
const head = { appendChild: (el) => { ran.push(el.textContent.length);
  vm.runInContext(el.textContent, ctx); } };
const document = { head, querySelectorAll: () => [],
  createElement: () => ({ remove() {} }) };
const ctx = vm.createContext({ document, atob, Blob, Response, DecompressionStream,
  setInterval, clearInterval, setTimeout });
ctx.globalThis = ctx;
vm.runInContext(code, ctx);
await new Promise((ok) => setTimeout(ok, 200));
console.log(JSON.stringify({ ran, parts: ctx.nbprof ? Object.keys(ctx.nbprof).sort() : null }));
"""


def test_the_dashboards_script_travels_deflated_and_runs_as_the_bundle() -> None:
    """What an output carries is a third of the bundle's size and runs it once inflated."""
    out = node_eval(_RUN_DEFLATED, assets.scripts())
    bundle = assets.bundle(*assets.SCRIPTS)
    assert out["ran"] == [len(bundle)]
    assert out["parts"] == ["embed", "format", "timeline"]
    assert len(assets.scripts()) < 0.45 * len(bundle)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("export default 1;\n", "only export function/const/class"),
        ("const a = 1;\nexport { a };\n", "only export function/const/class"),
        ("export let a = 1;\n", "only export function/const/class"),
        ('import a from "./x.mjs";\n', "only named or namespace imports"),
        ('import { a } from "../x.mjs";\n', "only named or namespace imports"),
        ('import { a } from "x";\n', "only named or namespace imports"),
        ('const m = import("./x.mjs");\n', "dynamic import"),
        ('import { a-b } from "./x.mjs";\n', "cannot bind"),
    ],
)
def test_the_bundler_refuses_what_it_does_not_translate(text: str, error: str) -> None:
    with pytest.raises(assets.BundleError, match=error):
        assets.translate("bad.mjs", text)


def test_the_bundler_translates_imports_and_exports() -> None:
    mod = assets.translate(
        "b.mjs",
        'import { f, g as h } from "./a.mjs";\nimport * as A from "./a.mjs";\n'
        "export async function run() {}\nexport const K = 1;\nexport class C {}\n",
    )
    assert mod.deps == ("a.mjs",)
    assert mod.exports == ("run", "K", "C")
    assert "const { f, g: h } = __nbp_a;" in mod.body
    assert "const A = __nbp_a;" in mod.body
    assert "export" not in mod.body


def test_the_bundler_refuses_an_import_cycle() -> None:
    mods = {
        "a.mjs": assets.translate("a.mjs", 'import { b } from "./b.mjs";\nexport const a = 1;\n'),
        "b.mjs": assets.translate("b.mjs", 'import { a } from "./a.mjs";\nexport const b = 1;\n'),
    }
    with pytest.raises(assets.BundleError, match=r"a.mjs -> b.mjs -> a.mjs"):
        assets.order(("a.mjs",), mods.__getitem__)


# -- one layout of rows, two implementations ----------------------------------------------


def _lanes(spec: list[tuple[int, str]]) -> list[Lane]:
    return [Lane(f"r{r} {kind} {i}", kind, (kind, r, i)) for i, (r, kind) in enumerate(spec)]


_LAYOUT_CASES = [
    [(0, "gpu"), (0, "gpu")],
    [(0, "cpu_ops"), (0, "gpu"), (1, "runtime"), (1, "gpu"), (1, "gpu")],
    [(0, "steps"), (0, "cpu_ops"), (1, "cpu_ops"), (2, "gpu")],
    [(r, k) for r in range(8) for k in ("steps", "cpu_ops", "runtime", "gpu", "gpu")],
    [(r, "gpu") for r in range(40) for _ in range(3)],
]


def test_python_and_the_browser_lay_out_the_same_rows() -> None:
    cases = []
    for spec in _LAYOUT_CASES:
        lanes = _lanes(spec)
        groups = rows.rank_groups(lanes)
        labels = rows.axis_labels(lanes, bool(groups))
        n = len(groups)
        for collapsed in ([False] * n, [True] * n, [k % 3 == 0 for k in range(n)]):
            for every in (rows.AXIS_EVERY, 2):
                cases.append((groups, labels, collapsed, every))
    js = node_eval(
        f"import {{ rowLayout }} from {json.dumps(str(JS / 'fold.mjs'))};"
        "let s = ''; process.stdin.on('data', (c) => { s += c; });"
        "process.stdin.on('end', () => console.log(JSON.stringify(JSON.parse(s).map("
        "  ([g, l, c, e]) => { const r = rowLayout(g, l, c, e); return {"
        "    rows: r.rows.map((x) => [x.label, x.kind, x.group]),"
        "    laneRow: Array.from(r.laneRow), axes: r.axes, separators: r.separators }; }))));",
        json.dumps([(document.to_json(g, []), lb, c, e) for g, lb, c, e in cases]),
    )
    assert len(js) == len(cases) > 20
    for (groups, labels, collapsed, every), got in zip(cases, js, strict=True):
        py = rows.row_layout(groups, labels, collapsed, every)
        assert [list(r) for r in py.rows] == got["rows"]
        assert py.lane_row == got["laneRow"]
        assert (py.axes, py.separators) == (got["axes"], got["separators"])
