"""Helper processes that take pieces of one stream while this process reads it.

A big trace is read as it is decompressed (:mod:`nbprof.trace.stream`), a piece at a time.
Where cores are idle, helper processes read pieces too: this process copies a piece into a
free slot of a helper's shared memory and tells the helper so through a pipe; when every
slot is taken it reads the piece itself. Each helper has two slots, one it is reading and
the next waiting, so it never waits for this process while pieces keep coming; this process
does the rest, and the decompression. No process holds the whole file: the slots are the
only memory shared, and they are reused.

A helper sends back what it made of its pieces in batches while it reads (so that little
is left to send once the stream ends), pickled into a memory file (``memfd``) that this
process maps at the end: arrays cross as their bytes, unpickled in place, not through a
pipe; the caller puts each piece's result back in its place in the file.
Anything that goes wrong in a helper (a piece it cannot read, an error, its death) makes
:meth:`Helpers.results` give None: the caller then reads the file again in one process,
which gives exactly the one-process result or error.

A helper is forked where :func:`nbprof.trace.forked.can_fork` allows it (see
:mod:`nbprof.trace.forked` for why a bare ``os.fork`` and a pipe). Elsewhere on Linux (a
notebook's kernel, whose other threads make a fork unsafe) it is started afresh, the same
interpreter with this process's import path, its shared memory a memory file: it takes
pieces once it has imported the reader (about 0.15 s: the reader's modules import pandas
only where they make a frame, :mod:`nbprof._lazy`), and until then this process reads
them all, so a helper that never comes up costs nothing more.
"""

from __future__ import annotations

import contextlib
import json
import logging
import mmap
import os
import pickle
import signal
import struct
import subprocess
import sys
from dataclasses import dataclass
from typing import Any, NoReturn, Protocol

from nbprof.trace import forked

logger = logging.getLogger(__name__)

#: Slots per helper: one being read, the next waiting.
SLOTS = 2
#: A message to a helper: the slot, and how many bytes in it (-1: the stream has ended).
_MESSAGE = struct.Struct("<qq")
#: What starts a helper's result, among the one-byte "slot free again" tokens before it.
_RESULT = b"R"
_LENGTH = struct.Struct("<q")

#: Arrays' bytes in the memory file start at multiples of this (numpy's fastest loops
#: want aligned data).
_ALIGN = 64


class Work(Protocol):
    """A helper's side of the work, made before the fork and run in the helper."""

    def take(self, data: mmap.mmap, span: tuple[int, int]) -> None:
        """Read one piece: the buffer (the slot's shared memory) and the piece's span in
        it; a byte either side of the span is the one that lay there in the stream."""

    def batch(self, final: bool) -> Any | None:
        """What to send back now, if anything (asked after each piece, and once at the
        end with ``final``)."""

    def result(self) -> Any:
        """The last word, once every batch is sent."""


@dataclass
class _Helper:
    pid: int
    memory: mmap.mmap
    #: Tells the helper which slot holds a piece (write end of its pipe).
    to_helper: int
    #: The helper's "slot free again" tokens, then its result (read end, non-blocking).
    from_helper: int
    #: The memory file the helper writes its batches into.
    batches: int
    #: Its free slots: every one from the start for a forked helper; for one started
    #: afresh, none until it says they are (its first tokens), once it can read them.
    free: list[int]
    #: The result's bytes read so far, once its first byte has come.
    result: bytearray | None = None
    #: The helper is gone or stopped taking pieces.
    done: bool = False
    reaped: bool = False
    #: A helper started afresh (reaped through it); None for a forked one.
    process: subprocess.Popen[bytes] | None = None

    def reap(self) -> None:
        """Wait for the helper to end (once)."""
        if self.reaped:
            return
        with contextlib.suppress(ChildProcessError):
            if self.process is not None:
                self.process.wait()
            else:
                os.waitpid(self.pid, 0)
        self.reaped = True

    def kill(self) -> None:
        """End the helper now, and reap it."""
        if not self.reaped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
        self.reap()


