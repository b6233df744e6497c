"""A trace read a piece at a time, as it is read and decompressed, gives exactly what
reading it whole gives.

The streamed path (:mod:`nbprof.trace.stream`) only ever keeps a few MiB of JSON; every
file it cannot read exactly as the whole file is read goes back to that way. Each test
reads a file both ways (``NBPROF_STREAM=0`` turns streaming off) and compares the trace,
or the error, and checks which way the file was read.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nbprof.trace import decode as dec
from nbprof.trace import io, reader, scan, stream
from tests.conftest import corpus_params
from tests.test_trace_cache import assert_same
from tests.test_trace_fastpaths import (
    CASES,
    GOOD,
    _x,
    assert_same_either_way,
    kineto_text,
    read_each_way,
)

#: GOOD with a correlation id on every GPU event: no flow events are needed to link them.
LINKED = [
    dict(e, args={**e["args"], "correlation": 9}) if e.get("cat") == "gpu_memcpy" else e
    for e in GOOD
]


@pytest.fixture(autouse=True, params=["scanner", "python"])
def events_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "scanner" and not scan.available():
        pytest.skip("the C scanner is not built")
    monkeypatch.setenv(scan.ENV, "1" if request.param == "scanner" else "0")
    monkeypatch.setenv("NBPROF_PARSE_WORKERS", "1")
    return str(request.param)


class Spy:
    """Records whether each streamed read gave a rank, and the stream buffer's largest size."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.ranks: list[bool] = []
        self.largest = 0
        real_rank, real_pieces = reader._stream_rank, stream.pieces

        def rank(*args: Any, **kw: Any) -> Any:
            got = real_rank(*args, **kw)
            self.ranks.append(got is not None)
            return got

        def pieces(*args: Any, **kw: Any) -> Any:
            gen = real_pieces(*args, **kw)
            try:
                while True:
                    buf, span = next(gen)
                    self.largest = max(self.largest, len(buf))
                    yield buf, span
            except StopIteration as stop:
                return stop.value

        monkeypatch.setattr(reader, "_stream_rank", rank)
        monkeypatch.setattr(stream, "pieces", pieces)


def both_ways(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any, Spy]:
    """(trace or error text) read as streamed where it can be, then read whole."""
    spy = Spy(monkeypatch)
    one, two = read_each_way(path, monkeypatch, reader.STREAM_ENV)
    return one, two, spy


def write_gz(tmp_path: Path, text: str | bytes, gz: bool = True) -> Path:
    data = text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text
    p = tmp_path / ("t.json.gz" if gz else "t.json")
    p.write_bytes(gzip.compress(data) if gz else data)
    return p


def room(piece: int, keep: int, out: int) -> int:
    """The most the stream's buffer holds: its room for what must fit (a piece, what is
    kept back for the end, a piece read and the separator of a cut), or what was read to
    see the layout."""
    return max(stream._ROOM * (piece + keep + out + 16), reader._HEAD_BYTES + out)


