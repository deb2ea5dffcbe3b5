#!/usr/bin/env python3
"""Mutation check: does the test suite still catch the defects it exists to catch?

For each defect below, this script takes a scratch copy of the repository, plants one small,
plausible bug in the product code (an exact-string replacement in one file under reb_ray/,
analysis/ or probes/), runs the test files meant to catch that bug against the copy, and
reports whether they did: `caught` with the ids of the failing tests, or `NOT CAUGHT`. It is
the proof that a faster (re-housed, shared-fixture, trimmed) suite lost nothing: run it on the
revision before and after such a change and compare the tables.

Usage (from the repository root; it is a plain script, not part of CI):

    flock /tmp/reb-test.lock .venv/bin/python scripts/mutation_check.py            # HEAD
    flock /tmp/reb-test.lock .venv/bin/python scripts/mutation_check.py --rev REV  # any commit
    flock /tmp/reb-test.lock .venv/bin/python scripts/mutation_check.py --tree     # working tree
    .venv/bin/python scripts/mutation_check.py --list                     # the defects
    .venv/bin/python scripts/mutation_check.py --only witness --only viewer_escaping
    .venv/bin/python scripts/mutation_check.py --apply-only               # plant, run nothing

Options: `--rev REV` (default HEAD) checks a commit: `git clone --shared` of this repository
into a temporary directory, checked out detached at REV. `--tree` checks the working tree as
it is now, uncommitted changes and untracked (not ignored) files included, .venv and other
ignored paths excluded (a clone of HEAD overlaid with the working tree's files). The snapshot
is taken once; each defect gets its own copy of it, so one mutation never leaks into another.
`--only NAME` (repeatable) runs those defects only; `--list` prints them; `--apply-only` makes
every copy and plants every mutation (and checks the imports resolve into the copy) without
running a test; `--lock FILE` takes an flock on FILE around each pytest run instead of the
whole script running under one; `--keep` keeps the copies and prints where they are.

How the copy's code is the code under test: the venv (.venv) has an editable install of this
repository (a .pth line adding /work/main to sys.path, after PYTHONPATH), so every pytest run
gets PYTHONPATH=<copy>, runs with cwd=<copy>, and before the first run the script checks that
`reb_ray`, `analysis`, `probes` and `tests` (and the probes directory reb_ray.paths finds)
resolve into the copy; tests that start subprocesses or Ray workers hand PYTHONPATH on.

Each run is `.venv/bin/python -m pytest -q -p no:cacheprovider [--no-budgets] --junitxml=X FILES`
(`--no-budgets` only where the copy's tests define it). A defect is caught when pytest exits 1
with at least one failed or errored test (their ids are read from the JUnit XML); exit 0 is NOT
CAUGHT (skipped tests are counted: a catching test that skips here does not catch); any other
exit (usage error, collection error, interrupted, timeout) is an ERROR. Before any copy is made,
every mutation's target string is checked to occur exactly once in its file; if one does not,
the script stops with exit status 2 naming it. A designated test file that the revision lacks is
named in the notes (a deleted test file is a finding too).

The mutation of probes/c0_probe.py makes the C0 tests build a probe toolbox of their own in the
reb-ray cache (keyed by the probes' contents); it is removed after that defect's run.

Exit status: 0 every defect caught; 1 a defect not caught or a run in error; 2 a mutation does
not apply (or the copy does not import its own code).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VENV_PYTHON = REPO / ".venv" / "bin" / "python"
DEFAULT_TIMEOUT_S = 1800  # one defect's whole pytest run


@dataclass(frozen=True)
class Defect:
    name: str
    what: str  # the rule the mutation breaks
    path: str  # the file mutated, relative to the repository root
    old: str  # must occur exactly once in `path`
    new: str
    short: str  # the mutation in a few words, for the table
    tests: tuple[str, ...]  # the test files meant to catch it
    why: str  # what the mutation does, in words


DEFECTS: tuple[Defect, ...] = (
    Defect(
        name="witness",
        short='apply_witness: `== VALID` -> `!= MISSING`',
        what="the witness check: a command stage (C1) passes without a valid witness",
        path="reb_ray/grading/witness.py",
        old='    if graded["status"] != "success" or witness["witness_status"] == VALID:\n',
        new='    if graded["status"] != "success" or witness["witness_status"] != MISSING:\n',
        why="apply_witness lets an `unverified` witness through (only a missing one fails the stage)",
        tests=("tests/probing/test_witness_hook.py", "tests/test_witness_adversarial.py", "tests/test_regrade.py"),
    ),
    Defect(
        name="key_masking",
        short='finish(): `rec.error = redact.text(rec.error) ...` -> `rec.error = rec.error`',
        what="the key masking: the real LLM key written to a stored value",
        path="reb_ray/llm/proxy.py",
        old="                rec.error = redact.text(rec.error) if rec.error else rec.error\n",
        new="                rec.error = rec.error\n",
        why="the proxy records an upstream error (which may echo the real key) unmasked in the meter / request log",
        tests=("tests/llm/test_proxy.py",),
    ),
    Defect(
        name="resume_identity",
        short='expand: `config.resume.rerun` -> `config.resume`',
        what="resume by trial identity: a scored trial is re-run on resume",
        path="reb_ray/sweep/expand.py",
        old="    done = set() if config.resume.rerun else scored\n",
        new="    done = set() if config.resume else scored\n",
        why="expand tests the [resume] table instead of its `rerun` flag: every scored trial runs again",
        tests=("tests/orchestrators/test_expand.py", "tests/sweep/test_state.py", "tests/test_trial_identity.py"),
    ),
    Defect(
        name="lease_healing",
        short='_restore: `book.free = [g ... not in taken]` -> `list(book.gpus)`',
        what="the GPU lease actor's healing: a GPU held twice after the lease actor dies",
        path="reb_ray/orchestrators/lease_actor.py",
        old="        book.free = [g for g in book.gpus if g not in taken]\n",
        new="        book.free = list(book.gpus)\n",
        why="a restarted lease actor restores its holders but counts every GPU free, held ones included",
        tests=("tests/orchestrators/test_lease_faults.py", "tests/test_gpu_lease.py"),
    ),
    Defect(
        name="reaper",
        short='orphaned_containers: filter adds `"status": "exited"`',
        what="the reaper: a container left after a killed slot worker / driver",
        path="reb_ray/sandbox/docker/reaper.py",
        old='filters={"label": f"{MANAGED}=true"})',
        new='filters={"label": f"{MANAGED}=true", "status": "exited"})',
        why="orphaned_containers lists only exited containers: a dead owner's running sandbox is never reaped",
        tests=("tests/sandbox/test_reaper.py", "tests/orchestrators/test_orphans.py"),
    ),
    Defect(
        name="clone_owner",
        short='`INFRA_CLONE = ..., Owner.INFRA` -> `Owner.AGENT`',
        what="the owner of a failed repository clone (must be the infrastructure's)",
        path="reb_ray/grading/vocabulary.py",
        old='    INFRA_CLONE = "infra_clone", Owner.INFRA\n',
        new='    INFRA_CLONE = "infra_clone", Owner.AGENT\n',
        why="infra_clone is charged to the agent",
        tests=("tests/grading/test_vocabulary.py", "tests/test_placement.py", "tests/analysis/test_failures.py"),
    ),
    Defect(
        name="c0_interpreter",
        short='pyright --outputjson: `--pythonpath python` -> `sys.executable`',
        what="C0's use of the reported interpreter (pyright must be given the report's python)",
        path="probes/c0_probe.py",
        old='"--outputjson", "--pythonpath", python, "-p", config_path',
        new='"--outputjson", "--pythonpath", sys.executable, "-p", config_path',
        why="the C0 probe's pyright analysis resolves imports against the probe's own python, not the report's",
        tests=("tests/probing/test_c0_probe.py", "tests/grading/test_c0_grading.py"),
    ),
    Defect(
        name="export_hashes",
        short='plan(): index wheel `hashed.append(...)` -> `pinned.append(name==version)`',
        what="the export's hash pinning (the environment export pins package hashes)",
        path="reb_ray/environment/export.py",
        old=('        elif kind == "index":\n'
             '            wheel = dist.get("wheel")\n'
             '            if wheel:\n'
             '                hashed.append((name, version, wheel["sha256"], wheel["file"]))\n'),
        new=('        elif kind == "index":\n'
             '            wheel = dist.get("wheel")\n'
             '            if wheel:\n'
             '                pinned.append(f"{name}=={version}")\n'),
        why="an index-installed package whose wheel (and sha256) is known is exported by version only, without its hash",
        tests=("tests/environment/test_environment_units.py", "tests/references/test_reference_units.py",
               "tests/environment/test_environment_docker.py"),
    ),
    Defect(
        name="viewer_escaping",
        short='`autoescape=True` -> `select_autoescape(["html"])`',
        what="the viewer's escaping (HTML escaping of stored values)",
        path="reb_ray/viewer/server.py",
        old="autoescape=True,",
        new='autoescape=jinja2.select_autoescape(["html"]),',
        why="autoescape by extension: the templates are *.html.j2, so nothing is escaped",
        tests=("tests/viewer/test_viewer.py",),
    ),
    Defect(
        name="partition_once",
        short='_retry: `submit(spec.next_attempt())` -> `submit(spec)`',
        what="the partition's exactly-once scoring: a trial scored once after a network partition",
        path="reb_ray/orchestrators/ray_orchestrator.py",
        old="            submit(spec.next_attempt())\n",
        new="            submit(spec)\n",
        why="the retry of a dead attempt reuses its spec: same attempt number, the trial written twice as attempt 1",
        tests=("tests/orchestrators/test_partition.py",),
    ),
)
BY_NAME = {d.name: d for d in DEFECTS}


@dataclass
class Result:
    defect: Defect
    verdict: str = "ERROR"  # caught | NOT CAUGHT | ERROR | applied
    failing: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    log: Path | None = None


class Abort(Exception):
    """A loud stop: a mutation that does not apply, a copy that does not import its own code."""


def git(*args: str, cwd: Path = REPO) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise Abort(f"git {' '.join(args)} (in {cwd}) failed: {proc.stderr.strip()[:500]}")
    return proc.stdout


def snapshot(root: Path, rev: str | None) -> str:
    """Fill `root` (absent) with the revision `rev`, or with the working tree when `rev` is None.
    Returns a one-line description of what was taken."""
    head = git("rev-parse", "--verify", f"{rev or 'HEAD'}^{{commit}}").strip()
    git("clone", "--quiet", "--shared", "--no-checkout", str(REPO), str(root), cwd=root.parent)
    git("checkout", "--quiet", "--detach", head, cwd=root)
    if rev is not None:
        return f"revision {rev} = {head[:12]}"
    # The working tree: tracked files as they are now (edits and deletions), untracked files
    # that git does not ignore; .venv, caches and other ignored paths are left out.
    listed = git("ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0")
    copied = removed = 0
    for rel in filter(None, dict.fromkeys(listed)):
        src, dst = REPO / rel, root / rel
        if os.path.lexists(src):
            if src.is_dir() and not src.is_symlink():
                continue  # a submodule or nested repository: not product code
            dst.parent.mkdir(parents=True, exist_ok=True)
            if dst.is_symlink() or dst.exists():
                dst.unlink()
            shutil.copy2(src, dst, follow_symlinks=False)
            copied += 1
        elif os.path.lexists(dst):
            dst.unlink()
            removed += 1
    changed = [line for line in git("status", "--porcelain").splitlines() if line.strip()]
    return (f"working tree of {REPO} on {head[:12]} ({len(changed)} uncommitted change(s); "
            f"{copied} file(s) copied, {removed} deleted file(s) removed)")


def count_in(path: Path, text: str) -> int:
    return path.read_text().count(text) if path.is_file() else -1


def preflight(root: Path, defects: list[Defect]) -> None:
    """Every mutation's target occurs exactly once in its file of the snapshot; else Abort."""
    bad = []
    for d in defects:
        if not d.path.startswith(("reb_ray/", "analysis/", "probes/")):
            bad.append(f"{d.name}: {d.path} is not product code (reb_ray/, analysis/, probes/)")
            continue
        n = count_in(root / d.path, d.old)
        if n != 1:
            where = "the file does not exist" if n < 0 else f"found {n} times, expected exactly once"
            bad.append(f"{d.name}: target string in {d.path}: {where}:\n{textwrap.indent(d.old, '      | ')}")
    if bad:
        raise Abort("mutation(s) do not apply:\n  " + "\n  ".join(bad))


