"""The built wheel, installed alone in a fresh virtual environment, runs ``nbprof demo`` and
the four notebooks on the real GPU traces it carries.

This is a newcomer's first run on a machine with no GPU, no corpus folder and no network:
the wheel is built from the source files (``pip wheel --no-deps``), installed with
``--no-deps --no-index`` into a new virtual environment whose only view of the
dependencies (torch, pandas, bokeh...) is a ``.pth`` line naming this interpreter's
site-packages, and the demo runs there from an empty folder, with every proxy variable
pointing at a closed local port so any download fails as it would offline. The notebooks
run in that environment's own kernel, which cannot open the corpus or the checkout's
package (see ``offline_kernel.py``).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "nbprof" / "data"

pytestmark = pytest.mark.slow


@dataclass
class Installed:
    wheel: Path
    venv: Path
    python: Path
    script: Path
    home: Path

    def env(self, **extra: str) -> dict[str, str]:
        """A newcomer's environment: no corpus, an empty cache, no GPU, no network."""
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("NBPROF_", "PYTHON", "VIRTUAL_ENV"))
            and k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
        }
        with socket.socket() as s:  # a local port nobody listens on
            s.bind(("127.0.0.1", 0))
            dead = f"http://127.0.0.1:{s.getsockname()[1]}"
        for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
            env[var] = dead
        env.update(
            HOME=str(self.home),
            NBPROF_CACHE_DIR=str(self.home / "cache"),
            # The tables' own cache apart, so the download cache stays empty unless a
            # download happened.
            NBPROF_TABLE_CACHE=str(self.home / "tables"),
            CUDA_VISIBLE_DEVICES="",
            PATH=f"{self.python.parent}{os.pathsep}{env.get('PATH', '')}",
        )
        env.update(extra)
        return env

    def run(self, *args: str, cwd: Path, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.script), *args],
            cwd=cwd,
            env=self.env(**extra),
            capture_output=True,
            text=True,
            timeout=300,
        )


def _pip(*args: str, cwd: Path, env: dict[str, str] | None = None) -> None:
    # --no-index everywhere: nothing may come from a package index. Without PYTHONPATH:
    # pip would take a checkout named there for an installed nbprof of the same version,
    # and skip installing the wheel.
    base = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input", *args],
        cwd=cwd,
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def _build_and_install(base: Path, **build_env: str) -> Installed:
    """The wheel built from a copy of the release's files, installed in a new venv."""
    # Build from a copy of the files a release is made of, so build artefacts land in
    # the copy and nothing stale in the checkout (an old build/ folder) reaches the wheel.
    src = base / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, src / name)
    shutil.copytree(
        REPO / "nbprof",
        src / "nbprof",
        # The scanner an editable install built in the checkout: the wheel builds its own.
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.so", "*.pyd"),
    )
    # The running environment provides the build backend (setuptools): no download.
    _pip("wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(base), "./src",
         cwd=base, env=build_env)  # fmt: skip
    (wheel,) = base.glob("nbprof-*.whl")

    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # The dependencies, without installing them again: this interpreter's site-packages,
    # appended after the new environment's own (so the wheel's nbprof comes first).
    deps = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (Path(purelib) / "shared-dependencies.pth").write_text("\n".join(sorted(deps)) + "\n")
    _pip("--python", str(python), "install", "--no-deps", "--no-index", str(wheel), cwd=base)
    script = python.parent / ("nbprof.exe" if os.name == "nt" else "nbprof")
    home = base / "home"
    home.mkdir()
    return Installed(wheel, venv, python, script, home)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    yield _build_and_install(tmp_path_factory.mktemp("wheel"))


