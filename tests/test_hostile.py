"""Hostile and unlucky input to the reader: no hang, no crash, no raw exception.

Every big input is generated here, streamed to a temporary folder (nothing large is kept in
the repository). Cases that need memory run the command in a subprocess under an
address-space limit (``RLIMIT_AS``), so they show what a machine that is short of memory
sees without using the memory themselves. Timeouts are hang guards, many times what the
case takes now and well under what it took before.
"""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import os
import subprocess
import sys
import zipfile
import zlib
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import nbprof
from nbprof.analysis._text import NAME_PREFIX, matches, token_matches
from nbprof.errors import TraceError
from nbprof.telemetry import read_recording
from nbprof.trace import read

REPO = Path(__file__).resolve().parent.parent
EV = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 5,
      "args": {"device": 0, "stream": 7}}  # fmt: skip
EV_TEXT = json.dumps(EV, separators=(",", ":")).encode()
DOC = b'{"traceEvents":[' + EV_TEXT + b"]}"


def reason(path: Path) -> str:
    with pytest.raises(TraceError) as info:
        read(path, progress=False)
    assert info.value.path == str(path)
    assert "\n" not in str(info.value)
    return info.value.reason


def put(tmp_path: Path, name: str, data: bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


def member(data: bytes, level: int = 9) -> bytes:
    """One gzip member (``cat a.gz b.gz`` is a valid gzip file of both)."""
    c = zlib.compressobj(level, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return c.compress(data) + c.flush()


def run_limited(extra_mib: int, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """``nbprof ARGV`` in a subprocess allowed ``extra_mib`` MiB of address space beyond what
    it holds once its modules are imported."""
    code = f"""
import resource, sys
import nbprof.cli, nbprof.trace, nbprof.analysis, nbprof.views.text  # imported before the limit
size = next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith("VmSize"))
resource.setrlimit(resource.RLIMIT_AS, (size + {extra_mib} * 2**20, resource.RLIM_INFINITY))
sys.exit(nbprof.cli.main({list(argv)!r}))
"""
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENBLAS_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env
    )


def one_line_refusal(done: subprocess.CompletedProcess, path: Path) -> str:
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"nbprof: error: {path}: "), done.stderr
    return lines[0]


needs_linux = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="address-space limits and /proc are Linux's"
)


# -- item: special files ----------------------------------------------------------------------


