"""``%%gpuprof -o after --compare before`` in an IPython InteractiveShell (CPU torch)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
from IPython.core.interactiveshell import InteractiveShell
from test_magic import final_bundle, run
from traitlets.config import Config

import nbprof


@pytest.fixture(scope="module")
def shell() -> Iterator[InteractiveShell]:
    if InteractiveShell.initialized():
        sh = InteractiveShell.instance()
    else:
        cfg = Config()
        cfg.HistoryManager.hist_file = ":memory:"
        sh = InteractiveShell.instance(config=cfg)
    sh.run_line_magic("load_ext", "nbprof")
    sh.run_cell("import torch", store_history=True)
    yield sh
    sh.run_line_magic("unload_ext", "nbprof")


def test_compare_shows_the_comparison_and_stores_the_profile(shell: InteractiveShell) -> None:
    result, _ = run(shell, "%%gpuprof -o before_run\na = torch.ones(64, 64)\nb = a @ a\n")
    assert result.success, result.error_in_exec
    result, cap = run(
        shell,
        "%%gpuprof -o after_run --compare before_run\nc = torch.ones(64, 64)\nd = (c @ c) @ c\n",
    )
    assert result.success, result.error_in_exec
    before, after = shell.user_ns["before_run"], shell.user_ns["after_run"]
    assert isinstance(after, nbprof.Profile) and after is not before
    assert torch.equal(shell.user_ns["d"], torch.full((64, 64), 64.0 * 64))
    data = final_bundle(cap)
    # The cell's output is the comparison of the two stored profiles, not a dashboard.
    assert data["text/plain"] == nbprof.compare(before, after).text()
    assert data["text/plain"].startswith("nbprof compare\n")
    assert 'class="nbprof nbp-compare"' in data["text/html"]
    # On the CPU the kernels table is empty; the CPU ops compare: one more matmul after,
    # and the runs' traced CPU time stands in for the step time.
    cmp = nbprof.compare(before, after)
    assert cmp.step_time.statistic == "cpu_span" and cmp.step_time.before_ms > 0
    assert cmp.warnings == ["Neither run recorded GPU activity: only their CPU sides compare."]
    ops = cmp.ops
    mm = ops[ops["name"] == "aten::matmul"]
    assert len(mm) == 1 and (mm["before_count"].iloc[0], mm["after_count"].iloc[0]) == (1, 2)


@pytest.mark.parametrize(
    ("setup", "line", "message"),
    [
        ("", "--compare nothing_here", "--compare nothing_here: no variable 'nothing_here'"),
        ("not_a_profile = 3", "--compare not_a_profile", "not_a_profile is a int, not an"),
        ("", "--compare 1x", "--compare 1x: not a valid variable name"),
    ],
)
def test_compare_with_a_bad_name_refuses_before_running(
    shell: InteractiveShell, setup: str, line: str, message: str
) -> None:
    if setup:
        shell.run_cell(setup)
    shell.user_ns.pop("ran", None)
    result, cap = run(shell, f"%%gpuprof {line}\nran = True\n")
    assert not result.success
    assert message in cap.stderr + cap.stdout + str(result.error_in_exec)
    assert "ran" not in shell.user_ns  # the body never ran


def test_a_failing_cell_shows_its_partial_profile_not_a_comparison(
    shell: InteractiveShell,
) -> None:
    run(shell, "%%gpuprof -o base\ntorch.ones(3).sum()\n")
    result, cap = run(
        shell, "%%gpuprof --compare base\ntorch.ones(3).sum()\nraise ValueError('x')\n"
    )
    assert isinstance(result.error_in_exec, ValueError)
    data = final_bundle(cap)
    assert not data["text/plain"].startswith("nbprof compare")
    assert "partial" in data["text/plain"]
