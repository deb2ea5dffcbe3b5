"""The report's note on stages that deviate from the paper's release: a tiny suite on disk, a
hand-made run of it written with the real sink and identity file, and the real `reb-ray report`,
`python -m analysis` and HTML report read back."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from analysis.report_html import write_html
from reb_ray.suite.load import load_suite
from reb_ray.sweep.identity import check_identity, task_digest
from reb_ray.testing.suite import off, write_task
from tests.analysis.runs import row, write_run

ROOT = Path(__file__).resolve().parents[2]


def _task(root: Path, task_id: str, cpu_deviation: str = "", gpu_deviation: str = "") -> Path:
    """Task `task_id` of suite `tiny`: C1 and C3 with the given deviations (none when empty), no C4."""

    def stage(command: str, deviation: str) -> str:
        return f'command = "{command}"' + (f'\ndeviation = "{deviation}"' if deviation else "")

    return write_task(root, "tiny", task_id, category="1_cpu", files={}, cpu=stage("python train.py", cpu_deviation),
                      single_gpu=stage("python train.py --cuda", gpu_deviation), multi_gpu=off("one GPU is enough"))


def _suite(root: Path) -> Path:
    """tasks root with suite `tiny`: t1 deviates on C1 only (its C3 follows the release), t2 on
    nothing, t3 on C3 but its spec changes after the sweep ran."""
    _task(root, "t1", cpu_deviation="writes its own config (the release ran a prepare step)")
    _task(root, "t2")
    _task(root, "t3", gpu_deviation="runs on one GPU of two")
    return root


def _run(tmp_path: Path) -> tuple[Path, Path]:
    tasks_root = _suite(tmp_path / "tasks")
    specs = {t.id: t for t in load_suite("tiny", tasks_root)}
    rows = [{**row("alpha", task_id, 1, "scored", c0_status="success", c0_missing=0, c0_total=1,
                   c1_status="success", c3_status="failure", c3_failure_category="runtime", c5_status="success"),
             "suite": "tiny"} for task_id in specs]
    run_dir = write_run(tmp_path / "run", rows)
    identity = {f"task.{task_id}": task_digest(spec) for task_id, spec in specs.items()}
    check_identity(run_dir, "s1", identity, allow_drift=False)
    _task(tasks_root, "t3", gpu_deviation="runs on one GPU of four")  # edited after the sweep: not the deviation that ran
    return run_dir, tasks_root


def _note(text: str) -> list[str]:
    """The deviations note of a terminal report: its head and indented lines."""
    match = re.search(r"^Stages that differ from the paper's release.*?(?=\n\n|\Z)", text, re.S | re.M)
    assert match, text
    return match.group(0).splitlines()


def test_report_lists_the_deviating_stages_of_the_run_and_the_unknown_specs(slow_process, tmp_path):
    run_dir, tasks_root = _run(tmp_path)
    cli = [sys.executable, "-c", "from reb_ray.cli import main; main()", "report", str(run_dir), "--tasks-root", str(tasks_root)]
    report = subprocess.run(cli, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert report.returncode == 0, report.stderr
    note = _note(report.stdout)
    assert "reb-ray tasks list --suite tiny" in note[0]
    assert note[1:] == ["  t1: C1", "  unknown for 1 task(s) whose spec is not under the tasks root or changed "
                        "since the sweep ran: t3"]

    analysis = subprocess.run([sys.executable, "-m", "analysis", str(run_dir), "--tasks-root", str(tasks_root)],
                              capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert analysis.returncode == 0 and _note(analysis.stdout) == note

    html = write_html(run_dir, tmp_path / "r.html", tasks_root=tasks_root, with_plots=False).read_text()
    items = re.search(r'<ul class="lines" data-section="deviations">(.*?)</ul>', html, re.S)
    assert items and re.findall(r"<li>(.*?)</li>", items.group(1))[0] == "t1: C1"

    # the bundled tasks/ has no suite `tiny`: every task is unknown, none is said to follow the release
    bundled = subprocess.run(cli[:-2], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert _note(bundled.stdout)[1:] == ["  unknown for 3 task(s) whose spec is not under the tasks root or changed "
                                         "since the sweep ran: t1, t2, t3"]
