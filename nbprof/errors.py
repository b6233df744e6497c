"""Errors nbprof raises on purpose, with a plain reason a user can act on."""

from __future__ import annotations


class NbprofError(Exception):
    """Base class of every error nbprof raises on purpose."""


class TraceError(NbprofError, ValueError):
    """A trace file could not be read: names the file and the plain reason.

    Raised for anything wrong with the input (not JSON, truncated, corrupt gzip, no
    ``traceEvents``, wrong types, negative or non-numeric times, empty), never a
    traceback from deep inside a parser.
    """

    def __init__(self, path: str | None, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}" if path else reason)
