"""%%gpuprof / %gpuprof in an IPython InteractiveShell, on small CPU torch code."""

from __future__ import annotations

import gzip
import json
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from IPython.core.interactiveshell import ExecutionResult, InteractiveShell
from IPython.utils.capture import CapturedIO, capture_output
from traitlets.config import Config

import nbprof
from nbprof.result import Profile


@pytest.fixture
def ctrl_c() -> Iterator[None]:
    """Python's own SIGINT handler (raises KeyboardInterrupt), whatever the runner set."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.fixture(scope="module")
def shell() -> Iterator[InteractiveShell]:
    if InteractiveShell.initialized():
        sh = InteractiveShell.instance()
    else:
        cfg = Config()
        cfg.HistoryManager.hist_file = ":memory:"
        sh = InteractiveShell.instance(config=cfg)
    sh.run_line_magic("load_ext", "nbprof")
    sh.run_cell("import torch", store_history=True)
    yield sh
    sh.run_line_magic("unload_ext", "nbprof")


def run(shell: InteractiveShell, src: str) -> tuple[ExecutionResult, CapturedIO]:
    with capture_output() as cap:
        result = shell.run_cell(src, store_history=True)
    return result, cap


def final_bundle(cap: CapturedIO) -> dict[str, Any]:
    """The last display bundle: what the cell shows once it is done."""
    assert cap.outputs, "nothing was displayed"
    return cap.outputs[-1].data


def is_profile_bundle(data: dict[str, Any]) -> bool:
    return "text/html" in data and "text/plain" in data and "nbprof" in data["text/plain"]


def test_cell_bundle_namespace_and_last_expression(shell: InteractiveShell) -> None:
    result, cap = run(
        shell,
        "%%gpuprof -o prof\na = torch.ones(4, 4)\nb = a @ a\nb.sum()\n",
    )
    assert result.success, result.error_in_exec
    # Assignments land; the last expression goes through the displayhook as Out[n].
    assert torch.equal(shell.user_ns["b"], torch.full((4, 4), 4.0))
    assert float(result.result) == 64.0
    assert "Out[" in cap.stdout
    prof = shell.user_ns["prof"]
    assert isinstance(prof, Profile)
    assert (prof.cpu_ops["name"] == "aten::mm").any()
    data = final_bundle(cap)
    assert is_profile_bundle(data)
    # The bundle is the Profile's own (HTML ids differ between renderings; text does not).
    assert data["text/plain"] == prof._repr_mimebundle_()["text/plain"]


def test_gauge_then_dashboard_replaces_it(shell: InteractiveShell) -> None:
    result, cap = run(shell, "%%gpuprof\ntorch.ones(3).sum();\n")
    assert result.success
    assert result.result is None  # the ';' silences the value, as in a plain cell
    first, last = cap.outputs[0], cap.outputs[-1]
    display_id = first.transient.get("display_id")
    assert display_id, "the gauge (or the line saying why there is none) has a display id"
    assert last.update and last.transient.get("display_id") == display_id
    assert is_profile_bundle(last.data)
    if not torch.cuda.is_available():
        # No NVML here: the gauge's place says why in one line.
        assert "no live gauge" in "\n".join(str(v) for v in first.data.values()) or (
            "application/vnd.jupyter.widget-view+json" in first.data
        )


def test_widget_gauge_runs_and_is_closed(
    shell: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Where NVML's library loads, the real gauge widget is shown, driven and closed.
    import nbprof.magic
    from nbprof.views.gauge import GaugeWidget

    monkeypatch.setattr(nbprof.magic, "_no_nvml_reason", lambda: "")
    made: list[GaugeWidget] = []
    real_init = GaugeWidget.__init__

    def init(self: GaugeWidget, *a: Any, **k: Any) -> None:
        real_init(self, *a, **k)
        made.append(self)

    monkeypatch.setattr(GaugeWidget, "__init__", init)
    result, cap = run(shell, "%%gpuprof\ng = torch.ones(3).sum()\nraise RuntimeError('late')\n")
    assert isinstance(result.error_in_exec, RuntimeError)
    [gauge] = made
    assert "stopped" in gauge.text  # frozen by the capture's stop()
    assert gauge.widget is None or gauge.widget.comm is None  # closed by the magic
    first, last = cap.outputs[0], cap.outputs[-1]
    assert "text/html" in first.data and first.transient.get("display_id")
    assert last.update and last.transient.get("display_id") == first.transient["display_id"]
    assert is_profile_bundle(last.data)


def test_no_gauge_shows_only_the_dashboard(shell: InteractiveShell) -> None:
    result, cap = run(shell, "%%gpuprof --no-gauge\nx = torch.ones(2) * 3\n")
    assert result.success
    assert len(cap.outputs) == 1
    assert not cap.outputs[0].update
    assert is_profile_bundle(cap.outputs[0].data)
    assert torch.equal(shell.user_ns["x"], torch.full((2,), 3.0))


def test_no_gpu_is_said_plainly(shell: InteractiveShell) -> None:
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    run(shell, "%%gpuprof --no-gauge -o p_cpu\ntorch.ones(2).sum()\n")
    prof = shell.user_ns["p_cpu"]
    assert any("No GPU" in n for n in prof.notes)
    bundle = prof._repr_mimebundle_()
    assert "No GPU: torch.cuda.is_available() is False" in bundle["text/plain"].replace(
        "\n    ", " "
    )
    assert "No GPU: torch.cuda.is_available() is False" in bundle["text/html"]


def test_line_form(shell: InteractiveShell) -> None:
    result, cap = run(shell, "%gpuprof --no-gauge -o lp y = torch.ones(3) + 1")
    assert result.success
    assert torch.equal(shell.user_ns["y"], torch.full((3,), 2.0))
    assert isinstance(shell.user_ns["lp"], Profile)
    assert is_profile_bundle(final_bundle(cap))
    result, _ = run(shell, "%gpuprof --no-gauge torch.ones(2).sum() + 40")
    assert float(result.result) == 42.0
    # Code that starts like an option, and options after `--`.
    result, _ = run(shell, "%gpuprof --no-gauge -- -torch.ones(1).sum()")
    assert float(result.result) == -1.0


def test_line_form_option_values_with_spaces(shell: InteractiveShell, tmp_path: Path) -> None:
    path = tmp_path / "with space.json"
    result, _ = run(shell, f'%gpuprof --no-gauge --trace "{path}" sp = torch.ones(2) * 5')
    assert result.success, result.error_in_exec
    assert torch.equal(shell.user_ns["sp"], torch.full((2,), 5.0))
    assert len(nbprof.load(path).cpu_ops) > 0


def test_help(shell: InteractiveShell) -> None:
    result, cap = run(shell, "%gpuprof --help")
    assert result.success
    for option in ("--out-var", "--trace", "--html", "--no-gauge", "--memory", "--stack"):
        assert option in cap.stdout
    assert "--repeat" in cap.stdout and "--warmup" in cap.stdout and "--lite" in cap.stdout
    assert not cap.outputs


def test_usage_errors_run_nothing(shell: InteractiveShell) -> None:
    shell.user_ns.pop("never", None)
    for src in (
        "%%gpuprof --warmup 2\nnever = 1\n",
        "%%gpuprof --repeat 0\nnever = 1\n",
        "%%gpuprof --trace /no/such/folder/t.json\nnever = 1\n",
        "%%gpuprof -o not-a-name\nnever = 1\n",
        "%gpuprof",
    ):
        result, _ = run(shell, src)
        assert not result.success, src
        assert "never" not in shell.user_ns


def test_syntax_error_points_into_the_cell_and_profiles_nothing(shell: InteractiveShell) -> None:
    result, cap = run(shell, "%%gpuprof --no-gauge\nok = 1\nbroken = (\n")
    err = result.error_in_exec
    assert isinstance(err, SyntaxError)
    assert err.filename in shell.compile._filename_map
    assert not cap.outputs
    assert not torch.autograd.profiler._is_profiler_enabled


def test_trace_and_html_files(shell: InteractiveShell, tmp_path: Path) -> None:
    trace = tmp_path / "cell.json.gz"
    page = tmp_path / "cell.html"
    result, _ = run(
        shell,
        f"%%gpuprof --no-gauge --trace {trace} --html {page} -o tp\n"
        "z = torch.ones(8, 8) @ torch.ones(8, 8)\n",
    )
    assert result.success, result.error_in_exec
    with gzip.open(trace, "rt") as f:
        assert "traceEvents" in json.load(f)
    loaded = nbprof.load(trace)
    assert len(loaded.cpu_ops) == len(shell.user_ns["tp"].cpu_ops)
    html = page.read_text(encoding="utf-8")
    assert html.lstrip().lower().startswith(("<!doctype html", "<html"))
    assert "</html>" in html.lower()


def test_repeat_and_warmup_record_n_steps(shell: InteractiveShell) -> None:
    shell.user_ns["calls"] = 0
    result, _ = run(
        shell,
        "%%gpuprof --no-gauge --repeat 3 --warmup 2 -o rp\n"
        # Run k (1-5) takes the dot product of two vectors of 3 + k: its shapes name it.
        "calls += 1\nw = torch.ones(3 + calls) @ torch.ones(3 + calls)\ncalls\n",
    )
    assert result.success, result.error_in_exec
    assert shell.user_ns["calls"] == 5
    assert result.result == 5  # the last run's value is displayed
    prof = shell.user_ns["rp"]
    # Three consecutive ProfilerSteps, numbered by torch (1-3 on 2.2, 2-4 later).
    assert len(prof.steps) == 3 and np.diff(prof.steps["step"]).tolist() == [1, 1]
    dot = prof.cpu_ops[prof.cpu_ops["name"] == "aten::dot"]
    assert sorted(json.loads(dims)[0][0] for dims in dot["input_dims"]) == [6, 7, 8]  # runs 3-5


def test_exception_shows_partial_profile_then_reraises(shell: InteractiveShell) -> None:
    src = (
        "%%gpuprof --no-gauge -o ep\n"
        "before = torch.ones(2).sum()\n"
        "def f():\n"
        "    raise ValueError('bad value')\n"
        "f()\n"
        "after = 1\n"
    )
    shell.user_ns.pop("after", None)
    result, cap = run(shell, src)
    err = result.error_in_exec
    assert isinstance(err, ValueError) and str(err) == "bad value"
    assert "before" in shell.user_ns and "after" not in shell.user_ns
    # The partial profile was displayed, and carries the error.
    assert is_profile_bundle(final_bundle(cap))
    prof = shell.user_ns["ep"]
    assert prof.error is err
    assert (prof.cpu_ops["name"] == "aten::sum").any()
    # The original traceback ends in the cell, at the line the user sees (1-based, the
    # %%gpuprof line being line 1).
    tb = err.__traceback__
    frames = []
    while tb is not None:
        frames.append((tb.tb_frame.f_code.co_filename, tb.tb_lineno, tb.tb_frame.f_code.co_name))
        tb = tb.tb_next
    cell_file = frames[-1][0]
    assert cell_file in shell.compile._filename_map
    assert frames[-1][1:] == (4, "f")
    assert frames[-2][0] == cell_file and frames[-2][1] == 5
    # IPython prints it pointing into the cell, with nbprof's own frames hidden.
    assert "raise ValueError('bad value')" in cap.stdout
    assert "nbprof/magic.py" not in cap.stdout


def test_keyboard_interrupt_stops_cleanly(shell: InteractiveShell, ctrl_c: None) -> None:
    # A real SIGINT (what Ctrl-C sends) in the middle of the profiled body.
    src = (
        "%%gpuprof -o kp\n"
        "k = torch.ones(3).sum()\n"
        "signal.raise_signal(signal.SIGINT)\n"
        "not_reached = 1\n"
    )
    shell.user_ns["signal"] = signal
    result, cap = run(shell, src)
    assert isinstance(result.error_in_exec, KeyboardInterrupt)
    assert "not_reached" not in shell.user_ns
    assert not torch.autograd.profiler._is_profiler_enabled
    prof = shell.user_ns["kp"]
    assert any("Interrupted" in n for n in prof.notes)
    assert is_profile_bundle(final_bundle(cap))


def test_other_magics_inside_the_cell(shell: InteractiveShell) -> None:
    result, cap = run(shell, "%%gpuprof --no-gauge\n%time m = torch.ones(2).sum()\nm + 1\n")
    assert result.success, result.error_in_exec
    assert "Wall time" in cap.stdout
    assert float(result.result) == 3.0


def test_nested_gpuprof_is_refused(shell: InteractiveShell) -> None:
    result, cap = run(shell, "%%gpuprof --no-gauge\n%gpuprof --no-gauge torch.ones(1)\n")
    assert not result.success
    assert "already running" in str(result.error_in_exec)
    # The inner one showed nothing; the outer one shows its (partial) profile.
    assert len(cap.outputs) == 1 and is_profile_bundle(final_bundle(cap))
    assert not torch.autograd.profiler._is_profiler_enabled


def _leftovers() -> list[str]:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        left = [t.name for t in threading.enumerate() if t.name.startswith("nbprof")]
        if not left:
            return []
        time.sleep(0.02)
    return left


def test_cycles_leave_nothing_running(shell: InteractiveShell, ctrl_c: None) -> None:
    # Through the magic (display included); tests/test_capture.py runs 50 bare cycles.
    shell.user_ns["signal"] = signal
    bodies = [
        ("t = torch.ones(4) * 2\n", None),
        ("torch.ones(4).sum()\nraise RuntimeError('cycle')\n", RuntimeError),
        ("torch.ones(4).sum()\nraise KeyboardInterrupt\n", KeyboardInterrupt),
        ("torch.ones(4).sum()\nsignal.raise_signal(signal.SIGINT)\n", KeyboardInterrupt),
        ("t = torch.ones(2)\nt\n", None),
    ]
    outcomes: dict[str, int] = {}
    for i in range(10):
        body, expected = bodies[i % len(bodies)]
        gauge = "" if i % 3 == 0 else " --no-gauge"
        result, cap = run(shell, f"%%gpuprof{gauge} -o cyc\n{body}")
        err = result.error_in_exec
        assert (type(err) if err else None) is expected, (i, err)
        assert is_profile_bundle(final_bundle(cap))
        assert not torch.autograd.profiler._is_profiler_enabled, i
        outcomes[type(err).__name__ if err else "ok"] = (
            outcomes.get(type(err).__name__ if err else "ok", 0) + 1
        )
    assert outcomes == {"ok": 4, "RuntimeError": 2, "KeyboardInterrupt": 4}
    assert _leftovers() == []


def test_unload_removes_the_magics(shell: InteractiveShell) -> None:
    shell.run_line_magic("unload_ext", "nbprof")
    try:
        assert shell.find_cell_magic("gpuprof") is None
        assert shell.find_line_magic("gpuprof") is None
    finally:
        shell.run_line_magic("load_ext", "nbprof")
    assert shell.find_cell_magic("gpuprof") is not None


# -- hostile options and unlucky outputs ----------------------------------------------------------


@pytest.mark.parametrize("name", ["class", "None", "lambda"])
def test_keywords_are_not_variable_names(shell: InteractiveShell, name: str) -> None:
    shell.user_ns.pop("never", None)
    result, _ = run(shell, f"%%gpuprof --no-gauge -o {name}\nnever = 1\n")
    assert not result.success
    assert "not a valid variable name" in str(result.error_in_exec)
    assert "never" not in shell.user_ns


@pytest.mark.parametrize("option", ["--trace", "--html"])
@pytest.mark.parametrize("where", ["a-folder", "proc", "same-for-both"])
def test_unwritable_outputs_are_refused_before_the_body_runs(
    shell: InteractiveShell, tmp_path: Path, option: str, where: str
) -> None:
    shell.user_ns.pop("never", None)
    if where == "proc" and not Path("/proc").is_dir():
        pytest.skip("no /proc")
    target = {"a-folder": str(tmp_path), "proc": "/proc/self/nbprof.json"}.get(where)
    both = f"--trace {tmp_path}/x.json --html {tmp_path}/x.json"
    line = both if where == "same-for-both" else f"{option} {target}"
    result, cap = run(shell, f"%%gpuprof --no-gauge {line}\nnever = 1\n")
    assert not result.success
    assert "never" not in shell.user_ns and not cap.outputs
    message = str(result.error_in_exec)
    assert "\n" not in message
    assert (target or "x.json") in message


def _fill_the_disk_on_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    """The disk fills up as a file is written: fsync reports it (delayed allocation)."""
    import errno

    from nbprof import _files

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(_files.os, "fsync", full)


@pytest.mark.parametrize("option", ["--trace", "--html"])
def test_a_failed_write_keeps_the_profile_and_says_so_in_one_line(
    shell: InteractiveShell, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, option: str
) -> None:
    """The body ran, then the output could not be written: the profile is in -o and on
    screen, one line says what was not saved, and no half-written file is left."""
    target = tmp_path / ("out.json.gz" if option == "--trace" else "out.html")
    target.write_bytes(b"previous")
    _fill_the_disk_on_fsync(monkeypatch)
    shell.user_ns.pop("fw", None)
    result, cap = run(
        shell, f"%%gpuprof --no-gauge {option} {target} -o fw\ny = torch.ones(4) @ torch.ones(4)\n"
    )
    assert result.success, result.error_in_exec
    prof = shell.user_ns["fw"]
    assert isinstance(prof, Profile) and (prof.cpu_ops["name"] == "aten::dot").any()
    assert is_profile_bundle(final_bundle(cap))
    said = [line for line in cap.stderr.splitlines() if line.startswith("nbprof:")]
    assert len(said) == 1 and str(target) in said[0] and "no space left" in said[0], cap.stderr
    assert target.read_bytes() == b"previous"
    assert [p.name for p in tmp_path.iterdir()] == [target.name]


_NESTED_CELL = """
import sys
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output
sh = InteractiveShell.instance()
sh.run_line_magic("load_ext", "nbprof")
with capture_output() as cap:
    r = sh.run_cell(
        "%%gpuprof --no-gauge -o outer\\n"
        "import torch\\n"
        "x = torch.ones(4) @ torch.ones(4)\\n"
        "with torch.profiler.profile():\\n"
        "    x = torch.ones(4) @ torch.ones(4)\\n"
    )
print("error=" + type(r.error_in_exec).__name__)
print("message=" + str(r.error_in_exec).replace("\\n", " "))
print("outputs=" + str(len(cap.outputs)))
print("dots=" + str(int((sh.user_ns["outer"].cpu_ops["name"] == "aten::dot").sum())))
"""


@pytest.mark.timeout(300)
def test_a_torch_profiler_in_the_cell_is_a_usage_error_with_the_partial_profile() -> None:
    """In a subprocess: before, this killed the process (the notebook's kernel)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    done = subprocess.run(
        [sys.executable, "-c", _NESTED_CELL], capture_output=True, text=True, timeout=240, env=env
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    out = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    assert out["error"] == "UsageError" and "cannot start inside" in out["message"]
    assert out["outputs"] == "1" and out["dots"] == "1"
