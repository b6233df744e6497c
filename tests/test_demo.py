"""``nbprof demo``: with no GPU and no network it diagnoses a real GPU trace bundled with nbprof."""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import io
import json
import shutil
import socket
from pathlib import Path

import pytest

from nbprof import datasets, demo
from nbprof.datasets import Dataset

RULE = "=" * demo.RULE_WIDTH


@pytest.fixture
def no_gpu_no_network(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(datasets.CORPUS_ENV, raising=False)
    monkeypatch.setenv(datasets.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(datasets, "_VERIFIED", set())
    monkeypatch.setattr(demo, "_cuda_available", lambda: False)
    # Downloads go to a local port nobody listens on: the "no network" case, reached
    # through the real download code.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setattr(
        Dataset, "url", property(lambda self: f"http://127.0.0.1:{port}/{self.file_name}")
    )


def _lines(out: str) -> list[str]:
    """The demo's own header lines (before the report), unwrapped."""
    header = out.split(RULE)[1]
    joined: list[str] = []
    for ln in header.strip("\n").splitlines():
        if ln.startswith("    ") and joined:
            joined[-1] += " " + ln.strip()
        else:
            joined.append(ln.strip())
    return joined


DATA = Path(datasets.__file__).parent / "data"


def _assert_the_default_bundled_trace(out: str) -> None:
    """The demo's header names the bundled default: which trace, its origin, licence, GPU."""
    ds = datasets.info(demo.DEFAULT_DATASET)
    lines = _lines(out)
    assert lines[0] == f"nbprof demo: REAL GPU TRACE (recorded, not live): {ds.title}"
    assert "No GPU on this machine: this diagnoses a trace recorded on one." in lines
    assert f"Dataset {ds.name} (the default; `nbprof demo --list` shows the others)." in lines
    assert f"From: {ds.origin}." in lines  # repository, path, commit and licence
    licence = DATA / ds.licence_file
    assert f"Licence: {ds.licence}; its text ships with nbprof: {licence}." in lines
    assert f"Read from: {DATA / ds.file_name} (bundled with nbprof)." in lines
    # The GPU it was recorded on, from the registry, agreeing with the trace's own record.
    assert f"Recorded on: {ds.gpu} (as the trace itself records)." in lines
    assert demo.CPU_LABEL not in out and "What the CPU did" not in out
    # The default shows a run whose host blocks on a tiny copy while the GPU's queued work
    # waits on work outside the trace: the verdict says the block is a consequence.
    assert "Verdict: GPU mostly idle. NVIDIA A100-SXM4-80GB:" in out
    assert "a consequence, not the cause" in " ".join(out.split())


@pytest.mark.usefixtures("no_gpu_no_network")
def test_no_gpu_no_corpus_no_network_diagnoses_the_bundled_real_gpu_trace(
    tmp_path: Path,
) -> None:
    html = tmp_path / "out" / "demo.html"
    buf = io.StringIO()
    res = demo.run("auto", output=html, out=buf)
    out = buf.getvalue()

    assert res.kind == "dataset"
    _assert_the_default_bundled_trace(out)
    assert len(res.profile.kernels) > 0
    # The printed report is the profile's own text report, noting the recorded trace.
    assert res.profile.text().strip().splitlines()[0] in out
    assert any(n.startswith(f"Recorded trace {demo.DEFAULT_DATASET}:") for n in res.profile.notes)
    assert f"Dashboard written to {html.resolve()}" in out
    page = html.read_text(encoding="utf-8")
    assert page.lstrip().lower().startswith("<!doctype html")
    assert demo.CPU_LABEL not in page
    assert not (tmp_path / "cache").exists()  # nothing downloaded, nothing cached


@pytest.mark.usefixtures("no_gpu_no_network")
def test_offline_changes_nothing_for_the_bundled_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert demo.main(["--offline", "-o", str(tmp_path / "d.html")]) == 0
    _assert_the_default_bundled_trace(capsys.readouterr().out)


@pytest.mark.corpus
@pytest.mark.usefixtures("no_gpu_no_network")
def test_with_a_corpus_the_bundled_copy_is_still_the_one_read(
    corpus: Path,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(datasets.CORPUS_ENV, str(corpus))
    assert demo.main(["-o", str(tmp_path / "demo.html")]) == 0
    _assert_the_default_bundled_trace(capsys.readouterr().out)


@pytest.mark.usefixtures("no_gpu_no_network")
def test_a_live_cpu_profile_only_when_asked_for_and_labelled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    html = tmp_path / "cpu.html"
    assert demo.main(["--cpu", "--steps", "2", "-o", str(html)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{RULE}\nnbprof demo: {demo.CPU_LABEL}")
    assert "not a GPU" in out
    assert "What the CPU did" in out and "aten::conv2d" in out  # the model's real ops
    assert "REAL GPU TRACE" not in out
    page = html.read_text(encoding="utf-8")
    assert demo.CPU_LABEL in page  # the profile itself carries the label
    res = demo.run("cpu", output=tmp_path / "again.html", steps=1, out=io.StringIO())
    assert res.kind == "cpu" and res.profile.notes[0].startswith(demo.CPU_LABEL)
    assert len(res.profile.kernels) == 0


@pytest.mark.usefixtures("no_gpu_no_network")
def test_a_broken_install_is_one_clear_error_not_a_cpu_profile(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The package's data folder without the default trace: say so, never fall back.
    monkeypatch.setattr(datasets, "_DATA_DIR", tmp_path / "data")
    assert demo.main(["-o", str(tmp_path / "x.html")]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1
    assert "should ship with nbprof" in err and demo.DEFAULT_DATASET in err
    assert demo.CPU_LABEL not in captured.out
    assert not (tmp_path / "x.html").exists() and not (tmp_path / "cache").exists()


@pytest.mark.corpus
@pytest.mark.usefixtures("no_gpu_no_network")
def test_a_cached_download_of_another_trace_is_used_offline(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ds = datasets.info("alexnet-a100-sync")
    assert not ds.bundled
    (tmp_path / "cache").mkdir()
    shutil.copyfile(corpus / ds.file_name, tmp_path / "cache" / ds.file_name)
    argv = ["--dataset", ds.name, "--offline", "-o", str(tmp_path / "d.html")]
    assert demo.main(argv) == 0
    lines = _lines(capsys.readouterr().out)
    assert f"Read from: {tmp_path / 'cache' / ds.file_name} (the download cache)." in lines
    assert f"Licence: {ds.licence} (the repository's own licence file at that commit)." in lines


def _tiny_bundled(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Dataset:
    """A test-only bundled trace (two 40 µs kernels, built here), in a temporary package
    data folder. It stands in for a real recording only to drive the bundled code path."""
    events = [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": ts, "dur": 40.0,
         "args": {"device": 0, "stream": 7, "correlation": i}}
        for i, ts in enumerate((10.0, 60.0))
    ]  # fmt: skip
    data = gzip.compress(json.dumps({"traceEvents": events}).encode(), mtime=0)
    ds = dataclasses.replace(
        datasets.info("alexnet-a100-sync"),
        name="test-only-bundled",
        title="a two-kernel trace built by the test",
        file_name="test-only-bundled.json.gz",
        sha256=hashlib.sha256(data).hexdigest(),
        size=len(data),
        bundled=True,
    )
    monkeypatch.setitem(datasets._BY_NAME, ds.name, ds)
    monkeypatch.setattr(datasets, "_DATA_DIR", tmp_path / "data")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / ds.file_name).write_bytes(data)
    return ds


@pytest.mark.usefixtures("no_gpu_no_network")
def test_any_bundled_trace_is_picked_by_name_and_listed_as_bundled(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ds = _tiny_bundled(monkeypatch, tmp_path)
    assert demo.main(["--dataset", ds.name, "-o", str(tmp_path / "b.html")]) == 0
    out = capsys.readouterr().out
    lines = _lines(out)
    assert lines[0].endswith(ds.title)
    assert f"Read from: {tmp_path / 'data' / ds.file_name} (bundled with nbprof)." in lines
    assert demo.CPU_LABEL not in out
    assert not (tmp_path / "cache").exists()

    assert demo.main(["--list"]) == 0
    listing = capsys.readouterr().out
    bundled, downloadable = listing.split("Downloadable")
    assert f"{ds.name}  ({ds.size / 1e6:.2f} MB; here: bundled with nbprof)" in bundled
    assert ds.name not in downloadable


@pytest.mark.usefixtures("no_gpu_no_network")
def test_dataset_option_picks_the_bundled_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = "dlrm-v100-8ranks"
    assert demo.main(["--dataset", name, "--offline", "-o", str(tmp_path / "a.html")]) == 0
    lines = _lines(capsys.readouterr().out)
    ds = datasets.info(name)
    assert lines[0].endswith(ds.title)
    # A GPU named differently in the trace than in the registry: both are shown.
    assert f"Recorded on: {ds.gpu} (the trace itself records 8x Tesla V100-SXM2-32GB)." in lines
    assert f"Read from: {DATA / ds.folder_name} (bundled with nbprof)." in lines


@pytest.mark.usefixtures("no_gpu_no_network")
def test_a_dataset_that_cannot_be_had_offline_is_one_clear_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc = demo.main(["--dataset", "alexnet-a100-sync", "--offline", "-o", str(tmp_path / "x")])
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert datasets.CORPUS_ENV in err
    assert not (tmp_path / "x").exists()


@pytest.mark.usefixtures("no_gpu_no_network")
def test_forcing_the_gpu_without_one_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert demo.main(["--gpu"]) == 2
    assert "torch.cuda.is_available() is False" in capsys.readouterr().err


@pytest.mark.usefixtures("no_gpu_no_network")
def test_list_shows_the_bundled_first_and_what_is_here(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert demo.main(["--list"]) == 0
    out = capsys.readouterr().out
    bundled, downloadable = out.split("\nDownloadable")
    assert "Bundled (inside the nbprof package" in bundled
    in_package = [n for n in datasets.names() if datasets.info(n).bundled]
    others = [n for n in datasets.names() if n not in in_package]
    assert in_package and others
    for group, names in ((bundled, in_package), (downloadable, others)):
        for name in names:
            ds = datasets.info(name)
            assert f"{name}{'  [default]' if name == demo.DEFAULT_DATASET else ''}  (" in group
            assert f"recorded on {ds.gpu}" in group and ds.origin in group
    assert f"{demo.DEFAULT_DATASET}  [default]" in bundled
    assert bundled.count("here: bundled with nbprof)") == len(in_package)
    assert downloadable.count("not here: downloads on first use") == len(others)


@pytest.mark.corpus
@pytest.mark.usefixtures("no_gpu_no_network")
def test_list_says_which_are_in_the_corpus(
    corpus: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(datasets.CORPUS_ENV, str(corpus))
    assert demo.main(["--list"]) == 0
    out = capsys.readouterr().out
    others = [n for n in datasets.names() if not datasets.info(n).bundled]
    assert out.count(f"here: {datasets.CORPUS_ENV})") == len(others)
    assert out.count("here: bundled with nbprof)") == len(datasets.names()) - len(others)


@pytest.mark.usefixtures("no_gpu_no_network")
def test_the_cli_hands_demo_its_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    from nbprof import cli

    assert cli.main(["demo", "--list"]) == 0
    assert f"{demo.DEFAULT_DATASET}  [default]" in capsys.readouterr().out


def test_the_default_is_a_registered_trace() -> None:
    assert demo.DEFAULT_DATASET in datasets.names()
