"""Names are bytes: file names that are not UTF-8, names that drive a terminal, names that
take a backtracking regex forever.

* A file or folder name that is not valid UTF-8 reads, analyses, reports and compares,
  through the table cache, alone and as a job folder.
* Every message printing a file name or a trace string escapes control characters, bidi
  controls and undecodable bytes (one function: :func:`nbprof.errors.plain_text`): a
  newline in a file name cannot forge a second ``nbprof: error:`` line.
* No regex that sees trace text is worse than linear: 1 MB names built to make each
  pattern backtrack go through ``analyze``, ``report`` and ``compare`` within a hang guard
  many times what they take (quadratic patterns took hours on these).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import nbprof
from nbprof.cli import main
from nbprof.errors import plain_text
from tests.golden import KinetoBuilder
from tests.jobs import write_job

REPO = Path(__file__).resolve().parent.parent
needs_bytes_names = pytest.mark.skipif(
    sys.platform != "linux", reason="file names of arbitrary bytes are a Linux file system's"
)


def small_trace(kernel: str = "ampere_sgemm_128x64_nn") -> dict[str, Any]:
    b = KinetoBuilder()
    b.step(1, 0.0, 400.0)
    b.cpu_op("aten::mm", 10.0, 50.0)
    b.kernel(kernel, 30.0, 100.0, grid=(264, 1, 1))
    b.kernel("elementwise_kernel", 150.0, 30.0)
    return b.document()


def old(path: Path) -> Path:
    """Dated a minute back, so that the table cache keeps it (a file written within the
    last two seconds is not cached: its mtime could hide a rewrite)."""
    for p in [path, *(path.iterdir() if path.is_dir() else [])]:
        t = p.stat().st_mtime - 60
        os.utime(p, (t, t))
    return path


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


# -- names that are not UTF-8 ------------------------------------------------------------------


@pytest.fixture
def bytes_names(tmp_path: Path) -> dict[str, Path]:
    """A trace, a folder and a job folder whose names hold bytes that are not UTF-8."""
    root = os.fsencode(tmp_path)
    folder = Path(os.fsdecode(root + b"/caf\xe9-\xff"))
    folder.mkdir()
    trace = Path(os.fsdecode(os.fsencode(folder) + b"/t\xfe\x80.json"))
    trace.write_text(json.dumps(small_trace()))
    other = folder / "plain.json"
    other.write_text(json.dumps(small_trace("volta_sgemm_128x64_nn")))
    job = Path(os.fsdecode(root + b"/job\xff"))
    write_job(job)
    (job / "rank1.json").rename(Path(os.fsdecode(os.fsencode(job) + b"/rank\xe91.json")))
    for p in (trace, other, job):
        old(p)
    return {"trace": trace, "other": other, "job": job, "folder": folder}


@needs_bytes_names
@pytest.mark.parametrize("cached", [False, True], ids=["first-read", "from-cache"])
def test_analyze_a_file_whose_name_is_not_utf8(
    bytes_names: dict[str, Path], capsys: pytest.CaptureFixture[str], cached: bool
) -> None:
    trace = str(bytes_names["trace"])
    if cached:
        assert run(["analyze", "--json", trace], capsys)[0] == 0
    code, out, err = run(["analyze", "--json", trace], capsys)
    assert code == 0, err
    doc = json.loads(out)
    # JSON holds text: each byte that is not UTF-8 is written as Python writes it.
    assert doc["source"]["path"].endswith("caf\\xe9-\\xff/t\\xfe\\x80.json")
    code, out, err = run(["analyze", trace], capsys)
    assert code == 0, err
    assert "caf\\xe9-\\xff/t" in out.splitlines()[0]  # the header, escaped


@needs_bytes_names
def test_report_and_compare_with_names_that_are_not_utf8(
    bytes_names: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    trace, other = str(bytes_names["trace"]), str(bytes_names["other"])
    code, out, err = run(["report", trace], capsys)
    assert code == 0, err
    page = Path(os.fsdecode(os.fsencode(bytes_names["folder"]) + b"/t\xfe\x80.html"))
    html = page.read_bytes().decode("utf-8")  # valid UTF-8 throughout
    assert "t\\xfe\\x80.json" in html
    assert "t\\xfe\\x80.html" in out
    for argv in (
        ["compare", trace, other],
        ["compare", "--json", other, trace],
        ["compare", "-o", str(bytes_names["folder"] / "c\udcff.html"), trace, other],
    ):
        code, out, err = run(argv, capsys)
        assert code == 0, (argv, err)
    assert (bytes_names["folder"] / "c\udcff.html").read_bytes().decode("utf-8")


@needs_bytes_names
@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_job_folder_and_rank_files_whose_names_are_not_utf8(
    bytes_names: dict[str, Path], capsys: pytest.CaptureFixture[str], workers: str
) -> None:
    job = str(bytes_names["job"])
    for _ in range(2):  # the second time from the table cache
        code, out, err = run(["analyze", "--json", "--workers", workers, job], capsys)
        assert code == 0, err
        doc = json.loads(out)
        assert [r["rank"] for r in doc["job"]["ranks"]] == [0, 1, 2, 3]
        assert doc["job"]["missing"] == []
    code, out, err = run(["report", "--workers", workers, job], capsys)
    assert code == 0, err


@needs_bytes_names
def test_nbprof_load_of_names_that_are_not_utf8(bytes_names: dict[str, Path]) -> None:
    for _ in range(2):
        p = nbprof.load(bytes_names["trace"])
        assert p.diagnosis.devices
        assert p.to_html().encode("utf-8")
        job = nbprof.load(bytes_names["job"])
        assert isinstance(job, nbprof.Job) and len(job.diagnosis.ranks) == 4
        assert job.to_html().encode("utf-8")


# -- names that would drive the terminal ------------------------------------------------------

#: Control characters, a forged error line, a right-to-left override, an isolate, a zero
#: width joiner, a line separator, a byte that is not UTF-8.
HOSTILE = "a\nnbprof: error: forged\r\x1b[2J\x07\u202egnp.exe\u2066x\u2069\u200d\u2028\udcff"
RAW = ["\n", "\r", "\x1b", "\x07", "\u202e", "\u2066", "\u2069", "\u200d", "\u2028", "\udcff"]


def test_plain_text_escapes_what_a_terminal_would_act_on() -> None:
    shown = plain_text(HOSTILE)
    assert not any(c in shown for c in RAW)
    assert shown == (
        "a\\nnbprof: error: forged\\r\\x1b[2J\\x07\\u202egnp.exe\\u2066x\\u2069\\u200d\\u2028\\xff"
    )
    assert plain_text(shown) == shown  # escaping twice changes nothing
    assert plain_text("naïve Ünïcode ✓ 日本") == "naïve Ünïcode ✓ 日本"


def lines_of(text: str) -> list[str]:
    return text.split("\n")


@needs_bytes_names
def test_a_newline_in_a_file_name_cannot_forge_an_error_line(tmp_path: Path) -> None:
    bad = tmp_path / f"{HOSTILE}.json"
    bad.write_text("{not json")
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONIOENCODING": "utf-8:strict"}
    done = subprocess.run(
        [sys.executable, "-m", "nbprof", "analyze", os.fsencode(bad)],
        capture_output=True,
        env=env,
        timeout=120,
    )
    err = done.stderr.decode("utf-8")  # strict: nothing undecodable reached it
    assert done.returncode == 2
    assert err.count("\n") == 1 and err.startswith("nbprof: error: ")
    assert not any(c in err[:-1] for c in RAW)


@needs_bytes_names
def test_warnings_escape_the_names_they_print(tmp_path: Path) -> None:
    """A table cache that cannot be written is a warning naming the cache's file: its
    folder's name reaches stderr escaped, as the trace's own name does."""
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps(small_trace()))
    old(trace)
    blocked = tmp_path / f"cache{HOSTILE}"
    blocked.write_text("a file where the cache folder should be")
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONIOENCODING": "utf-8:strict",
           "NBPROF_TABLE_CACHE": os.fsdecode(os.fsencode(blocked) + b"/tables")}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "nbprof", "analyze", str(trace)],
        capture_output=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    err = done.stderr.decode("utf-8")
    assert "cache" in err  # the warning was said
    assert not any(line.startswith("nbprof: error") for line in err.splitlines())
    assert not any(c in err.replace("\n", "") for c in RAW if c != "\n")
    assert err.count("\n") == len([x for x in err.splitlines() if x])


def test_trace_strings_in_the_text_report_are_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "t.json"
    text = HOSTILE.replace("\udcff", "")  # JSON text holds no lone surrogate
    b = KinetoBuilder(device_name=f"GPU {text}")
    b.kernel(f"kernel {text}", 10.0, 100.0)
    b.cpu_op(f"op {text}", 0.0, 5.0)
    path.write_text(json.dumps(b.document()))
    code, out, err = run(["analyze", str(path)], capsys)
    assert code == 0, err
    assert not any(c in out.replace("\n", "") for c in RAW if c != "\n")
    assert "forged" in out and not any(x.startswith("nbprof: error") for x in out.splitlines())


def hostile_strings_trace(path: Path, scale: float = 1.0, backend: str = "nccl") -> Path:
    """A one-rank trace whose kernel, op, annotation, device and backend names are HOSTILE."""
    text = HOSTILE.replace("\udcff", "")  # JSON text holds no lone surrogate
    b = KinetoBuilder(device_name=f"GPU {text}")
    b.step(1, 0.0, 1000.0)
    b.kernel(f"kernel {text}", 10.0, 100.0 * scale)
    b.kernel(f"ncclDevKernel_AllReduce {text}", 200.0, 100.0 * scale)
    b.cpu_op(f"op {text}", 0.0, 5.0)
    b.cpu_op(f"range {text}", 0.0, 5.0, cat="user_annotation")
    doc = b.document()
    doc["distributedInfo"] = {"backend": backend + text, "rank": 0, "world_size": 1}
    path.write_text(json.dumps(doc))
    return path


def strings_in(doc: Any) -> list[str]:
    if isinstance(doc, str):
        return [doc]
    if isinstance(doc, dict):
        return [s for k, v in doc.items() for s in strings_in(k) + strings_in(v)]
    if isinstance(doc, list):
        return [s for v in doc for s in strings_in(v)]
    return []


def assert_terminal_safe(text: str) -> None:
    assert not any(c in text.replace("\n", "") for c in RAW if c != "\n")
    assert not any(x.startswith("nbprof: error: forged") for x in text.split("\n"))


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_trace_strings_in_a_comparison_are_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], as_json: bool
) -> None:
    """Its JSON too: bidirectional controls and line separators, which a JSON writer leaves
    raw, are written as JSON's own escapes, so the JSON reads back the same names."""
    before = hostile_strings_trace(tmp_path / "before.json")
    after = hostile_strings_trace(tmp_path / "after.json", scale=2.0)
    code, out, err = run(["compare", *(["--json"] if as_json else []), str(before), str(after)],
                         capsys)  # fmt: skip
    assert code == 0, err
    assert_terminal_safe(out)
    assert "forged" in out
    if as_json:
        assert any(HOSTILE.replace("\udcff", "") in v for v in strings_in(json.loads(out)))


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_trace_strings_in_a_job_report_are_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], as_json: bool
) -> None:
    """The backend's name in the job's heading was printed raw."""
    text = HOSTILE.replace("\udcff", "")
    info = {r: {"backend": "nccl" + text, "rank": r, "world_size": 2} for r in range(2)}
    write_job(tmp_path, world=2, info=info)
    code, out, err = run(["analyze", *(["--json"] if as_json else []), str(tmp_path)], capsys)
    assert code == 0, err
    assert_terminal_safe(out)
    assert "forged" in out
    if as_json:
        assert json.loads(out)["job"]["backend"] == "nccl" + text
    else:
        assert nbprof.load(str(tmp_path)).text().count("forged") == out.count("forged")
        assert_terminal_safe(nbprof.load(str(tmp_path)).text())


