"""The copies table's grouping gives what grouping the rows' tuples gives."""

from __future__ import annotations

import numpy as np
import pandas as pd

from nbprof.analysis import _group, transfers


def test_sorted_groups_are_the_tuples_groups() -> None:
    rng = np.random.default_rng(1)
    words = [["0", "1", "10", "2"], ["HtoD", "DtoH", "", "DtoD"], ["Pageable", "Device"]]
    for n in (1, 7, 3000):
        rank = rng.integers(0, 4, n).astype("int32")
        # Equal text in distinct objects, as well as shared ones.
        keys = [
            np.array(["".join(list(w[j])) for j in rng.integers(0, len(w), n)], dtype=object)
            for w in words
        ]
        rows = list(zip(rank.tolist(), *(k.tolist() for k in keys), strict=True))
        want = _group.codes(rows, sort=True)
        # As a trace holds them (Categoricals: their codes read as they are), and as objects.
        for given in ([pd.Categorical(k) for k in keys], keys):
            got = transfers._sorted_groups(rank, given)  # type: ignore[arg-type]
            assert got is not None
            assert got[0] == want[0]
            np.testing.assert_array_equal(got[1], want[1])
            assert got[1].dtype == want[1].dtype
        # A short table's path: the same groups, each text the same object.
        short = transfers._tuple_groups(rank, keys)
        assert short[0] == got[0]
        np.testing.assert_array_equal(short[1], got[1])
        for a, b in zip(short[0], got[0], strict=True):
            assert all(x is y for x, y in zip(a[1:], b[1:], strict=True))
    # Not integer ranks, no rows: the tuples decide.
    assert transfers._sorted_groups(np.array([0.5]), [np.array(["a"], dtype=object)]) is None
    assert transfers._sorted_groups(np.zeros(0, int), [np.zeros(0, dtype=object)]) is None
