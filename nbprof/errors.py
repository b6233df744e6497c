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


#: What a terminal acts on or reorders instead of showing: C0 and C1 control characters
#: (ANSI escape sequences, bells, a newline that would start a forged line), Unicode's
#: bidirectional controls (a right-to-left override shows "exe.txt" for "txt.exe"), other
#: invisible format characters (zero widths, joiners, tags), the line and paragraph
#: separators, and lone surrogates: the bytes of a file name that were not UTF-8, which no
#: terminal encoding can print. One class of characters: a linear scan.
_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\xad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f"
    "\ufeff\ufff9-\ufffb\ud800-\udfff\U000e0000-\U000e007f]"
)
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(m: re.Match[str]) -> str:
    c = m.group()
    if c in _SHORT:
        return _SHORT[c]
    o = ord(c)
    if 0xDC80 <= o <= 0xDCFF:  # a byte that was not UTF-8, as os.fsdecode keeps it
        return f"\\x{o - 0xDC00:02x}"
    if o < 0x100:
        return f"\\x{o:02x}"
    return f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}"


def plain_text(value: object) -> str:
    """Text safe to print on a terminal: what a terminal would act on rather than show
    (see :data:`_UNSAFE`) is written as Python writes it in a string (``\\n``, ``\\x1b``,
    ``\\u202e``; a byte of a file name that is not UTF-8 as ``\\xff``). The one escaping of
    every message that prints a file name or a trace string; escaping twice changes
    nothing (the result is printable, and a backslash is left as it is)."""
    text = str(value)
    if text.isprintable():  # the usual case, with no scan: every character is shown
        return text
    return _UNSAFE.sub(_escape, text)


def plain_lines(text: str) -> str:
    """``text`` with each of its lines made :func:`plain_text`: the newlines between them
    are kept, everything else a terminal would act on is escaped."""
    if text.isprintable():
        return text
    return "\n".join(plain_text(line) for line in text.split("\n"))


def _json_escape(m: re.Match[str]) -> str:
    o = ord(m.group())
    if o >= 0x10000:  # JSON writes it as its UTF-16 surrogate pair
        o -= 0x10000
        return f"\\u{0xD800 + (o >> 10):04x}\\u{0xDC00 + (o & 0x3FF):04x}"
    return f"\\u{o:04x}"


def plain_json(text: str) -> str:
    """JSON text, the same JSON, with what a terminal would act on inside its strings
    written as JSON's own ``\\uXXXX`` escapes (the bidirectional controls, C1 controls and
    line separators a JSON writer leaves raw): ``--json`` printed on a terminal cannot
    reorder or forge what it shows. Lone surrogates are :func:`valid_text`'s."""
    if text.isprintable() or not _UNSAFE_IN_JSON.search(text):
        return text
    return _UNSAFE_IN_JSON.sub(_json_escape, text)


#: What :data:`_UNSAFE` holds beyond the JSON whitespace between values (a writer escapes
#: the C0 controls inside strings itself) and lone surrogates.
_UNSAFE_IN_JSON = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\xad\u061c\u180e\u200b-\u200f\u2028-\u202e"
    "\u2060-\u206f\ufeff\ufff9-\ufffb\U000e0000-\U000e007f]"
)

_LONE = re.compile("[\ud800-\udfff]")


def valid_text(value: str) -> str:
    """``value`` with each lone surrogate (a byte of a file name that was not UTF-8) written
    as ``plain_text`` shows it, so that it can be encoded as UTF-8 (JSON, HTML); the rest
    is unchanged."""
    return _LONE.sub(_escape, value) if _LONE.search(value) else value


class NestedProfilerError(NbprofError, RuntimeError):
    """A torch profiler was started inside ``%%gpuprof`` / ``nbprof.profile()``."""
