"""A trace's event array is read in pieces of whole events: streamed as it is read and
decompressed where it is laid out as Kineto writes it, else whole. However a file is cut,
it reads to the same trace, or fails with the same error.

Each test reads a file in pieces small enough to exercise every step of the stream, and
compares the result with the same file read in one piece, or read whole (the layout not
looked for), or with the same events written on one line; it also checks which way the
file was read and that the stream's buffer stayed small.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import random
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nbprof
from nbprof.trace import accel, io, pieces, reader
from tests.conftest import corpus_params
from tests.test_trace_cache import assert_same
from tests.test_trace_fastpaths import GOOD, _x, assert_same_either_way, kineto_text

#: GOOD with a correlation id on every GPU event.
LINKED = [
    dict(e, args={**e["args"], "correlation": 9}) if e.get("cat") == "gpu_memcpy" else e
    for e in GOOD
]


@pytest.fixture(autouse=True, params=["accelerator", "pure"])
def events_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test here runs with pieces read by the accelerator and by the pure path."""
    if request.param == "accelerator" and accel._accel is None:
        pytest.skip("the C accelerator is not built")
    monkeypatch.setenv(accel.ENV, "1" if request.param == "accelerator" else "0")
    return str(request.param)


class Spy:
    """Records how each file was read: streamed to its end (True) or read whole (False),
    and the stream buffer's largest size."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.ways: list[bool] = []
        self.largest = 0
        real_iter, real_whole = pieces.Stream.__iter__, pieces.whole
        spy = self

        def streamed(stream: pieces.Stream) -> Any:
            for piece in real_iter(stream):
                spy.largest = max(spy.largest, len(piece.data))
                yield piece
            spy.ways.append(True)

        def whole(*args: Any) -> Any:
            spy.ways.append(False)
            return real_whole(*args)

        monkeypatch.setattr(pieces.Stream, "__iter__", streamed)
        monkeypatch.setattr(pieces, "whole", whole)


def assert_same_events(a: Any, b: Any) -> None:
    """The traces of two files holding the same events: the same but for their source."""
    assert_same(a, dataclasses.replace(b, source=a.source))


def read(path: Path) -> Any:
    """The trace at ``path``, or its error's text."""
    try:
        return nbprof.trace.read(path, progress=False, cache=False)
    except nbprof.TraceError as e:
        return str(e)


