"""Reference environments without Docker: the recipe replay's grammar, the choice of a task's
reference, reference.toml written and read back, and the health verdicts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reb_ray.agents.reference import _PLAIN_VENV, parse_dockerfile, parse_env
from reb_ray.environment.export import dockerfile, plan
from reb_ray.errors import RebRayError
from reb_ray.sweep.references import Candidate, pick_references, read_reference, reference_toml, store_reference
from reb_ray.sweep.task_health import health_table, judge

MANIFEST = {
    "trial_id": "heuristic/numpy-trainer/0", "attempt": 1, "sweep_id": "s", "repo_dir": "/work/repo",
    "report_path": "/opt/scimlopsbench/report.json", "image": {"tag": "reb-ray/sandbox:minimal-x", "id": "sha256:1"},
    "interpreter": {"path": "/opt/envs/heuristic/bin/python", "prefix": "/opt/envs/heuristic", "venv": True,
                    "base_prefix": "/usr", "version": "3.11.2", "pyvenv_cfg": "include-system-site-packages = false"},
    "distributions": [{"name": "numpy", "version": "2.1.0", "installer": "pip", "source": {"kind": "index"},
                       "location": "/opt/envs/heuristic/lib/python3.11/site-packages",
                       "wheel": {"sha256": "ab" * 32, "file": "numpy-2.1.0-cp311-none.whl"}}],
    "filesystem": {"groups": [{"path": "/opt/envs/heuristic", "files": 10, "bytes": 100}]},
    "system_packages": {"added": {}, "changed": {}},
}


def test_the_replay_reads_the_dockerfile_an_export_writes():
    text = dockerfile(MANIFEST, plan(MANIFEST), has_wheels=False, report_name="report.json")
    steps = parse_dockerfile(text)
    words = [w for w, _ in steps]
    assert words[0] == "FROM" and "WORKDIR" == words[-1]
    runs = [a for w, a in steps if w == "RUN"]
    assert runs[0] == "/usr/bin/python3.11 -m venv /opt/envs/heuristic"  # the environment at the same prefix
    assert "--require-hashes" in runs[1] and "--find-links" not in runs[1]  # no wheels: a reference holds none
    assert ("COPY", "repo /work/repo") in steps
    env = parse_env(next(a for w, a in steps if w == "ENV"))
    assert env == {"PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}


def test_the_replay_refuses_what_it_does_not_know():
    assert parse_dockerfile("RUN a \\\n  && b\n# c\n") == [("RUN", "a    && b")]
    with pytest.raises(ValueError, match="line 2: ADD is not an instruction"):
        parse_dockerfile("FROM x\nADD http://x /y\n")
    with pytest.raises(ValueError, match="not KEY=VALUE"):
        parse_env("JUSTNAME")
    assert parse_env('A="a b" B=c') == {"A": "a b", "B": "c"}


def test_only_a_plain_venv_step_is_replayed_without_ensurepip():
    """The export's first RUN is made without ensurepip's byte-compiling (the same venv); a venv
    step with any option or other command is replayed as written."""
    text = dockerfile(MANIFEST, plan(MANIFEST), has_wheels=False, report_name="report.json")
    runs = [a for w, a in parse_dockerfile(text) if w == "RUN"]
    assert [bool(_PLAIN_VENV.match(r)) for r in runs] == [True] + [False] * (len(runs) - 1)
    assert _PLAIN_VENV.match(runs[0]).groups() == ("/usr/bin/python3.11", "/opt/envs/heuristic")
    for written in ("/usr/bin/python3 -m venv --system-site-packages /opt/v", "python3 -m venv /opt/v",
                    "/usr/bin/python3 -m venv /opt/v && touch /x", "/usr/bin/python3 -m venv '/opt/a b'"):
        assert not _PLAIN_VENV.match(written), written


def _row(trial: str, task: str = "numpy-trainer", size: int | None = 1000, **stages) -> dict:
    row = {"sweep_id": "s", "trial_id": trial, "attempt": 1, "task_id": task, "suite": "demo", "agent": "heuristic",
           "node": "vm", "env_size_bytes": size, "gpu_model": None, "cpu_count": 2, "kernel": "6.1"}
    for stage in ("c0", "c1", "c2", "c3", "c4", "c5"):
        row[f"{stage}_status"] = stages.get(stage, "skipped")
    return row


def _output(tmp_path: Path, rows: list[dict], reproducible: dict[str, bool | None]) -> Path:
    """An output directory holding `rows` as trials and one verification per trial."""
    from reb_ray.results.parquet_sink import ParquetSink

    out = tmp_path / "out"
    sink = ParquetSink(out)
    sink.write(rows, [])
    sink.close()
    lines = []
    for row in rows:
        export = tmp_path / "exports" / row["trial_id"].replace("/", "__")
        export.mkdir(parents=True)
        (export / "manifest.json").write_text(json.dumps(MANIFEST))
        (export / "report.json").write_text('{"python_path": "/opt/envs/heuristic/bin/python"}')
        (export / "requirements.lock").write_text("numpy==2.1.0 --hash=sha256:" + "ab" * 32 + "\n")
        lines.append(json.dumps({"sweep_id": "s", "trial_id": row["trial_id"], "attempt": 1, "export": str(export),
                                 "reproducible": reproducible[row["trial_id"]], "build_s": 12.5,
                                 "rebuilt_stages": {"c0": row["c0_status"], "c1": row["c1_status"]}}))
    (out / "environments").mkdir()
    (out / "environments" / "verifications.jsonl").write_text("\n".join(lines) + "\nnot json\n")
    return out


def test_the_reference_is_the_reproducible_one_reaching_the_highest_stage_then_the_smallest(tmp_path):
    rows = [_row("a/numpy-trainer/0", c0="success", c1="success", size=5000),
            _row("b/numpy-trainer/0", c0="success", c1="success", size=3000),
            _row("c/numpy-trainer/0", c0="success", c1="success", c3="success", size=9000),  # not reproducible
            _row("d/numpy-trainer/0", c0="success", size=10),  # smallest, but a lower stage
            _row("e/torch-tiny/0", task="torch-tiny", c0="success", c1="success", size=None),
            _row("f/torch-tiny/0", task="torch-tiny", c0="success", c1="failure", size=1)]
    out = _output(tmp_path, rows, {"a/numpy-trainer/0": True, "b/numpy-trainer/0": True, "c/numpy-trainer/0": False,
                                   "d/numpy-trainer/0": True, "e/torch-tiny/0": True, "f/torch-tiny/0": True})
    chosen = pick_references(out, "demo")
    assert {k: v.row["trial_id"] for k, v in chosen.items()} == {"numpy-trainer": "b/numpy-trainer/0",
                                                                  "torch-tiny": "e/torch-tiny/0"}
    assert pick_references(out, "researchenvbench") == {}


def test_a_stored_reference_is_small_text_and_reads_back(tmp_path):
    row = _row("b/numpy-trainer/0", c0="success", c1="success", c2="not_run", c5="success")
    row["c2_failure_category"] = "insufficient_hardware"
    out = _output(tmp_path, [row], {"b/numpy-trainer/0": True})
    cand = pick_references(out)["numpy-trainer"]
    dest = store_reference(cand, tmp_path / "task")
    assert sorted(p.name for p in dest.iterdir()) == ["Dockerfile", "README.md", "manifest.json", "reference.toml",
                                                      "report.json", "requirements.lock"]
    assert "wheels" not in (dest / "Dockerfile").read_text()
    ref = read_reference(tmp_path / "task")
    assert ref["passed"] == ["c0", "c1", "c5"] and ref["task"] == "numpy-trainer"
    assert ref["stages"]["c2"] == {"status": "not_run", "failure_category": "insufficient_hardware"}
    assert ref["hardware"] == {"cpu_count": 2, "kernel": "6.1"}  # unknown columns are left out, never 0
    assert "# gpu_model: unknown" in (dest / "reference.toml").read_text()
    assert ref["verification"]["build_s"] == 12.5 and ref["source"]["trial_id"] == "b/numpy-trainer/0"
    assert read_reference(tmp_path / "elsewhere") is None
    (dest / "reference.toml").write_text('passed = ["c9"]\n')
    with pytest.raises(RebRayError, match="reference.toml: passed = \\['c9'\\]"):
        read_reference(tmp_path / "task")


def test_no_verifications_is_one_clear_line(tmp_path):
    with pytest.raises(RebRayError, match="no verifications"):
        pick_references(tmp_path)


REF = {"passed": ["c0", "c1", "c3", "c5"]}


def _trial(**stages) -> dict:
    row = {"status": "scored", "failure_reason": stages.pop("reason", None)}
    for stage in ("c0", "c1", "c2", "c3", "c4", "c5"):
        status = stages.get(stage, "failure")
        row[f"{stage}_status"] = status.split(":")[0]
        row[f"{stage}_failure_category"] = status.split(":")[1] if ":" in status else None
    return row


def test_health_verdicts():
    ok = judge("t", REF, _trial(c0="success", c1="success", c3="not_run:insufficient_hardware", c5="success"),
               _trial(c2="skipped", c4="skipped", c5="success"))
    assert ok.verdict == "ok" and ok.reasons == ["c3 unmeasured here: insufficient_hardware"]
    assert ok.noop == "passes nothing"  # noop's honest report passing C5 is no break
    broken = judge("t", REF, _trial(c0="success", c1="failure:missing_module", c3="success", c5="success",
                                    reason="c1: ModuleNotFoundError"), _trial())
    assert broken.verdict == "broken" and broken.reasons[0] == "reference c1 failure (missing_module)"
    trivial = judge("t", REF, _trial(c0="success", c1="success", c3="success", c5="success"), _trial(c1="success"))
    assert trivial.verdict == "broken" and "noop passes c1" in trivial.reasons[0]
    unknown = judge("t", REF, {"status": "infra_error", "failure_reason": "docker died"}, _trial())
    assert unknown.verdict == "unknown" and unknown.failed and "docker died" in unknown.reasons[0]
    table = health_table([ok, broken])
    assert table.splitlines()[0].split() == ["task", "reference", "stages", "reference", "noop", "verdict"]
    assert "c0 c1 c3 c5" in table.splitlines()[1] and "broken (reference c1 failure" in table.splitlines()[2]


def test_reference_toml_of_a_candidate_is_valid_toml():
    import tomllib

    cand = Candidate({"build_s": 1.0, "rebuilt_stages": {}}, _row("x/y/0", c0="success") | {"node": 'we"ird'})
    data = tomllib.loads(reference_toml(cand))
    assert data["source"]["node"] == 'we"ird' and data["passed"] == ["c0"]


def test_the_demo_suite_ships_a_small_replayable_reference_for_every_task():
    from reb_ray.suite.load import load_suite

    for task in load_suite("demo"):
        ref = read_reference(task.task_dir)
        assert ref is not None, task.id
        assert ref["task"] == task.id and "c1" in ref["passed"], ref
        assert ref["verification"]["reproducible"] is True and ref["hardware"]["container_runtime"] == "docker"
        folder = task.task_dir / "reference"
        steps = parse_dockerfile((folder / "Dockerfile").read_text())
        assert any(w == "RUN" and "--require-hashes" in a for w, a in steps), task.id
        assert sum(p.stat().st_size for p in folder.iterdir()) < 64_000  # text only, no wheels or images
        assert json.loads((folder / "report.json").read_text())["python_path"].startswith("/opt/envs/")


def test_the_researchenvbench_references_are_cpu_recipes_that_claim_no_gpu_stage():
    """The references made on a CPU node: each passed C1 on a rebuild, records its GPU stages as
    the CPU node graded them (never passed), and is small text the replay understands."""
    from reb_ray.suite.load import load_suite

    shipped = {}
    for task in load_suite("researchenvbench"):
        ref = read_reference(task.task_dir)
        if ref is None:
            continue
        shipped[task.id] = ref["passed"]
        assert ref["task"] == task.id and ref["verification"]["reproducible"] is True, ref
        assert not set(ref["passed"]) & {"c2", "c3", "c4"}, ref["passed"]
        assert ref["stages"]["c3"].get("failure_category") == "insufficient_hardware", ref["stages"]
        folder = task.task_dir / "reference"
        parse_dockerfile((folder / "Dockerfile").read_text())  # raises on what the replay cannot do
        assert sum(p.stat().st_size for p in folder.iterdir()) < 128_000  # text only, no wheels or images
    assert shipped == {"kyegomez--multimodalmamba": ["c1", "c5"], "kyegomez--visionmamba": ["c0", "c1", "c5"]}
