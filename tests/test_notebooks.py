"""The teaching notebooks run top to bottom headless with no GPU; Binder is set up for them.

Each notebook is executed with nbclient in a fresh ``python3`` kernel with no visible GPU,
no ``NBPROF_TRACE_CORPUS``, the corpus folder hidden from the kernel, no network and an
empty cache (see ``offline_kernel.py``): every cell that would profile live loads a real
trace bundled with nbprof instead. The executed notebook must say so once, show one
dashboard (never a "CPU only" one), keep its tables' time columns named by their unit,
count in correct plurals, stay small enough to keep in git, and run in under a minute.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from offline_kernel import Executed, execute, offline_env, read_from, text_of

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
BINDER = REPO / "binder"
#: The README's launch badge opens this notebook in JupyterLab.
BADGE_URL = (
    "https://mybinder.org/v2/gh/nbprof/nbprof/HEAD"
    "?urlpath=lab/tree/notebooks/01-why-nvidia-smi-says-100.ipynb"
)
#: Limits of a notebook saved after Run All, and of its run without a GPU. A lesson saves
#: under 1.5 MB with nbprof's load bundle (BokehJS deflated, 0.47 MB, once per notebook) and
#: its dashboards (0.58 to 0.90 MB saved in all, benchmarks/bench_weight.py); what the
#: lesson prints besides them is held to MAX_LESSON_BYTES.
MAX_SAVED_BYTES = 1_500_000
MAX_LESSON_BYTES = 150_000
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

    from nbprof import datasets

    used = _datasets_used(path)
    assert used, path.name
    for name in used:
        assert name in datasets.names(), f"{path.name}: {name!r} is not a current dataset name"


def test_badge_opens_the_first_notebook() -> None:
    target = BADGE_URL.split("urlpath=lab/tree/", 1)[1]
    assert (REPO / target).is_file()


def hidden_corpus() -> list[Path]:
    """The trace corpus folders a kernel must not see: the one beside the checkout and the
    one ``NBPROF_TRACE_CORPUS`` names, where they exist."""
    env = os.environ.get("NBPROF_TRACE_CORPUS")
    found = [REPO.parent / "shared" / "traces", *([Path(env)] if env else [])]
    return [p for p in found if p.exists()]


@pytest.fixture(scope="module")
def executed(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[dict[Path, Future[Executed]], Path]]:
    """Every notebook, executed two at a time (each in its own kernel process)."""
    base = tmp_path_factory.mktemp("notebooks")
    # No GPU, no corpus, no network, and private folders so nothing is read from or
    # written to the user's own caches or Jupyter settings.
    env = offline_env(base, dict(os.environ), hidden_corpus())
    env.update(NBPROF_CACHE_DIR=str(base / "cache"), NBPROF_TABLE_CACHE=str(base / "tables"))
    pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="notebook-exec")
    try:
        yield {p: pool.submit(execute, p, env, base) for p in NOTEBOOKS}, base
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_without_a_gpu(
    path: Path, executed: tuple[dict[Path, Future[Executed]], Path]
) -> None:
    futures, base = executed
    nb = futures[path].result().nb  # re-raises the cell's error, with its traceback

    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    text = "\n".join(text_of(o) for o in outputs)
    assert text.count("No GPU here") == 1  # said once
    assert "RECORDED trace" in text  # the lesson ran on real traces, and said so
    assert not (base / "cache").exists()  # nothing downloaded: every trace was bundled
    # One dashboard, of a real GPU trace: no live CPU-only profile buries the lesson.
    dashboards = [o for o in outputs if _plain(o).startswith("nbprof ·")]
    assert len(dashboards) == 1
    # ... read from inside the package (the dashboard's title is the trace's path).
    assert read_from(_plain(dashboards[0]), REPO / "nbprof" / "data")
    assert "CPU only (no GPU activity)" not in text
    assert "no live gauge" not in text


def _plain(o: Any) -> str:
    return str(o.get("data", {}).get("text/plain", ""))


def _is_nbprof_view(o: Any) -> bool:
    """nbprof's own display outputs: the BokehJS load bundle, a dashboard, a comparison."""
    data = o.get("data", {})
    if "application/javascript" in data and "text/plain" not in data:
        return True
    return _plain(o).startswith(("nbprof ·", "nbprof compare"))


#: A count of one with a plural noun ("1 calls"; not "1.5 ms", "0.1 pts"), or a "(s)".
_BAD_PLURAL = re.compile(
    r"(?<![\w.,+-])1 (?:[A-Za-z]\w*-[\w-]+ )*(?:op )?(?!ms\b|µs\b)[A-Za-z][\w-]*s\b|\w\(s\)"
)


