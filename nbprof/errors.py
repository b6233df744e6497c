"""Errors nbprof raises on purpose, with a plain reason a user can act on."""

from __future__ import annotations

import re


class NbprofError(Exception):
    """Base class of every error nbprof raises on purpose."""


class TraceError(NbprofError, ValueError):
    """A trace file could not be read: names the file and the plain reason, never a
    traceback from deep inside a parser. What is an error and what is skipped with a
    note is written once, in docs/errors.md."""

    def __init__(self, path: str | None, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}" if path else reason)


class OutputError(NbprofError):
    """A file nbprof was asked to write could not be written: names that file (the output,
    never the input) and the plain reason. Nothing is left half-written in its place."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def plain_text(value: object) -> str:
    """Text safe to print on a terminal: control characters from a trace or a file name
    (ANSI escape sequences, bells) become '?'."""
    return _CONTROL.sub("?", str(value))


class NestedProfilerError(NbprofError, RuntimeError):
    """A torch profiler was started inside ``%%gpuprof`` / ``nbprof.profile()``."""
