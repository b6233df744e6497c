"""Recording samples to JSON lines, reading them back, replaying them in (fake) real time."""

from __future__ import annotations

import math
import threading
from pathlib import Path

import fake_nvml
import numpy as np
import orjson
import pandas as pd
import pynvml
import pytest
from fake_nvml import FakeClock, FakeGpu

from nbprof import TraceError, telemetry
from nbprof.telemetry import ReplaySource, Sampler, read_recording, replay, write_jsonl
from nbprof.telemetry.recording import REPLAY_THREAD_NAME


def sampled(gpus: list[FakeGpu] | None = None, passes: int = 6) -> tuple[Sampler, FakeClock]:
    clock = FakeClock()
    fake = fake_nvml.build(gpus, clock=clock)
    s = Sampler(fake, clock_ns=clock.wall_ns, monotonic_ns=clock.monotonic_ns)
    s.open()
    for _ in range(passes):
        s.sample_once()
        clock.advance(0.25)
    return s, clock


def test_write_then_replay_round_trips(tmp_path: Path) -> None:
    s, _ = sampled([FakeGpu(), FakeGpu(name='H"<b>', gpm=None)])
    original = s.samples()
    path = write_jsonl(original, tmp_path / "run.jsonl")
    back = replay(path)
    pd.testing.assert_frame_equal(back.frame, original.frame)
    assert back.reasons == original.reasons and back.reasons
    assert back.gpus == original.gpus
    assert back.source == "replay: run.jsonl"
    header = orjson.loads(path.read_bytes().split(b"\n")[0])
    assert header["format"] == "nbprof-nvml-samples" and header["version"] == 1
    assert header["metrics"][0] == "util_gpu"
    # NaN metrics are absent from sample lines, not written as null.
    first_row = orjson.loads(path.read_bytes().split(b"\n")[1])
    assert "sm_util" not in first_row and first_row["util_gpu"] == 100.0


def test_unavailable_round_trips(tmp_path: Path) -> None:
    clock = FakeClock()
    fake = fake_nvml.build(clock=clock, init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    s = Sampler(fake, clock_ns=clock.wall_ns)
    s.open()
    back = replay(write_jsonl(s.samples(), tmp_path / "none.jsonl"))
    assert len(back) == 0 and "NVML library not found" in back.unavailable


def test_recorder_writes_every_pass_and_state_changes(tmp_path: Path) -> None:
    gpus = [FakeGpu(), FakeGpu(name="second")]
    fake = fake_nvml.build(gpus)
    s = Sampler(fake)
    seen = threading.Event()

    def lose_gpu_after_two(tick: telemetry.Tick) -> None:
        if s.ticks == 2:
            gpus[1].lost = True
        if s.ticks >= 5:
            seen.set()

    path = tmp_path / "rec.jsonl"
    with telemetry.record(path, 0.05, sampler=s) as rec, s.subscribe(0.05, lose_gpu_after_two):
        assert seen.wait(10)
    assert not s.running
    recording = read_recording(path)
    assert len(recording.time_ns) == rec.rows_written > 0
    back = replay(path)
    assert set(back.frame["gpu"]) == {0, 1}
    assert "mid-run" in back.reasons[(1, "util_gpu")]
    # The loss is a state line in the file, so it applies from that time on only.
    assert len(recording.states) >= 2
    assert (0, "util_gpu") not in recording.states[0].reasons
    assert (1, "util_gpu") not in recording.states[0].reasons
    lines = path.read_bytes().splitlines()
    assert any(b'"state"' in line for line in lines[1:])


def test_recorder_closed_before_any_pass_still_writes_a_header(tmp_path: Path) -> None:
    fake = fake_nvml.build(init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    s = Sampler(fake)
    rec = telemetry.record(tmp_path / "r.jsonl", sampler=s)
    rec.close()
    rec.close()
    # Whether or not the thread got to NVML first, the file is a valid, empty recording.
    assert len(replay(tmp_path / "r.jsonl")) == 0
    assert read_recording(tmp_path / "r.jsonl").states


def test_truncated_last_line_is_skipped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    s, _ = sampled()
    path = write_jsonl(s.samples(), tmp_path / "cut.jsonl")
    data = path.read_bytes().rstrip(b"\n")
    path.write_bytes(data[:-7])
    back = replay(path)
    assert len(back) == len(s.samples()) - 1
    assert "truncated" in caplog.text


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", "empty file"),
        (b"not json\n", "not JSON"),
        (b'{"format": "other"}\n', "not an nbprof sample header"),
        (b'{"format": "nbprof-nvml-samples", "version": 99}\n', "version 99"),
        (
            b'{"format": "nbprof-nvml-samples", "version": 1}\n{"t": 1, "gpu": 0}\nnope\n{}\n',
            "line 3 is not JSON",
        ),
        (b'{"format": "nbprof-nvml-samples", "version": 1}\n{"t": "x"}\n', 'integer "t"'),
        (
            b'{"format": "nbprof-nvml-samples", "version": 1}\n'
            b'{"t": 1, "gpu": 0, "util_gpu": "a"}\n',
            "util_gpu is not a number",
        ),
    ],
)
def test_bad_files_name_the_file_and_the_reason(
    tmp_path: Path, content: bytes, reason: str
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content)
    with pytest.raises(TraceError) as err:
        replay(path)
    assert reason in str(err.value) and "bad.jsonl" in str(err.value)


