"""The verifier of an exported Harbor task (standard library only; copied to `tests/reb_ray_verify.py`).

Harbor runs `tests/test.sh` after the agent phase, with `tests/` copied in only then; test.sh
runs this program with the image's `/usr/bin/python3` (the report's interpreter when the agent
removed it). It measures the environment the agent left with reb-ray's own in-sandbox probes
(the toolbox shipped beside it: pyright with its node, probes/) and the task's hidden stage
commands from `tests/spec.json`, then writes Harbor's reward file `/logs/verifier/reward.json`:

- `c0_missing_ratio`: pyright's missing top-level imports over the task's C0 baseline (0 is
  best; 1 when the interpreter does not run or there is no usable report);
- `c1`, `c2`, `c3`, `c4`: 1 when the stage's command ran with the expected exit code and log
  pattern, else 0; a stage the task does not apply to, or one needing more GPUs than the
  container sees, is left out (Harbor's rewards are numbers only: unknown is absent, never 0);
- `c5_lies`: the report's claims that the probes contradict (path, versions, capabilities);
- `reward`: the mean over the measured environment stages, C0 counting 1 only with nothing
  missing: 1 when every measured stage passed, 0 when none did.

Every stage's verdict, with its reason, also goes to `/logs/verifier/verdicts.json`, and each
command's output tail to the verifier log (Harbor's test-stdout.txt). The grading rules are a
reduced form of reb-ray's (no witness of the pinned code's run, a reduced C5 audit); the
reb-ray harness remains the reference.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
#: Harbor's verifier directory in the container (its reward files' place); tests point it elsewhere.
VERIFIER_DIR = os.environ.get("REB_RAY_VERIFIER_DIR", "/logs/verifier")
TOOLBOX = "/opt/reb-ray-toolbox"
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
TAIL = 4000


def log(text):
    sys.stdout.write(text.rstrip("\n") + "\n")
    sys.stdout.flush()


def read_report(path):
    """(report dict or None, reason when None)."""
    try:
        if not os.path.isfile(path):
            return None, "missing_report: no file at " + path
        if os.path.getsize(path) > 1 << 20:
            return None, "invalid_report: over 1 MiB"
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError) as exc:
        return None, "invalid_report: " + str(exc)[:200]
    if not isinstance(data, dict):
        return None, "invalid_report: not a JSON object"
    python = data.get("python_path")
    if not isinstance(python, str) or not python.startswith("/") or "\n" in python:
        return None, "invalid_report: python_path is not an absolute path"
    return data, None


def unpack_toolbox(tar_path):
    """The toolbox directory, unpacked from the shipped archive (pyright's inner tar beside node)."""
    if os.path.isdir(TOOLBOX):
        shutil.rmtree(TOOLBOX)
    parent = os.path.dirname(TOOLBOX)
    with tarfile.open(tar_path) as tar:
        tar.extractall(parent)
    inner = os.path.join(TOOLBOX, "pyright.tar")
    with tarfile.open(inner) as tar:
        tar.extractall(TOOLBOX)
    os.unlink(inner)
    return TOOLBOX


def run_json_probe(argv, timeout):
    """Run a probe that writes one JSON object to the path given as --out; its record or None."""
    out = tempfile.mktemp(prefix="reb-ray-probe-", suffix=".json")
    env = {"PATH": SYSTEM_PATH, "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}
    try:
        subprocess.run(argv + ["--out", out], timeout=timeout, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, check=False)
        with open(out, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None


def missing_imports(record):
    """Distinct top-level modules pyright flagged reportMissingImports (relative ones left out)."""
    found = set()
    diags = ((record or {}).get("pyright") or {}).get("generalDiagnostics") or []
    for diag in diags:
        if not isinstance(diag, dict) or diag.get("rule") != "reportMissingImports":
            continue
        match = re.match(r'^Import "([^"]+)" could not be resolved', str(diag.get("message", "")))
        name = match.group(1) if match else str(diag.get("message", ""))
        if not name.startswith("."):
            found.add(name.split(".")[0])
    return sorted(found)


def run_command(stage, repo_dir, python, visible_gpus, helpers):
    """(passed, reason, output tail) of one command stage, run as reb-ray runs it."""
    shim = tempfile.mkdtemp(prefix="reb-ray-shim-")
    for name in ("python", "python3"):
        path = os.path.join(shim, name)
        with open(path, "w") as fh:
            fh.write("#!/bin/sh\nexec '%s' \"$@\"\n" % python.replace("'", "'\\''"))
        os.chmod(path, 0o755)
    env = {"PATH": "%s:%s:%s" % (shim, os.path.dirname(python), SYSTEM_PATH), "CUDA_VISIBLE_DEVICES": visible_gpus,
           "PYTHONUNBUFFERED": "1", "HOME": "/root", "REB_RAY_HELPERS": helpers, "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "LANG": "C.UTF-8"}
    env.update(stage.get("env") or {})
    command = stage["command"]
    argv = ["sh", "-c", command] if isinstance(command, str) else list(command)
    workdir = os.path.normpath(os.path.join(repo_dir, stage.get("workdir") or "."))
    started = time.monotonic()
    try:
        proc = subprocess.Popen(argv, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True)
    except OSError as exc:
        return False, "cannot start: %s" % exc, ""
    try:
        output, _ = proc.communicate(timeout=stage["timeout_s"])
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        text = output.decode("utf-8", "replace")
        return False, "timeout after %gs" % stage["timeout_s"], text[-TAIL:]
    text = output.decode("utf-8", "replace")
    if proc.returncode != stage["exit_code"]:
        return False, "exit code %s, expected %s" % (proc.returncode, stage["exit_code"]), text[-TAIL:]
    pattern = stage.get("log_pattern")
    if pattern and re.search(pattern, text, re.MULTILINE) is None:
        return False, "log pattern %r not found" % pattern, text[-TAIL:]
    return True, "passed in %.1fs" % (time.monotonic() - started), text[-TAIL:]


def visible_gpu_count():
    try:
        out = subprocess.run(["nvidia-smi", "-L"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(1 for line in out.stdout.decode(errors="replace").splitlines() if line.startswith("GPU "))


def audit(report, facts, gpus):
    """The report's claims the probes contradict: path, versions, capabilities (a count)."""
    lies = []
    if not facts or not facts.get("python_runs"):
        return ["python_path: does not run"]
    claimed = report.get("python_version")
    real = facts.get("python_version")
    if isinstance(claimed, str) and isinstance(real, str) and not real.startswith(claimed.strip()):
        lies.append("python_version: reported %s, runs %s" % (claimed, real))
    claimed = report.get("torch_version")
    real = facts.get("torch_version") if facts.get("torch_import_ok") else None
    if isinstance(claimed, str) and claimed != real:
        lies.append("torch_version: reported %s, imports %s" % (claimed, real))
    if report.get("cuda_available") is True and (real is None or gpus == 0):
        lies.append("cuda_available: reported true, no CUDA torch or GPU seen")
    count = report.get("gpu_count")
    if isinstance(count, int) and not isinstance(count, bool) and count > gpus:
        lies.append("gpu_count: reported %d, %d visible" % (count, gpus))
    return lies


def main():
    with open(os.path.join(HERE, "spec.json"), encoding="utf-8") as fh:
        spec = json.load(fh)
    os.makedirs(VERIFIER_DIR, exist_ok=True)
    repo_dir = spec["repo_dir"]
    helpers = os.path.join(HERE, "helpers")
    verdicts, rewards = {}, {}
    report, problem = read_report(spec["report_path"])
    gpus = visible_gpu_count()
    stages = spec["stages"]
    if report is None:
        log("report: " + problem)
        baseline = spec.get("c0_baseline_total")
        if baseline:
            rewards["c0_missing_ratio"] = 1.0
        verdicts["c0"] = {"status": "failure", "reason": problem}
        for name in stages:
            rewards[name] = 0
            verdicts[name] = {"status": "failure", "reason": problem}
    else:
        python = report["python_path"]
        toolbox = unpack_toolbox(os.path.join(HERE, "toolbox.tar"))
        launcher = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else python
        c0 = run_json_probe([launcher, os.path.join(toolbox, "probes", "c0_probe.py"), "--toolbox", toolbox,
                             "--repo", repo_dir, "--python", python, "--timeout", "540"], 600)
        baseline = spec.get("c0_baseline_total")
        if c0 is None or c0.get("error") or not isinstance((c0.get("pyright") or {}).get("generalDiagnostics"), list):
            if c0 is not None and c0.get("python_ok") is False:
                verdicts["c0"] = {"status": "failure", "reason": "interpreter does not run"}
                if baseline:
                    rewards["c0_missing_ratio"] = 1.0
            else:
                verdicts["c0"] = {"status": "not_run", "reason": "the C0 probe left no pyright record"}
        else:
            missing = missing_imports(c0)
            verdicts["c0"] = {"status": "success" if not missing else "failure", "missing": missing}
            if baseline:
                rewards["c0_missing_ratio"] = min(1.0, len(missing) / baseline)
        for name, stage in stages.items():
            if name == "c2":
                if gpus < 1:
                    verdicts[name] = {"status": "insufficient_hardware", "reason": "no GPU visible"}
                    continue
                rec = run_json_probe([python, os.path.join(toolbox, "probes", "c2_probe.py")], 600)
                ok = bool(rec and rec.get("kernel_ok"))
                verdicts[name] = {"status": "success" if ok else "failure", "record": rec}
                rewards[name] = int(ok)
                continue
            needed = stage.get("gpus", 0)
            if needed > gpus:
                verdicts[name] = {"status": "insufficient_hardware", "reason": "needs %d GPU(s), %d visible" % (needed, gpus)}
                continue
            visible = ",".join(str(i) for i in range(needed))
            passed, reason, tail = run_command(stage, repo_dir, python, visible, helpers)
            log("== %s: %s\n%s" % (name, reason, tail))
            verdicts[name] = {"status": "success" if passed else "failure", "reason": reason}
            rewards[name] = int(passed)
        facts = run_json_probe([launcher, os.path.join(toolbox, "probes", "facts_probe.py"), "--python", python], 300)
        lies = audit(report, facts, gpus)
        verdicts["c5"] = {"status": "success" if not lies else "failure", "lies": lies}
        rewards["c5_lies"] = len(lies)
    measured = [verdicts[name]["status"] == "success" for name in ["c0", *stages]
                if verdicts.get(name, {}).get("status") in ("success", "failure")]
    rewards["reward"] = round(sum(measured) / len(measured), 6) if measured else 0.0
    for name, verdict in verdicts.items():
        log("%s: %s %s" % (name, verdict["status"], verdict.get("reason") or verdict.get("missing") or verdict.get("lies") or ""))
    with open(os.path.join(VERIFIER_DIR, "verdicts.json"), "w", encoding="utf-8") as fh:
        json.dump(verdicts, fh, indent=2)
    with open(os.path.join(VERIFIER_DIR, "reward.json"), "w", encoding="utf-8") as fh:
        json.dump(rewards, fh)
    log("reward: " + json.dumps(rewards))


if __name__ == "__main__":
    main()