class Helpers:
    """Helper processes, each ready to read pieces of up to ``slot_bytes`` (see the
    module)."""

    def __init__(self, helpers: list[_Helper], slot_bytes: int) -> None:
        self._helpers = helpers
        self.slot_bytes = slot_bytes
        #: Pieces handed to each helper, in the order handed.
        self.handed = [0] * len(helpers)

    @classmethod
    def start(cls, n: int, slot_bytes: int, work: Work) -> Helpers | None:
        """``n`` helpers that each run ``work`` on the pieces handed to them, forked where
        that is safe, else started afresh; None when none could be started (not on Linux,
        no memory file, file descriptors or processes left): the caller reads every piece
        itself."""
        if n < 1:
            return None
        afresh = not forked.can_fork()
        if afresh and sys.platform != "linux":  # no memory files to share
            return None
        started: list[_Helper] = []
        for _ in range(n):
            h = _start(slot_bytes, work, afresh)
            if h is None:
                break
            started.append(h)
        if not started:
            return None
        return cls(started, slot_bytes)

    def offer(self, data: bytes | bytearray, span: tuple[int, int]) -> int | None:
        """Hand ``data[span]`` (with the byte before and after it) to a helper with a free
        slot: which helper took it, or None when none is free or the piece is bigger than
        a slot (the caller reads it)."""
        start, stop = span
        n = stop - start + 2
        if n > self.slot_bytes:
            return None
        best: tuple[int, _Helper] | None = None
        for k, h in enumerate(self._helpers):
            _poll(h)
            if h.free and not h.done and (best is None or len(h.free) > len(best[1].free)):
                best = (k, h)
        if best is None:
            return None
        k, h = best
        slot = h.free.pop()
        at = slot * self.slot_bytes
        with memoryview(data) as view:
            h.memory[at : at + n] = view[start - 1 : stop + 1]
        try:
            os.write(h.to_helper, _MESSAGE.pack(slot, n))
        except OSError as e:  # the helper is gone: its slots stay taken, its result fails
            logger.debug("helper %d: %s", h.pid, e)
            h.done = True
            h.free.append(slot)
            return None
        self.handed[k] += 1
        return k

    def results(self) -> list[tuple[list[Any], Any]] | None:
        """Each helper's batches and ``result()``, once it has read every piece handed to
        it; None when any helper failed. A helper handed nothing is stopped, not waited for
        (one started afresh may not be up yet): its entry is ``([], None)``."""
        for h in self._helpers:
            try:
                os.write(h.to_helper, _MESSAGE.pack(-1, -1))
            except OSError:  # gone: its result says so below
                pass
            os.close(h.to_helper)
            h.to_helper = -1
        # Each helper handed pieces is waited for, even past a failure.
        got = [
            _result(h) if k else _stopped(h)
            for h, k in zip(self._helpers, self.handed, strict=True)
        ]
        return None if any(g is None for g in got) else [g for g in got if g is not None]

    def close(self) -> None:
        """Stop and reap every helper (killed if it has not ended) and free the memory."""
        for h in self._helpers:
            if h.to_helper >= 0:
                os.close(h.to_helper)
                h.to_helper = -1
            os.close(h.from_helper)
            os.close(h.batches)
            h.kill()
            h.memory.close()

    def __enter__(self) -> Helpers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: What a helper started afresh runs: this process's import path first (a notebook's
#: additions to it), then :func:`_spawned` with the rest of its arguments.
_SPAWNED = (
    "import json, sys; "
    "sys.path[:0] = [p for p in json.loads(sys.argv[1]) if p not in sys.path]; "
    "from nbprof.trace.helpers import _spawned; _spawned(sys.argv[2:])"
)