def mutate(copy: Path, d: Defect) -> None:
    path = copy / d.path
    text = path.read_text()
    n = text.count(d.old)
    if n != 1:
        raise Abort(f"{d.name}: target string found {n} times in {path}, expected exactly once")
    path.write_text(text.replace(d.old, d.new, 1))
    compiled = subprocess.run([sys.executable, "-c", "import ast, sys; ast.parse(open(sys.argv[1]).read())", str(path)],
                              capture_output=True, text=True)
    if compiled.returncode != 0:
        raise Abort(f"{d.name}: the mutated {d.path} does not parse: {compiled.stderr.strip()[-500:]}")


def test_env(copy: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(copy), env.get("PYTHONPATH")) if p)
    env.pop("PYTEST_ADDOPTS", None)  # the caller's extra options would change what runs and where XML goes
    return env


def check_imports(copy: Path, python: Path) -> None:
    """reb_ray, analysis, probes, tests and the probes directory resolve into `copy`; else Abort."""
    code = ("import json, reb_ray, analysis, probes, tests, reb_ray.paths as p; "
            "print(json.dumps({'reb_ray': reb_ray.__file__, 'analysis': analysis.__file__, 'probes': probes.__file__, "
            "'tests': tests.__file__, 'bundled probes': str(p.bundled_dir('probes'))}))")
    proc = subprocess.run([str(python), "-c", code], cwd=copy, env=test_env(copy), capture_output=True, text=True)
    if proc.returncode != 0:
        raise Abort(f"importing the copy's code failed: {proc.stderr.strip()[-800:]}")
    where = json.loads(proc.stdout.strip().splitlines()[-1])
    outside = {k: v for k, v in where.items() if not Path(v).resolve().is_relative_to(copy.resolve())}
    if outside:
        raise Abort(f"the copy's tests would not import the copy's code (PYTHONPATH={copy}): {outside}")


