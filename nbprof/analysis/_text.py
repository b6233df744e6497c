"""Regex matching over name columns, once per distinct name.

Traces repeat a few thousand names across hundreds of thousands of rows (and across every
rank of a multi-rank set); matching each distinct name once per pattern, and remembering
the answer, is what keeps analysis well under a second.
"""

from __future__ import annotations

import collections
import functools
import itertools
import re
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from nbprof.analysis import _frames

#: A column of names as the matching functions take it: the trace's text columns come as
#: ``Categorical`` s (:func:`name_column`), whose codes and distinct values the matching
#: reads directly; a Series or an object array of text is factorized first.
Names = pd.Series | np.ndarray | pd.Categorical


def name_column(df: pd.DataFrame, name: str) -> Names:
    """Column ``name`` of ``df`` to match patterns on: the ``Categorical`` a trace's text
    column is (its codes and distinct values read as they are, never found again), else
    the column's array."""
    values = _frames.stored_array(df, name)
    if isinstance(values, pd.Categorical):
        return values
    if type(values) is np.ndarray and values.dtype == object and values.ndim == 1:
        view = values.view()
        view.flags.writeable = False
        return view
    return df[name]


def text_column(df: pd.DataFrame, name: str) -> Names:
    """``as_text(df[name])`` as :func:`name_column` gives it: the column as it is where it
    is text already."""
    values = name_column(df, name)
    if isinstance(values, pd.Categorical):
        return values if _all_text(values) else np.asarray(values.astype(str), dtype=object)
    if isinstance(values, np.ndarray) and _all_text(values):
        return values
    return as_text(df[name])


def _factorize(values: Names) -> tuple[np.ndarray, Any]:
    """(each row's code, the distinct values): a Categorical's own codes and categories;
    anything else ``pd.factorize(values, use_na_sentinel=False)``."""
    held: Any = values
    if isinstance(held, pd.Series) and isinstance(held.dtype, pd.CategoricalDtype):
        held = held.array
    if isinstance(held, pd.Categorical):
        codes = np.asarray(held.codes)
        if not len(codes) or codes.min() >= 0:
            return codes, np.asarray(held.categories, dtype=object)
        held = np.asarray(held, dtype=object)  # missing values: pandas decides
    return pd.factorize(held, use_na_sentinel=False)


def text_codes(values: Names) -> tuple[list[Any], np.ndarray]:
    """(distinct names, each row's index into them) of a column of str, in order of first
    appearance, as ``_group.codes(values.tolist())`` gives them."""
    codes, uniq = _factorize(values)
    codes = np.asarray(codes, dtype=np.int64)
    if isinstance(values, pd.Categorical) or (
        isinstance(values, pd.Series) and isinstance(values.dtype, pd.CategoricalDtype)
    ):
        # Categories are sorted: renumbered in order of first appearance.
        if not len(codes):
            return [], codes
        # The codes used, in order of first appearance: one hashing pass, not a sort.
        order = np.asarray(pd.unique(codes), dtype=np.int64)
        place = np.empty(len(uniq), np.int64)
        place[order] = np.arange(len(order))
        return [uniq[i] for i in order.tolist()], place[codes]
    return list(uniq), codes


def is_in(values: Names, names: frozenset[str]) -> np.ndarray:
    """``Series.isin(names)`` for a column of names (a missing or odd value is in none),
    asked once per distinct name."""
    if not len(values):
        return np.zeros(0, dtype=bool)
    if isinstance(values, np.ndarray) and (values.dtype != object or values.ndim != 1):
        values = pd.Series(values, dtype=object, copy=False)
    codes, uniq = _factorize(values)
    hit = np.fromiter(
        (type(v) is str and v in names for v in list(uniq)), dtype=bool, count=len(uniq)
    )
    return np.asarray(hit[codes])


