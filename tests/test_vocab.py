"""The vocabulary (nbprof/vocab.py): each verdict declared once, and every view saying it.

Adding a verdict means a record in nbprof.vocab and its rule; these tests fail while the
type, a rules' table, a view or docs/json.md lacks it, or while a second table of
verdicts grows somewhere else.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import get_args

import pytest

from nbprof import vocab
from nbprof.analysis import compare, verdict
from nbprof.analysis.model import BOTTLENECKS, VERDICT_BASES
from nbprof.views import compare as compare_view
from nbprof.views import panel, text
from tests.views_data import small_profile

ROOT = Path(__file__).resolve().parents[1]
NAMES = tuple(vocab.VERDICTS)


def test_the_type_lists_exactly_the_records_in_their_order() -> None:
    assert get_args(vocab.Bottleneck) == NAMES
    assert BOTTLENECKS == NAMES
    assert all(t.name == name for name, t in vocab.VERDICTS.items())


@pytest.mark.parametrize("name", NAMES)
def test_each_record_is_complete(name: str) -> None:
    t = vocab.VERDICTS[name]
    for word in (t.label, t.short, t.phrase, t.means):
        assert word.strip() == word and word, (name, word)
    assert len(t.short) <= 10, "the short form fills a rank table's column"
    assert re.fullmatch(r"#[0-9a-f]{6}", t.colour), t.colour
    # The measure is a metric the comparison computes, and its sentence takes both parts.
    assert t.measure.metric in {m.name for m in compare.METRICS}, t.measure.metric
    assert "{b}" in t.measure.moved and "{how}" in t.measure.moved


def test_labels_short_forms_and_phrases_tell_verdicts_apart() -> None:
    for field in ("label", "short", "phrase"):
        words = [getattr(t, field) for t in vocab.VERDICTS.values()]
        assert len(set(words)) == len(words), field


def test_the_stalls_decide_known_verdicts_with_known_bases() -> None:
    assert {s.verdict for s in vocab.STALLS} <= set(NAMES)
    assert {s.basis for s in vocab.STALLS} <= set(VERDICT_BASES)
    # The rules' table is the vocabulary's, in its order (it breaks ties between shares).
    assert list(verdict.STALLS) == [s.key for s in vocab.STALLS]
    assert verdict.STALLS == {s.key: (s.verdict, s.basis, s.meaning) for s in vocab.STALLS}
    from nbprof.views._style import SPAN_PARTS

    assert {s.key for s in vocab.STALLS} <= set(SPAN_PARTS), "a stall the views cannot name"


@pytest.mark.parametrize("name", NAMES)
def test_every_view_says_every_verdict(name: str) -> None:
    t = vocab.VERDICTS[name]
    p = small_profile()
    p.diagnosis.verdict.bottleneck = name  # type: ignore[assignment]
    html = panel.render(p)
    assert f'<span class="nbp-tag">{t.label}</span>' in html
    assert f"--nbp-vc:{t.colour}" in html
    assert f"Verdict: {t.label}." in text.render(p)
    assert compare_view._label(name) == t.label
    assert compare.state(name) == t.phrase


def test_an_unknown_verdict_is_spelled_out_in_a_neutral_colour() -> None:
    t = vocab.term("gpu_on_fire")
    assert (t.label, t.short, t.phrase) == ("gpu on fire",) * 3
    assert t.colour == vocab.UNKNOWN_COLOUR and t.measure == vocab.KERNEL_BUSY


def _tables_of_verdicts(path: Path) -> list[int]:
    """Lines of dict, set, list or tuple literals holding two or more verdict names: a
    second declaration of verdicts (a comparison with one name is a rule, not a table)."""
    hits = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        items = (
            node.keys
            if isinstance(node, ast.Dict)
            else node.elts
            if isinstance(node, ast.Set | ast.List | ast.Tuple)
            else []
        )
        names = {i.value for i in items if isinstance(i, ast.Constant) and i.value in NAMES}
        if len(names) >= 2:
            hits.append(node.lineno)
    return hits


def test_no_module_but_the_vocabulary_declares_verdicts() -> None:
    found = {
        str(p.relative_to(ROOT)): lines
        for p in sorted((ROOT / "nbprof").rglob("*.py"))
        if p.name != "vocab.py" and (lines := _tables_of_verdicts(p))
    }
    assert not found, f"verdicts declared outside nbprof/vocab.py: {found}"


def test_the_scan_finds_a_second_table(tmp_path: Path) -> None:
    # The scan above must see what it is there to forbid, and only that.
    table = tmp_path / "table.py"
    table.write_text('COLOURS = {"compute_bound": "#000", "memory_bound": "#111"}\n')
    rule = tmp_path / "rule.py"
    rule.write_text('def f(b):\n    return b == "cpu_only" or b in ("idle",)\n')
    assert _tables_of_verdicts(table) == [1] and _tables_of_verdicts(rule) == []


def docs_table() -> str:
    rows = [
        "| `bottleneck` | label | what it means | measured by (in `nbprof compare`) |",
        "|---|---|---|---|",
    ]
    rows += [
        f"| `{t.name}` | {t.label} | {t.means} | `{t.measure.metric}` |"
        for t in vocab.VERDICTS.values()
    ]
    return "\n".join(rows)


def test_docs_list_every_verdict_as_the_vocabulary_does() -> None:
    doc = (ROOT / "docs" / "json.md").read_text(encoding="utf-8")
    assert docs_table() in doc, (
        "docs/json.md's verdict table differs from nbprof/vocab.py; it should read:\n"
        + docs_table()
    )
