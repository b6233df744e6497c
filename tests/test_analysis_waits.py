"""What queued work waited on, and what the time after a sync is: hand-built traces whose
shares are written as formulas, and the corpus traces that show each rule.

Times in µs. The builder's launch calls last 2 µs unless a test says otherwise, so work
is queued 2 µs after its ``launch_ts``.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from golden import KinetoBuilder, read_trace

from nbprof.analysis import analyze
from nbprof.analysis.model import Diagnosis

SGEMM = "ampere_sgemm_128x64_nn"
ALLREDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


def diagnose(b: KinetoBuilder, tmp_path: Path) -> Diagnosis:
    return analyze(read_trace(b.write(tmp_path)))


def _ids(d: Diagnosis) -> set[str]:
    return {f.id for f in d.findings}


# -- the queue, measured over the whole gap -------------------------------------------------

EVENT_CYCLES, EVENT_PERIOD, EVENT_WAIT = 10, 470_000.0, 460_000.0


def event_wait_run() -> KinetoBuilder:
    """Cycles of 470 ms: a 5 ms GEMM on stream 7 (t to t+5000); 0.3 ms later the host
    launches a GEMM on stream 9 (queued from t+5300) that waits 460 ms on an event and runs
    t+465000 to t+469000; the host blocks in a synchronize from t+5310 to t+469000 (on that
    queue), then runs Python until the next cycle's launch returns at t+469992."""
    b = KinetoBuilder()
    for i in range(EVENT_CYCLES):
        t = EVENT_PERIOD * i
        b.kernel(SGEMM, t, 5000, stream=7, launch_ts=t - 10)
        b.kernel(SGEMM, t + 5000 + EVENT_WAIT, 4000, stream=9, launch_ts=t + 5298)
        b.runtime("cudaStreamSynchronize", t + 5310, 469_000 - 5310)
    return b


def test_work_launched_early_in_a_gap_is_queued_for_the_rest_of_it(tmp_path: Path) -> None:
    d = diagnose(event_wait_run(), tmp_path)
    m = d.devices[0]
    span = (EVENT_CYCLES - 1) * EVENT_PERIOD + 469_000
    # Each 460 ms gap: 300 µs before the waiting GEMM was queued (the host's), 459.7 ms
    # with it queued; between cycles 1000 µs: 992 the host's, 8 the launch delay. Read at
    # the instant the GPU went idle the queue was empty: 0% queued.
    dep = EVENT_CYCLES * (EVENT_WAIT - 300)
    idle = EVENT_CYCLES * EVENT_WAIT + (EVENT_CYCLES - 1) * 1000
    assert m.span_breakdown["dependency"] == pytest.approx(dep / span * 100)
    assert m.span_breakdown["host"] == pytest.approx(
        (EVENT_CYCLES * 300 + (EVENT_CYCLES - 1) * 992) / span * 100
    )
    assert m.idle_queued_pct == pytest.approx((dep + (EVENT_CYCLES - 1) * 8) / idle * 100)
    top = d.stalls.iloc[0]
    assert (top["cause"], top["queued_us"], top["dur"]) == (
        "dependency",
        EVENT_WAIT - 300,
        EVENT_WAIT,
    )


def test_a_host_blocked_on_that_queue_is_a_consequence_not_sync_bound(tmp_path: Path) -> None:
    d = diagnose(event_wait_run(), tmp_path)
    m = d.devices[0]
    span = (EVENT_CYCLES - 1) * EVENT_PERIOD + 469_000
    # The synchronize blocks 463.69 ms a cycle, all of it while the GPU's work is queued
    # (or running): none of the idle time is the sync's.
    assert m.span_breakdown["sync"] == 0.0
    v = d.verdict
    assert (v.bottleneck, v.basis) == ("idle", "queued_idle")
    assert "waiting on work outside the trace" in v.summary
    assert "cudaStreamSynchronize" in v.summary and "a consequence, not the cause" in v.summary
    assert "sync_stalls" not in _ids(d)
    f = {x.id: x for x in d.findings}["queued_idle"]
    blocked = EVENT_CYCLES * (EVENT_WAIT - 310)  # t+5310 to t+465000, each cycle
    assert f.evidence["host_blocked_behind_pct"] == pytest.approx(blocked / span * 100, abs=0.05)
    # No fix asks to drop the synchronize; the queued work's says to leave it, and, no
    # graph launching anything, looks at the ranks and processes, not at graphs.
    assert not any(
        w in (x.fix or "").lower() for x in d.findings for w in ("drop", "avoid per-step sync")
    )
    assert f.fix.startswith("Find what the queued work waits for: the other ranks' traces")
    assert "Leave the host's cudaStreamSynchronize as it is" in f.fix
    assert "graph" not in f.fix
    # The idle-GPU finding would say the same: the queued work's finding alone says it.
    assert "gpu_idle" not in _ids(d)