def equals(values: Names, word: str) -> np.ndarray:
    """``values == word`` for a column of text, asked once per distinct value of a
    Categorical."""
    if isinstance(values, pd.Categorical):
        codes, uniq = _factorize(values)
        return np.asarray(np.asarray(uniq == word, dtype=bool)[codes])
    return np.asarray(values == word)


#: Characters of a name that patterns look at. A search costs time per character (about
#: 2 s per MB of name for the slowest pattern set), and a hostile trace can hold names of
#: megabytes; the longest real one in the trace corpus (a templated C++ kernel) is 5,123
#: characters, and what identifies a kernel or an op comes first in its name.
NAME_PREFIX = 8192


@functools.lru_cache(maxsize=1 << 16)
def _hit(rx: re.Pattern[str], text: str) -> bool:
    words = _needles(rx)
    if words is not None:
        # No needle in the text, no match: the search is asked only where one could be.
        # Case-blind needles are looked for in lower case, in ASCII text only (Unicode's
        # case rules match more than lower() shows: "ſ" matches "s").
        hay = text if not words[0] else text.lower() if text.isascii() else None
        if hay is not None:
            if not any(map(hay.__contains__, words[1])):
                return False
            branches = _branches(rx)
            if branches is not None:
                # Only the alternatives whose needle the text holds can match: each is
                # searched alone (the whole pattern tries every alternative at every
                # character, 40 µs for a long kernel name and the memory-kernel pattern).
                for word, part, plain in branches:
                    if word in hay:
                        if plain:  # its needle is the whole of it: found
                            return True
                        one = _branch(part, rx.flags)
                        if one is None:
                            return rx.search(text) is not None
                        if one.search(text) is not None:
                            return True
                return False
    return rx.search(text) is not None


