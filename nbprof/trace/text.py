"""Text columns dictionary-encoded from the moment they are read: codes and distinct values.

A trace repeats a few thousand names over millions of events. The scanner (and the pure
path, the same way) gives each event's name as a code into its piece's distinct names, and
every text column the tables derive (devices, launch calls, ops, copy directions, input
shapes) is made the same way, so no step above the reader has to find the distinct values
again. The tables hold them as pandas ``Categorical`` s whose categories are the distinct
values sorted (so a groupby or a sort by the column orders it as it would order the text).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd
else:
    from nbprof._lazy import pandas as pd


@dataclass
class Text:
    """A column of text: each row's ``codes`` into ``values`` (distinct, any order)."""

    codes: np.ndarray
    values: Sequence[str]

    def __len__(self) -> int:
        return len(self.codes)

    @classmethod
    def of(cls, texts: Iterable[str]) -> Text:
        """The column of these texts, coded in order of first appearance."""
        place: dict[str, int] = {}
        setdefault = place.setdefault
        codes = np.fromiter((setdefault(t, len(place)) for t in texts), np.int32)
        return cls(codes, list(place))

    @classmethod
    def repeat(cls, text: str, n: int) -> Text:
        return cls(np.zeros(n, np.int32), [text])

    def take(self, rows: np.ndarray | slice) -> Text:
        return Text(self.codes[rows], self.values)

    def take_or(self, rows: np.ndarray, missing: str = "") -> Text:
        """The rows ``rows`` (-1: ``missing``)."""
        values = [*self.values, missing]
        if not len(self.codes):
            return Text(np.full(len(rows), len(self.values), np.int32), values)
        codes = np.where(rows >= 0, self.codes[np.maximum(rows, 0)], len(self.values))
        return Text(codes.astype(np.int32, copy=False), values)

    def used(self) -> tuple[np.ndarray, list[str]]:
        """(the codes this column uses, their values): a piece's columns share its whole
        list of names, most of which any one column never uses."""
        seen = np.zeros(len(self.values), bool)
        seen[self.codes] = True
        at = np.flatnonzero(seen)
        values = self.values
        return at, [values[i] for i in at.tolist()]

    def map(self, each: Any) -> Text:
        """``each`` of every value, worked out once per distinct value used."""
        at, values = self.used()
        mapped = Text.of(map(each, values))
        place = np.zeros(len(self.values), np.int32)
        place[at] = mapped.codes
        return Text(place[self.codes], mapped.values)

    def under(self, codes: np.ndarray) -> Text:
        """This column read at ``codes`` (a column whose values are this one's rows)."""
        return Text(self.codes[codes] if len(self.codes) else np.zeros(0, np.int32), self.values)

    def texts(self) -> list[str]:
        """Every row's text."""
        values = list(self.values)
        return [values[c] for c in self.codes.tolist()]

    def hits(self, test: Any) -> np.ndarray:
        """Boolean per row: ``test(value)``, asked once per distinct value used."""
        at, values = self.used()
        per = np.zeros(len(self.values), bool)
        per[at] = np.fromiter(map(test, values), bool, len(values))
        return per[self.codes]

    def categorical(self) -> pd.Categorical:
        """The column as a ``Categorical`` of the values it uses, sorted."""
        values = self.values
        if not len(self.codes):
            return empty()
        if len(values) == 1:  # a column of one text (a device, a category): every code 0
            return categorical(self.codes, values)
        at, used = self.used()
        if len(at) == 1:
            return categorical(np.zeros(len(self.codes), np.int32), used)
        ordered = sorted(range(len(used)), key=used.__getitem__)
        remap = np.zeros(len(values), np.int32)
        remap[at[np.asarray(ordered, np.intp)]] = np.arange(len(ordered), dtype=np.int32)
        return categorical(remap[self.codes], [used[i] for i in ordered])


def categorical(codes: np.ndarray, sorted_values: Sequence[str]) -> pd.Categorical:
    """The Categorical of these codes into distinct ``sorted_values`` (object categories,
    so that a row reads back as the str it was, not as pandas' own text type)."""
    return pd.Categorical.from_codes(codes, dtype=_dtype(tuple(sorted_values)), validate=False)


@functools.lru_cache(maxsize=1024)
def _dtype(values: tuple[str, ...]) -> pd.CategoricalDtype:
    """The dtype of these categories, made once: the ranks of a job hold the same names
    again and again, and a dtype checks its categories anew (tens of µs each)."""
    return pd.CategoricalDtype(pd.Index(list(values), dtype=object))


def empty() -> pd.Categorical:
    return categorical(np.zeros(0, np.int8), [])


def concat(parts: Sequence[Text]) -> Text:
    """The parts one after another, their values united (each part's codes moved onto the
    union's)."""
    if len(parts) == 1:
        return parts[0]
    place: dict[str, int] = {}
    setdefault = place.setdefault
    codes = []
    for p in parts:
        # Only the values the part uses: a piece's columns share its whole list of names.
        used = np.zeros(len(p.values), bool)
        used[p.codes] = True
        at = np.flatnonzero(used)
        values = p.values
        moved = np.zeros(len(values), np.int32)
        moved[at] = [setdefault(values[i], len(place)) for i in at.tolist()]
        codes.append(moved[p.codes])
    return Text(np.concatenate(codes) if codes else np.zeros(0, np.int32), list(place))


def union(parts: Sequence[pd.Categorical]) -> pd.Categorical:
    """Categoricals (of sorted categories) one after another, their categories united and
    sorted."""
    values = sorted(set().union(*(p.categories.tolist() for p in parts)))
    place = {v: i for i, v in enumerate(values)}
    codes = [
        np.fromiter(map(place.__getitem__, p.categories.tolist()), np.int32, len(p.categories))[
            p.codes
        ]
        if len(p.categories)
        else np.zeros(len(p), np.int32)
        for p in parts
    ]
    return categorical(np.concatenate(codes), values)