def with_helpers(monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    """Read any file with ``n`` helper processes (forked even with other threads left
    idle by other tests)."""
    from nbprof.trace import forked

    monkeypatch.setenv(forked.WORKERS_ENV, str(n + 1))
    monkeypatch.setattr(reader, "PARALLEL_MIN_BYTES", 100)
    monkeypatch.setattr(forked, "can_fork", lambda: True)


def small_pieces(monkeypatch: pytest.MonkeyPatch, piece: int, out: int) -> None:
    """Cut pieces of about ``piece`` bytes from decompressed pieces of ``out`` bytes, and
    keep only 32 bytes back for the end: every step of the stream runs on a small file."""
    monkeypatch.setattr(reader, "_piece_bytes", lambda: piece)
    monkeypatch.setattr(io, "_OUT", out)
    monkeypatch.setattr(io, "_FIRST_OUT", out)
    monkeypatch.setattr(dec, "TAIL_BYTES", 32)


@pytest.mark.parametrize("path", corpus_params())
def test_corpus_traces_stream_as_they_read_whole(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    one, two, spy = both_ways(path, monkeypatch)
    # Every trace in the corpus (a folder: each rank's file) is laid out as Kineto writes
    # it: streamed, not read again.
    assert spy.ranks and all(spy.ranks)
    assert_same(one, two)
    # Only a few pieces' bytes are held at once, whatever the file's size: room for four
    # times a piece, what is kept back for the end, and a piece read.
    assert spy.largest <= room(reader._piece_bytes(), dec.TAIL_BYTES, io._FIRST_OUT)


@pytest.mark.parametrize("gz", [True, False])
@pytest.mark.parametrize("sizes", [(40, 7), (200, 64), (1 << 21, 1 << 19)])
def test_good_trace_streams_in_any_pieces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sizes: tuple[int, int], gz: bool
) -> None:
    small_pieces(monkeypatch, *sizes)
    one, two, spy = both_ways(write_gz(tmp_path, kineto_text(LINKED * 5), gz), monkeypatch)
    assert spy.ranks == [True]
    assert_same(one, two)
    assert len(one.kernels) == 10


@pytest.mark.parametrize("gz", [True, False])
@pytest.mark.parametrize("case", list(CASES))
def test_cases_stream_or_fail_as_they_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str, gz: bool
) -> None:
    small_pieces(monkeypatch, 60, 16)
    one, two, spy = both_ways(write_gz(tmp_path, CASES[case], gz), monkeypatch)
    assert_same_either_way(one, two)
    # Whatever streaming could not read exactly was read whole: no error came from it.
    assert spy.ranks in ([], [True], [False])


def test_values_after_the_events_are_read_at_the_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Newer Kineto writes baseTimeNanoseconds and distributedInfo after the events: the
    # times gathered before they were known are moved by the base at the end.
    base = 1_700_000_000_000_000_000
    after = f'"distributedInfo": {{"rank": 3}},\n  "baseTimeNanoseconds": {base}'
    small_pieces(monkeypatch, 60, 16)
    one, two, spy = both_ways(write_gz(tmp_path, kineto_text(LINKED * 3, after=after)), monkeypatch)
    assert spy.ranks == [True]
    assert_same(one, two)
    # The earliest event is the step annotation at ts=90 µs after the base.
    assert one.origin_ns == base + 90_000
    assert sorted(set(one.kernels["ts"])) == [40.0, 70.0]  # 130 and 160 µs, less 90
    assert set(one.kernels["rank"]) == {3}


def test_times_out_of_range_with_a_base_fail_as_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 4.6e18 ns of base and 4.7e18 ns of time: past the int64 nanoseconds of year 2262.
    base = 2**62 - 1
    late = _x("cpu_op", "late", 4_700_000_000_000_000, 1)
    text = kineto_text([*LINKED, late], after=f'"baseTimeNanoseconds": {base}')
    one, two, spy = both_ways(write_gz(tmp_path, text), monkeypatch)
    assert one == two
    assert "timestamps out of range" in one
    assert spy.ranks == [False]


def test_flow_events_needed_send_the_file_to_the_whole_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No correlation ids: kernels are linked by flow events, found in the whole file.
    ev = [dict(e, args={k: v for k, v in e["args"].items() if k != "correlation"})
          if "args" in e else e for e in GOOD]  # fmt: skip
    ev[2].update(pid=0, tid=7)
    one, two, spy = both_ways(write_gz(tmp_path, kineto_text(ev)), monkeypatch)
    assert spy.ranks == [False]
    assert_same(one, two)
    assert one.kernels["correlation"].tolist()[0] == 7


def test_a_one_line_file_is_decompressed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Not laid out for streaming: the bytes already decompressed are kept, not read again.
    text = json.dumps({"schemaVersion": 1, "traceEvents": GOOD})
    p = write_gz(tmp_path, text)
    opened: list[str] = []
    real = io.gunzip_pieces

    def counting(*args: Any, **kw: Any) -> Any:
        opened.append(str(args[1]))
        return real(*args, **kw)

    monkeypatch.setattr(io, "gunzip_pieces", counting)
    one, two, spy = both_ways(p, monkeypatch)
    assert_same(one, two)
    assert spy.ranks == []
    assert opened == [str(p), str(p)]  # once in each of the two reads


