"""The job dashboard: rank table, heatmap and the straggler's panel; trace text escaped."""

from __future__ import annotations

import json
from pathlib import Path

import nbprof
from nbprof.job import Job
from tests.jobs import STRAGGLER, write_job


def test_job_dashboard_sections_in_order(tmp_path: Path) -> None:
    write_job(tmp_path)
    job = nbprof.load(tmp_path)
    assert isinstance(job, Job)
    html = job._repr_mimebundle_()["text/html"]
    ranks = html.index("<h3>Ranks</h3>")
    heat = html.index("nbp-heatmap")
    straggler = html.index(f"Rank {STRAGGLER}, the straggler, on its own")
    assert ranks < heat < straggler
    assert 'class="nbp-straggler"><td>2</td>' in html
    assert "Communication-bound because of skew" in html


def test_job_dashboard_escapes_trace_text(tmp_path: Path) -> None:
    write_job(tmp_path)
    for f in tmp_path.glob("*.json"):
        doc = json.loads(f.read_text())
        doc["deviceProperties"][0]["name"] = "NVIDIA H100 80GB HBM3 <script>x</script>"
        f.write_text(json.dumps(doc))
    html = nbprof.load(tmp_path).to_html()
    assert "<script>x</script>" not in html
    assert "&lt;script&gt;x&lt;/script&gt;" in html


def test_report_command_writes_the_job_page(tmp_path: Path) -> None:
    from nbprof.cli import main

    folder = tmp_path / "job"
    write_job(folder)
    out = tmp_path / "job.html"
    assert main(["report", str(folder), "-o", str(out)]) == 0
    text = out.read_text()
    assert text.startswith("<!DOCTYPE html>") and "nbprof-job-heatmap" in text


def test_job_dashboard_names_the_folder_says_the_gpu_once_and_what_last_means(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "run-7"
    write_job(folder)
    job = nbprof.load(folder)
    html = job._repr_mimebundle_()["text/html"]
    # The folder's name in the title, its full path on hover.
    assert f'<h2 title="{job.diagnosis.source}">nbprof · run-7 · job of' in html
    # Every rank on the same GPU: named once, not on every row.
    names = {r.device_name or r.device for r in job.diagnosis.ranks}
    assert len(names) == 1
    (name,) = names
    table = html[html.index("<h3>Ranks</h3>") : html.index("nbp-heatmap")]
    assert table.count(name) == 1 and "<th>GPU</th>" not in table
    # What "last" counts, in words.
    r = job.diagnosis.ranks[0]
    assert "<th>last to arrive at</th>" in html
    assert f"<td>{r.last_count} of the {r.collective_count} collectives</td>" in html