def test_the_plural_check_catches_what_it_should() -> None:
    for bad in ("mm in bf16 (1 calls):", "each of the 8 GPU(s)", "1 FLOP-counted op rows"):
        assert _BAD_PLURAL.search(bad), bad
    for good in ("(1 call):", "1 call was", "26 calls", "1.25x", "+0.1 pts", "1 ms", "1 byte"):
        assert not _BAD_PLURAL.search(good), good


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_what_the_lesson_prints_counts_in_correct_plurals(
    path: Path, executed: tuple[dict[Path, Future[Executed]], Path]
) -> None:
    nb = executed[0][path].result().nb
    printed = [
        text_of(o)
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
        if not _is_nbprof_view(o)
    ]
    bad = [m.group(0) for t in printed for m in _BAD_PLURAL.finditer(t)]
    assert not bad, f"{path.name}: {bad}"


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
            shown += "\n".join(text_of(o) for o in c.outputs)
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


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_saved_after_run_all_it_stays_small(
    path: Path, executed: tuple[dict[Path, Future[Executed]], Path]
) -> None:
    run = executed[0][path].result()
    assert run.saved_bytes < MAX_SAVED_BYTES, (
        f"{path.name}: {run.saved_bytes / 1e6:.2f} MB saved after Run All"
    )
    import json

    views = sum(
        len(json.dumps(o))
        for c in run.nb.cells
        if c.cell_type == "code"
        for o in c.outputs
        if _is_nbprof_view(o)
    )
    own = run.saved_bytes - views
    assert own < MAX_LESSON_BYTES, f"{path.name}: {own / 1e3:.0f} kB besides nbprof's views"


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


def test_binder_post_build_fetches_nothing(tmp_path: Path) -> None:
    """The notebooks need only the traces inside the package: postBuild installs nbprof and
    downloads nothing. Run here with every download refused (the proxy is a closed local
    port), without its install line (nbprof is importable already): it succeeds and leaves
    the cache empty."""
    text = (BINDER / "postBuild").read_text(encoding="utf-8")
    for fetch in ("nbprof.datasets download", "curl", "wget", "http://", "https://"):
        assert fetch not in text, fetch
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
    assert not (tmp_path / "cache").exists()


def test_every_trace_a_notebook_reads_ships_inside_the_package() -> None:
    from nbprof import datasets

    for path in NOTEBOOKS:
        for name in _datasets_used(path):
            assert datasets.info(name).bundled, f"{path.name}: {name} is not bundled"


def test_nothing_in_the_notebooks_needs_the_network_or_the_corpus() -> None:
    # Real traces are reached only through nbprof.datasets, from inside the package: no
    # notebook fetches a URL of its own or names the corpus.
    for path in NOTEBOOKS:
        text = path.read_text(encoding="utf-8")
        assert "http://" not in text and "https://" not in text, path.name
        assert os.sep + "shared" + os.sep not in text, path.name
        assert "NBPROF_TRACE_CORPUS" not in text, path.name


def test_the_kernels_cannot_see_the_corpus_or_the_network(tmp_path: Path) -> None:
    """The guard the notebooks run under refuses what it should, in a real kernel."""
    import nbformat

    hidden = tmp_path / "corpus"
    hidden.mkdir()
    (hidden / "trace.json").write_text("{}", encoding="utf-8")
    probe = tmp_path / "probe.ipynb"
    code = (
        "import socket\n"
        "for attempt in (\n"
        f"    lambda: open({str(hidden / 'trace.json')!r}).read(),\n"
        f"    lambda: __import__('os').listdir({str(hidden)!r}),\n"
        "    lambda: socket.getaddrinfo('example.org', 443),\n"
        "    lambda: socket.create_connection(('192.0.2.1', 9), timeout=1),\n"
        "):\n"
        "    try:\n"
        "        attempt()\n"
        "        print('allowed')\n"
        "    except OSError as e:\n"
        "        print('refused:', e)\n"
        f"print(open({str(probe)!r}).read()[:1])"
    )
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)]), probe)
    env = offline_env(tmp_path, dict(os.environ), [hidden])
    run = execute(probe, env, tmp_path)
    lines = text_of(run.nb.cells[0].outputs[0]).splitlines()
    assert [ln.split(":")[0] for ln in lines[:4]] == ["refused"] * 4, lines
    assert "hidden from this kernel" in lines[0] and "no network" in lines[2]
    assert lines[4] == "{"  # anything else opens as before


def _datasets_used(path: Path) -> list[str]:
    import nbformat

    nb = nbformat.read(path, as_version=4)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    return re.findall(r"(?:recorded|datasets\.(?:load|path|info|files))\(\"([^\"]+)\"", code)
