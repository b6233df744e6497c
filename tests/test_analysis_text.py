"""Name matching remembers whole answers across calls and ranks, without changing them."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
from hypothesis import example, given, settings
from hypothesis import strategies as st

from nbprof.analysis import _group, _text, classes, device, tensorcores
from nbprof.analysis.classes import is_collective, kernel_classes
from nbprof.trace.model import frame_from_arrays


def _fresh(values: list[object], pattern: str) -> np.ndarray:
    """What matches gives, worked out name by name (no remembered answer)."""
    rx = re.compile(pattern)
    return np.array([rx.search(str(v)[: _text.NAME_PREFIX]) is not None for v in values])


def test_remembered_answers_are_the_computed_ones() -> None:
    # Two "ranks" with the same names in the same first-seen order: the second gets the
    # remembered answer, equal to the first and to a fresh computation.
    names = ["ncclKernel_AllReduce", "volta_sgemm_128x64_nn", "elementwise_kernel", "x"]
    a = pd.Series(names * 3, dtype=object)
    b = pd.Series(names * 2, dtype=object)  # other rows, the same distinct names
    _text._MEMO.clear()  # earlier tests may have filled it: count from empty
    before = len(_text._MEMO)
    first = _text.matches(a, r"gemm|nccl")
    assert len(_text._MEMO) == before + 1
    again = _text.matches(b, r"gemm|nccl")
    assert len(_text._MEMO) == before + 1  # answered from memory
    np.testing.assert_array_equal(first, _fresh(a.tolist(), r"gemm|nccl"))
    np.testing.assert_array_equal(again, _fresh(b.tolist(), r"gemm|nccl"))
    # Another pattern, or the same names in another order, is another question.
    np.testing.assert_array_equal(_text.matches(a, "kernel"), _fresh(a.tolist(), "kernel"))
    rev = pd.Series(names[::-1], dtype=object)
    np.testing.assert_array_equal(_text.matches(rev, "gemm"), _fresh(rev.tolist(), "gemm"))
    # The caller owns what it gets: changing it changes no later answer.
    got = _text.matches(b, r"gemm|nccl")
    got[:] = False
    np.testing.assert_array_equal(_text.matches(b, r"gemm|nccl"), first[: len(b)])


def test_names_that_are_not_all_text_are_never_remembered_as_text() -> None:
    # 1, 1.0 and True are equal keys in Python but different text: each is matched anew.
    for values, want in (([1], False), ([1.0], True), ([True], False)):
        got = _text.matches(pd.Series(values, dtype=object), r"\.0")
        assert got.tolist() == [want], values


def test_memory_is_bounded() -> None:
    for i in range(_text._MEMO_SIZE + 20):
        _text.matches(pd.Series([f"kernel_{i}", "gemm"], dtype=object), "gemm")
    assert len(_text._MEMO) <= _text._MEMO_SIZE
    # A set of names longer than the limit is worked out each time, never kept.
    long_name = "k" * (_text._MEMO_CHARS + 1)
    assert _text.matches(pd.Series([long_name], dtype=object), "k").tolist() == [True]
    assert all(long_name not in key[-1] for key in _text._MEMO)


def test_token_tests_give_the_same_classes_twice() -> None:
    names = pd.Series(
        ["ncclDevKernel_AllGather_RING_LL", "ampere_fp16_s16816gemm_fp16_128x128",
         "void at::native::vectorized_elementwise_kernel<4>", "one_shot_all_reduce"] * 2,
        dtype=object,
    )  # fmt: skip
    tc = np.array([False, True, False, False] * 2)
    first = kernel_classes(names, tc)
    second = kernel_classes(names.iloc[::-1].reset_index(drop=True), tc[::-1])
    assert first["cls"].tolist()[:4] == ["communication", "tensor_core", "memory",
                                         "communication"]  # fmt: skip
    assert second["cls"].tolist() == first["cls"].tolist()[::-1]
    assert is_collective(names).tolist() == [True, False, False, True] * 2


def test_is_in_is_series_isin_for_text_and_none_for_the_rest() -> None:
    """is_in answers per distinct name what Series.isin answers per row; a missing value
    (None, NaN) or a non-text one (1) is in no set of names."""
    from nbprof.analysis._text import is_in

    values = np.array(["a", "b", None, np.nan, 1, "a", "c"], dtype=object)
    names = frozenset({"a", "c"})
    want = [True, False, False, False, False, True, True]
    assert is_in(values, names).tolist() == want
    assert is_in(values, frozenset({"b"})).tolist() == [v == "b" for v in values]
    # A trace's text column (a Categorical, missing values included): the same answers.
    cat = pd.Categorical(["a", "b", None, "a", "c"])
    assert is_in(cat, names).tolist() == pd.Series(cat).isin(names).tolist()
    assert is_in(np.array([], dtype=object), names).tolist() == []


def test_factorized_text_is_what_pandas_gives() -> None:
    long = "void cutlass::Kernel<" + "x" * 3000 + ">"
    cases = [
        pd.Series(np.array(["b", long, "a", "b", long], dtype=object)),
        pd.Series(np.array(["a", None, np.nan, "a"], dtype=object)),  # not all text
        pd.Series(np.array([1, 1.0, True, "1"], dtype=object)),
        pd.Series(["x", "y", "x"], dtype="str"),  # pandas' own text type
        pd.Series(np.array([], dtype=object)),
    ]
    for s in cases:
        codes, uniq = _text._factorize(s)
        want_codes, want_uniq = pd.factorize(s, use_na_sentinel=False)
        np.testing.assert_array_equal(codes, want_codes)
        assert list(uniq) == list(want_uniq)
        assert uniq.dtype == want_uniq.dtype
        # The Series' object array, factorized without the Series: the same answer.
        if s.dtype == object:
            codes, uniq = _text._factorize(s.to_numpy())
            np.testing.assert_array_equal(codes, want_codes)
            assert pd.Series(list(uniq), dtype=object).equals(
                pd.Series(list(want_uniq), dtype=object)
            )
    # A Categorical: its own codes and categories, read as they are; with a missing value,
    # pandas' answer for its values.
    for cat in (pd.Categorical(["b", long, "a", "b"]), pd.Categorical(["a", None, "a"])):
        codes, uniq = _text._factorize(cat)
        got = pd.Series([uniq[c] for c in codes.tolist()], dtype=object)
        assert got.equals(pd.Series(cat).astype(object))


def test_equals_is_numpys_comparison() -> None:
    n = _group.BY_ADDRESS + 3
    words = np.array(["".join(("mem", "ory")), "compute", "memory", "other"], dtype=object)
    values = words[np.arange(n) % 4]
    odd = values.copy()
    odd[5] = None
    odd[6] = np.nan
    for v in (values, odd, values[:10], np.array([], dtype=object), np.array(["memory"])):
        for word in ("memory", "compute", "absent"):
            got = _text.equals(v, word)
            assert got.dtype == bool
            assert got.tolist() == (v == word).tolist()
            if len(v) and all(type(x) is str for x in v.tolist()):  # as a trace holds it
                cat = pd.Categorical(v)
                assert _text.equals(cat, word).tolist() == (v == word).tolist()


# -- the needle test before a search ------------------------------------------------------

#: The patterns searched over kernel names, whose needles are worked out at import.
_NAME_PATTERNS = (
    tensorcores._TC_NVIDIA, tensorcores._NOT_TC, tensorcores._MFMA, tensorcores._HELPER,
    tensorcores._TC_METRIC, classes._MEMORY_FIRST, classes._MEMORY, device._GEMM_LIKE,
)  # fmt: skip


def test_needles_are_a_run_of_plain_characters_of_each_alternative() -> None:
    blind, words = _text._needles(re.compile(r"[hsid]884|sm(?:80|90)_xmma.*f16|\bsm9\d_", re.I))
    assert blind and words == ("884", "_xmma", "sm9")
    assert _text._needles(re.compile(r"Memcpy|^cuda")) == (False, ("Memcpy", "cuda"))
    # An alternative with no run of two plain characters could match almost anything.
    assert _text._needles(re.compile(r"gemm|[ab]x")) is None
    assert _text._needles(re.compile(r"gemm|\d+")) is None
    # A case-blind run that is not ASCII: lower() is not how the engine folds it.
    assert _text._needles(re.compile("gemm|straße", re.I)) is None
    for rx in _NAME_PATTERNS:
        assert _text._needles(rx) is not None, rx.pattern


def _words(rx: re.Pattern[str]) -> list[str]:
    found = _text._needles(rx)
    return list(found[1]) if found is not None else []


_PIECES = [
    *sorted({w for rx in _NAME_PATTERNS for w in _words(rx)}),
    "void", "<", ">", "::", "_", "128x64", "sm80_xmma_gemm_f16f16", "sm90_", "ſimt", "K",
    "SGEMM", "Elementwise", "İ", "bf16", "tensorop", "cutlass_", "_tf32", " ",
]  # fmt: skip


@st.composite
def _names(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.sampled_from(_PIECES) | st.text(max_size=3), max_size=8))
    text = "".join(parts)
    return text.upper() if draw(st.booleans()) and draw(st.booleans()) else text


@settings(max_examples=400, deadline=None)
@given(_names())
# A Unicode case rule the needles' lower() does not follow: "ſ" matches "s" when case is
# ignored (so "ſimt" is a SIMT kernel, and no needle of that pattern is in its lower case).
@example("cutlass_ſimt_128x64").via("long s")
@example("VOLTA_H884GEMM_64X64").via("upper case")
def test_a_name_matches_exactly_when_the_search_says_so(name: str) -> None:
    for rx in _NAME_PATTERNS:
        assert _text._hit.__wrapped__(rx, name) == (rx.search(name) is not None), rx.pattern


def test_every_corpus_kernel_name_matches_as_the_search_says(corpus: Path) -> None:
    import nbprof

    names: set[str] = set()
    for path in sorted(corpus.glob("*.json.gz")):
        k = nbprof.load(path, progress=False).trace.kernels
        names.update(str(n)[: _text.NAME_PREFIX] for n in k["name"].tolist())
    assert len(names) > 250  # 289 distinct kernel names in the 13 kernel-holding files
    skipped = 0
    for rx in _NAME_PATTERNS:
        for n in names:
            assert _text._hit.__wrapped__(rx, n) == (rx.search(n) is not None), (rx.pattern, n)
        skipped += sum(1 for n in names if not any(map(n.lower().__contains__, _words(rx))))
    # The point of it: most names are told apart without a search.
    assert skipped > len(names) * len(_NAME_PATTERNS) // 2


def test_name_columns_match_as_their_series() -> None:
    """A frame's name column matched as the array it stores (name_column) answers what
    its Series answers, for text held as objects and as a Categorical (as a trace holds
    it); an object column comes as its array, read only, whatever it holds."""
    n = 500
    words = ["ncclKernel_AllReduce", "volta_sgemm_128x64_nn", "elementwise_kernel", "x"]
    text = np.array([words[i % 4] for i in range(n)], dtype=object)
    odd = text.copy()
    odd[3] = None
    for values in (text, text[:7], odd, odd[:7]):
        # Held as object, as the trace's tables hold names.
        df = frame_from_arrays({"name": values, "ts": np.arange(len(values), dtype="float64")})
        got = _text.name_column(df, "name")
        all_text = all(type(v) is str for v in values)
        assert isinstance(got, np.ndarray) and not got.flags.writeable
        if all_text:
            assert isinstance(_text.text_column(df, "name"), np.ndarray)
        else:
            pd.testing.assert_series_equal(_text.text_column(df, "name"), df["name"].astype(str))
        for pattern in (r"gemm|nccl", r"^x$", "kernel"):
            want = _fresh(values.tolist(), pattern)
            _text._MEMO.clear()
            np.testing.assert_array_equal(_text.matches(got, pattern), want)
            # Twice: the second time from the memo.
            for _ in range(2):
                np.testing.assert_array_equal(_text.matches(got, pattern), want)
                np.testing.assert_array_equal(_text.matches(df["name"], pattern), want)
            codes, uniq = _text._factorize(got)
            want_codes, want_uniq = _text._factorize(df["name"])
            np.testing.assert_array_equal(codes, want_codes)
            # Missing names are NaN in both: compared as Series (NaN equals NaN).
            as_series = [pd.Series(list(u), dtype=object) for u in (uniq, want_uniq)]
            assert as_series[0].equals(as_series[1])
            if all_text:
                cat = frame_from_arrays({"name": pd.Categorical(values)})
                held = _text.name_column(cat, "name")
                assert isinstance(held, pd.Categorical)
                np.testing.assert_array_equal(_text.matches(held, pattern), want)
    # pandas' own text type: the Series, as before.
    typed = pd.DataFrame({"name": pd.Series(words, dtype="str")})
    assert isinstance(_text.name_column(typed, "name"), pd.Series)


def test_kernel_classes_of_an_array_are_those_of_its_series() -> None:
    names = np.array(["ncclKernel_AllReduce", "volta_sgemm_128x64_nn", "elementwise_kernel"])
    s = pd.Series(names.astype(object), index=[4, 7, 9])
    tc = np.array([False, True, False])
    want = kernel_classes(s, tc)
    got = kernel_classes(s.to_numpy(), tc, index=s.index)
    pd.testing.assert_frame_equal(got, want)
    pd.testing.assert_frame_equal(
        kernel_classes(s.to_numpy(), tc), want.reset_index(drop=True), check_index_type=True
    )


def test_alternatives_searched_alone_match_as_the_whole_pattern() -> None:
    """A pattern cut into its alternatives (each searched alone, where its needle is) says
    of every name what the whole pattern's search says; one that cannot be cut so is
    searched whole."""
    assert _text._top_alternatives(r"a[|\]]b|(c|d)|e\|f|[]x]y|[^]y]z") == [
        r"a[|\]]b",
        "(c|d)",
        r"e\|f",
        "[]x]y",
        "[^]y]z",
    ]
    assert _text._top_alternatives("ab(cd") is None
    assert _text._top_alternatives("ab[cd") is None
    cases = [
        re.compile(r"ab[|\]]cd|ef(?:gh|ij)kl|^mn\w*op|qrst", re.I),
        re.compile(r"xy(z)w|(?P<g>uv)tt|kk(?=ll)mm"),
        re.compile(r"abc|abd"),  # the parser factors the common prefix: not cut
        re.compile(r"(ab)cd|ef\1gh"),  # a reference to another alternative: not cut
        re.compile(r"gh|qr\|st"),  # a needle written otherwise than it reads: not cut
    ]
    assert _text._branches(cases[0]) is not None and _text._branches(cases[1]) is not None
    assert all(_text._branches(rx) is None for rx in cases[2:])
    for rx in _NAME_PATTERNS:
        assert _text._branches(rx) is not None, rx.pattern
    names = [
        "AB]CD", "xxab|cdyy", "EFGHKL", "efijkl", "efgkl", "mnzzop", "zmnop", "qr|st", "qrst",
        "xyzw", "uvtt", "kkllmm", "kkmm", "abd", "abcd", "abcdefabgh", "ſt", "ab|cd",
    ]  # fmt: skip
    for rx in cases:
        for name in names:
            assert _text._hit.__wrapped__(rx, name) == (rx.search(name) is not None), (rx, name)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.sampled_from(["gemm", "relu", "copy", "a_longer_kernel_name"]), min_size=1),
    st.integers(0, 2**32 - 1),
)
def test_text_codes_are_codes_of_the_values(words: list[str], seed: int) -> None:
    """A column of names has the codes of its values, numbered where the value first
    appears: held as objects (equal text in distinct str objects, as a column joined from
    pieces read apart holds, gets one code), and as a Categorical, whose sorted categories
    are renumbered so."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 2000))
    # Each word as a few distinct but equal objects (a slice makes a new str).
    pool = [(w + "!")[:-1] for w in words for _ in range(3)]
    values = np.empty(n, dtype=object)
    values[:] = [pool[i] for i in rng.integers(0, len(pool), n)]
    texts = values.tolist()
    want_uniq, want_code = _group.codes(texts)
    for held in (values, pd.Categorical(values), pd.Series(pd.Categorical(values))):
        uniq, code = _text.text_codes(held)
        assert uniq == want_uniq
        assert code.dtype == want_code.dtype and code.tolist() == want_code.tolist()
    every_other = values[::2]
    want = _group.codes(every_other.tolist())[1]
    assert _text.text_codes(every_other)[1].tolist() == want.tolist()