def supports_no_budgets(copy: Path) -> bool:
    for path in (copy / "tests").rglob("*.py"):
        with contextlib.suppress(OSError, UnicodeDecodeError):
            if "--no-budgets" in path.read_text():
                return True
    return False


def junit(xml: Path) -> tuple[list[str], dict[str, int]]:
    """(ids of failed or errored tests, {passed, failed, skipped}) from a JUnit XML file."""
    failing: list[str] = []
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    if not xml.is_file():
        return failing, counts
    for case in ET.parse(xml).getroot().iter("testcase"):
        classname, name = case.get("classname") or "", case.get("name") or ""
        parts = classname.split(".")
        # tests.orchestrators.test_partition / Class -> tests/orchestrators/test_partition.py::Class::name
        mod = next((i for i in range(len(parts), 0, -1) if parts[i - 1].startswith("test")), len(parts))
        nodeid = "/".join(parts[:mod]) + ".py" + "".join(f"::{p}" for p in parts[mod:]) + f"::{name}" if classname else name
        if case.find("failure") is not None or case.find("error") is not None:
            if nodeid not in failing:
                failing.append(nodeid)
                counts["failed"] += 1
        elif case.find("skipped") is not None:
            counts["skipped"] += 1
        else:
            counts["passed"] += 1
    return failing, counts


