"""``nbprof demo``: with no GPU it still shows something real, labelled for what it is."""

from __future__ import annotations

import io
import socket
from pathlib import Path

import pytest

from nbprof import datasets, demo
from nbprof.datasets import Dataset


def _needs_pipeline() -> None:
    """The demo drives the reader, the analysis and both views: skip until they exist."""
    import importlib

    for module, name in (
        ("nbprof.trace", "read"),
        ("nbprof.analysis", "analyze"),
        ("nbprof.views.text", "render"),
        ("nbprof.views.report", "render"),
    ):
        try:
            getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError) as e:
            pytest.skip(f"{module}.{name}, which the demo drives, is not available yet: {e}")


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


@pytest.mark.usefixtures("no_gpu_no_network")
def test_no_gpu_no_corpus_no_network_profiles_the_cpu_and_says_so(tmp_path: Path) -> None:
    _needs_pipeline()
    html = tmp_path / "out" / "demo.html"
    buf = io.StringIO()
    res = demo.run("auto", output=html, steps=2, out=buf)
    out = buf.getvalue()

    assert res.kind == "cpu"
    assert out.startswith("=" * 78 + f"\nnbprof demo: {demo.CPU_LABEL}")
    assert "not a GPU" in out
    assert "No real GPU trace at hand" in out  # why it fell back
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


@pytest.mark.corpus
@pytest.mark.usefixtures("no_gpu_no_network")
def test_with_a_corpus_it_diagnoses_a_real_gpu_trace(
    corpus: Path,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _needs_pipeline()
    monkeypatch.setenv(datasets.CORPUS_ENV, str(corpus))
    html = tmp_path / "demo.html"
    assert demo.main(["-o", str(html)]) == 0
    out = capsys.readouterr().out
    ds = datasets.info(demo.DEFAULT_DATASET)
    assert "REAL GPU TRACE" in out and ds.title in out
    assert ds.repository in out and str(corpus / ds.file_name) in out
    assert demo.CPU_LABEL not in out
    assert html.is_file() and html.stat().st_size > 0


@pytest.mark.corpus
@pytest.mark.usefixtures("no_gpu_no_network")
def test_dataset_option_picks_the_trace(
    corpus: Path,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _needs_pipeline()
    monkeypatch.setenv(datasets.CORPUS_ENV, str(corpus))
    name = "alexnet-a100-sync"
    assert demo.main(["--dataset", name, "--offline", "-o", str(tmp_path / "a.html")]) == 0
    out = capsys.readouterr().out
    assert datasets.info(name).title in out


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
def test_list_names_every_dataset(capsys: pytest.CaptureFixture[str]) -> None:
    assert demo.main(["--list"]) == 0
    out = capsys.readouterr().out
    for name in datasets.names():
        assert name in out


@pytest.mark.usefixtures("no_gpu_no_network")
def test_the_cli_hands_demo_its_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    cli = pytest.importorskip("nbprof.cli")
    assert cli.main(["demo", "--list"]) == 0
    assert demo.DEFAULT_DATASET in capsys.readouterr().out
