"""nbprof's modules import one another in one direction: no module imports another that
imports it back, directly or around a loop.

The imports are read with ``ast``, those inside functions included (a deferred import is
still a dependency; only ``if TYPE_CHECKING:`` blocks, never run, are left out). The
package itself counts only where a module imports a name from it (``from nbprof import
__version__``): importing ``nbprof.x`` always runs ``nbprof/__init__.py`` first, and that
alone is no loop.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "nbprof"


def modules(package: Path = PACKAGE) -> dict[str, Path]:
    """Dotted name -> file of every module of the package, extension modules included
    (by their stub or built file: ``from nbprof.trace import _nest`` names a module)."""
    out: dict[str, Path] = {}
    base = package.parent
    for path in sorted(package.rglob("*")):
        if path.suffix not in (".py", ".pyi", ".so", ".pyd") or "__pycache__" in path.parts:
            continue
        parts = list(path.relative_to(base).parts)
        parts[-1] = parts[-1].split(".")[0]
        if parts[-1] == "__init__":
            parts.pop()
        # A .py beats a stub or a built file of the same name.
        if path.suffix == ".py" or ".".join(parts) not in out:
            out[".".join(parts)] = path
    return out


def _type_checking(node: ast.If) -> bool:
    return "TYPE_CHECKING" in ast.unparse(node.test)


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement, in functions too, but not under ``if TYPE_CHECKING:``."""
    found: list[ast.Import | ast.ImportFrom] = []

    def walk(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child):
                for other in child.orelse:  # the else branch does run
                    walk(other)
                continue
            if isinstance(child, ast.Import | ast.ImportFrom):
                found.append(child)
            walk(child)

    walk(tree)
    return found


def graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the package's modules it imports."""
    mods = modules(package)
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for name, path in mods.items():
        if path.suffix != ".py":
            continue
        is_pkg = path.name == "__init__.py"
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                here = name.split(".") if is_pkg else name.split(".")[:-1]
                if node.level:
                    here = here[: len(here) - node.level + 1]
                    base = ".".join([*here, *([node.module] if node.module else [])])
                else:
                    base = node.module or ""
                # A name that is a module is that module; any other comes from `base`.
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base
                           for a in node.names]  # fmt: skip
            for t in targets:
                while t and t not in mods:  # `import nbprof.a.b` names nbprof.a.b
                    t = t.rpartition(".")[0]
                if t and t != name:
                    edges[name].add(t)
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_no_module_imports_another_that_imports_it_back() -> None:
    found = circles(graph())
    edges = graph()
    said = ["; ".join(f"{m} -> {', '.join(sorted(edges[m] & set(c)))}" for m in c) for c in found]
    assert not found, "import circles:\n" + "\n".join(said)


def test_results_are_data_and_views_never_import_them() -> None:
    edges = graph()
    results = {"nbprof.result", "nbprof.job", "nbprof.comparison"}
    for r in results:
        # Their display hooks go through the one renderer, not through the views themselves.
        views = {m for m in edges[r] if m.startswith("nbprof.views")}
        assert views <= {"nbprof.views", "nbprof.views.render"}, (r, views)
    for m, targets in edges.items():
        if m.startswith("nbprof.views"):
            assert not targets & results, (m, targets & results)


def test_the_walk_sees_circles_deferred_and_relative_imports(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from pkg.sub import b\n")
    (pkg / "sub" / "b.py").write_text("from ..c import x\n")
    (pkg / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import d\n"
        "import pkg.a\nx = 1\n"
    )
    (pkg / "d.py").write_text("from pkg import c\n")
    edges = graph(pkg)
    assert edges["pkg.a"] == {"pkg.sub.b"} and edges["pkg.sub.b"] == {"pkg.c"}
    assert edges["pkg.c"] == {"pkg.a"}, "a TYPE_CHECKING import is no dependency"
    assert circles(edges) == [["pkg.a", "pkg.c", "pkg.sub.b"]]


def test_a_render_exists_for_each_result_type() -> None:
    from nbprof.comparison import Comparison
    from nbprof.job import Job
    from nbprof.result import Profile
    from nbprof.views import render

    for cls in (Profile, Job, Comparison):
        assert f"{cls.__module__}.{cls.__qualname__}" in render.RENDERERS, cls


#: What ``import nbprof`` must not import: each costs from 0.1 s (IPython) to seconds (torch).
HEAVY = ("torch", "pandas", "bokeh", "ipywidgets", "dask", "IPython", "jinja2")


def test_import_nbprof_and_its_light_faces_stay_light() -> None:
    # `nbprof.compare` and `nbprof.profile` resolve to their modules, which are reached
    # before any trace is read; the CLI starts with them too.
    code = (
        "import sys, nbprof, nbprof.cli\n"
        "nbprof.compare, nbprof.profile, nbprof.TraceError\n"
        f"print([m for m in {HEAVY!r} if m in sys.modules])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == "[]", out.stdout