# -- queued work of a CUDA graph replay ----------------------------------------------------

GRAPH_CYCLES, GRAPH_PERIOD, GRAPH_PAUSE = 10, 10_000.0, 6000.0


def graph_launch(b: KinetoBuilder, ts: float, nodes: list[tuple[float, float]]) -> None:
    """One ``cudaGraphLaunch`` at ``ts`` (20 µs) whose replay runs a GEMM node at each
    (start, dur) of ``nodes`` on stream 7: every node carries the launch's correlation."""
    corr = b.runtime("cudaGraphLaunch", ts, 20.0)
    for start, dur in nodes:
        b.events.append(
            {
                "ph": "X", "cat": "kernel", "name": SGEMM, "pid": 0, "tid": 7,
                "ts": b.base_us + start, "dur": dur,
                "args": {"device": 0, "stream": 7, "correlation": corr,
                         "grid": [264, 1, 1], "block": [128, 1, 1]},
            }
        )  # fmt: skip


def graph_pause_run() -> KinetoBuilder:
    """Cycles of 10 ms: a graph launched at t-30 (queued from t-10) replays a 1000 µs node
    at t, pauses 6000 µs with nothing running, then a 1000 µs node to t+8000; 2000 µs to
    the next cycle, the host's."""
    b = KinetoBuilder()
    for i in range(GRAPH_CYCLES):
        t = GRAPH_PERIOD * i
        graph_launch(b, t - 30, [(t, 1000.0), (t + 1000 + GRAPH_PAUSE, 1000.0)])
    return b


def test_a_graph_replay_that_pauses_between_its_nodes_points_at_the_graph(
    tmp_path: Path,
) -> None:
    d = diagnose(graph_pause_run(), tmp_path)
    span = (GRAPH_CYCLES - 1) * GRAPH_PERIOD + 8000.0
    sb = d.devices[0].span_breakdown
    # The second node was queued from t-10 and starts 6000 µs after the first ended,
    # nothing running meanwhile: 6000 µs a cycle waiting on something the trace does not
    # show (60.6% of the span), all of it at a graph replay's nodes; between cycles the
    # host's 1990 µs and the 10 µs launch delay.
    assert sb["dependency"] == pytest.approx(GRAPH_CYCLES * GRAPH_PAUSE / span * 100)
    assert sb["host"] == pytest.approx((GRAPH_CYCLES - 1) * 1990 / span * 100)
    a = d.verdict
    assert (a.bottleneck, a.basis) == ("idle", "queued_idle")
    assert "100% of it at the nodes of CUDA/HIP graph replays" in a.summary
    f = {x.id: x for x in d.findings}["queued_idle"]
    assert f.evidence["graph_share_pct"] == pytest.approx(100.0)
    # Where to look, in the order the trace points: inside the graphs first.
    assert f.fix.startswith(
        "Find what the queued work waits for, inside the CUDA/HIP graphs (100% of this "
        "waiting is at their nodes)"
    )
    assert f.fix.index("graph") < f.fix.index("the other ranks' traces")
    assert d.stalls.iloc[0]["cpu_work"] == (
        "queued work on stream 7 (a CUDA/HIP graph's) waiting on work outside the trace"
    )


