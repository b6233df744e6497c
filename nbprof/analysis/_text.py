"""Regex matching over name columns, once per distinct name.

Traces repeat a few thousand names across hundreds of thousands of rows (and across every
rank of a multi-rank set); matching each distinct name once per pattern, and remembering
the answer, is what keeps analysis well under a second.
"""

from __future__ import annotations

import functools
import re

import numpy as np
import pandas as pd


@functools.lru_cache(maxsize=1 << 16)
def _hit(rx: re.Pattern[str], text: str) -> bool:
    return rx.search(text) is not None


def matches(values: pd.Series, pattern: re.Pattern[str] | str) -> np.ndarray:
    """Boolean array: does ``pattern`` search-match each value (as text)."""
    if len(values) == 0:
        return np.zeros(0, dtype=bool)
    rx = re.compile(pattern) if isinstance(pattern, str) else pattern
    codes, uniq = pd.factorize(values, use_na_sentinel=False)
    hit = np.fromiter((_hit(rx, str(u)) for u in uniq), dtype=bool, count=len(uniq))
    return hit[codes]
