"""The tuning report: the page and its PNGs from plain data, its table's numbers, and the page that a real tuning
run leaves (through the CLI, and when the run is interrupted)."""

import dataclasses
import math
import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import tilegrad
from tilegrad import cli
from tilegrad.tune.model import model_tasks
from tilegrad.tune.report import (
    BEST_VS_MEASURED,
    BEST_VS_TIME,
    ROOFLINE,
    RunSummary,
    TaskRow,
    WriteReport,
    write_report,
)
from tilegrad.tune.search.evolutionary import EvolutionaryPolicy
from tilegrad.tune.tuning_run import Callback

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@dataclasses.dataclass(frozen=True)
class Peaks:
    """Stands in for `machine.MachinePeaks`."""

    cpu: str = "Test CPU 9000"
    isa: str = "avx2"
    threads: int = 2
    fma_gflops: float = 100.0
    bandwidth_gbs: float = 20.0


def _rows_of(page: str) -> list[list[str]]:
    """The cells of the tasks table, row by row."""
    table = page.split('<table class="tasks">')[1].split("</table>")[0]
    return [re.findall(r"<td>(.*?)</td>", row) for row in re.findall(r"<tr>(.*?)</tr>", table)][1:]


def _assert_page(directory):
    page = (directory / "index.html").read_text()
    for png in (BEST_VS_TIME, BEST_VS_MEASURED, ROOFLINE):
        assert (directory / png).read_bytes()[:8] == PNG_MAGIC
        assert f'src="{png}"' in page
    return page


def test_report_from_plain_data(tmp_path):
    rows = [TaskRow("matmul+relu[64x64]", 2, 2_000_000_000, 4_000_000, untuned_s=0.4, tuned_s=0.1, trials=12),
            TaskRow("(winograd) conv2d[1x8x8x8]", 1, 50_000_000, 100_000, untuned_s=0.002, tuned_s=0.001, trials=3,
                    counted=False),
            TaskRow("transpose<&>[8x8]", 1, 0, 512, untuned_s=0.001, tuned_s=1e-5, trials=0),
            TaskRow("gather[8]", 1, 0, 64, untuned_s=math.inf, tuned_s=math.inf, trials=0)]
    history = [(1.5, 0, 0.802), (3.0, 6, 0.5), (4.5, 12, math.inf), (6.0, 15, 0.202)]
    summary = RunSummary("tiny.onnx", "gradient", "15 candidates", "2026-11-25 23:59 UTC", history)
    page_path = write_report(tmp_path / "out", summary, rows, Peaks())
    assert page_path == tmp_path / "out" / "index.html"
    page = _assert_page(tmp_path / "out")
    assert _rows_of(page) == [
        # 2 GFLOP in 0.1 s: 20 GFLOP/s, 20% of the 100 GFLOP/s peak
        ["0", "matmul+relu[64x64]", "2", "2000.000", "400.000", "100.000", "4.00x", "20.00", "20.0%", "12"],
        ["1", "(winograd) conv2d[1x8x8x8]", "1", "50.000", "2.000", "1.000", "2.00x", "50.00", "50.0%", "3"],
        ["2", "transpose&lt;&amp;&gt;[8x8]", "1", "0.000", "1.000", "0.010", "100.00x", "0.00", "0.0%", "0"],
        ["3", "gather[8]", "1", "0.000", "failed", "failed", "n/a", "n/a", "n/a", "0"]]
    for fact in ("tiny.onnx", "Test CPU 9000", "avx2", "gradient", "15 candidates", "2026-11-25 23:59 UTC",
                 "100.0 GFLOP/s FMA, 20.0 GB/s", "802.000 ms -&gt; 202.000 ms after 15 candidates in 6 s",
                 "untuned failed, tuned failed (ms)"):
        assert fact in page
    assert rows[0].intensity == 500.0
    write_report(tmp_path / "working", summary, rows[:3], Peaks())
    # weight x latency over the counted tasks: 2 x 400 + 1 ms untuned, 2 x 100 + 0.01 ms tuned
    assert "untuned 801.000, tuned 200.010 (ms)" in (tmp_path / "working" / "index.html").read_text()


