"""What pyproject.toml declares: every dependency is used, every import is declared, and
torch is never capped."""

from __future__ import annotations

import ast
import importlib.metadata
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

REPO = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def _imported_top_names() -> set[str]:
    names: set[str] = set()
    for path in (REPO / "nbprof").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module.split(".")[0])
    return names


def test_every_runtime_dependency_is_imported_by_nbprof() -> None:
    # A declared dependency nothing imports costs every user an install for nothing.
    imported = _imported_top_names()
    by_dist: dict[str, set[str]] = {}
    for top, dists in importlib.metadata.packages_distributions().items():
        for dist in dists:
            by_dist.setdefault(dist.lower().replace("_", "-"), set()).add(top)
    for spec in PROJECT["dependencies"]:
        name = Requirement(spec).name.lower().replace("_", "-")
        tops = by_dist.get(name, {name.replace("-", "_")})
        assert tops & imported, f"{name} is a dependency but nbprof imports none of {tops}"


def _declared() -> set[str]:
    """Distributions pyproject.toml names, at run time or in an extra, with the extras they
    ask for (``dask[distributed]`` declares distributed)."""
    specs = [*PROJECT["dependencies"], *(s for v in PROJECT["optional-dependencies"].values()
                                          for s in v)]  # fmt: skip
    out: set[str] = set()
    for req in map(Requirement, specs):
        out.add(_norm(req.name))
        out.update(_norm(x) for x in req.extras)
    out.discard("nbprof")
    return out


def _norm(name: str) -> str:
    return name.lower().replace("_", "-")


def test_every_package_nbprof_imports_is_declared() -> None:
    # Arriving through another package's dependencies is luck: that package may drop it.
    declared = _declared()
    dists = importlib.metadata.packages_distributions()
    third = {n for n in _imported_top_names() if n not in sys.stdlib_module_names} - {"nbprof"}
    missing = {
        top: names
        for top in sorted(third)
        if not (names := {_norm(d) for d in dists.get(top, [top])}) & declared
    }
    assert not missing, f"imported but not declared in pyproject.toml: {missing}"


def _bounds(name: str, specs: list[str]) -> list[Requirement]:
    return [r for r in map(Requirement, specs) if r.name.lower() == name]


def test_torch_and_torchvision_have_a_lower_bound_and_no_upper_bound() -> None:
    # An upper bound would make pip replace a user's newer torch with an older one.
    extras = PROJECT["optional-dependencies"]
    reqs = _bounds("torch", PROJECT["dependencies"])
    reqs += _bounds("torchvision", extras["examples"] + extras["test"])
    assert len(reqs) == 3
    for req in reqs:
        ops = {s.operator for s in req.specifier}
        assert ">=" in ops and not ops & {"<", "<=", "==", "~=", "==="}, str(req)
        # The range claimed starts at or below the version tested here.
        installed = Version(importlib.metadata.version(req.name))
        assert req.specifier.contains(installed, prereleases=True), (str(req), installed)