def test_a_plain_file_streams_as_it_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # torch.profiler's tensorboard_trace_handler writes plain JSON unless asked for gzip.
    text = kineto_text(LINKED * 200)
    small_pieces(monkeypatch, 4096, 1024)
    monkeypatch.setattr(dec, "TAIL_BYTES", 256)
    one, two, spy = both_ways(write_gz(tmp_path, text, gz=False), monkeypatch)
    assert spy.ranks == [True]
    assert_same(one, two)
    assert spy.largest <= room(4096, 256, 1024) < len(text) / 2


def test_a_big_file_for_several_processes_streams_with_helpers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Helper processes take pieces as they are cut: the same tables as one process's.
    from nbprof.trace import helpers

    with_helpers(monkeypatch, 1)
    small_pieces(monkeypatch, 256, 512)
    handed: list[int] = []
    results = helpers.Helpers.results

    def counting(team: helpers.Helpers) -> Any:
        got = results(team)
        handed.extend(team.handed)
        return got

    monkeypatch.setattr(helpers.Helpers, "results", counting)
    p = write_gz(tmp_path, kineto_text(LINKED * 20))
    one, two, spy = both_ways(p, monkeypatch)
    assert_same(one, two)
    assert spy.ranks == [True]
    assert len(handed) == 1 and handed[0] > 1  # pieces were read by the helper


@pytest.mark.parametrize("up_first", [True, False], ids=["helper-up", "helper-late"])
def test_a_big_file_in_a_notebook_streams_with_a_helper_started_afresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, up_first: bool
) -> None:
    """A notebook's kernel runs other threads, so a fork is not safe there: the helper is
    started afresh, and reads pieces once it is up. Either way the tables are one
    process's, and no process is left behind."""
    import threading

    from nbprof.trace import forked, helpers
    from tests.test_trace_helpers import up
    from tests.test_trace_parallel import _children

    monkeypatch.setenv(forked.WORKERS_ENV, "2")
    monkeypatch.setattr(reader, "PARALLEL_MIN_BYTES", 100)
    small_pieces(monkeypatch, 256, 512)
    teams: list[helpers.Helpers] = []
    start = helpers.Helpers.start

    def starting(*args: Any) -> Any:
        team = start(*args)
        assert team is not None
        teams.append(team)
        return up(team) if up_first else team  # up: as if the file were bigger

    monkeypatch.setattr(helpers.Helpers, "start", starting)
    p = write_gz(tmp_path, kineto_text(LINKED * 20))
    before = _children()
    idle = threading.Event()
    kernel_thread = threading.Thread(target=idle.wait)
    kernel_thread.start()
    try:
        assert not forked.can_fork()
        one, two, spy = both_ways(p, monkeypatch)
    finally:
        idle.set()
        kernel_thread.join()
    assert_same(one, two)
    assert spy.ranks == [True]
    (team,) = teams
    (h,) = team._helpers
    assert h.process is not None  # started afresh, not forked
    if up_first:
        assert team.handed[0] > 1  # pieces were read by the helper
    assert _children() == before


def test_a_helpers_columns_do_not_keep_its_memory_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One piece, read by the helper: every table is that one part, first views of the
    # helper's memory file; the trace's tables hold none of them.
    with_helpers(monkeypatch, 1)
    mapped: list[str] = []
    unpacked = reader._unpacked

    def spying(packed: Any) -> Any:
        got = unpacked(packed)
        for piece in got:
            for table, parts in piece.acc.parts.items():
                if any(isinstance(_root(v), memoryview) for p in parts for v in p.values()):
                    mapped.append(table)
        return got

    monkeypatch.setattr(reader, "_unpacked", spying)
    p = write_gz(tmp_path, kineto_text(LINKED), gz=False)
    trace = reader.read(p, progress=False, cache=False)
    assert {"kernels", "memcpy", "cpu_ops"} <= set(mapped)
    for table in ("kernels", "memcpy", "memset", "runtime", "cpu_ops", "annotations"):
        frame = getattr(trace, table)
        for column in frame.columns:
            assert not isinstance(_root(frame[column].to_numpy()), memoryview), (table, column)