def test_the_wheel_carries_the_package_data(installed: Installed) -> None:
    from nbprof import datasets

    with zipfile.ZipFile(installed.wheel) as z:
        names = set(z.namelist())
        # nbprof/data holds the bundled traces and their licence texts: they must ship, and
        # byte for byte as in the checkout.
        assert "nbprof/data/README.md" in names
        bundled = [datasets.info(n) for n in datasets.names() if datasets.info(n).bundled]
        assert bundled
        for ds in bundled:
            files = [f"{ds.folder_name}/{m.name}.gz" for m in ds.members] or [ds.file_name]
            for f in files:
                assert z.read(f"nbprof/data/{f}") == (DATA / f).read_bytes(), f
            assert z.read(f"nbprof/data/{ds.licence_file}") == (DATA / ds.licence_file).read_bytes()
        # The views' HTML templates, every one: a missing one fails only when its view
        # renders.
        templates = sorted((REPO / "nbprof" / "views" / "templates").glob("*.html"))
        assert templates
        for t in templates:
            assert z.read(f"nbprof/views/templates/{t.name}") == t.read_bytes(), t.name
    # PEP 561: type checkers read nbprof's own annotations only when the marker ships.
    assert "nbprof/py.typed" in names
    assert "nbprof/datasets.py" in names and "nbprof/demo.py" in names
    assert not [n for n in names if n.startswith(("tests/", "notebooks/", "benchmarks/"))]
    # The C accelerator (events scanner and ops' nesting walk, one extension) is compiled
    # into the wheel where there is a compiler, its type stubs beside it.
    if shutil.which("cc") or shutil.which("gcc"):
        assert [n for n in names if n.startswith("nbprof/trace/_accel.") and n.endswith(".so")]
    assert "nbprof/trace/_accel.pyi" in names
    stale = ("nbprof/trace/_scan.", "nbprof/trace/_nest.")  # the two extensions it replaced
    assert not [n for n in names if n.startswith(stale) and n.endswith((".so", ".pyi"))]


