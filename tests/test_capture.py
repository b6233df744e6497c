"""nbprof.profile(): a live capture on CPU torch, read back through the shared trace reader."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

import nbprof
from nbprof.capture import NO_GPU_NOTE, Capture, profile
from nbprof.errors import NbprofError
from nbprof.result import Profile

CUDA = torch.cuda.is_available()


@pytest.fixture
def ctrl_c() -> Iterator[None]:
    """Python's own SIGINT handler (raises KeyboardInterrupt), whatever the runner set."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _work(n: int = 8) -> torch.Tensor:
    a = torch.ones(n, n)
    return (a @ a).sum()


def _profiler_on() -> bool:
    return bool(torch.autograd.profiler._is_profiler_enabled)


def _nbprof_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("nbprof") and t.is_alive()]


def test_profile_returns_a_profile_of_the_block() -> None:
    with profile() as run:
        assert _profiler_on()
        _work()
    assert not _profiler_on()
    assert isinstance(run, Capture)
    prof = run.result
    assert isinstance(prof, Profile)
    names = set(prof.cpu_ops["name"])
    assert "aten::mm" in names or "aten::matmul" in names
    assert prof.error is None
    assert prof.trace.source == "live capture"
    if not CUDA:
        assert NO_GPU_NOTE in prof.notes
        assert prof.kernels.empty


def test_shapes_and_flops_unless_lite() -> None:
    with profile() as full:
        _work(16)
    with profile(lite=True) as lite:
        _work(16)
    assert full.result is not None and lite.result is not None
    mm_full = full.result.cpu_ops[full.result.cpu_ops["name"] == "aten::mm"]
    mm_lite = lite.result.cpu_ops[lite.result.cpu_ops["name"] == "aten::mm"]
    assert len(mm_full) == 1 and len(mm_lite) == 1
    # 16x16 @ 16x16: 2 * 16^3 multiply-adds, as torch's with_flops counts them.
    assert mm_full["flops"].iloc[0] == 2 * 16**3
    assert "16" in mm_full["input_dims"].iloc[0]
    assert mm_lite["input_dims"].iloc[0] in ("", "[]")
    assert not mm_lite["flops"].iloc[0] > 0


def test_memory_and_stack_options_still_capture() -> None:
    with profile(memory=True, stack=True) as run:
        _work()
    assert run.result is not None
    assert (run.result.cpu_ops["name"] == "aten::mm").any()


def test_exception_leaves_a_partial_profile_and_propagates() -> None:
    err = ValueError("boom")
    run = profile()
    with pytest.raises(ValueError) as caught:
        with run:
            _work()
            raise err
    assert caught.value is err
    assert not _profiler_on()
    assert run.result is not None
    assert run.result.error is err
    assert any("raised ValueError" in n for n in run.result.notes)
    assert (run.result.cpu_ops["name"] == "aten::mm").any()


def test_keyboard_interrupt_stops_cleanly() -> None:
    run = profile()
    with pytest.raises(KeyboardInterrupt):
        with run:
            _work()
            raise KeyboardInterrupt
    assert not _profiler_on()
    assert run.result is not None
    assert any("Interrupted" in n for n in run.result.notes)


def test_repeat_records_the_last_n_steps() -> None:
    run = profile(repeat=3, warmup=2)
    with run:
        for i in range(5):
            _work(8 + i)  # run i multiplies (8 + i)-square matrices: its shapes name it
            run.step()
    assert run.result is not None
    steps = run.result.steps
    # Three consecutive ProfilerSteps; their numbers are torch's own (2.2 labels these
    # three 1-3, later releases 2-4), so the runs are told apart by their shapes.
    assert len(steps) == 3 and np.diff(steps["step"]).tolist() == [1, 1]
    assert any("last 3 of 5" in n for n in run.result.notes)
    # Only the recorded runs' matmuls are in the trace: runs 2, 3 and 4.
    mm = run.result.cpu_ops[run.result.cpu_ops["name"] == "aten::mm"]
    assert sorted(json.loads(dims)[0][0] for dims in mm["input_dims"]) == [10, 11, 12]