def test_a_table_of_one_part_is_copied_out_of_shared_memory() -> None:
    import numpy as np

    shared = np.frombuffer(memoryview(bytearray(64)), np.int64)
    acc = reader._Acc()
    acc.add("comms", {"ts_ns": shared[:4], "dur": np.arange(4)})
    acc.add("kernels", {"ts_ns": shared[4:6]})
    acc.add("kernels", {"ts_ns": shared[6:]})
    reader._own_lone_parts(acc)
    (comms,) = acc.parts["comms"]
    assert not isinstance(_root(comms["ts_ns"]), memoryview)
    assert comms["ts_ns"].tolist() == [0, 0, 0, 0]
    # Several parts are joined into new arrays anyway: left as they are.
    assert all(isinstance(_root(p["ts_ns"]), memoryview) for p in acc.parts["kernels"])


def _root(a: Any) -> Any:
    while getattr(a, "base", None) is not None:
        a = a.base
    return a


def test_gzip_members_split_inside_an_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = kineto_text(LINKED * 4).encode()
    cut = data.index(b'"gemm"') + 3
    p = tmp_path / "t.json.gz"
    p.write_bytes(gzip.compress(data[:cut]) + gzip.compress(data[cut:]))
    small_pieces(monkeypatch, 100, 50)
    one, two, spy = both_ways(p, monkeypatch)
    assert spy.ranks == [True]
    assert_same(one, two)


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda b: b[: len(b) // 2], id="truncated"),
        pytest.param(
            lambda b: b[:200] + bytes(x ^ 0x5A for x in b[200:260]) + b[260:], id="corrupt"
        ),
    ],
)
def test_damaged_gzip_fails_as_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: Any
) -> None:
    import random

    rng = random.Random(5)
    # Incompressible names make the gzip stream long enough to damage mid-way.
    events = [_x("cpu_op", f"{rng.getrandbits(64):016x}", i, 1) for i in range(200)]
    raw = gzip.compress(kineto_text([*GOOD, *events]).encode())
    p = tmp_path / "t.json.gz"
    p.write_bytes(damage(raw))
    small_pieces(monkeypatch, 300, 128)
    one, two, _ = both_ways(p, monkeypatch)
    assert one == two
    assert "gzip data is" in one