def _site_data(installed: Installed) -> Path:
    """The installed package's data folder, inside the virtual environment."""
    proc = subprocess.run(
        [str(installed.python), "-c", "import nbprof, sys; print(nbprof.__file__)"],
        cwd=installed.home,
        env=installed.env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return Path(proc.stdout.strip()).parent / "data"


def test_the_installed_package_is_the_wheel(installed: Installed) -> None:
    assert _site_data(installed).is_relative_to(installed.venv)


def test_demo_with_no_gpu_no_corpus_and_no_network(installed: Installed, tmp_path: Path) -> None:
    """The README's first command, run from the wheel: a real GPU's verdict, offline."""
    from nbprof import datasets, demo

    proc = installed.run("demo", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    rule = "=" * 88
    ds = datasets.info(demo.DEFAULT_DATASET)
    header = " ".join(out.split(rule)[1].split())  # unwrapped
    assert header.startswith(f"nbprof demo: REAL GPU TRACE (recorded, not live): {ds.title}")
    assert "No GPU on this machine: this diagnoses a trace recorded on one." in header
    assert f"Recorded on: {ds.gpu} (as the trace itself records)." in header
    assert f"From: {ds.origin}." in header
    data = _site_data(installed)
    assert f"Licence: MIT; its text ships with nbprof: {data / ds.licence_file}." in header
    assert f"Read from: {data / ds.file_name} (bundled with nbprof)." in header
    assert "Verdict: GPU mostly idle. The GPU idled 59% of its span with work queued" in " ".join(
        out.split()
    )
    assert "LIVE CPU PROFILE" not in out and "CPU only" not in out
    html = tmp_path / "nbprof-demo.html"
    assert f"Dashboard written to {html}" in out
    assert html.read_text(encoding="utf-8").lstrip().lower().startswith("<!doctype html")
    assert "Traceback" not in proc.stderr
    assert not (installed.home / "cache").exists()  # nothing downloaded


def test_demo_list_there_shows_the_bundled_traces_first(
    installed: Installed, tmp_path: Path
) -> None:
    from nbprof import datasets

    proc = installed.run("demo", "--list", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    bundled, downloadable = proc.stdout.split("\nDownloadable")
    assert "dlrm-a100-queued-idle  [default]" in bundled
    in_package = [n for n in datasets.names() if datasets.info(n).bundled]
    assert bundled.count("here: bundled with nbprof)") == len(in_package)
    assert "here:" not in downloadable.replace("not here:", "")


def test_a_live_cpu_profile_from_the_wheel_when_asked_for(
    installed: Installed, tmp_path: Path
) -> None:
    proc = installed.run("demo", "--cpu", "--steps", "2", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("=" * 88 + "\nnbprof demo: LIVE CPU PROFILE (no GPU on this")
    assert "What the CPU did" in proc.stdout and "aten::conv2d" in proc.stdout


@pytest.mark.corpus
def test_demo_from_the_wheel_diagnoses_a_cached_unbundled_trace_offline(
    installed: Installed, corpus: Path, tmp_path: Path
) -> None:
    # What a user has after one download of a trace that is not bundled: the pinned file in
    # the cache (copied here from the corpus into a temporary cache), and still no network.
    name = "hta__critical_path_alexnet__benchmark_result_2869224_1695835535_trace.json.gz"
    cache = tmp_path / "cache"
    cache.mkdir()
    shutil.copyfile(corpus / name, cache / name)
    proc = installed.run(
        "demo", "--dataset", "alexnet-a100-sync", cwd=tmp_path, NBPROF_CACHE_DIR=str(cache)
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    header = " ".join(proc.stdout.split("=" * 88)[1].split())
    assert "nbprof demo: REAL GPU TRACE (recorded, not live): AlexNet benchmark" in header
    assert f"Read from: {cache / name} (the download cache)." in header
    assert "(the repository's own licence file at that commit)" in header


def test_the_notebooks_run_from_the_wheel_offline(installed: Installed, tmp_path: Path) -> None:
    """Each notebook in the virtual environment's own kernel: no corpus (hidden, with the
    checkout's package), no network, an empty cache; every trace from the wheel."""
    import importlib.util

    from offline_kernel import execute, offline_env, read_from, text_of

    from tests.test_notebooks import NOTEBOOKS, hidden_corpus

    spec = importlib.util.find_spec("nbprof")
    assert spec is not None and spec.origin is not None
    hidden = [*hidden_corpus(), REPO / "nbprof", Path(spec.origin).parent]
    env = offline_env(tmp_path, installed.env(), hidden)
    data = _site_data(installed)
    for path in NOTEBOOKS:
        run = execute(path, env, tmp_path, python=installed.python)
        outputs = [o for c in run.nb.cells if c.cell_type == "code" for o in c.outputs]
        assert not [o for o in outputs if o.get("output_type") == "error"], path.name
        text = "\n".join(text_of(o) for o in outputs)
        assert "RECORDED trace" in text, path.name
        dashboards = [t for t in map(text_of, outputs) if t.startswith("nbprof ·")]
        assert len(dashboards) == 1 and read_from(dashboards[0], data), path.name
    assert not (installed.home / "cache").exists()  # nothing downloaded


def test_without_a_compiler_the_wheel_reads_traces_in_python(tmp_path: Path) -> None:
    # The accelerator is optional: with no C compiler the build still succeeds, the wheel
    # holds no extension, and traces are read by the pure path, to the same tables, after
    # one warning that says so and how much slower it is.
    from nbprof.trace import read
    from tests.test_trace_fastpaths import GOOD, kineto_text

    base = tmp_path / "nocc"
    base.mkdir()
    installed = _build_and_install(base, CC="false")
    with zipfile.ZipFile(installed.wheel) as z:
        assert not [n for n in z.namelist() if n.endswith((".so", ".pyd"))]
    trace = tmp_path / "t.json"
    trace.write_text(kineto_text(GOOD * 3), encoding="utf-8")
    code = (
        "import sys; from nbprof.trace import read, accel; "
        "t = read(sys.argv[1], progress=False, cache=False); "
        "read(sys.argv[1], progress=False, cache=False); "
        "print(accel.available(), len(t.kernels), t.kernels['grid'].tolist(), "
        "t.cpu_ops['input_dims'].tolist())"
    )
    proc = subprocess.run(
        [str(installed.python), "-c", code, str(trace)],
        cwd=tmp_path,
        env=installed.env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    from nbprof.trace import accel

    warned = [line for line in proc.stderr.splitlines() if "C accelerator" in line]
    assert len(warned) == 1 and f"about {accel.PURE_SLOWDOWN:.1f}x as slow" in warned[0]
    here = read(trace, progress=False, cache=False)
    # Read here by the accelerator (where it is built), there in Python: the same columns.
    want = (
        False,
        len(here.kernels),
        here.kernels["grid"].tolist(),
        here.cpu_ops["input_dims"].tolist(),
    )
    assert proc.stdout.strip() == " ".join(map(str, want))