def test_trace_strings_in_a_single_traces_json_are_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = hostile_strings_trace(tmp_path / "t.json")
    code, out, err = run(["analyze", "--json", str(path)], capsys)
    assert code == 0, err
    assert_terminal_safe(out)
    assert json.loads(out)["devices"][0]["name"] == "GPU " + HOSTILE.replace("\udcff", "")


# -- names that make a regex backtrack ---------------------------------------------------------

MB = 1 << 20
#: Pieces that, repeated over a megabyte, made one of nbprof's patterns backtrack over the
#: rest of the name from every repeat: quadratic (each is a prefix of a pattern whose next
#: part never comes), plus the plain worst cases of any pattern (one character repeated).
PIECES = [
    " ", "\t", "a", "A", "1", "_", ":", "<", "(", ")", ">", '"', ",", "-1",
    "H100", "H200", "xmma_", "sm80_xmma", "sm1_xmma_", "Cijk_", "cutlass", "implicit_gemm",
    "bmm_", "cublas", "at::native::a_", "_stages_1", "sm_1", "0x", "void ", "a::",
    "Memcpy ", "ProfilerStep#1", "nccl:", "_MT1x1x1", "dataloader.py(1): ",
]  # fmt: skip


def hostile_name(piece: str, n: int = MB) -> str:
    return (piece * (n // len(piece) + 1))[:n]


def hostile_trace(folder: Path, name: str, scale: float = 1.0) -> Path:
    """One trace holding every hostile name where nbprof reads a name: kernels, CPU ops,
    annotations, runtime calls, the device's name, a copy's name and a collective's
    metadata."""
    b = KinetoBuilder(device_name=hostile_name("H100") + "NVX")
    b.step(1, 0.0, 100_000.0)
    t = 10.0
    for piece in PIECES:
        long = hostile_name(piece)
        b.cpu_op(long, t, 50.0 * scale, types=[long[:4096]])
        b.kernel(long, t + 10, 30.0 * scale)
        b.cpu_op(long, t, 10.0, cat="user_annotation")
        t += 200.0
    b.cpu_op("record_param_comms", t, 10.0)
    b.events[-1]["args"].update(
        {"Collective name": hostile_name("all_"), "dtype": hostile_name('"a'),
         "Process Group Name": hostile_name("-1,"), "Process Group Ranks": hostile_name("[")}
    )  # fmt: skip
    b.kernel(hostile_name("nccl"), t + 5, 40.0)
    b.events.append({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy " + hostile_name("Aa"),
                     "pid": 0, "tid": 7, "ts": b.base_us + t + 100, "dur": 5.0,
                     "args": {"device": 0, "stream": 7, "bytes": 100}})  # fmt: skip
    path = folder / name
    path.write_text(json.dumps(b.document()))
    return path


@pytest.fixture(scope="module")
def hostile_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("hostile-names")
    return hostile_trace(d, "before.json"), hostile_trace(d, "after.json", scale=2.0)


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_megabyte_names_through_analyze(
    hostile_pair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["analyze", "--no-cache", "--json", str(hostile_pair[0])], capsys)
    assert code == 0, err
    assert json.loads(out)["devices"][0]["kernel_count"] == len(PIECES) + 1
    code, out, err = run(["analyze", "--no-cache", str(hostile_pair[0])], capsys)
    assert code == 0, err


@pytest.mark.slow
@pytest.mark.timeout(120)  # 12 s here now; 198 s with "H100.*NVL" and "\s+>"
def test_megabyte_names_through_report(
    hostile_pair: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_html = tmp_path / "r.html"
    code, _, err = run(["report", "--no-cache", str(hostile_pair[0]), "-o", str(out_html)], capsys)
    assert code == 0, err
    assert out_html.stat().st_size > MB


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_megabyte_names_through_compare(
    hostile_pair: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before, after = (str(p) for p in hostile_pair)
    code, out, err = run(["compare", "--no-cache", "--json", before, after], capsys)
    assert code == 0, err
    assert json.loads(out)["schema"] == "nbprof.compare/1"
    code, _, err = run(["compare", "--no-cache", "-o", str(tmp_path / "c.html"), before, after],
                       capsys)  # fmt: skip
    assert code == 0, err


def test_the_rewritten_patterns_match_what_they_matched() -> None:
    """The linear forms give the answers the backtracking ones gave, on names where both
    finish: real kernel names and the edge cases the rewrites had to keep."""
    from nbprof.analysis import names, peaks
    from nbprof.analysis.classes import _MEMORY_FIRST
    from nbprof.analysis.tensorcores import _F32_XMMA, _MFMA, _NOT_TC, _TC_NVIDIA

    tc = "|".join((
        r"[hsid]884", r"hmma", r"[hsid]1688", r"[hsid]16816", r"i8816", r"imma", r"tensorop",
        r"sm(?:75|80|86|87|89|90a?|100a?|120)_xmma.*(?:tf32|bf16|f16|fp16|e4m3|e5m2|i8|int8)",
        r"xmma_.*(?:tf32|bf16|f16|fp16|e4m3|e5m2|int8)", r"wgmma", r"gmma", r"nvjet",
        r"tcgen05", r"bmm_\w*e[45]m[23]", r"fmha", r"flash_(?:fwd|bwd)", r"flash::",
        r"cutlass.*(?:_tf32|_bf16|_f16|_s8|_e4m3|h16816|s16816|tensor)",
        r"implicit_?gemm.*(?:tensor|hmma|xmma|1688|16816|884)", r"\bsm9\d_",
    ))  # fmt: skip
    not_tc = (
        r"simt|sgemm|gemv|gemmSN|nvjet_sss|"
        r"gemmk1|sm\d+_xmma_\w*_f32f32_f32f32_f32|xmma_\w*_f32f32_f32(?!.*tf32)"
    )
    mfma = r"mfma|_MT\d+x\d+x\d+_MI|Cijk_.*_MI\d+"
    memory_first = (
        r"^triton_(?:poi|red|per)_|"
        r"at::native::(?:\w+_)?elementwise_kernel|at::native::reduce_kernel|"
        r"splitKreduce|cublasLt::epilogue|cublas\w*::(?:scal|axpy|copy|swap)"
    )
    cases: list[tuple[Any, str, list[str]]] = [
        (
            _TC_NVIDIA.search,
            tc,
            [
                "sm80_xmma_gemm_bf16bf16_bf16f32_f32_nn_n",
                "sm90_xmma_gemm_f32f32_tf32f32",
                "xmma_fprop_f16",
                "sm80_xmma_x_sm80_xmma_f16",
                "cutlass_80_tensorop_s1688gemm",
                "cutlass_x_cutlass16816",
                "cutlass16816",
                "cutlass_simt_sgemm",
                "bmm_x_bmm_E4m3",
                "implicit_gemm_x_implicitgemm_hmma",
                "void cutlass::Kernel<cutlass_80_wmma_f16>",
                "sm80_xmma\nf16",
                "xmma_\nf16",
                "xmma_x_xmma_",
                "bmm_bmm_e4m2",
            ],
        ),
        (
            lambda t: _NOT_TC.search(t) or _F32_XMMA.search(t),
            not_tc,
            [
                "sm80_xmma_gemm_f32f32_f32f32_f32_nn",
                "xmma_gemm_f32f32_f32_tn",
                "xmma_x_f32f32_f32",
                "xmma_x_xmma_f32f32_f32",
                "xmma_a_f32f32_f32 tf32",
                "xmma_a_f32f32_f32\ntf32",
                "sm1_xmma_sm2_xmma_f32f32_f32f32_f32",
                "sm86_xmma_a_f32f32_f32f32_f32",
                "xmma__f32f32_f32_tf32_f32f32_f32",
                "cutlass_simt",
                "xmma_tf32_f32f32_f32",
                "xmma_f32f32_f32",
                "tf32 xmma__f32f32_f32",
                "xmma__f32f32_f32 xmma_ tf32",
                "a\nxmma__f32f32_f32",
                "xmma_\n_f32f32_f32",
                "xmma__f32f32_f32tf32",
                "XMMA__F32F32_F32",
                "xmma__f32f32_f32 x xmma__f32f32_f32 tf32 xmma_b_f32f32_f32",
            ],
        ),
        (
            _MFMA.search,
            mfma,
            [
                "Cijk_Ailk_Bljk_HHS_BH_MT64x64x16_MI32x32x8",
                "Cijk_MI16",
                "Cijk_x_Cijk_MI16",
                "Cijk_a_MI",
                "Cijk_\n_MI1",
            ],
        ),
        (
            _MEMORY_FIRST.search,
            memory_first,
            [
                "cublasLt::epilogue",
                "cublas_x::scal",
                "cublascublas::copy",
                "cublas::gemm",
                "xcublas_axpy::swap",
                "cublas x::scal",
                "triton_poi_fused",
                "at::native::vectorized_elementwise_kernel",
            ],
        ),
        (
            peaks._NVL.search,
            r"H100.*NVL|H200.*NVL|GH200",
            [
                "NVIDIA H100 NVL",
                "NVIDIA H100 PCIE",
                "H200 NVL",
                "NVIDIA GH200 480GB",
                "H100\nNVL",
                "NVL H100",
                "H100 H100 NVL",
                "H100NVL",
            ],
        ),
    ]
    for now, was, texts in cases:
        old_rx = re.compile(was, re.IGNORECASE if now != peaks._NVL.search else 0)
        for text in texts:
            assert bool(now(text)) == bool(old_rx.search(text)), (was[:40], text)
    for text in ["a  >", " >", "a <b  , c >", "x\n>", "   ", "a>b", "< >  >", "\t \n>"]:
        assert names._SPACE_BEFORE_CLOSE.sub(">", text) == re.sub(r"\s+>", ">", text)