def test_damaged_gzip_with_helpers_fails_as_whole_and_stops_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The damage is met mid-stream, pieces already handed out: the helpers are stopped.
    import random

    from nbprof.trace import helpers
    from tests.test_trace_parallel import _children

    handed: list[int] = []
    offer = helpers.Helpers.offer

    def counting(team: helpers.Helpers, *args: Any) -> Any:
        k = offer(team, *args)
        handed.append(k is not None)
        return k

    monkeypatch.setattr(helpers.Helpers, "offer", counting)
    with_helpers(monkeypatch, 2)
    rng = random.Random(5)
    # Past the first 64 KiB read to see the layout, so that the stream starts.
    events = [_x("cpu_op", f"{rng.getrandbits(64):016x}", i, 1) for i in range(3000)]
    raw = gzip.compress(kineto_text([*GOOD, *events]).encode())
    p = tmp_path / "t.json.gz"
    p.write_bytes(raw[: len(raw) * 3 // 4])
    small_pieces(monkeypatch, 300, 128)
    before = _children()
    one, two, _ = both_ways(p, monkeypatch)
    assert one == two
    assert "gzip data is" in one
    assert any(handed)
    assert _children() == before


def test_the_buffer_stays_small_on_a_bigger_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 3,000 events, about 0.5 MB of JSON, in pieces of 8 KiB: the buffer never holds more
    # than its room (see room()), a third of the file here.
    events = [_x("cpu_op", f"op{i % 50}", 10 * i, 5, **{"External id": i}) for i in range(3000)]
    text = kineto_text([*LINKED, *events])
    small_pieces(monkeypatch, 8192, 4096)
    monkeypatch.setattr(dec, "TAIL_BYTES", 1024)
    one, two, spy = both_ways(write_gz(tmp_path, text), monkeypatch)
    assert spy.ranks == [True]
    assert_same(one, two)
    assert spy.largest <= room(8192, 1024, 4096) < len(text) / 3


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.sampled_from(range(len(LINKED))), min_size=1, max_size=15),
    st.integers(1, 400),
    st.integers(1, 200),
    st.sampled_from(['"traceName": "t"', '"baseTimeNanoseconds": 5', ""]),
)
def test_any_events_in_any_pieces_stream_as_whole(
    order: list[int], piece: int, out: int, after: str
) -> None:
    import tempfile

    text = kineto_text([LINKED[i] for i in order], after=after)
    with tempfile.TemporaryDirectory() as d, pytest.MonkeyPatch.context() as m:
        m.setenv("NBPROF_PARSE_WORKERS", "1")
        small_pieces(m, piece, out)
        one, two, _ = both_ways(write_gz(Path(d), text), m)
        assert_same_either_way(one, two)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 30),
    st.integers(1, 300),
    st.integers(1, 120),
    st.integers(0, 64),
    st.booleans(),
)
def test_pieces_are_the_events_in_order(
    count: int, piece: int, out: int, keep: int, hold_a_view: bool
) -> None:
    """The spans handed out are the array's events, whole and in order, however the text
    arrives, whether the buffer can grow in place or (a view of it held) cannot."""
    events = [dict(LINKED[i % len(LINKED)], ts=i) for i in range(count)]
    text = kineto_text(events, after='"traceName": "t", "n": [1, 2]').encode()
    chunks = iter(text[i : i + out] for i in range(0, len(text), out))
    first = bytearray()
    for c in chunks:
        first += c
        if len(first) >= 200:
            break
    h = dec.layout(first)
    assert h is not None
    views = []
    got: list[bytes] = []
    with pytest.MonkeyPatch.context() as m:
        m.setattr(dec, "TAIL_BYTES", keep)
        gen = stream.pieces(chunks, h, first, piece)
        try:
            while True:
                buf, (a, b) = next(gen)
                if hold_a_view and not views:
                    views.append(memoryview(buf))
                # The byte before a span and the one after it are the reader's to use.
                assert buf[a - 1 : a] in (b" ", b"\n", b"[") and b < len(buf)
                got.append(bytes(buf[a:b]))
        except StopIteration as stop:
            end = stop.value
    for v in views:
        v.release()
    # From the first event's "{" to the last one's "}", the events two spaces in.
    first_event = text.index(b"{", text.index(b'"traceEvents"'))
    inside = text[first_event : text.rindex(b"}\n  ]") + 1]
    assert b",\n  ".join(got) == inside
    assert [e for g in got for e in json.loads(b"[" + g + b"]")] == [
        json.loads(json.dumps(e)) for e in events
    ]
    assert json.loads(bytes(end.top["traceName"])) == "t" and end.json_bytes == len(text)
    assert end.repeated is None


@pytest.mark.parametrize("layout", ["one line", "indented", "shared out"])
def test_every_file_opened_is_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str
) -> None:
    # A plain file is read a piece at a time from its open file: whether it is streamed
    # (with helper processes or not) or handed back to be read whole, it is closed after.
    from nbprof import _files
    from nbprof.trace import forked

    opened: list[Any] = []
    real = _files.open_regular

    def recording(p: Any) -> Any:
        f, size = real(p)
        opened.append(f)
        return f, size

    monkeypatch.setattr(io, "open_regular", recording)
    if layout == "shared out":
        monkeypatch.setenv(forked.WORKERS_ENV, "2")
        monkeypatch.setattr(reader, "PARALLEL_MIN_BYTES", 100)
    text = json.dumps({"traceEvents": LINKED}) if layout == "one line" else kineto_text(LINKED)
    one, two, spy = both_ways(write_gz(tmp_path, text, gz=False), monkeypatch)
    assert_same(one, two)
    assert opened and all(f.closed for f in opened)
    assert spy.ranks == ([] if layout == "one line" else [True])
