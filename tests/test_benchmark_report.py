"""benchmarks/report.py on the committed H100 JSON: the generated tables of
benchmarks/README.md have their rows and the page holds what it generates.

Reads JSON only: nothing is measured, TensorFlow is not needed.
"""

import importlib.util
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGE = ROOT / "benchmarks" / "README.md"


@pytest.fixture(scope="module")
def report():
    benchmarks = str(ROOT / "benchmarks")
    sys.path.insert(0, benchmarks)  # report.py imports _common as the scripts do
    try:
        path = ROOT / "benchmarks" / "report.py"
        spec = importlib.util.spec_from_file_location("benchmark_report", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(benchmarks)


def rows(table):
    return [line for line in table.splitlines()[2:] if line.startswith("|")]


def test_every_generated_table_has_one_row_per_measured_figure(report):
    expected = {"gpu_matmul": 10, "gpu_bert": 10, "gpu_bert_batch256": 2, "gpu_generation": 6}
    assert set(report.SECTIONS) == set(expected)
    for name, count in expected.items():
        table = report.section(name)
        header = table.splitlines()[0]
        assert header.endswith("| machine | versions | commit | command |"), name
        assert len(rows(table)) == count, name
        for row in rows(table):
            assert row.count(" | ") == header.count(" | "), row
            assert "NVIDIA H100 80GB HBM3; 16-core Intel Xeon Processor host" in row
            assert "TF 2.21.0, Keras 3.15.1" in row


def test_rows_carry_the_json_figures_and_the_commands_beside_them(report):
    bert = report.section("gpu_bert")
    assert "| bert_tiny | float32 | no | 334,787 (0.6%) | 218,113 (0.4%) | 1.53 | 0.88 |" in bert
    assert ("`bert_benchmark.py --presets bert_tiny bert_small --policies float32 mixed_bfloat16"
            " --jit 1 --rounds 3 --steps 20`") in bert
    base = report.section("gpu_bert_batch256")
    # MFU against machine_gpu.json's bfloat16 peak (701 TFLOP/s), not the run's own.
    assert ("| bert_base | mixed_bfloat16 | yes | 418,636 (32.6%) | 372,628 (29.0%) | 1.12 | 1.04 |"
            in base)
    generation = report.section("gpu_generation")
    assert ("| UniLM vs GPT-2, greedy, with XLA | 0.21 ms/step | keras-hub GPT-2 0.24 ms/step"
            " | 1.16 |") in generation
    assert "| cached 2,222 tok/s | recomputed 1,998 tok/s | 1.11 |" in generation
    matmul = report.section("gpu_matmul")
    assert "| bfloat16 | (8192x8192)@(8192x8192) | 644.6 | 701.3 | 1.02 |" in matmul
    assert "`machine_benchmark.py --sizes 2048 4096 8192 --repeats 5`" in matmul


def test_the_page_holds_what_report_generates(report):
    text = PAGE.read_text(encoding="utf-8")
    names = [found.group(2) for found in report.BLOCK.finditer(text)]
    assert sorted(names) == sorted(report.SECTIONS)
    if report.commit_of(ROOT / "benchmarks" / "gpu_h100" / "bert_gpu_jit.json") is None:
        pytest.skip("no full git history: the commit column cannot be regenerated here")
    assert report.update(text) == text, "python benchmarks/report.py --update benchmarks/README.md"
    command = [sys.executable, str(ROOT / "benchmarks" / "report.py"), "--check", str(PAGE)]
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_stale_table_is_rewritten_and_an_unknown_name_refused(report):
    stale = "<!-- report:begin gpu_generation -->\nold\n<!-- report:end gpu_generation -->\n"
    assert report.update(stale) == ("<!-- report:begin gpu_generation -->\n"
                                    + report.section("gpu_generation")
                                    + "<!-- report:end gpu_generation -->\n")
    with pytest.raises(KeyError, match="gpu_nothing"):
        report.update("<!-- report:begin gpu_nothing -->\n<!-- report:end gpu_nothing -->\n")


def test_the_summary_still_reads_the_gpu_directory(report):
    loaded = report.load(str(ROOT / "benchmarks" / "gpu_h100"))
    assert [name for name, _, error in loaded if error] == []
    text = report.summary(loaded, "benchmarks/gpu_h100", draw=False)
    assert "## machine_gpu" in text and "## bert_gpu_jit" in text
