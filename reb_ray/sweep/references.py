"""Reference environments: one verified recipe per task, stored under the task.

`pick_references(output, suite)` reads the output's verifications dataset
(`<output>/environments/verifications.jsonl`, written by `reb-ray env verify` and `sweep
--verify-exports`) and keeps, for each task, the best environment among those a verification
rebuilt with `reproducible: yes` (the same verdict on every stage C0..C5 as the source attempt):

1. the highest stage of the pyramid it passed (C4 over C3 over C2 over C1 over C0: a recipe
   that reaches a GPU stage proves more than one that reaches only the CPU stage);
2. then the most stages passed (C5 included);
3. then the smallest environment (`env_size_bytes` of the source attempt; unknown sizes last);
4. then the trial id, so the choice never depends on the order of the dataset.

`store_reference(choice, task)` writes `<task_dir>/reference/`: the export's `requirements.lock`,
`requirements.nohash.lock`, `manifest.json` and `report.json`, a `Dockerfile` made again from
the manifest without the `wheels/` step (a reference is small text files only: pip takes the
locked versions, hashes checked, from the node's package cache or the index), `reference.toml`
(below) and a short README.md. `reference.toml` records where the recipe came from (sweep,
trial, attempt, agent, node), what its verification measured (build seconds, the rebuilt
stages), every stage's status in the source attempt with its failure category (a GPU stage on
a CPU-only node is `not_run` with `insufficient_hardware`: recorded as such, never as passed),
`passed` (the stages that succeeded), and the hardware fingerprint of the source attempt's
node (a column the row does not know is left out: TOML has no null, absent means unknown).

`reb-ray tasks verify` (reb_ray.sweep.task_health) reads reference.toml back.
"""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import dataclass
from pathlib import Path

from reb_ray.errors import RebRayError

#: The stages whose statuses a reference records, pyramid order (C5 is the report's audit).
STAGES = ("c0", "c1", "c2", "c3", "c4", "c5")
#: The environment stages ranked for "highest stage reached", lowest first.
PYRAMID = ("c0", "c1", "c2", "c3", "c4")
REFERENCE_FILE = "reference.toml"
COPIED = ("requirements.lock", "requirements.nohash.lock", "manifest.json", "report.json")
REFERENCE_VERSION = 1


@dataclass
class Candidate:
    """One verified environment: its verification record and its source attempt's trials row."""

    record: dict
    row: dict

    @property
    def passed(self) -> list[str]:
        return [s for s in STAGES if self.row.get(f"{s}_status") == "success"]

    def rank(self) -> tuple:
        """The sort key of the module docstring's order: smaller is better."""
        highest = max((PYRAMID.index(s) for s in self.passed if s in PYRAMID), default=-1)
        size = self.row.get("env_size_bytes")
        return (-highest, -len(self.passed), size if size is not None else math.inf, self.row["trial_id"])


def verifications(output: Path) -> list[dict]:
    """The records of `<output>/environments/verifications.jsonl` (a line that is not JSON, an
    interrupted append, is skipped)."""
    from reb_ray.results.verifications import VERIFICATIONS, read_verifications

    records = read_verifications(output)
    if records is None:
        raise RebRayError(f"{output}: no verifications ({VERIFICATIONS}): run a sweep with --verify-exports, "
                          "or `reb-ray env verify` an export")
    return records


def candidates(output: Path, suite: str | None = None) -> list[Candidate]:
    """Every environment of `output` a verification found reproducible (with its export still on
    disk), with its source attempt's trials row; only `suite`'s when given."""
    from reb_ray.results.read import read_trials

    output = Path(output)
    rows = {(r["sweep_id"], r["trial_id"], r["attempt"]): r for r in read_trials(output).to_pylist()}
    found = []
    for record in verifications(output):
        if record.get("reproducible") is not True or not record.get("export"):
            continue
        row = rows.get((record.get("sweep_id"), record.get("trial_id"), record.get("attempt")))
        if row is None or (suite is not None and row.get("suite") != suite):
            continue
        if not (Path(record["export"]) / "manifest.json").is_file():
            continue  # the export was removed since: nothing to store
        found.append(Candidate(record, row))
    return found


def pick_references(output: Path, suite: str | None = None) -> dict[str, Candidate]:
    """{task id: its best candidate} (module docstring's order)."""
    best: dict[str, Candidate] = {}
    for cand in candidates(output, suite):
        task = cand.row["task_id"]
        if task not in best or cand.rank() < best[task].rank():
            best[task] = cand
    return best


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(str(value))  # a JSON string is a TOML basic string