def _matmul_relu(path, n=64):
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((n, n)).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Relu", ["y"], ["z"])], "matmul_relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, n])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [n, n])], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_cli_tune_writes_the_report(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cli.tune, "_machine_peaks", Peaks)
    model = _matmul_relu(tmp_path / "mm.onnx")
    out = tmp_path / "report"
    assert cli.main(["tune", str(model), "--db", str(tmp_path / "t.db"), "--trials", "8", "--measure-per-round",
                     "4", "--policy", "evolutionary", "--report", str(out)]) == 0
    assert f"report in {out / 'index.html'}" in capsys.readouterr().out
    page = _assert_page(out)
    (task,) = model_tasks(str(model))
    (row,) = _rows_of(page)
    assert row[1] == task.name and "matmul+relu" in task.name
    assert row[3] == f"{task.flops / 1e6:.3f}" and task.flops >= 2 * 64**3 and row[-1] == "8"
    assert "mm.onnx" in page and "evolutionary" in page and "8 candidates" in page
    ort_ms = re.search(r"<th>onnxruntime</th><td>([0-9.]+) ms in the same rounds: compile\(db=\) runs "
                       r"([0-9.]+)x its speed \(untuned ([0-9.]+)x\)", page)
    assert ort_ms and float(ort_ms[1]) > 0 and float(ort_ms[2]) > 0 and float(ort_ms[3]) > 0


class _Interrupt(Callback):
    def measured(self, run, st, batch, results):
        raise KeyboardInterrupt


def test_an_interrupted_run_leaves_a_page(tmp_path):
    report = WriteReport(tmp_path / "report", Peaks(), model="mm.onnx")
    policy = EvolutionaryPolicy(population=16, generations=1, measure_per_round=4)
    with pytest.raises(KeyboardInterrupt):
        tilegrad.tune(str(_matmul_relu(tmp_path / "mm.onnx")), db=tmp_path / "t.db", policy=policy, trials=100,
                      algorithms=False, progress=False, callbacks=[report, _Interrupt()])
    (row,) = _rows_of(_assert_page(tmp_path / "report"))
    assert row[-1] == "4"  # the one round measured before the interruption


def test_the_page_shows_the_whole_models_measured_against_the_estimates(tmp_path):
    rows = [TaskRow("matmul[64x64]", 2, 2_000_000, 40_000, untuned_s=0.004, tuned_s=0.002, trials=6)]
    summary = RunSummary("tiny.onnx", "gradient", "60 s", "2026-12-02 08:00 UTC", [(1.0, 0, 0.008)],
                         measured={"untuned": 0.0100, "default": 0.0050}, chosen="default")
    page = write_report(tmp_path, summary, rows, Peaks()).read_text()
    assert "untuned 10.000, default 5.000 (ms) -&gt; default built by compile(db=)" in page
    assert "estimate / measured (untuned)</th><td>0.80" in page and "estimate / measured (default)</th><td>0.80" in page
    assert "onnxruntime" not in page


def test_the_page_sets_the_model_beside_other_runtimes_timed_in_the_same_rounds(tmp_path):
    rows = [TaskRow("matmul[64x64]", 2, 2_000_000, 40_000, untuned_s=0.004, tuned_s=0.002, trials=6)]
    summary = RunSummary("tiny.onnx", "gradient", "60 s", "2026-12-02 08:00 UTC", [(1.0, 0, 0.008)],
                         measured={"untuned": 0.0100, "default": 0.0050}, chosen="default",
                         peers={"onnxruntime": (0.0080, ""), "other": (None, "unavailable: not installed")})
    page = write_report(tmp_path, summary, rows, Peaks()).read_text()
    assert ("<th>onnxruntime</th><td>8.000 ms in the same rounds: compile(db=) runs 1.60x its speed "
            "(untuned 0.80x)</td>") in page
    assert "<th>other</th><td>unavailable: not installed</td>" in page
