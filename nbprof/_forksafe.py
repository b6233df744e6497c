"""Whether this process may fork a child that runs Python code.

A forked child gets a copy of the parent's memory, its imported modules included, so it
starts at once, where a spawned one imports everything again. But it gets only the thread
that forked: a lock another thread held at that moment stays held in the child forever, and
the child deadlocks on it (the warning under ``os.fork`` in Python's documentation,
https://docs.python.org/3/library/os.html#os.fork). So fork is used only on Linux, from the
main thread, while no other thread runs but the ones known to hold no lock a child needs. A
notebook kernel always runs other threads (its I/O and heartbeat), so it never forks.
"""

from __future__ import annotations

import sys
import threading


def _threads_allow_fork() -> bool:
    for t in threading.enumerate():
        if t is threading.main_thread() or t is threading.current_thread():
            continue
        # tqdm's monitor only sleeps on an Event and touches nothing a child uses.
        if type(t).__name__ == "TMonitor":
            continue
        return False
    return threading.current_thread() is threading.main_thread()


def can_fork() -> bool:
    return sys.platform == "linux" and _threads_allow_fork()
