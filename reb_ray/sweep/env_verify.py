"""Verify: rebuild an export and run the probe phase on it, with no agent.

`verify(export_dir)` builds the export's Dockerfile (`docker build --no-cache` by default: a
verification must really rebuild, not reuse the layers of an earlier build), then runs one
trial of the task on the built image whose agent does nothing but check that the report the
recipe put back is there (`RebuiltEnvironment`), so the probe phase judges exactly what the
recipe built (the node's CA bundle is lent to pip while building, as the sandboxes get it), and
compares each stage's verdict (C0..C5, COMPARED) with the source attempt's
(export.json's `stages`). It also compares the packages the rebuilt interpreter holds (its own
manifest, taken by the same capture) with the source manifest's.

The result: `reproducible` true (every compared stage has the source's status), false (the
stages that differ are listed), or null with `built` false when the recipe did not build (its
error is kept; the kept image is never used in its place). It is printed as one line
`reproducible: yes` / `reproducible: no (...)` / `reproducible: not attempted (...)` and written
as `verification.json` in the export directory, and appended to the source output's dataset
of verifications, `<output>/environments/verifications.jsonl`, when that directory is writable;
a caller that runs the rebuild on another node than the output's (`--verify-exports` on a
cluster) appends it there itself (`append=False`). The record names the host that rebuilt it
(`verified_on`): a rebuild is measured on its node's hardware and with its node's caches.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from reb_ray.agents.base import Agent, AgentContext, AgentRun
from reb_ray.errors import RebRayError
from reb_ray.results.verifications import append_verification

COMPARED = ("c0", "c1", "c2", "c3", "c4", "c5")
BUILD_TIMEOUT_S = 3600.0
VERIFY_REPOSITORY = "reb-ray/env-verify"


class RebuiltEnvironment(Agent):
    """The agent phase of a verification: the environment is already built, so it only checks
    that the recipe put the report back (exit 0 when it did)."""

    name = "rebuilt-environment"
    trusted = True
    calls_no_model = True

    def run(self, sandbox, ctx: AgentContext) -> AgentRun:
        started = time.monotonic()
        result = sandbox.exec(["test", "-f", ctx.report_path], timeout=60)
        return AgentRun.from_exec(result, ctx.timeout_s, started)


#: The classic builder's line for each finished step: " ---> <image id>".
_STEP_IMAGE = re.compile(r"^ ---> ([0-9a-f]{12})\s*$", re.MULTILINE)


def build(export_dir: Path, tag: str, no_cache: bool = True, timeout: float = BUILD_TIMEOUT_S,
          labels: dict[str, str] | None = None) -> tuple[bool, float, str]:
    """`docker build` the export as `tag`: (built, seconds, the build output's last 2,000 characters).
    `--force-rm`: the classic builder otherwise leaves the container of a failed step behind.
    A failed build leaves no image either: the classic builder keeps an untagged image per step
    that succeeded (a gigabyte once the interpreter is installed), so the last of them is
    removed, and with it the untagged ones below it, down to the `FROM` image, which stays."""
    argv = ["docker", "build", "--force-rm", "-t", tag, *(["--no-cache"] if no_cache else []),
            *(arg for k, v in (labels or {}).items() for arg in ("--label", f"{k}={v}")), str(export_dir)]
    started = time.monotonic()
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, time.monotonic() - started, f"the build ran past {timeout:.0f} s"
    if proc.returncode != 0:
        steps = _STEP_IMAGE.findall(proc.stdout)
        if len(steps) > 1:  # the first is the FROM image itself
            subprocess.run(["docker", "rmi", steps[-1]], capture_output=True)
    return proc.returncode == 0, time.monotonic() - started, (proc.stdout + proc.stderr)[-2000:]


def compare(source: dict[str, str], rebuilt: dict[str, str]) -> list[str]:
    """The COMPARED stages whose status differs: "c1: success -> failure" each."""
    return [f"{s}: {source.get(s)} -> {rebuilt.get(s)}" for s in COMPARED if source.get(s) != rebuilt.get(s)]


def package_set(manifest: dict | None) -> set[tuple[str, str]]:
    prefix = ((manifest or {}).get("interpreter") or {}).get("prefix") or "/nonexistent"
    return {(d["name"].lower(), d.get("version") or "") for d in (manifest or {}).get("distributions") or []
            if not d.get("shadowed") and str(d.get("location") or "").startswith(prefix)}


def verify(export_dir: Path, output: Path | None = None, no_cache: bool = True, tasks_root: Path | None = None,
           keep_image: bool = False, mirrors: list[Path] | None = None, task=None, append: bool = True,
           progress=None) -> dict:
    """Rebuild and probe the export in `export_dir`; returns the verification record (module
    docstring). `output` receives the verification trial's rows' artifacts (a temporary
    directory when None). `mirrors`: the repository mirror directories the verification trial
    places a fetched task's repository from, as the source sweep did (`--repo-mirror`; without
    them a fetched task is cloned from its remote). `task`: the source's TaskSpec when the
    caller loaded it (else it is loaded from `tasks_root`). `append`: the record goes into the
    source output's verifications dataset; a rebuild on another node than the output's passes
    False and its caller appends the record where the output is (that node may see a directory
    of the same path that is not the output). The rebuilt image is removed afterwards unless
    `keep_image`. `progress(line)` is told as each step begins and ends (the build, the probe
    phase, the file comparison: minutes each on a busy node). Raises RebRayError when
    `export_dir` is not an export."""
    from reb_ray.suite.load import find_task
    from reb_ray.models.sweep import SweepConfig, TrialSpec
    from reb_ray.trial import run_trial

    say = progress or (lambda line: None)
    export_dir = Path(export_dir)
    try:
        info = json.loads((export_dir / "export.json").read_text())
        source_manifest = json.loads((export_dir / "manifest.json").read_text())
    except (OSError, ValueError) as exc:
        raise RebRayError(f"{export_dir}: not an environment export (export.json / manifest.json: {exc})") from None
    if task is None:
        task = find_task(info["suite"], info["task_id"], tasks_root, "verify its export")
    digest = hashlib.sha256((export_dir / "Dockerfile").read_bytes()).hexdigest()[:12]
    tag = f"{VERIFY_REPOSITORY}:{digest}"
    record: dict = {"export": str(export_dir.resolve()), "sweep_id": info["sweep_id"], "trial_id": info["trial_id"],
                    "attempt": info["attempt"], "task_id": info["task_id"], "image": tag,
                    "verified_on": socket.gethostname(), "source_agent_wall_time_s": info.get("agent_wall_time_s"),
                    "source_stages": info.get("stages")}
    # The node's CA bundle (the one its sandboxes get) for pip during the build only: a network
    # whose TLS is intercepted is the node's, not the recipe's.
    ca = SweepConfig().sandbox.ca_bundle
    placed = export_dir / "certs" / "ca.pem"
    if ca is not None and Path(ca).is_file() and placed.parent.is_dir() and not placed.exists():
        shutil.copyfile(ca, placed)
    else:
        placed = None
    try:
        from reb_ray.environment.keep import identity_labels

        # The rebuilt image says what it is, as a kept one does (reb_ray.environment.keep).
        labels = {**identity_labels(info["trial_id"], info["attempt"]), "reb-ray.env-rebuilt-from": info["sweep_id"]}
        labels["org.opencontainers.image.description"] = labels["org.opencontainers.image.description"].replace(
            "kept environment", "environment rebuilt from an export")
        say(f"building {export_dir / 'Dockerfile'} as {tag}{' (no cache)' if no_cache else ''}")
        built, build_s, log = build(export_dir, tag, no_cache, labels=labels)
        say(f"{'built' if built else 'the build failed'} in {build_s:.1f} s")
    finally:
        if placed is not None:
            placed.unlink(missing_ok=True)
    record.update(built=built, build_s=build_s)
    if not built:
        record.update(reproducible=None, differs=None, build_error=log)
        return _finish(export_dir, info, record, append)
    try:
        with tempfile.TemporaryDirectory(prefix="reb-ray-verify-") as tmp:
            out = Path(output) if output is not None else Path(tmp)
            config = SweepConfig(suite=info["suite"], tasks_root=tasks_root, output=out, keep_environments="none",
                                 agents=["reb_ray.sweep.env_verify:RebuiltEnvironment"], repo_mirrors=list(mirrors or []))
            spec = TrialSpec(sweep_id=f"verify-{info['sweep_id']}", agent="reb_ray.sweep.env_verify:RebuiltEnvironment",
                             task=task, trial_index=0, config=config, image=tag)
            started = time.monotonic()
            say(f"probing the rebuilt environment ({info['task_id']}: its stages, as the source attempt was probed)")
            outcome = run_trial(spec)
            record["probe_s"] = time.monotonic() - started
            say(f"probed in {record['probe_s']:.1f} s: " + ", ".join(f"{s['stage']} {s['status']}" for s in outcome.stages))
            trial = outcome.trial
            rebuilt_manifest = None
            if trial.get("env_manifest_path"):
                try:
                    rebuilt_manifest = json.loads(gzip.decompress((out / trial["env_manifest_path"]).read_bytes()))
                except (OSError, ValueError, EOFError):
                    pass
            say("comparing the rebuilt prefix with the kept image's, file by file")
            record["files"] = compare_files(info.get("kept_image"), source_manifest, tag)
    finally:  # also when the trial raised: the rebuilt image is this call's own
        if not keep_image:
            subprocess.run(["docker", "rmi", "-f", tag], capture_output=True)
            record["image"] = None
    stages = {s["stage"]: s["status"] for s in outcome.stages}
    record.update(status=trial.get("status"), failure_reason=trial.get("failure_reason"), rebuilt_stages=stages)
    if trial.get("status") != "scored":
        record.update(reproducible=None, differs=None)
        return _finish(export_dir, info, record, append)
    differs = compare(info.get("stages") or {}, stages) + files_differ(record.get("files"))
    source_pkgs, rebuilt_pkgs = package_set(source_manifest), package_set(rebuilt_manifest)
    record.update(reproducible=not differs, differs=differs,
                  packages_missing=sorted(f"{n}=={v}" for n, v in source_pkgs - rebuilt_pkgs) if rebuilt_manifest else None,
                  packages_extra=sorted(f"{n}=={v}" for n, v in rebuilt_pkgs - source_pkgs) if rebuilt_manifest else None)
    return _finish(export_dir, info, record, append)


def compare_files(kept_image: str | None, manifest: dict, rebuilt_image: str) -> dict:
    """The rebuilt prefix against the kept one, file by file (reb_ray.environment.prefix_files),
    read from both images without running them: {"status": "compared", **compare_prefixes} or
    {"status": "not compared", "why": ...} (no kept image on this node, the system's own
    interpreter, an engine error). Never raises."""
    from reb_ray.environment.prefix_files import comparable_prefix, compare_prefixes, prefix_digests

    prefix = ((manifest or {}).get("interpreter") or {}).get("prefix")
    if not comparable_prefix(prefix):
        return {"status": "not compared", "why": f"the prefix {prefix} is the system's interpreter, not an environment"}
    if not kept_image:
        return {"status": "not compared", "why": "no kept image of the source attempt"}
    try:
        from reb_ray.sandbox import provider_class

        client = provider_class("docker").connect_engine(timeout=30)
        started = time.monotonic()
        kept = prefix_digests(client, kept_image, prefix)
        rebuilt = prefix_digests(client, rebuilt_image, prefix)
    except Exception as exc:  # noqa: BLE001 - a kept image removed by the disk budget, an engine error
        return {"status": "not compared", "why": f"{type(exc).__name__}: {exc}"[:300]}
    return {"status": "compared", "prefix": prefix, "seconds": round(time.monotonic() - started, 3),
            **compare_prefixes(kept, rebuilt)}


def files_differ(files: dict | None) -> list[str]:
    """The verdict's lines for files of the kept prefix that the rebuild changed or lacks."""
    if not files or files.get("status") != "compared":
        return []
    out = []
    for key, what in (("modified", "files differ"), ("uncaptured", "files the rebuild lacks")):
        if files.get(key):
            more = files[f"{key}_count"] - len(files[key][:5])
            out.append(f"{what}: {', '.join(files[key][:5])}" + (f" and {more} more" if more > 0 else ""))
    return out