def test_missing_file_is_a_trace_error(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="cannot read"):
        replay(tmp_path / "nope.jsonl")


def test_replay_source_advances_deterministically(tmp_path: Path) -> None:
    s, _ = sampled(passes=8)
    path = write_jsonl(s.samples(), tmp_path / "r.jsonl")
    ticks: list[telemetry.Tick] = []
    src = ReplaySource(path, speed=1.0, on_tick=ticks.append, autostart=False)
    t0 = src.first_ns
    assert len(src.samples()) == 0
    src.advance(t0 + 0.6e9)  # passes at 0, 0.25, 0.5 s
    assert len(src.samples()) == 3 and len(ticks) == 1 and ticks[0].state_changed
    assert src.advance(t0 + 0.6e9) is None  # nothing new
    src.advance(t0 + 10e9)
    assert src.done.is_set() and len(src.samples()) == 8
    assert src.samples().source.startswith("replay: r.jsonl")
    assert len(src.samples(since_ns=t0 + 1)) == 7
    assert src.latest().frame.iloc[0]["sm_util"] == 35.0
    src.close()


def test_replay_source_thread_plays_and_leaves_nothing(tmp_path: Path) -> None:
    s, _ = sampled(passes=8)
    path = write_jsonl(s.samples(), tmp_path / "r.jsonl")
    with ReplaySource(path, speed=math.inf) as src:
        assert src.wait(10)
    assert len(src.samples()) == 8
    assert REPLAY_THREAD_NAME not in [t.name for t in threading.enumerate() if t.is_alive()]
    # Real time at 100x: 1.75 s of samples plays in well under a second, through the thread.
    got: list[int] = []
    with ReplaySource(path, speed=100.0, on_tick=lambda t: got.append(len(t.block))) as src:
        assert src.wait(30)
    assert sum(got) == 8


def test_replay_source_rejects_bad_speed(tmp_path: Path) -> None:
    s, _ = sampled(passes=1)
    path = write_jsonl(s.samples(), tmp_path / "r.jsonl")
    with pytest.raises(ValueError, match="speed"):
        ReplaySource(path, speed=0)


def test_written_values_are_exact(tmp_path: Path) -> None:
    s, _ = sampled(passes=3)
    orig = s.samples().frame
    back = replay(write_jsonl(s.samples(), tmp_path / "x.jsonl")).frame
    assert np.array_equal(orig["time_ns"].to_numpy(), back["time_ns"].to_numpy())
    assert back["time_ns"].dtype == np.int64
