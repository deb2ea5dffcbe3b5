"""The summary split by hardware: a synthetic run (real Parquet through the real sink) whose
trials ran on two kinds of GPU node; every cell below is derived by hand from the letters."""

from __future__ import annotations

import re

from analysis.hardware import UNKNOWN, hardware_kind, split_by_hardware
from analysis.summary import format_by_hardware
from analysis.summary import HEADERS, LEGEND, print_summary
from reb_ray.results.read import read_trials
from reb_ray.testing import synthetic

H100 = {"gpu_model": "NVIDIA H100 80GB HBM3", "gpu_count": 2, "cuda_driver_version": "12.4",
        "gpu_driver_version": "550.54.15", "cpu_model": "Xeon A"}
A100 = {"gpu_model": "NVIDIA A100-SXM4-40GB", "gpu_count": 1, "cuda_driver_version": "12.2",
        "gpu_driver_version": "535.104.05", "cpu_model": "Xeon B"}


def _on(node: dict, attempt: tuple[dict, list[dict]]) -> tuple[dict, list[dict]]:
    row, stages = attempt
    return {**row, **node}, stages


def _run(tmp_path, extra=()):
    attempts = [
        _on(H100, synthetic.trial("a", "t1", 0, "SSSS")),
        _on(H100, synthetic.trial("a", "t2", 0, "SSFS")),
        # a/t1/1: its first attempt failed for infra on the H100 node, the scored one ran on the A100 node.
        _on(H100, synthetic.trial("a", "t1", 1, "FFFF", status="infra_error")),
        _on(A100, synthetic.trial("a", "t1", 1, "SSFH", attempt=2)),
        _on(A100, synthetic.trial("a", "t2", 1, "FSF-")),
        _on(A100, synthetic.trial("b", "t1", 0, "FSFH")),
        *extra,
    ]
    return synthetic.write(tmp_path, attempts)


def _tables(text: str) -> dict[str, dict[str, dict[str, str]]]:
    """{hardware kind: {agent: {header: cell}}} of the split's blocks."""
    out = {}
    for block in text.split("\n\nhardware: ")[1:]:
        lines = block.split("\n\n" + LEGEND)[0].splitlines()
        kind = re.sub(r" \(\d+ trials?\)$", "", lines[0])
        assert lines[1].startswith("sweep ") and re.split(r"\s{2,}", lines[2].strip()) == list(HEADERS)
        out[kind] = {cells[0]: dict(zip(HEADERS, cells)) for cells in (re.split(r"\s{2,}", l.strip()) for l in lines[4:])}
    return out


def test_kind_labels():
    assert hardware_kind(H100) == "2x NVIDIA H100 80GB HBM3, CUDA 12.4"
    assert hardware_kind({"gpu_count": 0, "gpu_model": None}) == "no GPU"
    assert hardware_kind({}) == UNKNOWN
    assert hardware_kind({"gpu_model": "NVIDIA L4", "gpu_count": None}) == "NVIDIA L4"


def test_a_run_on_two_kinds_is_summarized_per_kind(tmp_path, capsys):
    trials = read_trials(_run(tmp_path))
    parts = split_by_hardware(trials)
    assert list(parts) == ["2x NVIDIA H100 80GB HBM3, CUDA 12.4", "1x NVIDIA A100-SXM4-40GB, CUDA 12.2"]
    # The infra attempt goes with its trial's current (A100) attempt.
    assert parts["1x NVIDIA A100-SXM4-40GB, CUDA 12.2"].num_rows == 4 and parts["2x NVIDIA H100 80GB HBM3, CUDA 12.4"].num_rows == 2
    text = print_summary(tmp_path)
    assert text.endswith(LEGEND) and text.count(LEGEND) == 1
    assert "by hardware: this run mixes 2 kinds of node (GPU model, count, CUDA driver)" in text
    assert "hardware: 2x NVIDIA H100 80GB HBM3, CUDA 12.4 (2 trials)" in text
    assert "hardware: 1x NVIDIA A100-SXM4-40GB, CUDA 12.2 (3 trials)" in text
    tables = _tables(text)
    h100, a100 = tables["2x NVIDIA H100 80GB HBM3, CUDA 12.4"], tables["1x NVIDIA A100-SXM4-40GB, CUDA 12.2"]
    assert list(h100) == ["a"] and list(a100) == ["a", "b"]
    pick = ("trials", "C1", "C2", "C3", "C4", "infra")
    assert [h100["a"][k] for k in pick] == ["2", "2/2", "2/2", "1/2", "2/2", "0"]
    assert [a100["a"][k] for k in pick] == ["2", "1/2", "2/2", "0/2", "0/1 hw1", "1"]
    assert [a100["b"][k] for k in pick] == ["1", "0/1", "1/1", "0/1", "0/1 hw1", "0"]
    # The whole run's table comes first and is unchanged: a's four trials together.
    whole = text.split("\n\n")[0].splitlines()
    a_cells = re.split(r"\s{2,}", next(l for l in whole if l.startswith("a ")).strip())
    assert a_cells[1] == "4" and a_cells[HEADERS.index("C1")] == "3/4"


def test_one_kind_prints_no_split_and_unknown_is_a_kind_of_its_own(tmp_path):
    one = read_trials(synthetic.write(tmp_path / "one", [_on(H100, synthetic.trial("a", "t1", 0, "SSSS")),
                                                          _on(H100, synthetic.trial("b", "t1", 0, "FSFF"))]))
    assert format_by_hardware(one) == "" and "hardware:" not in print_summary(tmp_path / "one")
    mixed = read_trials(synthetic.write(tmp_path / "mixed", [_on(H100, synthetic.trial("a", "t1", 0, "SSSS")),
                                                              synthetic.trial("a", "t2", 0, "FSFF")]))
    assert list(split_by_hardware(mixed)) == ["2x NVIDIA H100 80GB HBM3, CUDA 12.4", UNKNOWN]
    assert f"hardware: {UNKNOWN} (1 trial)" in format_by_hardware(mixed)


def test_reb_ray_report_prints_the_split(tmp_path):
    from typer.testing import CliRunner

    from reb_ray.cli import app

    out = CliRunner().invoke(app, ["report", str(_run(tmp_path))])
    assert out.exit_code == 0, out.output
    assert "hardware: 1x NVIDIA A100-SXM4-40GB, CUDA 12.2 (3 trials)" in out.output
    assert out.output.index("hardware: 2x NVIDIA H100") < out.output.index(LEGEND) < out.output.index("analysis of sweep")