@contextlib.contextmanager
def locked(path: str | None):
    if not path:
        yield
        return
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def remove_mutant_toolboxes(d: Defect) -> list[str]:
    """A mutated probe makes the tests build a probe toolbox of its own (reb_ray.probing.toolbox:
    `$REB_RAY_CACHE_DIR` or ~/.cache/reb-ray, `toolbox-<hash>/` and its .tar, about 270 MB, keyed
    by the probes' contents). Remove those holding this mutation; returns their names."""
    if not d.path.startswith("probes/"):
        return []
    cache = Path(os.environ.get("REB_RAY_CACHE_DIR") or Path.home() / ".cache" / "reb-ray")
    removed = []
    for box in cache.glob("toolbox-*"):
        probe = box / d.path
        with contextlib.suppress(OSError, UnicodeDecodeError):
            if box.is_dir() and d.new in probe.read_text() and d.old not in probe.read_text():
                shutil.rmtree(box, ignore_errors=True)
                with contextlib.suppress(OSError):
                    box.with_name(box.name + ".tar").unlink()
                removed.append(box.name)
    return removed


def run_defect(d: Defect, pristine: Path, work: Path, logs: Path, args: argparse.Namespace) -> Result:
    res = Result(d)
    copy = work / d.name
    t0 = time.monotonic()
    try:
        shutil.copytree(pristine, copy, symlinks=True)
        mutate(copy, d)
        check_imports(copy, args.python)
        present = [t for t in d.tests if (copy / t).is_file()]
        missing = [t for t in d.tests if t not in present]
        if missing:
            res.notes.append(f"test file(s) missing in this revision: {', '.join(missing)}")
        if args.apply_only:
            res.verdict = "applied"
            return res
        if not present:
            res.verdict = "NOT CAUGHT"
            return res
        xml = logs / f"{d.name}.xml"
        res.log = logs / f"{d.name}.log"
        cmd = [str(args.python), "-m", "pytest", "-q", "-p", "no:cacheprovider",
               *(["--no-budgets"] if supports_no_budgets(copy) else []), f"--junitxml={xml}", *present]
        print(f"[{time.strftime('%H:%M:%S')}] {d.name}: {' '.join(cmd[1:])}", flush=True)
        with locked(args.lock), open(res.log, "w") as out:
            t0 = time.monotonic()  # the seconds reported are the tests', not the wait for the lock
            out.write(f"$ cd {copy} && PYTHONPATH={copy} {' '.join(cmd)}\n# mutation: {d.path}: {d.why}\n\n")
            out.flush()
            proc = subprocess.Popen(cmd, cwd=copy, env=test_env(copy), stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            try:
                rc = proc.wait(timeout=args.timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)  # pytest and everything it started (Ray, sweeps)
                proc.wait()
                rc = None
        res.failing, res.counts = junit(xml)
        if rc is None:
            res.verdict = "ERROR"
            res.notes.append(f"timed out after {args.timeout} s")
        elif rc == 1 and res.failing:
            res.verdict = "caught"
        elif rc == 0:
            res.verdict = "NOT CAUGHT"
        else:
            res.verdict = "ERROR"
            res.notes.append(f"pytest exit status {rc} (see {res.log})")
        if res.counts.get("skipped"):
            res.notes.append(f"{res.counts['skipped']} test(s) skipped")
        return res
    finally:
        res.seconds = time.monotonic() - t0
        if not args.apply_only:
            with contextlib.suppress(OSError):
                remove_mutant_toolboxes(d)
        if args.keep:
            res.notes.append(f"copy kept at {copy}")
        else:
            shutil.rmtree(copy, ignore_errors=True)


def table(results: list[Result]) -> str:
    rows = [("defect", "mutation (file)", "caught by (test ids)", "seconds")]
    for r in results:
        if r.verdict == "caught":
            caught = "caught: " + ", ".join(r.failing)
        else:
            caught = r.verdict + (f" ({', '.join(r.defect.tests)})" if r.verdict == "NOT CAUGHT" else "")
        if r.notes:
            caught += " [" + "; ".join(r.notes) + "]"
        rows.append((r.defect.name, f"{r.defect.short} ({r.defect.path})", caught, f"{r.seconds:.0f}"))
    widths = [min(max(len(row[i]) for row in rows), cap) for i, cap in enumerate((16, 110, 10_000, 7))]
    lines = []
    for i, row in enumerate(rows):
        lines.append(" | ".join(cell.ljust(widths[j]) if j < 3 else cell.rjust(widths[j]) for j, cell in enumerate(row)))
        if i == 0:
            lines.append("-+-".join("-" * w for w in widths))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--rev", default=None, help="the git revision to check (default HEAD)")
    where.add_argument("--tree", action="store_true", help="check the working tree, uncommitted changes included")
    parser.add_argument("--only", action="append", default=[], metavar="NAME", help="run this defect only (repeatable)")
    parser.add_argument("--list", action="store_true", help="list the defects and exit")
    parser.add_argument("--apply-only", action="store_true", help="plant every mutation, run no test")
    parser.add_argument("--lock", metavar="FILE", help="flock FILE around each pytest run")
    parser.add_argument("--keep", action="store_true", help="keep the scratch copies")
    parser.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT_S, help="seconds per defect's pytest run")
    parser.add_argument("--python", type=Path, default=VENV_PYTHON, help="the venv's python (default .venv/bin/python)")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the results as JSON to FILE")
    args = parser.parse_args(argv)

    if args.list:
        for d in DEFECTS:
            print(f"{d.name:16} {d.what}\n{'':16} mutation: {d.path}: {d.why}\n{'':16} tests: {', '.join(d.tests)}")
        return 0
    unknown = [n for n in args.only if n not in BY_NAME]
    if unknown:
        parser.error(f"unknown defect(s) {unknown}; known: {', '.join(BY_NAME)}")
    defects = [BY_NAME[n] for n in dict.fromkeys(args.only)] or list(DEFECTS)
    if not args.python.is_file():
        parser.error(f"no python at {args.python} (make the venv: scripts/setup.sh)")

    work = Path(tempfile.mkdtemp(prefix="mutation-check-"))
    logs = work / "logs"
    logs.mkdir()
    results: list[Result] = []
    try:
        pristine = work / "snapshot"
        taken = snapshot(pristine, None if args.tree else (args.rev or "HEAD"))
        print(f"mutation check of {taken}; scratch {work}", flush=True)
        preflight(pristine, defects)
        check_imports(pristine, args.python)
        print(f"{len(defects)} mutation(s) apply exactly once; the copy imports its own reb_ray", flush=True)
        for d in defects:
            res = run_defect(d, pristine, work, logs, args)
            results.append(res)
            print(f"[{time.strftime('%H:%M:%S')}] {d.name}: {res.verdict} in {res.seconds:.0f} s "
                  f"{res.counts or ''} {('; '.join(res.failing))[:400]}", flush=True)
    except Abort as exc:
        print(f"\nMUTATION CHECK ABORTED: {exc}", file=sys.stderr)
        return 2
    finally:
        if results and not args.apply_only:
            kept = work / "logs"
            final = Path(tempfile.gettempdir()) / f"mutation-check-logs-{time.strftime('%Y%m%d-%H%M%S')}"
            shutil.copytree(kept, final)
            print(f"\npytest logs and JUnit XML: {final}")
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)

    print("\n" + table(results))
    if args.json:
        args.json.write_text(json.dumps([{"defect": r.defect.name, "file": r.defect.path, "mutation": r.defect.why,
                                          "tests": list(r.defect.tests), "verdict": r.verdict, "failing": r.failing,
                                          "counts": r.counts, "notes": r.notes, "seconds": round(r.seconds, 1)}
                                         for r in results], indent=1))
    if args.apply_only:
        print(f"\n{len(results)} mutation(s) applied; no test run")
        return 0
    missed = [r for r in results if r.verdict != "caught"]
    for r in missed:
        print(f"{r.verdict}: {r.defect.name} ({r.defect.what}); meant to be caught by {', '.join(r.defect.tests)}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
