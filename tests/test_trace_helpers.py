"""Helper processes that read pieces of a stream: what they are handed comes back, in
order; anything that goes wrong in one gives None, and no process is left behind."""

from __future__ import annotations

import mmap
import os
import sys
import time
from typing import Any

import numpy as np
import pytest

from nbprof.trace import forked, helpers
from tests.test_trace_parallel import _children

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="helpers run on Linux")


@pytest.fixture(autouse=True, params=["forked", "afresh"])
def how(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test with forked helpers, and with helpers started afresh (as in a notebook,
    whose threads make a fork unsafe). Other tests may leave idle threads behind; the
    forked helpers here run pure Python."""
    monkeypatch.setattr(forked, "can_fork", lambda: request.param == "forked")
    return str(request.param)


def up(team: helpers.Helpers) -> helpers.Helpers:
    """``team`` once each helper is ready to take pieces: one started afresh takes none
    until it has imported the reader, which the tests wait for."""
    for h in team._helpers:
        waited = 0.0
        while len(h.free) < helpers.SLOTS:
            assert waited < 60 and not h.done, "a helper that never came up"
            time.sleep(0.01)
            waited += 0.01
            helpers._poll(h)
    return team


def started(n: int, slot_bytes: int, keep: Any) -> helpers.Helpers:
    """``n`` helpers, each ready to take pieces (:func:`up`)."""
    team = helpers.Helpers.start(n, slot_bytes, keep)
    assert team is not None
    return up(team)


class Keep:
    """A helper's side that keeps the bytes of each piece, with the byte either side, and
    sends them back ``every`` pieces, as bytes and as an array (out of band)."""

    def __init__(
        self, fail_on: bytes | None = None, die_on: bytes | None = None, every: int = 3
    ) -> None:
        self.got: list[bytes] = []
        self.fail_on, self.die_on, self.every = fail_on, die_on, every
        self.taken = 0

    def take(self, data: mmap.mmap, span: tuple[int, int]) -> None:
        a, b = span
        piece = bytes(data[a - 1 : b + 1])
        if self.die_on is not None and self.die_on in piece:
            os._exit(3)  # killed mid-piece (out of memory, a crash)
        if self.fail_on is not None and self.fail_on in piece:
            raise ValueError("a piece it cannot read")
        self.got.append(piece)
        self.taken += 1

    def batch(self, final: bool) -> Any | None:
        if len(self.got) < self.every and not (final and self.got):
            return None
        sent = (self.got, np.frombuffer(b"".join(self.got), np.uint8).copy())
        self.got = []
        return sent

    def result(self) -> int:
        return self.taken


def pieces_of(back: tuple[list[Any], int]) -> list[bytes]:
    """A helper's pieces from its batches, each checked against its array's copy."""
    batches, taken = back
    out: list[bytes] = []
    for got, array in batches:
        assert isinstance(array, np.ndarray) and array.flags.writeable
        assert array.ctypes.data % helpers._ALIGN == 0  # its bytes were laid out aligned
        assert array.tobytes() == b"".join(got)
        out.extend(got)
    assert len(out) == taken
    return out


def stream_of(n: int) -> list[tuple[bytes, tuple[int, int]]]:
    """``n`` pieces, each the span of a buffer with a byte either side."""
    return [(b"[piece %03d]" % i, (1, 10)) for i in range(n)]


def hand_out(team: helpers.Helpers, pieces: list[tuple[bytes, tuple[int, int]]]) -> list[Any]:
    """Offer each piece; the ones no helper took are kept here, as the reader does."""
    who: list[Any] = []
    for data, span in pieces:
        k = team.offer(data, span)
        who.append(k if k is not None else data)
    return who


def test_pieces_come_back_in_the_order_handed() -> None:
    before = _children()
    keep = Keep()
    team = started(2, 64, keep)
    with team:
        pieces = stream_of(40)
        who = hand_out(team, pieces)
        got = team.results()
    assert got is not None and len(got) == 2
    theirs = [iter(pieces_of(g)) for g in got]
    # Put back in place, every piece is the one handed, with the byte either side.
    back = [next(theirs[w]) if isinstance(w, int) else w for w in who]
    assert back == [data for data, _ in pieces]
    assert sum(team.handed) == sum(isinstance(w, int) for w in who) >= 4  # 2 slots each
    assert [g[1] for g in got] == team.handed
    assert _children() == before


def test_a_piece_bigger_than_a_slot_is_kept_here() -> None:
    keep = Keep()
    team = started(1, 8, keep)
    with team:
        assert team.offer(b"[123456789]", (1, 10)) is None  # 11 bytes with its ends
        assert team.offer(b"[12345]", (1, 6)) == 0
        got = team.results()
        assert got is not None and pieces_of(got[0]) == [b"[12345]"]


@pytest.mark.parametrize(
    "keep",
    [
        pytest.param(Keep(fail_on=b"piece"), id="fails"),
        pytest.param(Keep(die_on=b"piece 000"), id="dies"),
    ],
)
def test_a_helper_that_fails_or_dies_gives_none(keep: Keep) -> None:
    before = _children()
    team = started(1, 64, keep)
    with team:
        who = hand_out(team, stream_of(12))
        assert who[0] == 0  # a helper's slots are free at the start: it took the first
        assert team.results() is None
    assert _children() == before


def test_closing_early_stops_every_helper() -> None:
    # The reader met an error mid-stream: its helpers are killed and reaped.
    before = _children()
    keep = Keep()
    team = started(3, 64, keep)
    hand_out(team, stream_of(5))
    assert len(_children() - before) == 3
    team.close()
    assert _children() == before


def test_without_a_safe_fork_helpers_start_afresh(
    how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    keep = Keep()
    team = helpers.Helpers.start(1, 64, keep)
    assert team is not None
    with team:
        (h,) = team._helpers
        assert (h.process is None) == (how == "forked")
        if how == "afresh":
            assert h.free == []  # nothing handed before it is up
    assert helpers.Helpers.start(0, 64, keep) is None
    if how == "afresh":  # (where a fork is safe, the platform is Linux)
        monkeypatch.setattr(helpers.sys, "platform", "darwin")  # no memory files there
        assert helpers.Helpers.start(1, 64, keep) is None


def test_a_helper_that_never_comes_up_takes_nothing(
    how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A helper started afresh that finds another nbprof on its path ends at once (it
    would read pieces its own way): nothing is handed to it, nothing is waited for."""
    if how == "forked":
        pytest.skip("a forked helper is this very module")
    before = _children()
    monkeypatch.setattr(helpers, "__file__", "/elsewhere/nbprof/trace/helpers.py")
    team = helpers.Helpers.start(1, 64, Keep())
    assert team is not None
    with team:
        (h,) = team._helpers
        assert h.process is not None and h.process.wait(timeout=60) == 2
        assert hand_out(team, stream_of(3)) == [data for data, _ in stream_of(3)]
        assert team.handed == [0]
        assert team.results() == [([], None)]
    assert _children() == before


def test_a_helper_handed_nothing_is_not_waited_for() -> None:
    # The stream ended before a helper started afresh was up: it is stopped, not awaited.
    before = _children()
    team = helpers.Helpers.start(2, 64, Keep())
    assert team is not None
    with team:
        assert team.results() == [([], None), ([], None)]
        assert all(h.reaped for h in team._helpers)
    assert _children() == before


def test_work_that_does_not_pickle_starts_no_helper_afresh(how: str) -> None:
    # A forked helper gets its work with the process; one started afresh needs it pickled.
    keep = Keep()
    keep.fail_on = lambda: None  # type: ignore[assignment]
    before = _children()
    team = helpers.Helpers.start(1, 64, keep)
    if how == "forked":
        assert team is not None
        team.close()
    else:
        assert team is None
    assert _children() == before


def test_a_helper_started_afresh_imports_from_this_process_path(
    how: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The work's class lives in a folder only this process's import path names (as a
    notebook adds its own): a helper started afresh finds it there."""
    if how == "forked":
        pytest.skip("a forked helper has this process's modules already")
    (tmp_path / "work_beside_the_notebook.py").write_text(
        "class Count:\n"
        "    def __init__(self):\n"
        "        self.n = 0\n"
        "    def take(self, data, span):\n"
        "        self.n += 1\n"
        "    def batch(self, final):\n"
        "        return None\n"
        "    def result(self):\n"
        "        return self.n\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import work_beside_the_notebook

    team = started(1, 64, work_beside_the_notebook.Count())
    with team:
        hand_out(team, stream_of(6))
        got = team.results()
    assert got == [([], team.handed[0])] and team.handed[0] >= 2


def test_a_helper_reads_pieces_without_importing_pandas(tmp_path: Any) -> None:
    """A helper started afresh imports the reader's modules; pandas (0.15 s of the 0.3-0.4
    s such a helper took to come up) is imported only where a frame is made, which a
    helper never does."""
    import subprocess

    from tests.test_trace_stream import LINKED, kineto_text, write_gz

    p = write_gz(tmp_path, kineto_text(LINKED * 20))
    code = f"""
import mmap, pathlib, sys
from nbprof.trace import decode as dec, helpers, io, reader, stream
src = io.open_source(pathlib.Path({str(p)!r}))
first = bytearray()
for piece in src.pieces:
    first += piece
work = reader._HelperPieces("t")
cut = stream.pieces(iter(()), dec.layout(first), first, 256)
taken = 0
for data, span in cut:
    slot = mmap.mmap(-1, len(data) + 2)
    slot[: len(data)] = bytes(data)
    work.take(slot, span)
    taken += 1
packed = work.batch(True)
assert taken > 1 and packed is not None and len(packed.pieces) == taken, taken
print("pandas" in sys.modules)
"""
    got = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert got.returncode == 0, got.stderr
    assert got.stdout.strip() == "False"
