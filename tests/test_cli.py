"""The nbprof command: analyze (text / JSON / --device), report, demo dispatch, bad input."""

from __future__ import annotations

import gzip
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from nbprof.analysis.model import BOTTLENECKS
from nbprof.cli import main

# DESIGN.md's schema nbprof.analysis/1: these keys keep their names and meanings.
TOP_KEYS = {"schema", "source", "devices", "verdict", "findings"}
DEVICE_KEYS = {
    "device", "name", "sm_count", "compute_capability", "gpu_span_us", "kernel_count",
    "memcpy_count", "memset_count", "kernel_busy_pct", "gpu_busy_pct", "sm_efficiency_pct",
    "occupancy_pct", "tensor_core_pct", "tensor_core_basis", "memcpy_bytes",
    "pageable_memcpy_count", "short_kernel_pct", "idle",
    # Added this round: communication, window, the host's pace, queued idle, copies.
    "comm_pct", "exposed_comm_pct", "comm_overlap_pct", "window_us", "host_us_per_kernel",
    "launch_us_per_kernel", "launch_to_start_us", "idle_queued_pct", "copies",
}  # fmt: skip
COPY_KEYS = {"kind", "count", "bytes", "us", "gbps"}
IDLE_KEYS = {"host_wait_pct", "kernel_wait_pct", "other_pct"}
FINDING_KEYS = {"id", "severity", "title", "detail", "evidence", "fix"}


def kineto(kernels: list[dict[str, Any]], *, sm_count: int = 108) -> dict[str, Any]:
    """A small Kineto trace: one CPU op launching each kernel on device 0, stream 7."""
    events: list[dict[str, Any]] = []
    for i, k in enumerate(kernels):
        corr = 100 + i
        t = 1000.0 + 50.0 * i
        events += [
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": t,
             "dur": 10.0, "args": {"External id": corr}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
             "ts": t + 1, "dur": 4.0, "args": {"correlation": corr, "External id": corr}},
            {"ph": "X", "cat": "kernel", "name": k["name"], "pid": 0, "tid": 7,
             "ts": t + 10, "dur": k.get("dur", 20.0),
             "args": {"device": k.get("device", 0), "stream": 7, "correlation": corr,
                      "grid": [k.get("grid", 216), 1, 1], "block": [256, 1, 1],
                      "est. achieved occupancy %": 50}},
        ]  # fmt: skip
    props = [
        {"id": d, "name": "NVIDIA A100-SXM4-80GB", "totalGlobalMem": 85_000_000_000,
         "computeMajor": 8, "computeMinor": 0, "maxThreadsPerMultiprocessor": 2048,
         "numSms": sm_count}
        for d in sorted({k.get("device", 0) for k in kernels})
    ]  # fmt: skip
    return {"schemaVersion": 1, "deviceProperties": props, "traceEvents": events}


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.json"
    trace = kineto(
        [
            {"name": "ampere_sgemm_128x64_nn"},
            {"name": "<img src=x onerror=alert(1)>", "dur": 5.0},
            {"name": "elementwise_kernel", "device": 1},
        ]
    )
    path.write_text(json.dumps(trace))
    return path


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code: int, err: str, path: object) -> None:
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"nbprof: error: {path}: ")
    assert "Traceback" not in err


