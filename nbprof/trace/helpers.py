"""Helper processes that take pieces of one stream while this process reads it.

A big trace is read as it is decompressed (:mod:`nbprof.trace.stream`), a piece at a time.
Where cores are idle, forked helpers read pieces too: this process copies a piece into a
free slot of a helper's shared memory and tells the helper so through a pipe; when every
slot is taken it reads the piece itself. Each helper has two slots, one it is reading and
the next waiting, so it never waits for this process while pieces keep coming; this process
does the rest, and the decompression. No process holds the whole file: the slots are the
only memory shared, and they are reused.

A helper keeps what it made of its pieces and sends it back, pickled, once it is told the
stream has ended; the caller puts each piece's result back in its place in the file.
Anything that goes wrong in a helper (a piece it cannot read, an error, its death) makes
:meth:`Helpers.results` give None: the caller then reads the file again in one process,
which gives exactly the one-process result or error.

Fork is used only where :func:`nbprof.trace.forked.can_fork` allows it; see
:mod:`nbprof.trace.forked` for why a bare ``os.fork`` and a pipe.
"""

from __future__ import annotations

import logging
import mmap
import os
import pickle
import signal
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

from nbprof.trace import forked

logger = logging.getLogger(__name__)

#: Slots per helper: one being read, the next waiting.
SLOTS = 2
#: A message to a helper: the slot, and how many bytes in it (-1: the stream has ended).
_MESSAGE = struct.Struct("<qq")
#: What starts a helper's result, among the one-byte "slot free again" tokens before it.
_RESULT = b"R"
_LENGTH = struct.Struct("<q")

#: Reads one piece in a helper: the buffer (the slot's shared memory) and the piece's span
#: in it; a byte either side of the span is the one that lay there in the stream.
Take = Callable[[mmap.mmap, tuple[int, int]], None]


@dataclass
class _Helper:
    pid: int
    memory: mmap.mmap
    #: Tells the helper which slot holds a piece (write end of its pipe).
    to_helper: int
    #: The helper's "slot free again" tokens, then its result (read end, non-blocking).
    from_helper: int
    free: list[int] = field(default_factory=lambda: list(range(SLOTS)))
    #: The result's bytes read so far, once its first byte has come.
    result: bytearray | None = None
    #: The helper is gone or stopped taking pieces.
    done: bool = False
    reaped: bool = False


class Helpers:
    """Forked helpers, each ready to read pieces of up to ``slot_bytes`` (see the module)."""

    def __init__(self, helpers: list[_Helper], slot_bytes: int) -> None:
        self._helpers = helpers
        self.slot_bytes = slot_bytes
        #: Pieces handed to each helper, in the order handed.
        self.handed = [0] * len(helpers)

    @classmethod
    def start(
        cls, n: int, slot_bytes: int, take: Take, result: Callable[[], Any]
    ) -> Helpers | None:
        """``n`` helpers that read each piece handed to them with ``take`` and, at the
        end, send back ``result()``; None when none could be started (no safe fork, no
        file descriptors or processes left): the caller reads every piece itself."""
        if n < 1 or not forked.can_fork():
            return None
        started: list[_Helper] = []
        for _ in range(n):
            h = _fork(slot_bytes, take, result)
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

    def results(self) -> list[Any] | None:
        """Each helper's ``result()``, once it has read every piece handed to it; None
        when any helper failed."""
        for h in self._helpers:
            try:
                os.write(h.to_helper, _MESSAGE.pack(-1, -1))
            except OSError:  # gone: its result says so below
                pass
            os.close(h.to_helper)
            h.to_helper = -1
        out: list[Any] = []
        failed = False
        for h in self._helpers:
            got = _result(h)
            if got is None:
                failed = True
            out.append(got)
        return None if failed else [ok for _, ok in out]

    def close(self) -> None:
        """Stop and reap every helper (killed if it has not ended) and free the memory."""
        for h in self._helpers:
            if h.to_helper >= 0:
                os.close(h.to_helper)
                h.to_helper = -1
            os.close(h.from_helper)
            if not h.reaped:
                try:
                    os.kill(h.pid, signal.SIGKILL)
                    os.waitpid(h.pid, 0)
                except (ChildProcessError, ProcessLookupError):  # already gone
                    pass
                h.reaped = True
            h.memory.close()

    def __enter__(self) -> Helpers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _fork(slot_bytes: int, take: Take, result: Callable[[], Any]) -> _Helper | None:
    try:
        memory = mmap.mmap(-1, SLOTS * slot_bytes, flags=mmap.MAP_SHARED)
    except (OSError, ValueError) as e:
        logger.debug("helpers: no shared memory (%s)", e)
        return None
    fds: list[int] = []
    try:
        down = os.pipe()
        fds.extend(down)
        up = os.pipe()
        fds.extend(up)
        pid = os.fork()
    except OSError as e:  # no file descriptors or processes left
        logger.debug("helpers: could not start one (%s)", e)
        for fd in fds:
            os.close(fd)
        memory.close()
        return None
    if pid == 0:  # pragma: no cover - the helper; what it sends is checked by the caller
        os.close(down[1])
        os.close(up[0])
        _serve(memory, slot_bytes, down[0], up[1], take, result)
    os.close(down[0])
    os.close(up[1])
    os.set_blocking(up[0], False)
    return _Helper(pid, memory, down[1], up[0])