def verdict_line(record: dict) -> str:
    """`reproducible: yes`, `reproducible: no (stages that differ)`, or `reproducible: not attempted (why)`."""
    if not record.get("built"):
        return "reproducible: not attempted (the recipe does not build; see build_error in verification.json)"
    if record.get("reproducible") is None:
        return f"reproducible: not attempted (the verification trial was {record.get('status')}: {record.get('failure_reason')})"
    if record["reproducible"]:
        return "reproducible: yes"
    return f"reproducible: no ({'; '.join(record['differs'])})"


def _finish(export_dir: Path, info: dict, record: dict, append: bool) -> dict:
    record["verdict"] = verdict_line(record)
    write_record(export_dir, record)
    source = Path(info.get("output") or "")
    if append and source.is_dir() and os.access(source, os.W_OK):
        append_record(source, record)
    return record


def write_record(export_dir: Path, record: dict) -> None:
    """The record as the export's `verification.json` (the build's output included)."""
    (Path(export_dir) / "verification.json").write_text(json.dumps(record, indent=1, default=str) + "\n")


def append_record(output: Path, record: dict) -> None:
    """The record into `output`'s verifications dataset, without the build's output (it stays
    in the export's verification.json: the dataset holds one short line per verification)."""
    append_verification(output, {k: v for k, v in record.items() if k != "build_error"})