def _start(slot_bytes: int, work: Work, afresh: bool) -> _Helper | None:
    """One helper: its slots a memory file both map, a memory file for its batches, a pipe
    each way; forked, or started afresh (``afresh``), with ``work`` pickled at the start of
    the batches' file for it to read first and its files passed by number."""
    if afresh and (not sys.executable or getattr(sys, "frozen", False)):  # no interpreter
        return None
    size = SLOTS * slot_bytes
    fds: list[int] = []
    memory: mmap.mmap | None = None
    process: subprocess.Popen[bytes] | None = None
    try:
        payload = pickle.dumps(work, protocol=pickle.HIGHEST_PROTOCOL) if afresh else b""
        slots = os.memfd_create("nbprof-slots", os.MFD_CLOEXEC)
        fds.append(slots)
        os.ftruncate(slots, size)
        memory = mmap.mmap(slots, size, flags=mmap.MAP_SHARED)
        batches = os.memfd_create("nbprof-helper", os.MFD_CLOEXEC)
        fds.append(batches)
        _write_all(batches, payload)
        down = os.pipe()
        fds.extend(down)
        up = os.pipe()
        fds.extend(up)
        if afresh:
            passed = (slots, down[0], up[1], batches)
            path = [p for p in sys.path if isinstance(p, str)]  # (bytes would not say the same)
            args = [json.dumps(path), os.path.realpath(__file__), *map(str, passed)]
            process = subprocess.Popen(
                [sys.executable, "-c", _SPAWNED, *args, str(slot_bytes), str(len(payload))],
                pass_fds=passed,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            pid = process.pid
        else:
            pid = os.fork()
    except (
        OSError,
        subprocess.SubprocessError,
        AttributeError,
        TypeError,
        ValueError,
        pickle.PicklingError,
    ) as e:  # no memory files, descriptors or processes; work that does not pickle
        logger.debug("helpers: could not start one (%s)", e)
        for fd in fds:
            os.close(fd)
        if memory is not None:
            memory.close()
        return None
    if pid == 0:  # pragma: no cover - the forked helper; what it sends is checked here
        os.close(down[1])
        os.close(up[0])
        _serve(memory, slot_bytes, down[0], up[1], batches, work)
    for fd in (slots, down[0], up[1]):  # the helper's ends, and the map holds the slots
        os.close(fd)
    os.set_blocking(up[0], False)
    free = [] if afresh else list(range(SLOTS))
    return _Helper(pid, memory, down[1], up[0], batches, free, process=process)


def _spawned(argv: list[str]) -> NoReturn:  # pragma: no cover - runs in the helper
    """A helper started afresh: read the work from the start of the memory file for its
    batches (which it then writes over), say every slot is free, and serve. It ends
    without a word where this is not the module that started it (another nbprof found on
    the path would read pieces its own way) or anything fails first: the reader then
    reads every piece itself."""
    try:
        module, *numbers = argv
        slots, read_end, write_end, batches, slot_bytes, n = map(int, numbers)
        if os.path.realpath(__file__) != module:
            os._exit(2)
        memory = mmap.mmap(slots, SLOTS * slot_bytes, flags=mmap.MAP_SHARED)
        os.close(slots)
        work = pickle.loads(os.pread(batches, n, 0))
        os.lseek(batches, 0, os.SEEK_SET)  # batches are written from the start
        os.write(write_end, bytes(range(SLOTS)))
    except BaseException:
        os._exit(1)
    _serve(memory, slot_bytes, read_end, write_end, batches, work)


def _serve(  # pragma: no cover - runs in the helper
    memory: mmap.mmap,
    slot_bytes: int,
    read_end: int,
    write_end: int,
    batches: int,
    work: Work,
) -> NoReturn:
    """The helper: read each piece it is told of, free its slot, write each batch to the
    memory file ``batches``; at the end send ``(True, (where each batch lies, result))``,
    or ``(False, why)`` once anything failed; never return."""
    status = 1
    try:
        try:
            written: list[tuple[int, int, list[tuple[int, int]]]] = []
            at = 0
            while True:
                message = _read_exactly(read_end, _MESSAGE.size)
                if len(message) < _MESSAGE.size:
                    raise EOFError("the reader stopped before the end")
                slot, n = _MESSAGE.unpack(message)
                final = n < 0
                if not final:
                    start = slot * slot_bytes
                    work.take(memory, (start + 1, start + n - 1))
                    os.write(write_end, bytes((slot,)))
                got = work.batch(final)
                if got is not None:
                    at = _write_batch(batches, at, got, written)
                if final:
                    break
            sent: tuple[bool, Any] = (True, (written, work.result()))
        except BaseException as e:  # reported to the reader, which reads in one process
            sent = (False, f"{type(e).__name__}: {e}")
        data = pickle.dumps(sent, protocol=pickle.HIGHEST_PROTOCOL)
        _write_all(write_end, _RESULT + _LENGTH.pack(len(data)))
        _write_all(write_end, data)
        status = 0
    finally:
        # No atexit handlers, no flushing of the parent's buffered output twice.
        os._exit(status)


def _write_batch(
    fd: int, at: int, value: Any, written: list[tuple[int, int, list[tuple[int, int]]]]
) -> int:
    """Pickle ``value`` into the memory file at ``at``, its arrays' bytes out of band,
    each aligned; note where the pickle and each array's bytes lie; the file's new end."""
    raw: list[pickle.PickleBuffer] = []
    data = pickle.dumps(value, protocol=5, buffer_callback=raw.append)
    _write_all(fd, data)
    where = (at, len(data))
    at += len(data)
    spans: list[tuple[int, int]] = []
    for b in raw:
        with b.raw() as view:
            pad = -at % _ALIGN
            if pad:
                _write_all(fd, bytes(pad))
                at += pad
            _write_all(fd, view)
            spans.append((at, view.nbytes))
            at += view.nbytes
    written.append((*where, spans))
    return at


def _read_exactly(fd: int, n: int) -> bytes:
    got = b""
    while len(got) < n:
        more = os.read(fd, n - len(got))
        if not more:
            break
        got += more
    return got


def _write_all(fd: int, data: bytes | memoryview) -> None:
    with memoryview(data) as view:
        while len(view):
            view = view[os.write(fd, view) :]


def _poll(h: _Helper) -> None:
    """Take the helper's tokens that came (slots free again) without waiting."""
    if h.done or h.result is not None:
        return
    while True:
        try:
            got = os.read(h.from_helper, 1 << 12)
        except BlockingIOError:
            return
        except OSError as e:
            logger.debug("helper %d: %s", h.pid, e)
            h.done = True
            return
        if not got:  # the helper is gone
            h.done = True
            return
        _tokens(h, got)
        if h.result is not None:
            return


def _tokens(h: _Helper, got: bytes) -> None:
    """Free the slots named by ``got``'s tokens; from the result's first byte on, keep it."""
    if h.result is not None:
        h.result += got
        return
    at = got.find(_RESULT)
    tokens = got if at < 0 else got[:at]
    h.free.extend(tokens)
    if at >= 0:
        # The helper sends its result only at the end, or once it failed: no more pieces.
        h.result = bytearray(got[at:])
        h.done = True


def _batches(fd: int, written: list[tuple[int, int, list[tuple[int, int]]]]) -> list[Any]:
    """The batches a helper wrote to the memory file ``fd``, unpickled where they lie: its
    arrays are views of a private (copy-on-write) map of the file, which lives as long as
    they do."""
    if not written:
        return []
    size = max([at + n for at, n, _ in written] + [a + n for *_, s in written for a, n in s])
    mapped = mmap.mmap(fd, size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    view = memoryview(mapped)
    return [
        pickle.loads(view[at : at + n], buffers=[view[a : a + k] for a, k in spans])
        for at, n, spans in written
    ]


def _stopped(h: _Helper) -> tuple[list[Any], Any]:
    h.kill()
    return [], None


def _result(h: _Helper) -> tuple[list[Any], Any] | None:
    """The helper's batches and result, or None when it failed or sent nothing readable;
    the helper is reaped."""
    try:
        body = _body(h)
        if body is None:
            why = "no result (the helper died)"
        else:
            try:
                ok, got = pickle.loads(body)
                if ok:
                    written, last = got
                    return _batches(h.batches, written), last
                why = str(got)
            except Exception as e:
                why = f"an unreadable result ({type(e).__name__}: {e})"
    except OSError as e:
        why = str(e)
    finally:
        h.reap()
    logger.debug("helper %d failed: %s", h.pid, why)
    return None


def _body(h: _Helper) -> bytearray | None:
    """The pickled result the helper sends after its tokens (its length first), read to
    the end; None when the helper ended before sending all of it."""
    os.set_blocking(h.from_helper, True)
    while h.result is None or len(h.result) < 1 + _LENGTH.size:
        more = os.read(h.from_helper, 1 << 16)
        if not more:
            return None
        _tokens(h, more)
    (size,) = _LENGTH.unpack_from(h.result, 1)
    body = bytearray(size)
    have = h.result[1 + _LENGTH.size :]
    body[: len(have)] = have
    at = len(have)
    h.result = None
    with memoryview(body) as view:
        while at < size:
            with view[at:] as rest:
                k = os.readv(h.from_helper, [rest])
            if not k:
                return None
            at += k
    return body