def _serve(  # pragma: no cover - runs in the helper
    memory: mmap.mmap,
    slot_bytes: int,
    read_end: int,
    write_end: int,
    take: Take,
    result: Callable[[], Any],
) -> NoReturn:
    """The helper: read each piece it is told of, free its slot; at the end send
    ``(True, result())``, or ``(False, why)`` once anything failed; never return."""
    status = 1
    try:
        try:
            while True:
                message = _read_exactly(read_end, _MESSAGE.size)
                if len(message) < _MESSAGE.size:
                    raise EOFError("the reader stopped before the end")
                slot, n = _MESSAGE.unpack(message)
                if n < 0:
                    break
                at = slot * slot_bytes
                take(memory, (at + 1, at + n - 1))
                os.write(write_end, bytes((slot,)))
            sent: tuple[bool, Any] = (True, result())
        except BaseException as e:  # reported to the reader, which reads in one process
            sent = (False, f"{type(e).__name__}: {e}")
        data = pickle.dumps(sent, protocol=pickle.HIGHEST_PROTOCOL)
        _widen(write_end)
        _write_all(write_end, _RESULT + _LENGTH.pack(len(data)))
        _write_all(write_end, data)
        status = 0
    finally:
        # No atexit handlers, no flushing of the parent's buffered output twice.
        os._exit(status)


def _read_exactly(fd: int, n: int) -> bytes:
    got = b""
    while len(got) < n:
        more = os.read(fd, n - len(got))
        if not more:
            break
        got += more
    return got


def _write_all(fd: int, data: bytes) -> None:
    with memoryview(data) as view:
        while len(view):
            view = view[os.write(fd, view) :]


def _widen(fd: int) -> None:
    """A 1 MiB pipe buffer (Linux's default is 64 KiB): a result of tens of MB then
    crosses in a few hundred writes, not thousands of switches between processes."""
    try:
        import fcntl

        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, 1 << 20)
    except (ImportError, AttributeError, OSError):  # not Linux, or above pipe-max-size
        pass


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


def _result(h: _Helper) -> tuple[bool, Any] | None:
    """``(True, value)`` from the helper, or None when it failed or sent nothing readable;
    the helper is reaped."""
    os.set_blocking(h.from_helper, True)
    try:
        while h.result is None or len(h.result) < 1 + _LENGTH.size:
            more = os.read(h.from_helper, 1 << 16)
            if not more:
                break
            _tokens(h, more)
        data = h.result
        if data is None or len(data) < 1 + _LENGTH.size:
            why = "no result (the helper died)"
        else:
            (size,) = _LENGTH.unpack_from(data, 1)
            body = bytearray(size)
            have = data[1 + _LENGTH.size :]
            body[: len(have)] = have
            at = len(have)
            h.result = None
            with memoryview(body) as view:
                while at < size:
                    with view[at:] as rest:
                        k = os.readv(h.from_helper, [rest])
                    if not k:
                        break
                    at += k
            if at < size:
                why = "no result (the helper died)"
            else:
                try:
                    ok, got = pickle.loads(body)
                except Exception as e:
                    ok, got = False, f"an unreadable result ({type(e).__name__})"
                if ok:
                    return True, got
                why = str(got)
    except OSError as e:
        why = str(e)
    finally:
        try:
            os.waitpid(h.pid, 0)
            h.reaped = True
        except ChildProcessError:
            h.reaped = True
    logger.debug("helper %d failed: %s", h.pid, why)
    return None
