"""The built wheel, installed alone in a fresh virtual environment, runs ``nbprof demo``.

This is a newcomer's first run on a machine with no GPU, no corpus folder and no network:
the wheel is built from the source files (``pip wheel --no-deps``), installed with
``--no-deps --no-index`` into a new virtual environment whose only view of the
dependencies (torch, pandas, bokeh...) is a ``.pth`` line naming this interpreter's
site-packages, and the demo runs there from an empty folder, with every proxy variable
pointing at a closed local port so any download fails as it would offline.
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
    # --no-index everywhere: nothing may come from a package index.
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input", *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
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
    with zipfile.ZipFile(installed.wheel) as z:
        names = set(z.namelist())
    # nbprof/data is where bundled traces and their licence texts go: it must ship.
    assert "nbprof/data/README.md" in names
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


def test_the_installed_package_is_the_wheel(installed: Installed, tmp_path: Path) -> None:
    proc = subprocess.run(
        [str(installed.python), "-c", "import nbprof, sys; print(nbprof.__file__)"],
        cwd=tmp_path,
        env=installed.env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert Path(proc.stdout.strip()).is_relative_to(installed.venv)


def test_demo_with_no_gpu_no_corpus_and_no_network(installed: Installed, tmp_path: Path) -> None:
    proc = installed.run("demo", "--steps", "2", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    rule = "=" * 88
    assert out.startswith(f"{rule}\nnbprof demo: LIVE CPU PROFILE (no GPU on this machine)\n")
    assert "the numbers describe CPU work only, not" in out
    header = " ".join(out.split(rule)[1].split())  # unwrapped
    assert "No real GPU trace at hand (NBPROF_TRACE_CORPUS is not set, none is cached, " in header
    assert "and the download failed (" in header
    assert "For one: set NBPROF_TRACE_CORPUS to a folder of traces, or allow the one " in header
    assert "Verdict: CPU only (no GPU activity)." in out
    assert "What the CPU did" in out and "aten::conv2d" in out
    html = tmp_path / "nbprof-demo.html"
    assert f"Dashboard written to {html}" in out
    assert html.read_text(encoding="utf-8").lstrip().lower().startswith("<!doctype html")
    assert "Traceback" not in proc.stderr
    assert not (
        installed.home / "cache" / "hta__negative_queue_length_values_check__rank0.json.gz"
    ).exists()


def test_demo_list_there_says_nothing_is_here(installed: Installed, tmp_path: Path) -> None:
    proc = installed.run("demo", "--list", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    bundled, downloadable = proc.stdout.split("\nDownloadable")
    assert "(none in this version)" in bundled
    assert "dlrm-a100-sync-bound  [default]" in downloadable
    assert "here:" not in downloadable.replace("not here:", "")


@pytest.mark.corpus
def test_demo_from_the_wheel_diagnoses_a_cached_real_trace_offline(
    installed: Installed, corpus: Path, tmp_path: Path
) -> None:
    # What a user has after one download: the pinned file in the cache (copied here from
    # the corpus into a temporary cache), and still no network.
    name = "hta__negative_queue_length_values_check__rank0.json.gz"
    cache = tmp_path / "cache"
    cache.mkdir()
    shutil.copyfile(corpus / name, cache / name)
    proc = installed.run("demo", cwd=tmp_path, NBPROF_CACHE_DIR=str(cache))
    assert proc.returncode == 0, proc.stderr[-3000:]
    header = " ".join(proc.stdout.split("=" * 88)[1].split())
    assert (
        "nbprof demo: REAL GPU TRACE (recorded, not live): DLRM-style training on an A100" in header
    )
    assert "Recorded on: NVIDIA A100-SXM4-80GB" in header
    assert "From: facebookresearch/HolisticTraceAnalysis:" in header and "(MIT)" in header
    assert f"Read from: {cache / name} (the download cache)." in header
    assert "Verdict: Stalled on synchronizations." in proc.stdout


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