@pytest.mark.timeout(20)
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_refused_at_once_not_read_forever(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    assert "named pipe" in reason(fifo)
    with pytest.raises(TraceError, match="named pipe"):
        read_recording(fifo)  # nbprof.gauge(replay=...) reads it through this


@pytest.mark.timeout(20)
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_gauge_replay_of_a_fifo_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "samples.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(TraceError, match="named pipe"):
        nbprof.gauge(replay=fifo)


@pytest.mark.timeout(20)
@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_devices_are_refused_without_reading_them() -> None:
    assert "device" in reason(Path("/dev/zero"))
    assert "device" in reason(Path("/dev/null"))


def test_symlink_loop_and_broken_link_say_so(tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.symlink_to(b)
    b.symlink_to(a)
    assert "symbolic link loop" in reason(a)
    dangling = tmp_path / "d.json"
    dangling.symlink_to(tmp_path / "gone.json")
    assert "broken symbolic link" in reason(dangling) and "gone.json" in reason(dangling)


# -- item: deep nesting -----------------------------------------------------------------------

DEEP = "[" * 5000 + "]" * 5000


@pytest.mark.parametrize(
    "doc",
    [
        t.replace("DEEP", DEEP).replace("EV", EV_TEXT.decode())
        for t in [
            '{"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":1,"dur":1,'
            '"args":{"unread":DEEP}}]}',
            '{"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":1,"dur":1,'
            '"args":{"grid":DEEP}}]}',
            '{"traceEvents":[{"ph":"X","cat":"cpu_op","name":"k","ts":1,"dur":1,'
            '"args":{"Input Dims":DEEP}}]}',
            '{"traceEvents":[EV],"meta":DEEP}',
            '{"traceEvents":[EV],"distributedInfo":{"rank":DEEP}}',
            "[EV,DEEP]",
            "DEEP",
        ]
    ],
    ids=["unread-arg", "grid", "input-dims", "metadata", "distributedInfo", "in-array", "bare"],
)
def test_deep_nesting_is_a_trace_error_not_a_recursion_error(tmp_path: Path, doc: str) -> None:
    assert "nested too deeply" in reason(put(tmp_path, "deep.json", doc.encode()))


# -- item: gzip bombs and memory --------------------------------------------------------------


def bomb(path: Path, head: bytes, body: bytes, copies: int, tail: bytes) -> Path:
    """``head + body * copies + tail``, gzipped, written one member at a time: a 16 MiB body
    of repeated bytes compresses ~1000x, so 640 copies make 10 GiB in ~10-40 MB."""
    piece = member(body)
    with path.open("wb") as f:
        f.write(member(head))
        for _ in range(copies):
            f.write(piece)
        f.write(member(tail))
    return path


BODY = 16 * 2**20


@needs_linux
@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["events", "whitespace"])
def test_gzip_bomb_is_refused_early_and_bounded(tmp_path: Path, kind: str) -> None:
    """10 GiB of events (or of whitespace inside the event array) in one small gzip file,
    read with 1 GiB of memory to spare: refused once the output passes half of it (the
    reader needs about twice the JSON), without decompressing the rest."""
    ev = EV_TEXT + b","
    body = ev * (BODY // len(ev)) if kind == "events" else b" " * BODY
    p = bomb(tmp_path / "bomb.json.gz", b'{"traceEvents":[' + ev, body, 640, EV_TEXT + b"]}")
    assert p.stat().st_size < 40e6
    done = run_limited(1024, "analyze", str(p))
    line = one_line_refusal(done, p)
    assert "decompresses to more than" in line and "free" in line


@needs_linux
@pytest.mark.timeout(120)
def test_gzip_of_zeros_is_refused_from_its_first_bytes(tmp_path: Path) -> None:
    # Under a limit too: read in full, 10 GiB of zeros would take this machine's memory.
    p = bomb(tmp_path / "zeros.json.gz", b"\0", b"\0" * BODY, 640, b"\0")
    line = one_line_refusal(run_limited(1024, "analyze", str(p)), p)
    assert "binary data" in line


@needs_linux
@pytest.mark.timeout(120)
def test_out_of_memory_while_decoding_is_one_line_naming_file_and_size(tmp_path: Path) -> None:
    """1.5M tiny events (102 MB of JSON) pass the size check with 250 MiB to spare (the
    JSON is less than half of it) but need ~5x their size to read: a "not enough memory"
    refusal, exit 2, naming the file, its size and what would fit."""
    ev = b'{"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":1,"dur":1},'
    n = 1_500_000
    p = tmp_path / "tiny.json"
    with p.open("wb") as f:
        f.write(b'{"traceEvents":[')
        for _ in range(n // 100_000):
            f.write(ev * 100_000)
        f.write(ev[:-1] + b"]}")
    done = run_limited(250, "analyze", str(p))
    line = one_line_refusal(done, p)
    assert "not enough memory" in line and "102 MB" in line and "fit" in line


@needs_linux
@pytest.mark.timeout(120)
def test_json_larger_than_memory_is_refused_before_reading(tmp_path: Path) -> None:
    p = tmp_path / "big.json"
    with p.open("wb") as f:  # 200 MB, mostly a string nbprof never reads
        f.write(b'{"traceEvents":[' + EV_TEXT + b'],"notes":"')
        for _ in range(200):
            f.write(b"x" * 10**6)
        f.write(b'"}')
    line = one_line_refusal(run_limited(150, "analyze", str(p)), p)
    assert "is 200 MB of JSON" in line and "free" in line


@needs_linux
@pytest.mark.timeout(120)
def test_damaged_gzip_says_damaged_not_what_its_first_bytes_look_like(tmp_path: Path) -> None:
    """The start of the output is checked early (a bomb is refused from its first bytes), but
    garbage that comes out of a cut or corrupt stream is the damage's fault: say that."""
    whole = gzip.compress(b"not json at all " * 4096)
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(TraceError, match="gzip data is truncated"):
        read(cut)
    header_only = tmp_path / "header.json.gz"
    header_only.write_bytes(b"\x1f\x8b\x08\x00 not gzip")
    with pytest.raises(TraceError, match=r"gzip data is (truncated|corrupt)"):
        read(header_only)
    # A whole stream of the wrong content is still named by its content.
    ok = tmp_path / "text.json.gz"
    ok.write_bytes(whole)
    with pytest.raises(TraceError, match="no JSON trace"):
        read(ok)


def test_forged_gzip_size_trailer_is_corrupt_not_out_of_memory(tmp_path: Path) -> None:
    """A trailer claiming ~4 GiB: a buffer of that size was allocated up front, so with
    less memory than that free this read as "not enough memory"."""
    data = bytearray(gzip.compress(DOC))
    data[-4:] = (2**32 - 16).to_bytes(4, "little")
    p = put(tmp_path, "forged.json.gz", bytes(data))
    assert "corrupt" in reason(p)
    assert "corrupt" in one_line_refusal(run_limited(1024, "analyze", str(p)), p)


def test_multi_member_and_padded_gzip_still_read(tmp_path: Path) -> None:
    evs = [json.dumps({**EV, "ts": 10 + 10 * i}).encode() for i in range(3)]
    data = member(b'{"traceEvents":[' + evs[0]) + member(b"," + evs[1] + b",")
    data += member(evs[2] + b"]}", level=1) + b"\0" * 64
    tr = read(put(tmp_path, "m.json.gz", data), progress=False)
    assert tr.kernels["ts"].tolist() == [0.0, 10.0, 20.0]


# -- item: whitespace -------------------------------------------------------------------------


@pytest.mark.timeout(20)
@pytest.mark.parametrize("where", ["after-open", "before-close"])
def test_megabytes_of_whitespace_around_the_events_are_skipped_quickly(
    tmp_path: Path, where: str
) -> None:
    """200 MB of padding beside the event array: a Python byte loop took 25-55 s over it
    on a 2-core machine (~9 s per 100 MB when idle); it takes ~1-4 s now."""
    pad = b" \n\t\r" * (50 * 2**20)
    inner = pad + EV_TEXT if where == "after-open" else EV_TEXT + pad
    tr = read(put(tmp_path, "ws.json", b'{"traceEvents":[' + inner + b"]}"), progress=False)
    assert len(tr.kernels) == 1


# -- item: Chrome's array format without its closing bracket -----------------------------------


@pytest.mark.parametrize("ending", [b"", b",", b",\n  ", b"\n"])
@pytest.mark.parametrize("gz", [False, True])
def test_unterminated_event_array_is_read(tmp_path: Path, ending: bytes, gz: bool) -> None:
    evs = [json.dumps({**EV, "ts": 10 + 10 * i}).encode() for i in range(3)]
    data = b"[" + b",\n".join(evs) + ending
    p = put(tmp_path, "u.json.gz" if gz else "u.json", gzip.compress(data) if gz else data)
    tr = read(p, progress=False)
    assert tr.kernels["ts"].tolist() == [0.0, 10.0, 20.0]
    assert any("closing `]`" in n for n in tr.notes)


@pytest.mark.parametrize(
    "data",
    [b"[" + EV_TEXT[:-5], b'{"traceEvents":[' + EV_TEXT, b'{"traceEvents":[' + EV_TEXT + b","],
    ids=["cut-mid-event", "object-format", "object-format-comma"],
)
def test_cut_traces_are_still_truncated(tmp_path: Path, data: bytes) -> None:
    assert "truncated" in reason(put(tmp_path, "cut.json", data))


# -- item: duplicate keys ---------------------------------------------------------------------


@pytest.mark.parametrize("first", [1, 14])
def test_duplicate_trace_events_key_is_refused(tmp_path: Path, first: int) -> None:
    """15 events under two `traceEvents` keys: a dict keeps one of them, silently."""
    evs = [json.dumps({**EV, "ts": 10 + i}) for i in range(15)]
    a, b = ",".join(evs[:first]), ",".join(evs[first:])
    doc = '{"traceEvents":[' + a + '],"schemaVersion":1,"traceEvents":[' + b + "]}"
    assert "`traceEvents` appears more than once" in reason(put(tmp_path, "d.json", doc.encode()))


def test_duplicate_metadata_key_is_noted(tmp_path: Path) -> None:
    doc = b'{"schemaVersion":1,"traceEvents":[' + EV_TEXT + b'],"schemaVersion":2}'
    tr = read(put(tmp_path, "d.json", doc), progress=False)
    assert tr.metadata["schemaVersion"] == 2
    assert any("`schemaVersion` appears more than once" in n for n in tr.notes), tr.notes


# -- item: durations --------------------------------------------------------------------------


@pytest.mark.parametrize("dur", [1e18, 1e300, 9.1e15])
def test_absurd_durations_are_refused(tmp_path: Path, dur: float) -> None:
    doc = {"traceEvents": [EV, {**EV, "ts": 100, "dur": dur}]}
    got = reason(put(tmp_path, "dur.json", json.dumps(doc).encode()))
    assert got.startswith("event 1: duration out of range")


def test_longest_plausible_duration_is_kept(tmp_path: Path) -> None:
    doc = {"traceEvents": [EV, {**EV, "ts": 100, "dur": 9e15}]}
    tr = read(put(tmp_path, "dur.json", json.dumps(doc).encode()), progress=False)
    assert tr.kernels["dur"].max() == 9e15


# -- item: replay files -----------------------------------------------------------------------

HEADER = {"format": "nbprof-nvml-samples", "version": 1, "gpus": {}, "reasons": []}


@pytest.mark.parametrize(
    "row",
    [{"t": 2**63, "gpu": 0}, {"t": -(2**63) - 1, "gpu": 0}, {"t": True, "gpu": 0},
     {"t": 1, "gpu": 2**63}, {"t": 1, "gpu": True}, {"t": 1, "gpu": -1},
     {"t": 1, "gpu": 0, "util_gpu": True}],
    ids=["t-2**63", "t-below-int64", "t-true", "gpu-2**63", "gpu-true", "gpu-negative",
         "metric-true"],
)  # fmt: skip
def test_replay_values_out_of_range_are_trace_errors(tmp_path: Path, row: dict[str, Any]) -> None:
    p = tmp_path / "s.jsonl"
    p.write_text(json.dumps(HEADER) + "\n" + json.dumps(row) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(TraceError) as info:
        read_recording(p)
    assert info.value.path == str(p) and info.value.reason.startswith("line 2: ")


# -- item: long names -------------------------------------------------------------------------


@pytest.mark.timeout(20)
def test_long_names_are_classified_on_a_bounded_prefix() -> None:
    """A 16 MB kernel name took ~24 s to classify; only its first NAME_PREFIX characters
    are searched now (the longest real name in the corpus is 5,123 characters)."""
    pattern = r"(?i)elementwise|reduce_kernel|multi_tensor_apply|direct_copy|fill_kernel"
    huge = "void at::native::vectorized_" + "x" * (16 * 2**20) + "elementwise_kernel"
    names = pd.Series([huge, "a" * (NAME_PREFIX - 18) + "elementwise_kernel", "gemm"])
    assert matches(names, pattern).tolist() == [False, True, False]
    many = "x_" * (4 * 2**20) + "elementwise"  # 4M words before the one that matters
    words = pd.Series([many, "x_" * (NAME_PREFIX // 2 - 8) + "elementwise", "gemm"])
    assert token_matches(words, lambda t: "elementwise" in t).tolist() == [False, True, False]


@pytest.mark.timeout(30)
def test_a_huge_kernel_name_is_diagnosed_quickly(tmp_path: Path) -> None:
    """The whole analysis (name families, identities, the verdict) on a 16 MB kernel name:
    it took ~30 s, most of it reading the name past any part that identifies it."""
    name = "void cutlass::Kernel<" + "a<b>" * (4 * 2**20) + ">"
    doc = {"traceEvents": [{**EV, "name": name}, {**EV, "name": "gemm", "ts": 20}]}
    prof = nbprof.load(put(tmp_path, "huge.json", json.dumps(doc).encode()))
    assert prof.diagnosis.devices and prof.diagnosis.devices[0].kernel_count == 2


# -- item: messages ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expect"),
    [
        (bz2.compress(DOC), "bzip2-compressed"),
        (lzma.compress(DOC), "xz-compressed"),
        (b"\x28\xb5\x2f\xfd" + b"\0" * 16, "zstd-compressed"),
        (gzip.compress(gzip.compress(DOC)), "gzip inside gzip"),
        (gzip.compress(bz2.compress(DOC)), "once gunzipped, data that is bzip2-compressed"),
        (DOC.decode().encode("utf-16"), "UTF-16"),
        (DOC.decode().encode("utf-16-le"), "UTF-16"),
        (DOC.decode().encode("utf-16-be"), "UTF-16"),
        (DOC.decode().encode("utf-32"), "UTF-32"),
        (gzip.compress(DOC.decode().encode("utf-16")), "UTF-16"),
    ],
    ids=["bz2", "xz", "zstd", "gzip-gzip", "gzip-bz2", "utf16-bom", "utf16le", "utf16be",
         "utf32", "gzip-utf16"],
)  # fmt: skip
def test_other_formats_are_named(tmp_path: Path, data: bytes, expect: str) -> None:
    assert expect in reason(put(tmp_path, "t.json", data))


def test_zip_archive_is_named(tmp_path: Path) -> None:
    p = tmp_path / "t.json"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("trace.json", DOC)
    assert "zip archive" in reason(p)


@pytest.mark.parametrize("gz", [False, True])
def test_utf8_byte_order_mark_is_skipped(tmp_path: Path, gz: bool) -> None:
    data = b"\xef\xbb\xbf" + DOC
    p = put(tmp_path, "bom.json", gzip.compress(data) if gz else data)
    assert len(read(p, progress=False).kernels) == 1


@pytest.mark.parametrize(
    ("ts", "words"), [("null", "got null"), ("true", "got a boolean"), ("[1]", "got an array")]
)
def test_wrong_timestamps_are_worded_not_shown_as_bytes(
    tmp_path: Path, ts: str, words: str
) -> None:
    doc = b'{"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":%s,"dur":1}]}' % ts.encode()
    got = reason(put(tmp_path, "ts.json", doc))
    assert got == f"event 0: `ts` should be a number, {words}"


def test_zero_sm_count_says_so(tmp_path: Path) -> None:
    doc = {"deviceProperties": [{"id": 0, "name": "NVIDIA A100", "numSms": 0}],
           "traceEvents": [EV]}  # fmt: skip
    tr = read(put(tmp_path, "sm.json", json.dumps(doc).encode()), progress=False)
    assert any("0 SMs" in n and "unknown" in n for n in tr.notes), tr.notes


def test_unreadable_metadata_warning_has_no_terminal_escapes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A key written with a JSON escape for ESC, and a value with invalid UTF-8.
    data = b'{"traceEvents":[' + EV_TEXT + b'],"\\u001b[2Jevil\\u0007":"\xff"}'
    tr = read(put(tmp_path, "esc.json", data), progress=False)
    text = caplog.text + "\n".join(tr.notes)
    assert "evil" in text
    assert "\x1b" not in text and "\x07" not in text


def test_progress_bar_stays_off_a_stderr_that_is_not_a_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A load slow enough to show its bar (here: made to show at once) writes nothing to a
    stderr that is a file or a pipe, so a one-line error there stands alone."""
    from nbprof.trace import reader

    made: list[Any] = []
    real = reader._Progress.__exit__

    def seen(self: Any, *exc: Any) -> None:
        made.append(self._bar)
        real(self, *exc)

    monkeypatch.setattr(reader._Progress, "__exit__", seen)
    monkeypatch.setattr(reader, "BAR_DELAY", 0.0)  # every load is slow enough
    p = put(tmp_path, "t.json", DOC)
    read(p)  # progress=None: the default
    assert made == [None] and capsys.readouterr().err == ""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    read(p)
    assert made[-1] is not None  # a terminal does get the bar
    assert "loading t.json" in capsys.readouterr().err


# -- the reader's other inputs still work -----------------------------------------------------


def test_streamed_gunzip_gives_the_same_bytes_as_gzip(corpus: Path) -> None:
    from nbprof.trace.io import read_bytes

    for p in sorted(corpus.glob("*.json.gz"))[:6]:
        got = read_bytes(p)
        assert isinstance(got, bytearray)
        assert bytes(got) == gzip.decompress(p.read_bytes()), p


def test_a_very_long_device_id_does_not_squeeze_the_timeline(tmp_path: Path) -> None:
    """Lane labels are the axis' width: a 10,000-character device id made the plot a
    sliver. They are cut to a few dozen characters around an ellipsis, keeping the end."""
    from nbprof.views.timeline import collect

    doc = {"traceEvents": [{**EV, "args": {"device": "d" * 10_000 + "-tail", "stream": 7}}]}
    prof = nbprof.load(put(tmp_path, "long.json", json.dumps(doc).encode()))
    labels = [lane.label for lane in collect(prof).lanes]
    assert labels and all(len(label) <= 40 for label in labels), labels
    assert any(label.startswith("GPU ddd") and label.endswith("-tail stream 7") for label in labels)
