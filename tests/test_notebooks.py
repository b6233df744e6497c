"""The teaching notebooks run top to bottom headless with no GPU; Binder is set up for them.

Each notebook is executed with nbclient in a fresh ``python3`` kernel, with no visible GPU
and ``NBPROF_TRACE_CORPUS`` pointing at the real traces (so nothing is downloaded).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
BINDER = REPO / "binder"
#: The README's launch badge opens this notebook in JupyterLab.
BADGE_URL = (
    "https://mybinder.org/v2/gh/nbprof/nbprof/HEAD"
    "?urlpath=lab/tree/notebooks/01-why-nvidia-smi-says-100.ipynb"
)
CELL_TIMEOUT_S = 300


def test_the_four_lessons_are_there() -> None:
    names = [p.name for p in NOTEBOOKS]
    for prefix in ("01-", "02-", "03-", "04-"):
        assert any(n.startswith(prefix) for n in names), names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_saved_without_outputs_and_with_exercises(path: Path) -> None:
    import nbformat

    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, path.name
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert "## Exercises" in markdown
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "%%gpuprof" in code  # profiles live where there is a GPU
    assert "datasets." in code  # and reads recorded real traces where there is not


def test_badge_opens_the_first_notebook() -> None:
    target = BADGE_URL.split("urlpath=lab/tree/", 1)[1]
    assert (REPO / target).is_file()


def _execute(path: Path, env: dict[str, str], workdir: Path) -> Any:
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        kernel_name="python3",
        timeout=CELL_TIMEOUT_S,
        resources={"metadata": {"path": str(workdir)}},
    )
    client.execute(env=env)  # raises CellExecutionError on the first failing cell
    return nb


@pytest.fixture(scope="module")
def executed(
    corpus: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[dict[Path, Future[Any]], Path]]:
    """Every notebook, executed two at a time (each in its own kernel process)."""
    base = tmp_path_factory.mktemp("notebooks")
    # The kernels get this environment: no GPU, the corpus, and private folders so nothing
    # is read from or written to the user's own cache or Jupyter settings.
    env = dict(os.environ)
    env.update(
        CUDA_VISIBLE_DEVICES="",
        NBPROF_TRACE_CORPUS=str(corpus),
        NBPROF_CACHE_DIR=str(base / "cache"),
        JUPYTER_RUNTIME_DIR=str(base / "runtime"),
        MPLBACKEND="Agg",
    )
    pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="notebook-exec")
    try:
        yield {p: pool.submit(_execute, p, env, base) for p in NOTEBOOKS}, base
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


@pytest.mark.corpus
@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_without_a_gpu(
    path: Path, executed: tuple[dict[Path, Future[Any]], Path]
) -> None:
    futures, base = executed
    nb = futures[path].result()  # re-raises the cell's error, with its traceback

    errors = [
        o
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
        if o.get("output_type") == "error"
    ]
    assert not errors
    text = "\n".join(
        o.get("text", "") if o.get("output_type") == "stream" else str(o.get("data", ""))
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
    )
    assert "No GPU here" in text
    assert "RECORDED trace" in text  # the lesson ran on real traces, and said so
    assert not (base / "cache").exists()  # everything came from the corpus


# -- Binder ---------------------------------------------------------------------------------


def _requirements() -> list[str]:
    lines = (BINDER / "requirements.txt").read_text(encoding="utf-8").splitlines()
    return [ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]


def test_binder_requirements_are_pinned_and_cpu_only() -> None:
    reqs = _requirements()
    options = [r for r in reqs if r.startswith("-")]
    pins = [r for r in reqs if not r.startswith("-")]
    assert options == ["--extra-index-url https://download.pytorch.org/whl/cpu"]
    for r in pins:
        assert re.fullmatch(r"[A-Za-z0-9_.\-]+==[0-9][\w.+]*", r), f"not pinned: {r}"
    pinned = {r.split("==")[0].lower().replace("_", "-"): r.split("==")[1] for r in pins}
    assert pinned["torch"].endswith("+cpu") and pinned["torchvision"].endswith("+cpu")
    assert not [n for n in pinned if n.startswith("nvidia-") and n != "nvidia-ml-py"]


def test_binder_pins_satisfy_the_package_dependencies() -> None:
    from packaging.requirements import Requirement
    from packaging.version import Version

    pins = {
        r.split("==")[0].lower().replace("_", "-"): Version(r.split("==")[1])
        for r in _requirements()
        if "==" in r
    }
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    needed = list(project["dependencies"]) + list(
        project.get("optional-dependencies", {}).get("examples", [])
    )
    for spec in needed:
        req = Requirement(spec)
        name = req.name.lower().replace("_", "-")
        # postBuild installs nbprof with --no-deps, so every dependency must be pinned here.
        assert name in pins, f"binder/requirements.txt does not pin {name}"
        assert req.specifier.contains(pins[name], prereleases=True), (name, str(pins[name]))


def test_binder_post_build_installs_nbprof_from_the_checkout() -> None:
    post = BINDER / "postBuild"
    assert post.stat().st_mode & stat.S_IXUSR
    text = post.read_text(encoding="utf-8")
    assert "pip install" in text and "--no-deps" in text and "-e ." in text
    assert (BINDER / "runtime.txt").read_text(encoding="utf-8").strip().startswith("python-3.")


def test_nothing_in_the_notebooks_needs_the_network_when_the_corpus_is_set() -> None:
    # Real traces are reached only through nbprof.datasets (NBPROF_TRACE_CORPUS, else a
    # pinned download): no notebook fetches a URL of its own.
    for path in NOTEBOOKS:
        text = path.read_text(encoding="utf-8")
        assert "http://" not in text and "https://" not in text, path.name
        assert os.sep + "shared" + os.sep not in text, path.name