def test_repeat_interrupted_in_warmup_says_nothing_was_recorded() -> None:
    run = profile(repeat=2, warmup=3)
    with pytest.raises(KeyboardInterrupt):
        with run:
            _work()
            run.step()
            raise KeyboardInterrupt
    assert not _profiler_on()
    assert run.result is not None
    assert run.result.cpu_ops.empty
    assert any("Only 1 of 5" in n for n in run.result.notes)


def test_a_failing_final_sync_still_stops_and_keeps_the_profile(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # An asynchronous CUDA error surfaces at the synchronize after the body.
    calls: list[int] = []

    def sync(self: Capture) -> None:
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(Capture, "_sync", sync)
    run = profile()
    with pytest.raises(RuntimeError, match="illegal memory access") as caught:
        with run:
            _work()
    assert not _profiler_on()
    assert run.result is not None and run.result.error is caught.value
    assert (run.result.cpu_ops["name"] == "aten::mm").any()


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")
def test_cuda_capture_records_kernels_and_flops() -> None:
    x = torch.randn(256, 256, device="cuda")
    torch.cuda.synchronize()
    with profile() as run:
        y = x @ x
    prof = run.result
    assert prof is not None
    assert y.shape == (256, 256)
    assert NO_GPU_NOTE not in prof.notes
    assert len(prof.kernels) >= 1
    assert (prof.kernels["op"] == "aten::mm").any()
    mm = prof.cpu_ops[prof.cpu_ops["name"] == "aten::mm"]
    assert mm["flops"].iloc[0] == 2 * 256**3
    assert prof.samples is not None


@pytest.mark.parametrize("name", ["raw.json", "raw.json.gz"])
def test_trace_path_keeps_the_raw_trace(tmp_path: Path, name: str) -> None:
    path = tmp_path / "sub" / name
    with profile(trace_path=path) as run:
        _work()
    assert run.result is not None
    opener = gzip.open if name.endswith(".gz") else open
    with opener(path, "rt") as f:
        data = json.load(f)
    assert "traceEvents" in data
    again = nbprof.load(path)
    assert len(again.cpu_ops) == len(run.result.cpu_ops)
    assert run.result.trace.source == str(path)


def test_samples_are_attached_with_the_reason_when_nvml_is_absent() -> None:
    with profile() as run:
        _work()
    prof = run.result
    assert prof is not None and prof.samples is not None
    if prof.samples.unavailable:
        assert any(prof.samples.unavailable in n for n in prof.notes)
    no_samples = profile(sample=False)
    with no_samples:
        _work()
    assert no_samples.result is not None and no_samples.result.samples is None
    assert not _nbprof_threads()


def test_nested_profiling_is_refused_and_the_outer_run_survives() -> None:
    with profile() as outer:
        with pytest.raises(NbprofError, match="already running"):
            with profile():
                pass
        _work()
    assert not _profiler_on()
    assert outer.result is not None
    assert (outer.result.cpu_ops["name"] == "aten::mm").any()


def test_a_failed_start_undoes_everything(monkeypatch: pytest.MonkeyPatch) -> None:
    from nbprof.views.gauge import GaugeWidget

    def refuse(self: object) -> None:
        raise KeyboardInterrupt  # Ctrl-C while the profiler was starting

    monkeypatch.setattr(torch.profiler.profile, "start", refuse)
    gauge = GaugeWidget()
    try:
        with pytest.raises(KeyboardInterrupt):
            with profile(gauge=gauge):
                pytest.fail("the body must not run")
        assert "stopped" in gauge.text
    finally:
        gauge.close()
    assert not _profiler_on()


def test_misuse_is_explained() -> None:
    with pytest.raises(ValueError, match="repeat"):
        profile(repeat=0)
    with pytest.raises(ValueError, match="warmup needs repeat"):
        profile(warmup=2)
    run = profile()
    with pytest.raises(NbprofError, match="inside the with block"):
        run.step()
    with pytest.raises(NbprofError, match="no profile yet"):
        run.show()
    with run:
        pass
    with pytest.raises(NbprofError, match="used once"):
        with run:
            pass


def test_handle_displays_as_its_profile() -> None:
    with profile() as run:
        _work()
    bundle = run._repr_mimebundle_()
    assert "text/plain" in bundle and "text/html" in bundle


def test_missing_torch_gives_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(ImportError, match=r"nbprof.profile\(\) needs PyTorch"):
        profile()


def test_import_nbprof_does_not_import_torch() -> None:
    code = (
        "import sys, nbprof\n"
        "heavy = ('torch', 'bokeh', 'ipywidgets', 'IPython', 'pandas')\n"
        "assert not [m for m in heavy if m in sys.modules], 'import nbprof'\n"
        "from nbprof.capture import profile\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
        "assert callable(nbprof.profile)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_public_names_resolve_in_a_fresh_process() -> None:
    code = (
        "import nbprof\n"
        "assert callable(nbprof.load), 'load'\n"
        "assert isinstance(nbprof.Profile, type), 'Profile'\n"
        "assert callable(nbprof.profile) and nbprof.profile.__module__ == 'nbprof.capture'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_public_name_is_the_capture_even_after_loading(tmp_path: Path) -> None:
    # nbprof.profile is the function users call, also once the module where Profile lives
    # has been imported by nbprof.load.
    with profile(trace_path=tmp_path / "t.json") as run:
        _work()
    assert run.result is not None
    nbprof.load(tmp_path / "t.json")
    with nbprof.profile() as again:
        _work()
    assert isinstance(again.result, Profile)


def test_fifty_cycles_leave_nothing_running(ctrl_c: None) -> None:
    """Success, exceptions and interrupts (raised and real SIGINT), with and without gauge."""
    from nbprof.views.gauge import GaugeWidget

    outcomes: dict[str, int] = {}
    for i in range(50):
        kind = ("ok", "error", "interrupt", "sigint", "ok-repeat")[i % 5]
        gauge = GaugeWidget() if i % 4 == 0 else None
        run = profile(repeat=2 if kind == "ok-repeat" else None, gauge=gauge)
        try:
            with run:
                _work()
                if kind == "error":
                    raise RuntimeError(f"cycle {i}")
                if kind == "interrupt":
                    raise KeyboardInterrupt
                if kind == "sigint":
                    signal.raise_signal(signal.SIGINT)  # what Ctrl-C delivers
                if kind == "ok-repeat":
                    run.step()
                    _work()
                    run.step()
            outcome = "ok"
        except RuntimeError:
            outcome = "error"
        except KeyboardInterrupt:
            outcome = "interrupt"
        finally:
            if gauge is not None:
                gauge.close()
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        assert not _profiler_on(), i
        assert run.result is not None, i
        assert (run.result.cpu_ops["name"] == "aten::mm").any(), i
    assert outcomes == {"ok": 20, "error": 10, "interrupt": 20}
    deadline = time.monotonic() + 5
    while _nbprof_threads() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _nbprof_threads() == []


def test_kineto_lines_stay_out_of_the_users_output() -> None:
    code = (
        "import torch, nbprof\n"
        "with nbprof.profile(sample=False) as run:\n"
        "    torch.ones(4) @ torch.ones(4)\n"
        "print(len(run.result.cpu_ops))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "KINETO_LOG_LEVEL"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )
    assert out.returncode == 0, out.stderr
    assert int(out.stdout.strip()) > 0
    assert "profiler_start" not in out.stderr and "SyncActivityProfilerHandler" not in out.stderr


# -- a torch profiler inside the profiled code ---------------------------------------------------

_NESTED = """
import sys, torch, nbprof
mode = sys.argv[1]
x = torch.ones(8, 8)
error = None
try:
    with nbprof.profile(sample=False) as run:
        x @ x
        if mode == "profiler":
            with torch.profiler.profile():
                x @ x
        elif mode == "autograd":
            with torch.autograd.profiler.profile():
                x @ x
        else:  # ended behind the profiler's back: the check at the end must hold
            torch.autograd.profiler._disable_profiler()
            torch.autograd.profiler._run_on_profiler_stop()
        x @ x
except Exception as e:
    error = e
prof = run.result
mm = int((prof.cpu_ops["name"] == "aten::mm").sum())
print(f"error={type(error).__name__}")
print(f"mm={mm}")
print("notes=" + " | ".join(prof.notes))
with nbprof.profile(sample=False) as again:  # the process can profile again
    x @ x
print("again=" + str(int((again.result.cpu_ops["name"] == "aten::mm").sum())))
"""


@pytest.mark.timeout(300)
@pytest.mark.parametrize("mode", ["profiler", "autograd", "ended-outside"])
def test_a_torch_profiler_inside_never_kills_the_process(mode: str) -> None:
    """It segfaulted the process (pytorch/pytorch#155146): the inner profiler took over
    torch's one session, its exit ended it, and exporting nbprof's then crashed."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    done = subprocess.run(
        [sys.executable, "-c", _NESTED, mode], capture_output=True, text=True, timeout=240, env=env
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    out = dict(line.split("=", 1) for line in done.stdout.splitlines())
    assert out["again"] == "1"
    if mode == "ended-outside":
        assert out["error"] == "NoneType" and out["mm"] == "0"
        assert "ended nbprof's profiling session" in out["notes"]
    else:
        # A clear error at the inner profiler's start, and the partial profile before it.
        assert out["error"] == "NestedProfilerError" and out["mm"] == "1"
        assert "NestedProfilerError" in out["notes"]


def test_the_inner_profiler_error_says_what_to_do() -> None:
    from nbprof.capture import NESTED_PROFILER

    with profile(sample=False) as run:
        with pytest.raises(NbprofError, match="cannot start inside") as info:
            with torch.profiler.profile():
                pass
        _work()
    assert "Remove the inner" in str(info.value) and NESTED_PROFILER == str(info.value)
    assert run.result is not None and (run.result.cpu_ops["name"] == "aten::mm").any()
    # Outside a run, torch's own profilers work as they always did.
    with torch.profiler.profile() as own:
        _work()
    assert any(e.name == "aten::mm" for e in own.events())


# -- where the raw trace goes ---------------------------------------------------------------------


@pytest.mark.parametrize("where", ["folder", "proc"])
def test_an_unwritable_trace_path_is_refused_before_the_run(tmp_path: Path, where: str) -> None:
    from nbprof.errors import OutputError

    target = tmp_path if where == "folder" else Path("/proc/nbprof-trace.json")
    if where == "proc" and not Path("/proc").is_dir():
        pytest.skip("no /proc")
    with pytest.raises(OutputError) as info:
        profile(trace_path=target)
    assert info.value.path == str(target)
    assert not _profiler_on()


def test_a_failed_trace_save_keeps_the_profile_and_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk fills up while the trace is saved: the profile still stands (read from the
    temporary export), the file that was there is untouched, and the reason is kept."""
    import errno
    import shutil

    from nbprof import capture

    dest = tmp_path / "run.json.gz"
    dest.write_bytes(b"previous")
    real = shutil.copyfileobj

    def full_disk(src: object, dst: object, *args: object) -> None:
        real(src, dst, *args)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(capture.shutil, "copyfileobj", full_disk)
    with profile(trace_path=dest, sample=False) as run:
        _work()
    prof = run.result
    assert prof is not None and (prof.cpu_ops["name"] == "aten::mm").any()
    assert "no space left" in run.save_error and str(dest) in run.save_error
    assert any("could not be saved" in n for n in prof.notes)
    assert prof.trace.source == "live capture"
    assert dest.read_bytes() == b"previous"
    assert [p.name for p in tmp_path.iterdir()] == ["run.json.gz"]  # no temporary left