def _toml_table(name: str | None, items: dict) -> list[str]:
    lines = [f"[{name}]"] if name else []
    for key, value in items.items():
        lines.append(f"# {key}: unknown" if value is None else f"{key} = {_toml_value(value)}")
    return lines


def reference_toml(cand: Candidate) -> str:
    """The text of reference.toml for `cand` (module docstring)."""
    from reb_ray.environment.fingerprint import FINGERPRINT_COLUMNS

    row, record = cand.row, cand.record
    lines = ["# The reference environment of this task: written by `reb-ray tasks reference`, checked by",
             "# `reb-ray tasks verify` (the `reference` agent rebuilds the recipe in this directory; it must",
             "# pass every stage in `passed` again). A key left out is unknown.",
             *_toml_table(None, {"reference_version": REFERENCE_VERSION, "task": row["task_id"], "suite": row["suite"],
                                 "passed": cand.passed}),
             "", *_toml_table("source", {"sweep_id": row["sweep_id"], "trial_id": row["trial_id"],
                                         "attempt": row["attempt"], "agent": row["agent"], "node": row.get("node"),
                                         "repo_commit": row.get("repo_commit"),
                                         "env_size_bytes": row.get("env_size_bytes"),
                                         "agent_wall_time_s": row.get("agent_wall_time_s"),
                                         "env_manifest_digest": row.get("env_manifest_digest")}),
             "", *_toml_table("verification", {"reproducible": True, "build_s": record.get("build_s"),
                                               "probe_s": record.get("probe_s")})]
    for stage in STAGES:
        table = {"status": row.get(f"{stage}_status"), "failure_category": row.get(f"{stage}_failure_category"),
                 "rebuilt": (record.get("rebuilt_stages") or {}).get(stage)}
        lines += ["", *_toml_table(f"stages.{stage}", {k: v for k, v in table.items() if v is not None or k == "status"})]
    lines += ["", *_toml_table("hardware", {c: row.get(c) for c in FINGERPRINT_COLUMNS})]
    return "\n".join(lines) + "\n"


def store_reference(cand: Candidate, task_dir: Path) -> Path:
    """Write `cand`'s recipe to `<task_dir>/reference/` (replacing an older one); returns it."""
    from reb_ray.environment.export import dockerfile, plan

    src = Path(cand.record["export"])
    try:
        manifest = json.loads((src / "manifest.json").read_text())
    except (OSError, ValueError) as exc:
        raise RebRayError(f"{src}/manifest.json: cannot read the export's manifest ({exc})") from None
    has_report = (src / "report.json").is_file()
    text = dockerfile(manifest, plan(manifest), has_wheels=False, report_name="report.json" if has_report else None)
    dest = Path(task_dir) / "reference"
    tmp = dest.with_name("reference.new")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for name in COPIED:
        if (src / name).is_file():
            shutil.copyfile(src / name, tmp / name)
    (tmp / "Dockerfile").write_text(text)
    (tmp / REFERENCE_FILE).write_text(reference_toml(cand))
    (tmp / "README.md").write_text(_readme(cand))
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    return dest


def _readme(cand: Candidate) -> str:
    row = cand.row
    return f"""# Reference environment of {row['task_id']}

The environment `{row['agent']}` built in trial {row['trial_id']} (attempt {row['attempt']}, sweep
{row['sweep_id']}), rebuilt from its recipe and found reproducible; it passed {', '.join(cand.passed) or 'no stage'}
(`reference.toml` has every stage and the hardware it ran on). `reb-ray tasks verify` rebuilds it
with the `reference` agent and checks that it still passes them.

To build it by hand: put the task's repository (at the pinned commit) in `repo/` and an empty
`certs/` beside this file, then `docker build -t my-env .` (the `FROM` image is reb-ray's sandbox
image: `reb-ray image build`). No wheels are stored here: pip takes the locked versions, their
hashes checked, from the index or a `--find-links` directory.
"""


def read_reference(task_dir: Path) -> dict | None:
    """The task's reference.toml, or None when the task has none. Raises RebRayError naming the
    file when it is not valid."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib

    path = Path(task_dir) / "reference" / REFERENCE_FILE
    if not path.is_file():
        return None
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise RebRayError(f"{path}: not valid TOML ({exc})") from None
    passed = data.get("passed")
    if not isinstance(passed, list) or any(s not in STAGES for s in passed):
        raise RebRayError(f"{path}: passed = {passed!r}: a list of stages among {', '.join(STAGES)}")
    return data
