"""The teaching notebooks run top to bottom headless with no GPU; Binder is set up for them.

Each notebook is executed with nbclient in a fresh ``python3`` kernel, with no visible GPU
and ``NBPROF_TRACE_CORPUS`` pointing at the real traces (so nothing is downloaded). Without
a GPU, every cell that would profile live loads a registered real trace instead: the
executed notebook must say so once, show one dashboard (never a "CPU only" one), keep its
tables' time columns named by their unit, stay small enough to keep in git, and run in
under a minute.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
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
#: Limits of a notebook saved after Run All, and of its run without a GPU.
MAX_SAVED_BYTES = 3_000_000
MAX_CPU_SECONDS = 60.0
#: A live profile in a notebook: the line form under ``if HAS_GPU:``, or the cell form.
_MAGIC = re.compile(r"^(\s*)%%?gpuprof\b", re.MULTILINE)


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
    assert _MAGIC.search(code)  # profiles live where there is a GPU
    assert "recorded(" in code and "datasets." in code  # real traces where there is not


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_live_profile_runs_only_on_a_gpu(path: Path) -> None:
    """A live cell without a GPU would show a "CPU only" dashboard: each one is the line
    form, inside the ``if HAS_GPU:`` block that starts its cell."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    live = [c.source for c in nb.cells if c.cell_type == "code" and _MAGIC.search(c.source)]
    assert live, path.name
    for src in live:
        assert src.startswith("if HAS_GPU:\n"), src
        # Indented: inside the block (a cell magic cannot be, so it is not used).
        assert all(m.group(1) for m in _MAGIC.finditer(src)), src
        assert "%%gpuprof" not in src, src


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_traces_are_registered_under_their_current_names(path: Path) -> None:
    import nbformat

    from nbprof import datasets

    nb = nbformat.read(path, as_version=4)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    used = re.findall(r"(?:recorded|datasets\.(?:load|path|info))\(\"([^\"]+)\"", code)
    assert used, path.name
    for name in used:
        assert name in datasets.names(), f"{path.name}: {name!r} is not a current dataset name"


def test_badge_opens_the_first_notebook() -> None:
    target = BADGE_URL.split("urlpath=lab/tree/", 1)[1]
    assert (REPO / target).is_file()


@dataclass
class Executed:
    nb: Any
    #: The notebook's size saved after Run All (nbformat's own writer, as Jupyter saves).
    saved_bytes: int
    #: CPU seconds the kernel process used, where /proc tells (else None), and wall time.
    cpu_s: float | None
    wall_s: float


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a live process, from /proc (Linux); None elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    # After the command name: state is field 3; utime, stime, then the reaped children's
    # cutime and cstime are fields 14 to 17.
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _execute(path: Path, env: dict[str, str], workdir: Path) -> Executed:
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        kernel_name="python3",
        timeout=CELL_TIMEOUT_S,
        resources={"metadata": {"path": str(workdir)}},
    )
    cpu: list[float | None] = [None]

    def after_cell(**_: Any) -> None:
        # The kernel is alive between cells: read its CPU time after each one.
        pid = getattr(client.km.provisioner, "pid", None) if client.km else None
        if pid is not None:
            cpu[0] = _cpu_seconds(pid)

    client.on_cell_executed = after_cell
    t0 = time.perf_counter()
    client.execute(env=env)  # raises CellExecutionError on the first failing cell
    wall = time.perf_counter() - t0
    saved = workdir / f"executed-{path.name}"
    nbformat.write(nb, saved)
    return Executed(nb, saved.stat().st_size, cpu[0], wall)


@pytest.fixture(scope="module")
def executed(
    corpus: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[dict[Path, Future[Executed]], Path]]:
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
    path: Path, executed: tuple[dict[Path, Future[Executed]], Path]
) -> None:
    futures, base = executed
    nb = futures[path].result().nb  # re-raises the cell's error, with its traceback

    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    text = "\n".join(_text(o) for o in outputs)
    assert text.count("No GPU here") == 1  # said once
    assert "RECORDED trace" in text  # the lesson ran on real traces, and said so
    assert not (base / "cache").exists()  # everything came from the corpus
    # One dashboard, of a real GPU trace: no live CPU-only profile buries the lesson.
    dashboards = [o for o in outputs if _plain(o).startswith("nbprof ·")]
    assert len(dashboards) == 1
    assert "CPU only (no GPU activity)" not in text
    assert "no live gauge" not in text


def _plain(o: Any) -> str:
    return str(o.get("data", {}).get("text/plain", ""))