def name_pattern(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """``re.compile(pattern, flags)`` for a pattern :func:`matches` searches name columns
    with, its needles (:func:`_needles`) and alternatives (:func:`_branches`) worked out
    now: at import, once, where every worker process forked afterwards finds them (parsing
    the longest pattern costs about 1 ms)."""
    rx = re.compile(pattern, flags)
    _needles(rx)
    return rx


#: The regex parser, to read a pattern's alternatives (private in Python: where it is
#: missing, patterns are searched as they are).
try:
    from re import _parser as _re_parser  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - a Python that moved it
    _re_parser = None


def _needles(rx: re.Pattern[str]) -> tuple[bool, tuple[str, ...]] | None:
    """(whether case is ignored, texts of which every match holds one); None when that
    cannot be told.

    A kernel name is searched by patterns of a few dozen alternatives, and Python's regex
    engine tries every alternative at every character of it: about 70 µs a name for the
    Tensor Core names, a third of a small rank's first analysis. Each alternative is a
    sequence, and a run of plain characters in it (``884`` in ``[hsid]884``, ``_xmma`` in
    ``sm(?:80|90)_xmma.*f16``) is in every text it matches: a name that holds none of the
    alternatives' runs cannot match, which a substring test tells in a few µs.
    """
    return _parsed(rx)[0]


def _branches(rx: re.Pattern[str]) -> tuple[tuple[str, str, bool], ...] | None:
    """Each alternative of a pattern that is one alternation: its needle (:func:`_runs`),
    its text, and whether it is its needle alone (plain characters only). A text matches
    the pattern exactly when one of them, searched alone with the pattern's flags, matches
    it; only one whose needle the text holds can, and one that is its needle alone does.
    None where the pattern is not so cut: one alternative, a verbose pattern, a reference
    to a group (numbered otherwise alone), text cut otherwise than the parser cuts it."""
    return _parsed(rx)[1]


@functools.lru_cache(maxsize=256)
def _parsed(
    rx: re.Pattern[str],
) -> tuple[tuple[bool, tuple[str, ...]] | None, tuple[tuple[str, str, bool], ...] | None]:
    """(:func:`_needles`, :func:`_branches`) of a pattern, from one parse of it."""
    if _re_parser is None or not isinstance(rx.pattern, str):
        return None, None
    try:
        tree = _re_parser.parse(rx.pattern, rx.flags)
        literal = _re_parser.LITERAL
        branch = _re_parser.BRANCH
    except Exception:  # a parser unlike this Python's: search as it is
        return None, None
    blind = bool(tree.state.flags & re.IGNORECASE)
    items = list(tree.data)
    one = len(items) == 1 and items[0][0] is branch
    alternatives = items[0][1][1] if one else [items]
    words = _runs(alternatives, literal, blind)
    if words is None:
        return None, None
    needles = (blind, tuple(dict.fromkeys(words)))
    if not one or rx.flags & re.VERBOSE or re.search(r"\\\d|\(\?P=|\(\?\(", rx.pattern):
        return needles, None
    parts = _top_alternatives(rx.pattern)
    if parts is None or len(parts) != len(words):
        return needles, None
    # Each part holds its alternative's needle as written: the cuts are the parser's.
    for w, part in zip(words, parts, strict=True):
        if w not in (part.lower() if blind else part):
            return needles, None
    plain = [all(op is literal for op, _ in alt) for alt in alternatives]
    return needles, tuple(zip(words, parts, plain, strict=True))


def _runs(alternatives: Any, literal: Any, blind: bool) -> list[str] | None:
    """The longest run of plain characters of each parsed alternative (lower case where
    case is ignored); None where one has no run of two, or a case-blind run is not ASCII."""
    words: list[str] = []
    for alt in alternatives:
        best, run = "", []
        for op, av in [*list(alt), (None, None)]:
            if op is literal:
                run.append(chr(av))
                continue
            if len(run) > len(best):
                best = "".join(run)
            run = []
        if len(best) < 2 or (blind and not best.isascii()):
            return None  # an alternative without such a run: any text could match it
        words.append(best.lower() if blind else best)
    return words


@functools.lru_cache(maxsize=1024)
def _branch(part: str, flags: int) -> re.Pattern[str] | None:
    """One alternative compiled alone (None where it does not compile alone): compiled
    when a name first holds its needle, so most alternatives are never compiled."""
    try:
        return re.compile(part, flags)
    except re.error:
        return None


def _top_alternatives(pattern: str) -> list[str] | None:
    """The pattern's text cut at each ``|`` outside parentheses and character sets (None
    where its brackets do not close)."""
    parts: list[str] = []
    depth = 0
    start = 0
    i = 0
    n = len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            # A set: a "]" right after "[" or "[^" is one of its characters.
            i += 1
            if i < n and pattern[i] == "^":
                i += 1
            if i < n and pattern[i] == "]":
                i += 1
            while i < n and pattern[i] != "]":
                i += 2 if pattern[i] == "\\" else 1
            if i >= n:
                return None
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth < 0:
                return None
        elif c == "|" and depth == 0:
            parts.append(pattern[start:i])
            start = i + 1
        i += 1
    if depth:
        return None
    parts.append(pattern[start:])
    return parts


def matches(values: Names, pattern: re.Pattern[str] | str) -> np.ndarray:
    """Boolean array: does ``pattern`` search-match each value (as text) in its first
    :data:`NAME_PREFIX` characters."""
    if len(values) == 0:
        return np.zeros(0, dtype=bool)
    rx = re.compile(pattern) if isinstance(pattern, str) else pattern
    codes, uniq = _factorize(values)
    return _hits(("search", rx), uniq, lambda u: _hit(rx, str(u)[:NAME_PREFIX]))[codes]


_TOKEN = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


@functools.lru_cache(maxsize=1 << 16)
def name_tokens(text: str) -> tuple[str, ...]:
    """The words of a kernel name, lower-cased: split at every non-alphanumeric, at
    camelCase humps and between letters and digits.

    ``_typeConvert`` gives ``type, convert`` (no ``conv``), ``s1688gemm`` gives ``s, 1688,
    gemm``, ``reshape_and_cache_flash`` gives ``reshape, and, cache, flash``: families are
    matched on whole words, never on substrings that happen to spell one.
    """
    return tuple(t.lower() for t in _TOKEN.findall(text))


def token_matches(
    values: Names,
    test: Callable[[tuple[str, ...]], bool],
    part: Callable[[str], str] | None = None,
) -> np.ndarray:
    """Boolean array: does ``test`` hold for the :func:`name_tokens` of each value (of
    ``part(value)`` when given), worked out once per distinct value, on its first
    :data:`NAME_PREFIX` characters."""
    if len(values) == 0:
        return np.zeros(0, dtype=bool)
    codes, uniq = _factorize(values)

    def one(u: Any) -> bool:
        head = str(u)[:NAME_PREFIX]
        return test(name_tokens(head if part is None else part(head)))

    return _hits(("tokens", test, part), uniq, one)[codes]


#: Most characters of names a remembered answer of :func:`_hits` may cover, and most
#: answers remembered: a few MB at most, whatever the traces.
_MEMO_CHARS = 1 << 16
_MEMO_SIZE = 128
_MEMO: collections.OrderedDict[tuple[Any, ...], np.ndarray] = collections.OrderedDict()
_MEMO_LOCK = threading.Lock()  # a Dask worker may analyse ranks in threads


def _hits(how: tuple[Any, ...], uniq: Any, one: Callable[[Any], bool]) -> np.ndarray:
    """``one(u)`` for each distinct name, as a bool array.

    The ranks of a job mostly hold the same kernel and call names in the same first-seen
    order (the 8 ranks of the corpus' DLRM job: 4 distinct sets per pattern), and one
    rank asks a pattern of the same names more than once, so the answer for a whole set
    of names is remembered (the last :data:`_MEMO_SIZE`, per process): the second and
    later ranks a worker analyses skip the per-name Python loop. Only for names that are
    all text: an answer is a pure function of the names' text, and equal keys then hold
    equal strings (``1 == 1.0 == True`` as keys, not as text).
    """
    key: tuple[Any, ...] | None = None
    text = _names_key(uniq)
    if text is not None:
        key = (*how, text)
        with _MEMO_LOCK:
            got = _MEMO.get(key)
            if got is not None:
                _MEMO.move_to_end(key)
                return got
    hit = np.fromiter((one(u) for u in uniq), dtype=bool, count=len(uniq))
    if key is not None:
        hit.flags.writeable = False  # shared by every later caller
        with _MEMO_LOCK:
            _MEMO[key] = hit
            if len(_MEMO) > _MEMO_SIZE:
                _MEMO.popitem(last=False)
    return hit


def _names_key(uniq: Any) -> tuple[str, ...] | None:
    if not 0 < len(uniq) <= _MEMO_CHARS:
        return None
    names = uniq.tolist() if isinstance(uniq, np.ndarray) else list(uniq)
    if set(map(type, names)) == {str} and sum(map(len, names)) <= _MEMO_CHARS:
        return tuple(names)
    return None


def has_bigram(tokens: tuple[str, ...], pairs: frozenset[tuple[str, str]]) -> bool:
    """Whether two adjacent words of ``tokens`` form one of ``pairs``."""
    return any(pair in pairs for pair in itertools.pairwise(tokens))


def as_text(values: pd.Series) -> pd.Series:
    """``values.astype(str)``, or ``values`` themselves when every one is a str already (a
    trace's name columns are): the same text without a copy of the column."""
    arr = values.array if isinstance(values.dtype, pd.CategoricalDtype) else values.to_numpy()
    if isinstance(arr, pd.Categorical) or arr.dtype == object:
        if _all_text(arr):
            return values
    return values.astype(str)


def _all_text(values: np.ndarray | pd.Categorical) -> bool:
    """Whether every value is a str (a Categorical's: its categories, and no code missing)."""
    if isinstance(values, pd.Categorical):
        codes = np.asarray(values.codes)
        return (not len(codes) or codes.min() >= 0) and all(
            type(v) is str for v in values.categories.tolist()
        )
    return set(map(type, values.tolist())) <= {str}
