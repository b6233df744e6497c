"""``nbprof demo``: with no GPU it still shows something real, labelled for what it is."""

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


@pytest.mark.usefixtures("no_gpu_no_network")
def test_no_gpu_no_corpus_no_network_profiles_the_cpu_and_says_so(tmp_path: Path) -> None:
    html = tmp_path / "out" / "demo.html"
    buf = io.StringIO()
    res = demo.run("auto", output=html, steps=2, out=buf)
    out = buf.getvalue()

    assert res.kind == "cpu"
    assert out.startswith(f"{RULE}\nnbprof demo: {demo.CPU_LABEL}")
    assert "not a GPU" in out
    # Why no real trace was used, and how to get one: one line of its own.
    hint = [ln for ln in _lines(out) if ln.startswith("No real GPU trace at hand")]
    assert len(hint) == 1
    assert f"{datasets.CORPUS_ENV} is not set" in hint[0]
    assert "the download failed (ConnectionError)" in hint[0]
    assert f"set {datasets.CORPUS_ENV} to a folder of traces" in hint[0]
    assert "allow the one download" in hint[0]
    assert "What the CPU did" in out and "aten::conv2d" in out  # the model's real ops
    # The profile itself carries the label, so every view of it says CPU.
    assert res.profile.notes[0].startswith(demo.CPU_LABEL)
    assert len(res.profile.kernels) == 0
    # The printed report is the profile's own text report.
    assert res.profile.text().strip().splitlines()[0] in out
    assert f"Dashboard written to {html.resolve()}" in out
    page = html.read_text(encoding="utf-8")
    assert page.lstrip().lower().startswith("<!doctype html")
    assert demo.CPU_LABEL in page


@pytest.mark.usefixtures("no_gpu_no_network")
def test_offline_says_the_download_was_not_tried(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert demo.main(["--offline", "--steps", "1", "-o", str(tmp_path / "d.html")]) == 0
    hint = [ln for ln in _lines(capsys.readouterr().out) if ln.startswith("No real GPU")]
    assert len(hint) == 1 and "--offline forbids the download" in hint[0]


@pytest.mark.corpus
@pytest.mark.usefixtures("no_gpu_no_network")
def test_with_a_corpus_it_diagnoses_the_default_real_gpu_trace(
    corpus: Path,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(datasets.CORPUS_ENV, str(corpus))
    html = tmp_path / "demo.html"
    assert demo.main(["-o", str(html)]) == 0
    out = capsys.readouterr().out
    ds = datasets.info(demo.DEFAULT_DATASET)
    lines = _lines(out)
    assert lines[0] == f"nbprof demo: REAL GPU TRACE (recorded, not live): {ds.title}"
    assert "No GPU on this machine: this diagnoses a trace recorded on one." in lines
    assert f"From: {ds.origin}." in lines  # repository, path, commit and licence
    assert f"Read from: {corpus / ds.file_name} ({datasets.CORPUS_ENV})." in lines
    # The GPU it was recorded on, from the registry, agreeing with the trace's own record.
    assert f"Recorded on: {ds.gpu} (as the trace itself records)." in lines
    assert demo.CPU_LABEL not in out
    # The default shows a run whose host blocks on a tiny copy while the GPU's queued work
    # waits on work outside the trace: the verdict says the block is a consequence.
    assert "Verdict: GPU mostly idle." in out
    assert "a consequence, not the cause" in " ".join(out.split())
    assert f"Dashboard written to {html.resolve()}" in out
    assert html.is_file() and html.stat().st_size > 0
    assert not (tmp_path / "cache").exists()  # nothing downloaded


@pytest.mark.corpus
@pytest.mark.usefixtures("no_gpu_no_network")
def test_a_cached_download_is_used_offline(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ds = datasets.info(demo.DEFAULT_DATASET)
    (tmp_path / "cache").mkdir()
    shutil.copyfile(corpus / ds.file_name, tmp_path / "cache" / ds.file_name)
    assert demo.main(["--offline", "-o", str(tmp_path / "d.html")]) == 0
    lines = _lines(capsys.readouterr().out)
    assert f"Read from: {tmp_path / 'cache' / ds.file_name} (the download cache)." in lines


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
def test_a_bundled_trace_is_diagnosed_with_no_corpus_and_no_network(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ds = _tiny_bundled(monkeypatch, tmp_path)
    assert demo.main(["-o", str(tmp_path / "b.html")]) == 0
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


@pytest.mark.corpus
@pytest.mark.usefixtures("no_gpu_no_network")
def test_dataset_option_picks_the_trace(
    corpus: Path,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(datasets.CORPUS_ENV, str(corpus))
    name = "dlrm-v100-8ranks"
    assert demo.main(["--dataset", name, "--offline", "-o", str(tmp_path / "a.html")]) == 0
    lines = _lines(capsys.readouterr().out)
    ds = datasets.info(name)
    assert lines[0].endswith(ds.title)
    # A GPU named differently in the trace than in the registry: both are shown.
    assert f"Recorded on: {ds.gpu} (the trace itself records 8x Tesla V100-SXM2-32GB)." in lines
    assert f"Read from: {corpus / ds.folder_name} ({datasets.CORPUS_ENV})." in lines


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
def test_list_shows_bundled_and_downloadable_and_what_is_here(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert demo.main(["--list"]) == 0
    out = capsys.readouterr().out
    bundled, downloadable = out.split("\nDownloadable")
    assert "Bundled (inside the nbprof package" in bundled
    assert "(none in this version)" in bundled  # no real trace ships in the package yet
    for name in datasets.names():
        ds = datasets.info(name)
        assert f"{name}{'  [default]' if name == demo.DEFAULT_DATASET else ''}  (" in downloadable
        assert f"recorded on {ds.gpu}" in downloadable and ds.origin in downloadable
    assert downloadable.count("not here: downloads on first use") == len(datasets.names())


@pytest.mark.corpus
@pytest.mark.usefixtures("no_gpu_no_network")
def test_list_says_which_are_in_the_corpus(
    corpus: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(datasets.CORPUS_ENV, str(corpus))
    assert demo.main(["--list"]) == 0
    out = capsys.readouterr().out
    assert out.count(f"here: {datasets.CORPUS_ENV})") == len(datasets.names())


@pytest.mark.usefixtures("no_gpu_no_network")
def test_the_cli_hands_demo_its_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    from nbprof import cli

    assert cli.main(["demo", "--list"]) == 0
    assert f"{demo.DEFAULT_DATASET}  [default]" in capsys.readouterr().out


def test_the_default_is_a_registered_trace() -> None:
    assert demo.DEFAULT_DATASET in datasets.names()