def _text(o: Any) -> str:
    if o.get("output_type") == "stream":
        return str(o.get("text", ""))
    return _plain(o)


@pytest.mark.corpus
@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_tables_name_their_time_columns_by_unit(
    path: Path, executed: tuple[dict[Path, Future[Executed]], Path]
) -> None:
    nb = executed[0][path].result().nb
    tables = [
        str(o["data"]["text/html"])
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
        if "text/html" in o.get("data", {}) and not _plain(o).startswith("nbprof ·")
    ]
    assert tables, path.name
    for html in tables:
        heads = re.findall(r"<th[^>]*>([^<]*)</th>", html)
        bare = [h for h in heads if h.strip() in ("ts", "start", "end", "dur")]
        assert not bare, f"{path.name}: a time column without its unit: {bare}"


@pytest.mark.corpus
@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_number_in_the_prose_is_computed_above_it(
    path: Path, executed: tuple[dict[Path, Future[Executed]], Path]
) -> None:
    """A figure a markdown cell states (a decimal or a percentage) must appear in the
    outputs of the cells above it: prose never quotes a number the notebook did not show."""
    nb = executed[0][path].result().nb
    shown = ""
    for c in nb.cells:
        if c.cell_type == "code":
            shown += "\n".join(_text(o) for o in c.outputs)
            continue
        # Code spans name things and headings pose the question: neither states a figure.
        # Names with digits (Qwen1.5-0.5B, sm_90) are not figures either.
        prose = re.sub(r"`[^`]*`", "", c.source)
        prose = "\n".join(ln for ln in prose.splitlines() if not ln.lstrip().startswith("#"))
        figures = re.findall(
            r"(?<![\w.-])\d+(?:\.\d+)?(?=\s?%)|(?<![\w.-])\d+\.\d+(?![\w.])", prose
        )
        for number in figures:
            assert number in shown, f"{path.name}: {number} in the prose is not shown above it"


@pytest.mark.corpus
@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_saved_after_run_all_it_stays_small(
    path: Path, executed: tuple[dict[Path, Future[Executed]], Path]
) -> None:
    run = executed[0][path].result()
    assert run.saved_bytes < MAX_SAVED_BYTES, (
        f"{path.name}: {run.saved_bytes / 1e6:.2f} MB saved after Run All"
    )


@pytest.mark.corpus
@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_it_runs_in_under_a_minute_without_a_gpu(
    path: Path, executed: tuple[dict[Path, Future[Executed]], Path]
) -> None:
    # The kernel's CPU time, not the wall clock: notebooks run two at a time here, on a
    # machine other work shares, and CPU time is what a one-core session would wait for.
    run = executed[0][path].result()
    if run.cpu_s is None:
        pytest.skip("no /proc: the kernel's CPU time cannot be read here")
    assert run.cpu_s < MAX_CPU_SECONDS, (
        f"{path.name}: {run.cpu_s:.1f} s of CPU (wall {run.wall_s:.1f} s)"
    )


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


def test_binder_post_build_fetches_the_traces_and_survives_no_network(tmp_path: Path) -> None:
    """postBuild downloads every registered trace through nbprof.datasets; a failed download
    says so and does not fail the build. Run here with every download refused (the proxy
    is a closed local port), without its install line (nbprof is importable already)."""
    text = (BINDER / "postBuild").read_text(encoding="utf-8")
    assert "python -m nbprof.datasets download" in text
    script = tmp_path / "postBuild-without-install"
    script.write_text("\n".join(ln for ln in text.splitlines() if "pip install" not in ln) + "\n")
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("NBPROF_")}
    env.update(
        NBPROF_CACHE_DIR=str(tmp_path / "cache"),
        PYTHONPATH=str(REPO),
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        HTTPS_PROXY=dead,
        HTTP_PROXY=dead,
        https_proxy=dead,
        http_proxy=dead,
    )
    proc = subprocess.run(
        ["bash", str(script)], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    from nbprof import datasets

    for name in datasets.names():
        assert f"{name}: not fetched: cannot get dataset {name!r}" in proc.stderr
    assert "the notebooks will download them on first use" in proc.stderr


def test_nothing_in_the_notebooks_needs_the_network_when_the_corpus_is_set() -> None:
    # Real traces are reached only through nbprof.datasets (NBPROF_TRACE_CORPUS, else a
    # pinned download): no notebook fetches a URL of its own.
    for path in NOTEBOOKS:
        text = path.read_text(encoding="utf-8")
        assert "http://" not in text and "https://" not in text, path.name
        assert os.sep + "shared" + os.sep not in text, path.name