def test_analyze_text(tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import nbprof

    code, out, err = run(["analyze", str(tiny)], capsys)
    assert code == 0, err
    from nbprof.vocab import VERDICTS

    verdict = nbprof.load(tiny).diagnosis.verdict
    assert f"Verdict: {VERDICTS[verdict.bottleneck].label}." in out
    assert "GPU 0" in out and "GPU 1" in out
    # Device 0's kernels cover 25 of its 55 us span: what nvidia-smi would report.
    assert f"{25 / 55 * 100:.1f}%" in out
    assert "ampere_sgemm_128x64_nn" in out


def test_text_report_escapes_terminal_control_codes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "ansi.json"
    path.write_text(json.dumps(kineto([{"name": "evil\x1b[2J\x1b[31mkernel\x07"}])))
    code, out, _ = run(["analyze", str(path)], capsys)
    assert code == 0
    assert "\x1b" not in out and "\x07" not in out
    assert "evil" in out and "kernel" in out


def test_analyze_json_follows_the_schema(tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["analyze", str(tiny), "--json"], capsys)
    assert code == 0
    doc = json.loads(out)
    assert TOP_KEYS <= doc.keys()
    assert doc["schema"] == "nbprof.analysis/1"
    assert doc["source"]["events"] == 9
    assert str(tiny) in doc["source"]["path"]
    devices = {d["device"]: d for d in doc["devices"]}
    assert set(devices) == {"0", "1"}
    for d in devices.values():
        assert DEVICE_KEYS <= d.keys()
        assert IDLE_KEYS <= d["idle"].keys()
        for c in d["copies"]:
            assert COPY_KEYS <= c.keys()
    assert devices["0"]["kernel_count"] == 2
    assert devices["1"]["kernel_count"] == 1
    # Device 0: kernels at [1010, 1030] and [1060, 1065] -> span 55 us, busy 25 us.
    assert devices["0"]["gpu_span_us"] == pytest.approx(55.0)
    assert devices["0"]["kernel_busy_pct"] == pytest.approx(25 / 55 * 100, abs=0.05)
    assert doc["verdict"]["bottleneck"] in BOTTLENECKS
    assert isinstance(doc["verdict"]["summary"], str) and doc["verdict"]["summary"]
    for f in doc["findings"]:
        assert FINDING_KEYS <= f.keys()


def test_analyze_device_filter(tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["analyze", str(tiny), "--json", "--device", "1"], capsys)
    assert code == 0
    doc = json.loads(out)
    assert [d["device"] for d in doc["devices"]] == ["1"]
    assert all(f.get("device", "") in ("", "1") for f in doc["findings"])
    code, out, _ = run(["analyze", str(tiny), "--device", "0"], capsys)
    assert code == 0
    assert "GPU 0" in out and "GPU 1" not in out


def test_unknown_device_is_bad_input(tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["analyze", str(tiny), "--device", "7"], capsys)
    assert_one_line_error(code, err, tiny)
    assert "'7'" in err and "devices: 0, 1" in err


def test_report_writes_self_contained_html(
    tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_path = tmp_path / "out.html"
    code, out, err = run(["report", str(tiny), "-o", str(out_path)], capsys)
    assert code == 0, err
    assert str(out_path) in out
    html = out_path.read_text(encoding="utf-8")
    assert "<html" in html.lower()
    # Offline: no script or stylesheet tag fetches anything (Bokeh's JS is inline).
    assert not re.search(r"<script[^>]*\ssrc=", html, re.IGNORECASE)
    assert not re.search(r"<link[^>]*\shref=[\"']?(https?:)?//", html, re.IGNORECASE)
    assert "Bokeh" in html


def test_report_is_written_beside_the_trace_by_default(
    tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not into whatever folder the command runs in (it wrote ./tiny.html there)."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    code, out, _ = run(["report", str(tiny)], capsys)
    assert code == 0
    assert (tiny.parent / "tiny.html").is_file() and not list(elsewhere.iterdir())
    assert f"wrote {tiny.parent / 'tiny.html'} (" in out
    assert "replacing" not in out
    # Again: the previous report is replaced, and that is said.
    code, out, _ = run(["report", str(tiny)], capsys)
    assert code == 0 and "replacing the previous file" in out


def test_report_never_overwrites_its_input(
    tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = tiny.read_bytes()
    link = tmp_path / "link.json"
    link.symlink_to(tiny)
    for target in (tiny, link):
        code, out, err = run(["report", str(tiny), "-o", str(target)], capsys)
        assert_one_line_error(code, err, target)
        assert "is the input" in err and not out
    assert tiny.read_bytes() == before
    folder = tmp_path / "ranks"
    folder.mkdir()
    rank = folder / "rank0.json"
    rank.write_bytes(before)
    code, _, err = run(["report", str(folder), "-o", str(rank)], capsys)
    assert_one_line_error(code, err, rank)
    assert rank.read_bytes() == before


@pytest.mark.parametrize("where", ["a-folder", "proc", "dev-full"])
def test_report_to_an_unwritable_place_names_the_output(
    tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    target = {"a-folder": tmp_path, "proc": Path("/proc/nbprof.html"),
              "dev-full": Path("/dev/full")}[where]  # fmt: skip
    if where != "a-folder" and not target.parent.is_dir():
        pytest.skip(f"no {target.parent}")
    code, out, err = run(["report", str(tiny), "-o", str(target)], capsys)
    assert_one_line_error(code, err, target)
    assert str(tiny) not in err and not out


def test_a_failed_report_write_leaves_the_previous_file(
    tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import errno

    from nbprof import _files

    out_path = tmp_path / "out.html"
    out_path.write_text("previous report")

    def full(fd: int) -> None:  # the disk fills up: fsync reports it
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(_files.os, "fsync", full)
    code, _, err = run(["report", str(tiny), "-o", str(out_path)], capsys)
    assert_one_line_error(code, err, out_path)
    assert "no space left" in err
    assert out_path.read_text() == "previous report"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.html", "tiny.json"]


def test_corpus_trace_json_and_text(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = next(corpus.glob("kineto-tbplugin__resnet50_num_workers_0__*.json.gz"))
    code, out, _ = run(["analyze", str(path), "--json"], capsys)
    assert code == 0
    doc = json.loads(out)
    assert doc["schema"] == "nbprof.analysis/1"
    [dev] = doc["devices"]
    assert "V100" in dev["name"]
    assert dev["kernel_count"] > 0
    code, out, _ = run(["analyze", str(path)], capsys)
    assert code == 0 and "V100" in out


def test_corpus_multi_rank_device_filter(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = corpus / "param__dlrm_kineto_8ranks"
    code, out, _ = run(["analyze", str(folder), "--json"], capsys)
    assert code == 0
    doc = json.loads(out)
    assert len(doc["devices"]) == 8
    first = doc["devices"][0]
    key = f"{first['rank']}:{first['device']}"
    code, out, _ = run(["analyze", str(folder), "--json", "--device", key], capsys)
    assert code == 0
    assert [(d["rank"], d["device"]) for d in json.loads(out)["devices"]] == [
        (first["rank"], first["device"])
    ]


@pytest.mark.parametrize(
    "content",
    [b"this is not json", b'{"traceEvents": [', b"\x1f\x8b\x08\x00corrupt", b'{"nope": 1}'],
    ids=["not-json", "truncated", "bad-gzip", "no-traceEvents"],
)
def test_bad_trace_is_one_line_and_exit_2(
    tmp_path: Path, content: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / ("bad.json.gz" if content.startswith(b"\x1f\x8b") else "bad.json")
    path.write_bytes(content)
    for command in (["analyze"], ["analyze", "--json"], ["report", "-o", str(tmp_path / "x.html")]):
        code, out, err = run([command[0], str(path), *command[1:]], capsys)
        assert_one_line_error(code, err, path)
        assert not out


def test_missing_file_and_empty_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "missing.json"
    code, _, err = run(["analyze", str(missing)], capsys)
    assert_one_line_error(code, err, missing)
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = run(["analyze", str(empty)], capsys)
    assert_one_line_error(code, err, empty)


def test_report_into_missing_folder(
    tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "nowhere" / "out.html"
    code, _, err = run(["report", str(tiny), "-o", str(target)], capsys)
    assert_one_line_error(code, err, target)


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert main(["frobnicate"]) == 2
    assert main(["--version"]) == 0
    assert "nbprof" in capsys.readouterr().out


def test_demo_dispatches_to_the_demo(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["demo", "--help"])
    out = capsys.readouterr().out
    assert code == 0
    assert "demo" in out and "--cpu" in out


def test_console_script(tiny: Path) -> None:
    exe = shutil.which("nbprof")
    cmd = [exe] if exe else [sys.executable, "-m", "nbprof"]
    done = subprocess.run(
        [*cmd, "analyze", str(tiny), "--json"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["schema"] == "nbprof.analysis/1"
    bad = tiny.with_name("bad.json.gz")
    bad.write_bytes(gzip.compress(b"[1, 2")[:-4])
    done = subprocess.run(
        [sys.executable, "-m", "nbprof", "analyze", str(bad)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(f"nbprof: error: {bad}: ")


def test_symlink_loop_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.symlink_to(b)
    b.symlink_to(a)
    code, _, err = run(["analyze", str(a)], capsys)
    assert_one_line_error(code, err, a)
    assert "symbolic link loop" in err  # it said "no such file or folder"


def test_error_lines_carry_no_terminal_escapes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "evil\x1b[2J\x07.json"
    path.write_text("not json")
    code, _, err = run(["analyze", str(path)], capsys)
    assert code == 2 and "\x1b" not in err and "\x07" not in err
    assert err.count("\n") == 1 and "evil" in err


def test_out_of_memory_in_the_analysis_is_one_line(
    tiny: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The reader words its own (tests/test_hostile.py, under a real limit); past it, the
    analysis can run out too."""
    import nbprof.analysis

    def exhausted(*args: object, **kwargs: object) -> None:
        raise MemoryError

    monkeypatch.setattr(nbprof.analysis, "analyze", exhausted)
    code, _, err = run(["analyze", str(tiny)], capsys)
    assert_one_line_error(code, err, tiny)
    assert "not enough memory" in err


@pytest.mark.timeout(300)
def test_no_progress_bar_text_before_the_error_line(tmp_path: Path) -> None:
    """A load slow enough for the progress bar (over ~1 s), failing at its last event: the
    bar went to stderr when it was a pipe, before the one-line error."""
    ev = (b'{"ph":"X","cat":"cpu_op","name":"aten::add","pid":1,"tid":1,"ts":1,"dur":1,'
          b'"args":{"External id":1}},')  # fmt: skip
    path = tmp_path / "slow.json"
    with path.open("wb") as f:
        f.write(b'{"traceEvents":[')
        for _ in range(15):
            f.write(ev * 100_000)
        f.write(b'{"ph":"X","cat":"cpu_op","name":"x","ts":1,"dur":-1}]}')
    done = subprocess.run(
        [sys.executable, "-m", "nbprof", "analyze", str(path)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(f"nbprof: error: {path}: ")
    assert "negative duration" in done.stderr


def _words(text: str) -> str:
    """Text with its line wrapping and indentation undone, for comparing views."""
    return re.sub(r"\s+", " ", text).strip()


@pytest.mark.parametrize(
    "prefix",
    [
        "hta__negative_queue_length_values_check",
        "tracelens__bert-small-inference-h100",
        "hta__triton_example",
        "kineto-tbplugin__resnet50_num_workers_0",
    ],
)
def test_text_panel_and_json_say_the_same_thing(
    corpus: Path, prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import html as html_lib

    import nbprof
    from nbprof.views import panel
    from nbprof.vocab import VERDICTS

    path = next(corpus.glob(f"{prefix}*.json.gz"))
    code, out, _ = run(["analyze", str(path), "--json"], capsys)
    assert code == 0
    doc = json.loads(out)
    code, text_out, _ = run(["analyze", str(path)], capsys)
    assert code == 0
    page = html_lib.unescape(re.sub(r"<[^>]+>", " ", panel.render(nbprof.load(path))))
    v = doc["verdict"]
    label = VERDICTS[v["bottleneck"]].label
    conf, basis = panel.confidence_text(type("V", (), v)())
    for view in (_words(text_out), _words(page)):
        # The verdict, its sentence with its numbers, its confidence and what decided it.
        assert label in view and _words(v["summary"]) in view
        assert f"{conf} confidence" in view and basis in view
        # The same findings, with the same figures in their details.
        for f in doc["findings"][:5]:
            assert _words(f["title"]) in view and _words(f["detail"]) in view
    for dev in doc["devices"]:
        # Every number of the new contract is shown where it is known.
        for key, shown in (("launch_to_start_us", "launch-to-start"), ("window_us", "window")):
            if dev[key] is not None:
                assert shown in _words(text_out) and shown in _words(page)