def read_whole(path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The trace at ``path`` read whole, its layout not looked for (no stream)."""
    with monkeypatch.context() as m:
        m.setattr(pieces, "layout", lambda _data: None)
        return read(path)


def write(tmp_path: Path, text: str | bytes, gz: bool = True, name: str = "t") -> Path:
    data = text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text
    p = tmp_path / (f"{name}.json.gz" if gz else f"{name}.json")
    p.write_bytes(gzip.compress(data) if gz else data)
    return p


def room(piece: int, keep: int, out: int) -> int:
    """The most the stream's buffer holds: its room for what must fit (a piece, what is
    kept back for the end, a piece read and the separator of a cut), or what was read to
    see the layout."""
    return max(pieces._ROOM * (piece + keep + out + 16), pieces.HEAD_BYTES + out)


def small_pieces(monkeypatch: pytest.MonkeyPatch, piece: int, out: int, keep: int = 32) -> None:
    """Cut pieces of about ``piece`` bytes from decompressed pieces of ``out`` bytes, and
    keep only ``keep`` bytes back for the end: every step of the stream runs on a small
    file."""
    monkeypatch.setattr(reader, "PIECE_BYTES", piece)
    monkeypatch.setattr(io, "_OUT", out)
    monkeypatch.setattr(io, "_FIRST_OUT", out)
    monkeypatch.setattr(pieces, "TAIL_BYTES", keep)


#: What :func:`kineto_text` writes before the events, on one line.
KINETO_BEFORE = '"schemaVersion": 1, "deviceProperties": [{"id": 0, "numSms": 80}]'


def one_line_text(events: list[Any], *, before: str = '"schemaVersion": 1', after: str = "") -> str:
    """A trace as ``json.dump`` writes it: everything on one line."""
    tail = f", {after}" if after else ""
    head = f"{before}, " if before else ""
    return "{" + head + '"traceEvents": [' + ", ".join(
        e if isinstance(e, str) else json.dumps(e) for e in events
    ) + "]" + tail + "}"  # fmt: skip


@pytest.mark.parametrize("path", corpus_params())
def test_corpus_traces_stream_as_they_read_whole(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = Spy(monkeypatch)
    one = read(path)
    # Every trace in the corpus (a folder: each rank's file) is laid out as Kineto writes
    # it: streamed to its end.
    assert spy.ways and all(spy.ways)
    # Only a few pieces' bytes are held at once, whatever the file's size.
    assert spy.largest <= room(reader.PIECE_BYTES, pieces.TAIL_BYTES, io._FIRST_OUT)
    assert_same(one, read_whole(path, monkeypatch))


@pytest.mark.parametrize("gz", [True, False])
@pytest.mark.parametrize("sizes", [(40, 7), (200, 64), (1 << 21, 1 << 19)])
def test_good_trace_streams_in_any_pieces_as_on_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sizes: tuple[int, int], gz: bool
) -> None:
    small_pieces(monkeypatch, *sizes)
    spy = Spy(monkeypatch)
    one = read(write(tmp_path, kineto_text(LINKED * 5), gz))
    assert spy.ways == [True]
    assert len(one.kernels) == 10
    # The same events on one line: read whole, one piece.
    line = read(
        write(
            tmp_path,
            one_line_text(LINKED * 5, before=KINETO_BEFORE, after='"traceName": "t"'),
            gz,
            "l",
        )
    )
    assert spy.ways == [True, False]
    assert_same_events(one, line)


#: An event whose args hold the text between two events, one level deeper.
NESTED_SEPARATOR = (
    '{"ph": "X", "cat": "cpu_op", "name": "n", "pid": 1, "tid": 2, "ts": 1,\n'
    '"args": {"a": [{"x": 1},\n{"y": 2}]}}'
)
BAD_EVENT = _x("kernel", "bad", 140, 1, device=0, stream=7, correlation="seven")
CASES = {
    "bad args type in a later piece": kineto_text([*GOOD, BAD_EVENT, *GOOD]),
    "bad field type": kineto_text([*GOOD, dict(GOOD[0], pid=[1]), *GOOD]),
    "negative duration, then bad JSON": kineto_text(
        [*GOOD, _x("kernel", "k", 5, -1), *GOOD]
    ).replace('"traceName": "t"', '"traceName": '),
    "float timestamps": kineto_text([*GOOD, _x("cpu_op", "f", 123.4567), *GOOD]),
    "a string timestamp": kineto_text([*GOOD, _x("cpu_op", "f", "12"), *GOOD]),
    "no ts": kineto_text([*GOOD, {"ph": "X", "cat": "cpu_op", "name": "n", "dur": 1}]),
    "bad UTF-8 in a name": kineto_text([*GOOD, *GOOD]).replace("gemm", "g\udcffm"),
    "separator text deeper in an event": kineto_text([*GOOD, NESTED_SEPARATOR, *GOOD]),
    # Among the pieces cut once the array's end is known (found by fuzzing: the pieces
    # after the one that failed were read on, and the rest of the events were lost).
    "separator text in broken last events": kineto_text([GOOD[3], GOOD[0]]).replace(
        '"ph": "X"', '"ph": },\n  {"X"'
    ),
    "duplicate traceEvents": kineto_text(GOOD, after='"traceEvents": []'),
    "a repeated top-level key": kineto_text(GOOD, after='"schemaVersion": 2'),
    "an array of objects after the events": kineto_text(GOOD, after='"x": [\n  {"a": 1}\n  ]'),
    "nothing after the events": kineto_text(GOOD, after=""),
    "events at no indentation": kineto_text(GOOD, indent=""),
    "metadata only": kineto_text([{"ph": "M", "name": "process_name", "pid": 1}] * 3),
    "one event": kineto_text(GOOD[:1]),
    "truncated": kineto_text(GOOD)[:-40],
    "CRLF": kineto_text(GOOD).replace("\n", "\r\n"),
    "byte-order mark": "\ufeff" + kineto_text(GOOD),
    "traceEvents in a string first": kineto_text(GOOD).replace(
        '"schemaVersion": 1', '"note": "\\"traceEvents\\": [\\n  {", "schemaVersion": 1'
    ),
    "trailing garbage": kineto_text(GOOD) + "x",
}


@pytest.mark.parametrize("gz", [True, False])
@pytest.mark.parametrize("case", list(CASES))
def test_cases_in_small_pieces_read_or_fail_as_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str, gz: bool
) -> None:
    p = write(tmp_path, CASES[case], gz)
    # In the same pieces: an error in the JSON of events names the piece's events.
    small_pieces(monkeypatch, 60, 16)
    whole = read_whole(p, monkeypatch)
    assert_same_either_way(read(p), whole)


def test_a_cut_inside_an_event_reads_the_rest_as_one_piece(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The text between two events also lies inside one, one level deeper: the piece cut
    # there is not whole events, and the rest of the array is then read as one piece.
    events = [*LINKED, NESTED_SEPARATOR, *LINKED]
    small_pieces(monkeypatch, 60, 16)
    spy = Spy(monkeypatch)
    one = read(write(tmp_path, kineto_text(events)))
    assert spy.ways == [True]
    assert len(one.cpu_ops) == 3
    line = read(
        write(
            tmp_path,
            one_line_text(events, before=KINETO_BEFORE, after='"traceName": "t"'),
            name="l",
        )
    )
    assert_same_events(one, line)


def test_errors_name_the_event_in_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    small_pieces(monkeypatch, 60, 16)
    text = kineto_text([*GOOD, BAD_EVENT, *GOOD])
    assert re.search(
        r"event 9: `args.correlation` should be an integer", read(write(tmp_path, text))
    )
    assert "JSON is truncated" in read(write(tmp_path, CASES["truncated"], name="cut"))


def test_values_after_the_events_are_read_at_the_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Newer Kineto writes baseTimeNanoseconds and distributedInfo after the events: the
    # times gathered before they were known are moved by the base at the end.
    base = 1_700_000_000_000_000_000
    after = f'"distributedInfo": {{"rank": 3}},\n  "baseTimeNanoseconds": {base}'
    small_pieces(monkeypatch, 60, 16)
    spy = Spy(monkeypatch)
    p = write(tmp_path, kineto_text(LINKED * 3, after=after))
    one = read(p)
    assert spy.ways == [True]
    assert_same(one, read_whole(p, monkeypatch))
    # The earliest event is the step annotation at ts=90 µs after the base.
    assert one.origin_ns == base + 90_000
    assert sorted(set(one.kernels["ts"])) == [40.0, 70.0]  # 130 and 160 µs, less 90
    assert set(one.kernels["rank"]) == {3}


def test_times_out_of_range_with_a_base_fail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 4.6e18 ns of base and 4.7e18 ns of time: past the int64 nanoseconds of year 2262.
    base = 2**62 - 1
    late = _x("cpu_op", "late", 4_700_000_000_000_000, 1)
    p = write(tmp_path, kineto_text([*LINKED, late], after=f'"baseTimeNanoseconds": {base}'))
    one = read(p)
    assert "timestamps out of range" in one
    assert one == read_whole(p, monkeypatch)


def test_flow_events_link_a_streamed_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # No correlation ids: kernels are linked by flow events, gathered piece by piece.
    ev = [dict(e, args={k: v for k, v in e["args"].items() if k != "correlation"})
          if "args" in e else e for e in GOOD]  # fmt: skip
    ev[2].update(pid=0, tid=7)
    small_pieces(monkeypatch, 60, 16)
    spy = Spy(monkeypatch)
    p = write(tmp_path, kineto_text(ev))
    one = read(p)
    assert spy.ways == [True]
    assert one.kernels["correlation"].tolist()[0] == 7
    assert "linked to their launch by flow events" in " ".join(one.notes)
    assert_same(one, read_whole(p, monkeypatch))


def test_a_one_line_file_is_decompressed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Not laid out for streaming: the bytes already decompressed are kept, not read again.
    p = write(tmp_path, json.dumps({"schemaVersion": 1, "traceEvents": GOOD}))
    opened: list[str] = []
    real = io.gunzip_pieces

    def counting(*args: Any, **kw: Any) -> Any:
        opened.append(str(args[1]))
        return real(*args, **kw)

    monkeypatch.setattr(io, "gunzip_pieces", counting)
    spy = Spy(monkeypatch)
    assert len(read(p).kernels) == 2
    assert spy.ways == [False]
    assert opened == [str(p)]


def test_a_plain_file_streams_as_it_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # torch.profiler's tensorboard_trace_handler writes plain JSON unless asked for gzip.
    text = kineto_text(LINKED * 200)
    small_pieces(monkeypatch, 4096, 1024, keep=256)
    spy = Spy(monkeypatch)
    p = write(tmp_path, text, gz=False)
    one = read(p)
    assert spy.ways == [True]
    assert spy.largest <= room(4096, 256, 1024) < len(text) / 2
    assert_same(one, read_whole(p, monkeypatch))


def test_gzip_members_split_inside_an_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = kineto_text(LINKED * 4).encode()
    cut = data.index(b'"gemm"') + 3
    p = tmp_path / "t.json.gz"
    p.write_bytes(gzip.compress(data[:cut]) + gzip.compress(data[cut:]))
    small_pieces(monkeypatch, 100, 50)
    spy = Spy(monkeypatch)
    one = read(p)
    assert spy.ways == [True]
    assert_same(one, read_whole(p, monkeypatch))


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
    rng = random.Random(5)
    # Incompressible names make the gzip stream long enough to damage mid-way.
    events = [_x("cpu_op", f"{rng.getrandbits(64):016x}", i, 1) for i in range(200)]
    p = tmp_path / "t.json.gz"
    p.write_bytes(damage(gzip.compress(kineto_text([*GOOD, *events]).encode())))
    small_pieces(monkeypatch, 300, 128)
    one = read(p)
    assert "gzip data is" in one
    assert one == read_whole(p, monkeypatch)


def test_the_buffer_stays_small_on_a_bigger_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 3,000 events, about 0.5 MB of JSON, in pieces of 8 KiB: the buffer never holds more
    # than its room (see room()), a third of the file here.
    events = [_x("cpu_op", f"op{i % 50}", 10 * i, 5, **{"External id": i}) for i in range(3000)]
    text = kineto_text([*LINKED, *events])
    small_pieces(monkeypatch, 8192, 4096, keep=1024)
    spy = Spy(monkeypatch)
    p = write(tmp_path, text)
    one = read(p)
    assert spy.ways == [True]
    assert spy.largest <= room(8192, 1024, 4096) < len(text) / 3
    assert_same(one, read_whole(p, monkeypatch))


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.sampled_from(range(len(LINKED))), min_size=1, max_size=15),
    st.integers(1, 400),
    st.integers(1, 200),
    st.sampled_from(['"traceName": "t"', '"baseTimeNanoseconds": 5', ""]),
)
def test_any_events_in_any_pieces_read_as_whole(
    order: list[int], piece: int, out: int, after: str
) -> None:
    text = kineto_text([LINKED[i] for i in order], after=after)
    with tempfile.TemporaryDirectory() as d, pytest.MonkeyPatch.context() as m:
        p = write(Path(d), text)
        whole = read_whole(p, m)
        small_pieces(m, piece, out)
        assert_same_either_way(read(p), whole)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.sampled_from(range(len(GOOD))), min_size=1, max_size=12),
    st.integers(1, 40),
    st.sampled_from(["},\n  {", "}\n  ]", "\n", ",", "]", "{", '"']),
)
def test_damaged_text_in_pieces_reads_or_fails_as_whole(
    order: list[int], at: int, insert: str
) -> None:
    """Text cut or spliced at some event boundary reads (or fails) the same either way."""
    text = kineto_text([GOOD[i] for i in order])
    cut = text.find("traceEvents") + at * 37 % max(1, len(text) - text.find("traceEvents"))
    text = text[:cut] + insert + text[cut:]
    with tempfile.TemporaryDirectory() as d, pytest.MonkeyPatch.context() as m:
        p = write(Path(d), text)
        whole = read_whole(p, m)
        small_pieces(m, 60, 16)
        assert_same_either_way(read(p), whole)


class _Source:
    """An io.Source of ``chunks``, for a Stream read directly."""

    def __init__(self, chunks: Any) -> None:
        self.pieces = chunks
        self.where = "t.json"


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
    h = pieces.layout(first)
    assert h is not None
    views = []
    got: list[bytes] = []
    with pytest.MonkeyPatch.context() as m:
        m.setattr(pieces, "TAIL_BYTES", keep)
        stream = pieces.Stream(_Source(chunks), h, first, piece)  # type: ignore[arg-type]
        for p in stream:
            buf, (a, b) = p.data, p.span
            if hold_a_view and not views:
                views.append(memoryview(buf))
            # The byte before a span and the one after it are the reader's to use.
            assert buf[a - 1 : a] in (b" ", b"\n", b"[") and b < len(buf)
            got.append(bytes(buf[a:b]))
    for v in views:
        v.release()
    # From the first event's "{" to the last one's "}", the events two spaces in.
    first_event = text.index(b"{", text.index(b'"traceEvents"'))
    inside = text[first_event : text.rindex(b"}\n  ]") + 1]
    assert b",\n  ".join(got) == inside
    assert [e for g in got for e in json.loads(b"[" + g + b"]")] == [
        json.loads(json.dumps(e)) for e in events
    ]
    assert stream.top is not None and stream.top.json_bytes == len(text)
    assert stream.top.meta.metadata["traceName"] == "t"


@pytest.mark.parametrize("layout", ["one line", "indented", "cut short"])
def test_every_file_opened_is_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str
) -> None:
    # A plain file is read a piece at a time from its open file: whether it is streamed,
    # read whole, or streamed and then read whole again, it is closed after.
    from nbprof import _files

    opened: list[Any] = []
    real = _files.open_regular

    def recording(p: Any) -> Any:
        f, size = real(p)
        opened.append(f)
        return f, size

    monkeypatch.setattr(io, "open_regular", recording)
    text = json.dumps({"traceEvents": LINKED}) if layout == "one line" else kineto_text(LINKED)
    if layout == "cut short":
        text = text[:-30]
    read(write(tmp_path, text, gz=False))
    assert opened and all(f.closed for f in opened)
    assert len(opened) == (2 if layout == "cut short" else 1)


ONE_LINE_CASES = {
    "good": one_line_text(GOOD, after='"traceName": "t"'),
    "good, metadata after only": one_line_text(GOOD, before="", after='"x": [1, {"a": [2]}]'),
    "the same start twice across chunks": one_line_text(
        # One chunk puts CPU annotations first; chunks of one event keep the file's order.
        [_x("gpu_user_annotation", "g", 100), _x("user_annotation", "a", 100), *GOOD]
    ),
    "bad args type": one_line_text([*GOOD, BAD_EVENT, *GOOD]),
    "bad field type": one_line_text([*GOOD, dict(GOOD[0], pid=[1]), *GOOD]),
    "negative duration": one_line_text([*GOOD, _x("kernel", "k", 5, -1), *GOOD]),
    "float timestamps later": one_line_text([*GOOD, _x("cpu_op", "f", 123.4567), *GOOD]),
    "a string timestamp": one_line_text([*GOOD, _x("cpu_op", "f", "12"), *GOOD]),
    "no ts": one_line_text([*GOOD, {"ph": "X", "cat": "cpu_op", "name": "n", "dur": 1}]),
    "bad UTF-8 in a name": one_line_text([*GOOD, *GOOD]).replace("gemm", "g\udcffm"),
    "an event that is no object": one_line_text([*GOOD, "[1]", *GOOD]),
    "duplicate traceEvents": one_line_text(GOOD, after='"traceEvents": []'),
    "duplicate traceEvents, the empty one first": one_line_text(GOOD, before='"traceEvents": []'),
    "a repeated top-level key": one_line_text(GOOD, after='"schemaVersion": 2'),
    "traceEvents nested first": one_line_text(GOOD, before='"m": {"traceEvents": [1]}'),
    "traceEvents not an array": '{"traceEvents": {"a": 1}}',
    "no events": one_line_text([]),
    "blank event array": '{"traceEvents": [  ]}',
    "metadata only": one_line_text([{"ph": "M", "name": "process_name", "pid": 1}] * 3),
    "one event": one_line_text(GOOD[:1]),
    "truncated": one_line_text(GOOD)[:-40],
    "trailing garbage": one_line_text(GOOD) + "x",
    "byte-order mark": "\ufeff" + one_line_text(GOOD),
    "baseTimeNanoseconds": one_line_text(GOOD, after='"baseTimeNanoseconds": 1700000000000000000'),
}

#: What each case reads to: the kernels of a trace, or (part of) the error's reason.
ONE_LINE_READS: dict[str, int | str] = {
    "good": 2,
    "good, metadata after only": 2,
    "the same start twice across chunks": 2,
    "bad args type": "event 9: `args.correlation` should be an integer",
    "bad field type": "event 9: `pid` should be an integer or a string, got an array",
    "negative duration": "event 9: negative duration",
    "float timestamps later": 4,
    "a string timestamp": "event 9: `ts` should be a number, got a string",
    "no ts": "event 9: duration event has no `ts`",
    "bad UTF-8 in a name": "not valid JSON",
    "an event that is no object": "event 9 should be an object",
    "duplicate traceEvents": "`traceEvents` appears more than once",
    "duplicate traceEvents, the empty one first": "`traceEvents` appears more than once",
    "a repeated top-level key": 2,
    "traceEvents nested first": 2,
    "traceEvents not an array": "`traceEvents` should be an array, got an object",
    "no events": "trace is empty (no events)",
    "blank event array": "trace is empty (no events)",
    "metadata only": "no timed events",
    "one event": 0,
    "truncated": "JSON is truncated",
    "trailing garbage": "not valid JSON",
    "byte-order mark": 2,
    "baseTimeNanoseconds": 2,
}


@pytest.mark.parametrize("gz", [True, False])
@pytest.mark.parametrize("chunk", [1, 3, 8192])
@pytest.mark.parametrize("case", list(ONE_LINE_CASES))
def test_a_one_line_file_is_one_piece_read_a_chunk_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str, chunk: int, gz: bool
) -> None:
    """A file not laid out as Kineto writes it is one piece, tabulated a chunk of events at
    a time: its trace or its error, whichever reads its events."""
    monkeypatch.setattr(reader, "CHUNK", chunk)
    spy = Spy(monkeypatch)
    got = read(write(tmp_path, ONE_LINE_CASES[case], gz))
    want = ONE_LINE_READS[case]
    if isinstance(want, int):
        assert not isinstance(got, str), got
        assert len(got.kernels) == want
        assert spy.ways == [False]
    else:
        assert isinstance(got, str) and want in got, got
