"""What a dashboard output weighs and how its payload travels (nbprof/views/timeline/wire.py,
assets.deflated): the pack round-trips, is plain base64 whatever the trace's names hold,
shuffles a column only where that deflates smaller, and the outputs stay under the
weights a saved notebook can afford (benchmarks/bench_weight.py measures them)."""

from __future__ import annotations

import base64
import os
import re
import zlib
from pathlib import Path

import numpy as np
import pytest
from views_data import HOSTILE, small_profile, synthetic_profile

from nbprof.views import assets, dashboard, timeline
from nbprof.views.timeline import wire

#: The weights of issue 38: a 10k-kernel dashboard after the first, a comparison.
MAX_DASHBOARD_BYTES = 250_000
MAX_COMPARISON_BYTES = 350_000
CORPUS = os.environ.get("NBPROF_TRACE_CORPUS")
RESNET = "kineto-tbplugin__resnet50_num_workers_{}__worker0.{}.pt.trace.json.gz"


def _stored(html: str) -> int:
    """Bytes this output takes in a saved notebook, as nbformat writes it (what
    benchmarks/bench_weight.py measures)."""
    import nbformat

    out = nbformat.v4.new_output("display_data", data={"text/html": html})
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(outputs=[out])])
    empty = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell()])
    return len(nbformat.writes(nb)) - len(nbformat.writes(empty))


def test_a_pack_round_trips_and_is_plain_base64_whatever_the_names() -> None:
    header = {"names": [*HOSTILE, "é</script>"], "c": {"dtype": "uint8", "part": 1}}
    cols = [zlib.compress(bytes(range(7)))]
    text = wire.pack(header, cols)
    assert re.fullmatch(r"[A-Za-z0-9+/=]+", text)
    back, parts = wire.unpack(text)
    assert back == header and parts == [bytes(range(7))]
    with pytest.raises(ValueError, match="not an nbprof pack"):
        wire.unpack(base64.b64encode(b"JSON{}").decode())


def test_a_column_is_shuffled_only_where_it_deflates_smaller() -> None:
    # Slowly rising start times: their byte planes are runs; random bytes gain nothing.
    rising = np.cumsum(np.random.default_rng(0).integers(1, 40, 20_000)).astype(np.uint32)
    part, shuffle = wire.column_part(rising)
    assert shuffle and len(part) < len(zlib.compress(rising.tobytes(), 6))
    back = np.frombuffer(zlib.decompress(part), np.uint8).reshape(4, -1).T.copy()
    assert np.array_equal(back.view(np.uint32).ravel(), rising)
    noise = np.random.default_rng(1).integers(0, 2**32, 5_000, dtype=np.uint64)
    part, shuffle = wire.column_part(noise.astype(np.uint32))
    assert not shuffle and zlib.decompress(part) == noise.astype("<u4").tobytes()
    assert wire.column_part(np.arange(9, dtype=np.uint8))[1] is False


def test_the_core_bokehjs_bundle_is_every_model_the_views_need() -> None:
    """Only BokehJS' core travels (no widgets, tables, GL): it must hold every model of a
    dashboard's timeline, sample tracks included."""
    from bokeh.embed.bundle import bundle_for_objs_and_resources
    from bokeh.plotting import figure
    from bokeh.resources import INLINE

    core = bundle_for_objs_and_resources([figure()], INLINE).js_raw
    tl = timeline.build(small_profile())
    assert bundle_for_objs_and_resources([tl.layout], INLINE).js_raw == core


def test_the_load_bundle_and_each_script_travel_deflated() -> None:
    raw = len(dashboard._bokeh_raw())
    assert raw > 1_000_000
    assert len(dashboard.loader_js()) < 0.45 * raw
    assert len(assets.scripts()) < 0.45 * len(assets.bundle(*assets.SCRIPTS))


def test_a_10k_kernel_dashboard_after_the_first_weighs_at_most_250_kb() -> None:
    html = dashboard.fragment(synthetic_profile(10_000), include_bokeh_js=False)
    assert _stored(html) <= MAX_DASHBOARD_BYTES, _stored(html)


@pytest.mark.skipif(not CORPUS, reason="needs NBPROF_TRACE_CORPUS")
def test_a_comparison_of_two_resnet_runs_weighs_at_most_350_kb() -> None:
    import nbprof
    from nbprof.views import compare

    assert CORPUS is not None
    stamps = {0: "1623143089861", 4: "1623212756351"}
    a, b = (nbprof.load(Path(CORPUS) / RESNET.format(w, stamps[w]), progress=False) for w in (0, 4))
    html = compare.fragment(nbprof.compare(a, b), include_bokeh_js=False)
    assert _stored(html) <= MAX_COMPARISON_BYTES, _stored(html)