def test_corpus_queued_time_is_measured_over_the_whole_gap(corpus: Path) -> None:
    import gzip
    import json

    path = corpus / "tracelens__bert-small-inference-h100.json.gz"
    if not path.is_file():
        pytest.skip("no BERT-small trace")
    # Worked out here from the raw events: the 60 idle gaps of the union of its 61 GPU
    # events, each queued from the earliest launch-call return among the events that
    # start at or after its end. The queue is empty as every gap opens (the host launches
    # each kernel after the previous one ended), but each kernel's launch returns a few µs
    # before it starts: 98.3 µs of the 3598.4 µs idle (2.7%) had work queued, where the
    # queue read at the instant the GPU went idle says 0%.
    doc = json.loads(gzip.decompress(path.read_bytes()))
    ev = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    gpu = sorted(
        (e for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")),
        key=lambda e: e["ts"],
    )
    calls = {
        e["args"]["correlation"]: e["ts"] + e["dur"]
        for e in ev
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    gaps, end = [], gpu[0]["ts"] + gpu[0]["dur"]
    for e in gpu[1:]:
        if e["ts"] > end:
            gaps.append((end, e["ts"]))
        end = max(end, e["ts"] + e["dur"])
    queued = at_open = 0.0
    for g0, g1 in gaps:
        first = min(calls.get(e["args"]["correlation"], math.inf) for e in gpu if e["ts"] >= g1)
        queued += g1 - min(max(first, g0), g1)
        at_open += (g1 - g0) if first < g0 else 0.0
    idle = sum(b - a for a, b in gaps)
    assert at_open == 0.0 and queued == pytest.approx(98.29, abs=0.01)
    d = analyze(read_trace(path))
    m = d.devices[0]
    assert m.idle_queued_pct == pytest.approx(queued / idle * 100, rel=1e-4)
    assert d.stalls["queued_us"].sum() == pytest.approx(queued, abs=0.01)


# -- queued behind a collective: the communication share ---------------------------------


def comm_run(period: float) -> KinetoBuilder:
    """Cycles of ``period``: a 2 ms GEMM (t to t+2000), an all-reduce launched at t+10 that
    starts only at t+5000 (queued 3 ms, nothing running) and runs alone to t+7000, a 1 ms
    GEMM queued behind it (t+7000 to t+8000); then the host's Python until the next
    cycle's GEMM launch returns at t+period-8."""
    b = KinetoBuilder()
    for i in range(10):
        t = period * i
        b.kernel(SGEMM, t, 2000, stream=7, launch_ts=t - 10)
        b.kernel(ALLREDUCE, t + 5000, 2000, stream=20, launch_ts=t + 10, grid=(8, 1, 1))
        b.kernel(SGEMM, t + 7000, 1000, stream=7, launch_ts=t + 20)
    return b


def test_work_queued_behind_a_collective_is_communication(tmp_path: Path) -> None:
    d = diagnose(comm_run(10_000.0), tmp_path)
    m = d.devices[0]
    span = 9 * 10_000 + 8000.0
    sb = m.span_breakdown
    # 3000 µs a cycle queued until the all-reduce starts, 2000 µs of it alone: 5000 of
    # communication a cycle (51% of the span) against the host's 9 x 1992 (18%).
    assert sb["comm_wait"] == pytest.approx(10 * 3000 / span * 100)
    assert sb["exposed_comm"] == pytest.approx(10 * 2000 / span * 100)
    assert sb["host"] == pytest.approx(9 * 1992 / span * 100)
    assert sb["dependency"] == 0.0
    v = d.verdict
    assert (v.bottleneck, v.basis) == ("communication_bound", "comm_wait")
    assert "queued behind a collective" in v.summary
    top = d.stalls.iloc[0]
    assert top["cause"] == "comm_wait"
    assert top["cpu_work"].startswith("queued behind ncclDevKernel_AllReduce")


def test_the_communication_share_is_weighed_against_the_hosts(tmp_path: Path) -> None:
    d = diagnose(comm_run(14_000.0), tmp_path)
    sb = d.devices[0].span_breakdown
    span = 9 * 14_000 + 8000.0
    # The host's 9 x 5992 µs (40.2%) edges out communication's 10 x 5000 (37.3%: neither
    # part alone, 22.4% queued and 14.9% alone, comes near): host-bound, a close call.
    comm = sb["exposed_comm"] + sb["comm_wait"]
    assert comm == pytest.approx(10 * 5000 / span * 100)
    assert sb["host"] == pytest.approx(9 * 5992 / span * 100)
    v = d.verdict
    assert (v.bottleneck, v.confidence) == ("host_bound", "low")
    assert "communication-bound fits almost as well" in v.summary
    assert f"for {10 * 2000 / span * 100:.0f}% of the span collectives ran" in v.summary


# -- what a stream waited on, from the Stream Wait Event records ---------------------------


def test_a_stream_wait_event_names_the_stream_waited_on(tmp_path: Path) -> None:
    b = KinetoBuilder()
    for i in range(10):
        t = 7000.0 * i
        b.kernel(SGEMM, t, 2000, stream=7, launch_ts=t - 10)
        # Stream 9 waits on an event of stream 20, which runs nothing in the trace.
        b.stream_wait(t + 5, stream=9, wait_on_stream=20)
        b.kernel(SGEMM, t + 6000, 1000, stream=9, launch_ts=t + 10)
    d = diagnose(b, tmp_path)
    span = 9 * 7000 + 7000.0
    assert d.devices[0].span_breakdown["dependency"] == pytest.approx(10 * 4000 / span * 100)
    top = d.stalls.iloc[0]
    assert top["cpu_work"] == (
        "queued work on stream 9 waiting on an event of stream 20 (work outside the trace)"
    )
    # The GPU-side wait record blocks no host: it is no blocking call.
    assert d.syncs.empty


def test_the_corpus_stream_wait_event_is_read(corpus: Path) -> None:
    from nbprof.analysis.host import stream_waits

    path = corpus / "hta__critical_path_cuda_event_sync_multi_stream__event_sync_trace.json.gz"
    if not path.is_file():
        pytest.skip("no multi-stream event trace")
    t = read_trace(path)
    # Its one cudaStreamWaitEvent: Kineto's record, on device 0's row 24 (the waiting
    # stream), says the event is stream 20's (the sgemm launched by correlation 27 ran
    # there); the host-side Event Syncs are not stream waits.
    w = stream_waits(t.runtime, "0")
    assert w[["stream", "wait_on_stream"]].values.tolist() == [[24, 20]]
    d = analyze(t)
    assert "Stream Wait Event" not in set(d.syncs["name"])


# -- the time after a sync: what the host does next ----------------------------------------

PRE = (
    ("tokenizers/implementations/base_tokenizer.py(20): encode_batch", "python_function"),
    ("torchvision/transforms/transforms.py(277): __call__", "python_function"),
    ("numpy/lib/npyio.py(400): load", "python_function"),
    ("preprocess", "user_annotation"),
)


def after_sync_run(name: str, cat: str) -> KinetoBuilder:
    """Cycles of 3000 µs: a 1000 µs GEMM the host waits for in a synchronize (t+5 to
    t+1000), then 1400 µs of ``name`` (t+1002 to t+2402), then Python until the next
    launch returns at t+2992."""
    b = KinetoBuilder()
    for i in range(10):
        t = 3000.0 * i
        b.kernel(SGEMM, t, 1000, launch_ts=t - 10)
        b.runtime("cudaStreamSynchronize", t + 5, 995)
        b.cpu_op(name, t + 1002, 1400, cat=cat)
    return b


@pytest.mark.parametrize(("name", "cat"), PRE)
def test_preprocessing_after_a_sync_is_input(tmp_path: Path, name: str, cat: str) -> None:
    d = diagnose(after_sync_run(name, cat), tmp_path)
    sb = d.devices[0].span_breakdown
    span = 9 * 3000 + 1000.0
    # Each 2000 µs gap: the sync had returned as it opened (no blocked time), then 1400 µs
    # of preprocessing (45%: input-bound), 2 + 590 µs of Python, 8 µs launch delay. Before,
    # the 995 µs after the sync were charged to it: sync-bound.
    assert sb["sync"] == 0.0
    assert sb["input"] == pytest.approx(9 * 1400 / span * 100)
    assert sb["host"] == pytest.approx(9 * 592 / span * 100)
    v = d.verdict
    assert (v.bottleneck, v.basis) == ("input_bound", "dataloader_gaps")
    assert "preprocessed inputs on the CPU" in v.summary and name in v.summary
    assert d.stalls.iloc[0]["cpu_work"] == f"input: {name}"
    f = {x.id: x for x in d.findings}["input_pipeline"]
    assert f.title == "The GPU waits for CPU preprocessing"


def test_python_work_after_a_sync_is_the_hosts(tmp_path: Path) -> None:
    # The same run, the 1400 µs in the model's own Python (a module's frame): host-bound,
    # and the frame is none the reader keeps.
    d = diagnose(after_sync_run("torch/nn/modules/module.py(1500): _call_impl", "python_function"),
                 tmp_path)  # fmt: skip
    sb = d.devices[0].span_breakdown
    span = 9 * 3000 + 1000.0
    assert sb["input"] == 0.0
    assert sb["host"] == pytest.approx(9 * 1992 / span * 100)
    assert d.verdict.bottleneck == "host_bound"
    # The 995 µs after each 995 µs block: where the block had drained the queue.
    drained = 9 * 995 / span * 100
    assert f"{drained:.0f}% of the span right after a blocking call returned" in d.verdict.summary


def test_the_reader_keeps_the_input_pipelines_python_frames(tmp_path: Path) -> None:
    b = KinetoBuilder()
    b.kernel(SGEMM, 0, 10)
    for i, (name, cat) in enumerate(PRE[:3]):
        b.cpu_op(name, 100.0 * i, 50, cat=cat)
    b.python_frame("torch/nn/modules/module.py(1500): _call_impl", 400, 50)
    b.python_frame("transformers/models/bert/modeling_bert.py(300): forward", 500, 50)
    b.python_frame("transformers/tokenization_utils_base.py(2800): __call__", 600, 50)
    names = set(read_trace(b.write(tmp_path)).annotations["name"])
    assert names == {n for n, _ in PRE[:3]} | {
        "transformers/tokenization_utils_base.py(2800): __call__"
    }


def test_the_reader_keeps_the_corpus_input_frames_and_no_other(corpus: Path) -> None:
    import gzip
    import json

    path = corpus / "tracelens__vllm_decode_full_graph_capture.json.gz"
    if not path.is_file():
        pytest.skip("no vLLM capture trace")
    # Its with_stack recording holds 119,876 Python frames; 12 of them run in numpy (the
    # model runner's cumsum/repeat over token positions): those are kept, no other frame.
    doc = json.loads(gzip.decompress(path.read_bytes()))
    frames = [e["name"] for e in doc["traceEvents"] if e.get("cat") == "python_function"]
    numpy_frames = sorted(n for n in frames if n.startswith("numpy/"))
    assert (len(frames), len(numpy_frames)) == (119_876, 12)
    names = read_trace(path).annotations["name"]
    kept = sorted(n for n in names if ".py(" in n)
    assert kept == numpy_frames


def test_dlrm_rank_time_after_the_all_to_all_sync_is_the_hosts(corpus: Path) -> None:
    path = corpus / "param__dlrm_kineto_8ranks"
    files = sorted(path.glob("*worker1_*.json.gz"))
    if not files:
        pytest.skip("no DLRM rank folder")
    d = analyze(read_trace(files[0]))
    m = d.devices[0]
    # Rank 1 blocks 6.56 ms in cudaStreamSynchronize (4372 to 10933 µs) while its first
    # all-to-all waits 7.6 ms for rank 7: the GPU runs the collective meanwhile. After it
    # returns the host runs the step's Python: once charged to the sync (20% of the span,
    # up to a block's length after each), now the host's (31%); the sync keeps only the
    # idle time while it blocked with nothing queued (under 1%).
    assert m.span_breakdown["sync"] < 1
    assert 28 < m.span_breakdown["host"] < 34
    assert d.verdict.bottleneck == "communication_bound"
    g = d.stalls
    assert not g["cpu_work"].str.startswith("after ").any()
