"""What one trial did, from its rows and stored artifacts alone (`reb-ray trial show`): a trial is debuggable without running it again.

`show_trial(output_dir, trial_id)` prints, for the trial's current attempt (or `attempt`): its
status and whose failure it was, every attempt's outcome, the agent (kind, model, version,
exit code, time, the limit that fired), the LLM side (requests, failures, tokens, cost and the
CLI's own figures), the commands it ran with their exit codes (from the attempt's own ATIF
trajectory `trajectory.json`, with the tokens and cost of each model turn where the proxy's
requests could be paired with them; for a run written before attempts wrote one, from the
stored transcript, reb_ray.llm.transcript; else the environment manifest's `commands` list,
read from the agent's full log at capture; else the end of that log), its report, the environment it left
(manifest and digest; the kept image, when kept, and whether the disk budget removed it
since; each rebuild verification of it), what the reported
interpreter is with the start-up hooks and suspicious actions recorded (python_path_kind,
startup_hooks, suspicious_actions, c0_unowned), every stage (status, category, reason) and every
log of the attempt (the agent's, the transcript, the request and network logs, each stage's, and
any other file of its artifact directory).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow.compute as pc

from reb_ray.errors import RebRayError
from reb_ray.grading.verdict import differences, verdicts
from reb_ray.llm.transcript import commands
from reb_ray.results.read import REPROBE_SUFFIX, latest_attempts, read_trial, read_trials, source_sweep
from reb_ray.results.verifications import attempt_key, read_verifications
from reb_ray.sizes import size_text
from reb_ray.terminal import printable

MAX_COMMANDS = 200  # commands shown (the first ones; the rest are counted)
LOG_TAIL_LINES = 30  # lines of the agent log shown when the transcript has no commands
READ_LIMIT = 64 * 1024 * 1024  # bytes of an artifact read back


def _fmt(value, spec: str = "") -> str:
    return "-" if value is None else format(value, spec)


def _read_artifact(output_dir: Path, rel: str | None) -> tuple[bytes | None, str | None]:
    """(content, None) of a gzip artifact, or (None, why not)."""
    if not rel:
        return None, "not stored"
    try:
        with gzip.open(output_dir / rel, "rb") as f:
            return f.read(READ_LIMIT), None
    except (OSError, EOFError) as exc:
        return None, f"{output_dir / rel}: {type(exc).__name__}: {exc}"


def _of_sweep(rows, sweep_id: str | None):
    """`rows` (a trial's rows of every sweep) of `sweep_id` only (all when None)."""
    return rows if sweep_id is None else rows.filter(pc.equal(rows["sweep_id"], sweep_id))


def _pick(output_dir: Path, trial_id: str, sweep_id: str | None, attempt: int | None, every=None) -> tuple[dict, list[dict]]:
    """(the chosen attempt's row, every attempt's row, by attempt) or RebRayError naming what
    exists. `every`: the trial's rows of every sweep, read once by the caller."""
    rows = _of_sweep(every if every is not None else read_trial(output_dir, trial_id), sweep_id)
    if rows.num_rows == 0:
        known = sorted({t for t in read_trials(output_dir, sweep_id, columns=["trial_id"])["trial_id"].to_pylist() if t})
        hint = f"; trials there: {', '.join(known[:8])}{' ...' if len(known) > 8 else ''}" if known else ""
        raise RebRayError(f"no trial {trial_id!r} under {output_dir}{f' in sweep {sweep_id}' if sweep_id else ''}{hint}")
    sweeps = sorted(set(rows["sweep_id"].to_pylist()))
    source = source_sweep(rows.select(["sweep_id", "reused_from"]).to_pylist())
    if len(sweeps) > 1 and source is not None:
        # One attempt graded again or reused by later sweeps: its re-probe when there is one (the
        # latest grading of the environment itself, shown beside the others), else the source
        # with its own logs.
        pick = source + REPROBE_SUFFIX if source + REPROBE_SUFFIX in sweeps else source
        rows = rows.filter(pc.equal(rows["sweep_id"], pick))
    elif len(sweeps) > 1:
        raise RebRayError(f"trial {trial_id!r} is in sweeps {', '.join(sweeps)}: choose one with --sweep-id")
    attempts = sorted(rows.to_pylist(), key=lambda r: r["attempt"] or 0)
    if attempt is None:
        return latest_attempts(rows).to_pylist()[0], attempts
    chosen = [r for r in attempts if r["attempt"] == attempt]
    if not chosen:
        raise RebRayError(f"trial {trial_id!r} has no attempt {attempt}; it has {', '.join(str(r['attempt']) for r in attempts)}")
    return chosen[-1], attempts


def _usd(value: float | None) -> str:
    return "-" if value is None else f"${value:.6f}"


def _llm_lines(row: dict) -> list[str]:
    if row.get("llm_requests") is None:
        return ["llm      none recorded (the agent uses no LLM, or the attempt ended before its agent phase)"]
    return [
        f"llm      {row['llm_requests']} request(s) through the proxy; failed: rate-limited {_fmt(row['llm_rate_limited'])}, "
        f"unavailable {_fmt(row['llm_unavailable'])}, auth {_fmt(row['llm_auth_failures'])}, "
        f"budget {_fmt(row['llm_budget_failures'])}; in flight at the end {_fmt(row['llm_in_flight'])}",
        f"tokens   input {_fmt(row['input_tokens'])} (cached {_fmt(row['cached_input_tokens'])}, cache write "
        f"{_fmt(row['cache_write_tokens'])}), output {_fmt(row['output_tokens'])} (reasoning {_fmt(row['reasoning_tokens'])}); "
        f"model {_fmt(row['llm_model'])}",
        f"cost     {_usd(row['cost_usd'])} ({_fmt(row['cost_source'])}, "
        f"prices {_fmt(row['price_version'])}); the agent's own figures: input {_fmt(row['agent_reported_input_tokens'])}, "
        f"output {_fmt(row['agent_reported_output_tokens'])}, cost {_usd(row['agent_reported_cost_usd'])}",
        f"last LLM error  {_fmt(row['llm_last_error'])}",
    ]


def _command_text(command: str, limit: int = 300) -> str:
    """A command on its own listing line: its first `limit` characters, a multi-line script's
    line breaks shown as `\\n` so the listing's indentation holds."""
    return command.strip()[:limit].replace("\r\n", "\\n").replace("\n", "\\n")


def _atif_call(step: dict, call: dict) -> tuple[str, str, str]:
    """(what ran, its status, the start of its output) of one tool call of an ATIF step."""
    arguments = call.get("arguments") if isinstance(call.get("arguments"), dict) else {}
    what = arguments.get("command") if isinstance(arguments.get("command"), str) else \
        f"{call.get('function_name')} {json.dumps(arguments, ensure_ascii=False)}"
    results = (step.get("observation") or {}).get("results") or []
    result = next((r for r in results if isinstance(r, dict) and r.get("source_call_id") == call.get("tool_call_id")), {})
    extra = result.get("extra") or {}
    status = (f"exit {extra['exit_code']}" if extra.get("exit_code") is not None else "failed" if extra.get("is_error")
              else "exit ?" if not result else "done")
    if extra.get("timed_out"):
        status += " (timed out)"
    content = result.get("content") if isinstance(result.get("content"), str) else ""
    return str(what), status, " | ".join(content.strip().splitlines()[:3])


def _atif_lines(output_dir: Path, row: dict) -> list[str] | None:
    """The commands and model turns of the attempt's trajectory.json; None when it has none
    stored, or it is unreadable (then the older sources are read)."""
    rel = row.get("atif_path")
    if not rel:
        return None
    try:
        with open(output_dir / rel, "rb") as f:
            doc = json.loads(f.read(READ_LIMIT))
        steps = [s for s in doc["steps"] if isinstance(s, dict)]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    agent = [s for s in steps if s.get("source") == "agent"]
    calls = [(s, c) for s in agent for c in s.get("tool_calls") or [] if isinstance(c, dict)]
    metered = [s["metrics"] for s in agent if isinstance(s.get("metrics"), dict)]
    turns = f"{len(metered)} with the proxy's tokens and cost" if metered else \
        (doc.get("extra") or {}).get("metrics_attribution") or "none metered"
    lines = [f"steps    {len(steps)} in {rel} (ATIF); {len(agent)} agent step(s), model turns: {turns}",
             f"commands ({len(calls)}, from the trajectory):"]
    for i, (step, call) in enumerate(calls[:MAX_COMMANDS]):
        what, status, output = _atif_call(step, call)
        lines.append(f"  [{i}] step {step.get('step_id')} $ {_command_text(what)}")
        metrics = step.get("metrics") or {}
        cost = f"  (in {_fmt(metrics.get('prompt_tokens'))}, out {_fmt(metrics.get('completion_tokens'))}, " \
               f"{_usd(metrics.get('cost_usd'))})" if metrics and call is step["tool_calls"][0] else ""
        lines.append(f"      {status}" + (f"  {output[:200]}" if output else "") + cost)
    if len(calls) > MAX_COMMANDS:
        lines.append(f"  ... {len(calls) - MAX_COMMANDS} more")
    return lines


def _command_lines(output_dir: Path, row: dict) -> list[str]:
    from_atif = _atif_lines(output_dir, row)
    if from_atif is not None:
        return from_atif
    data, why = _read_artifact(output_dir, row.get("trajectory_path"))
    found = commands(data) if data else []
    if found:
        lines = [f"commands ({len(found)}, from the transcript {row['trajectory_path']}):"]
        for i, cmd in enumerate(found[:MAX_COMMANDS]):
            status = (f"exit {cmd.exit_code}" if cmd.exit_code is not None
                      else "failed" if cmd.failed else "ok" if cmd.failed is False else "exit ?")
            lines.append(f"  [{i}] $ {_command_text(cmd.command)}")
            output = " | ".join(line for line in cmd.output.strip().splitlines()[:3])
            lines.append(f"      {status}" + (f"  {output[:200]}" if output else ""))
        if len(found) > MAX_COMMANDS:
            lines.append(f"  ... {len(found) - MAX_COMMANDS} more")
        return lines
    if why == "not stored":
        why = f"no transcript stored: the agent kind {_fmt(row.get('agent_kind'))} keeps none"
    else:
        why = f"the transcript {row['trajectory_path']} names none" if why is None else f"the transcript is unreadable: {why}"
    listed = _manifest_commands(output_dir, row)
    if listed:
        lines = [f"commands ({len(listed)}; {why}; from the environment manifest {row['env_manifest_path']}, "
                 f"its `commands` list):"]
        for i, cmd in enumerate(listed[:MAX_COMMANDS]):
            lines.append(f"  [{i}] $ {_command_text(str(cmd.get('command') or ''))}")
            lines.append(f"      exit {_fmt(cmd.get('exit_code'))}")
        if len(listed) > MAX_COMMANDS:
            lines.append(f"  ... {len(listed) - MAX_COMMANDS} more")
        return lines
    log, log_why = _read_artifact(output_dir, row.get("agent_log_path"))
    head = f"commands: none recorded ({why}; no commands in an environment manifest); "
    if log is None:
        tail = (row.get("agent_output_tail") or "").splitlines()[-LOG_TAIL_LINES:]
        return [head + f"the agent log is {log_why}; the row's output tail:", *(f"  {line}" for line in tail)]
    tail = log.decode("utf-8", errors="replace").splitlines()[-LOG_TAIL_LINES:]
    return [head + f"the last {len(tail)} lines of the agent log {row['agent_log_path']}:", *(f"  {line}" for line in tail)]


def _manifest(output_dir: Path, row: dict) -> dict | None:
    """The attempt's environment manifest (reb_ray.environment.capture), None when not stored or unreadable."""
    data, _ = _read_artifact(output_dir, row.get("env_manifest_path"))
    try:
        return json.loads(data) if data else None
    except ValueError:
        return None


def _manifest_commands(output_dir: Path, row: dict) -> list[dict]:
    """The manifest's `commands` list (read from the transcript or the agent's full log at capture)."""
    manifest = _manifest(output_dir, row)
    listed = ((manifest or {}).get("commands") or {}).get("list")
    return [c for c in listed if isinstance(c, dict)] if isinstance(listed, list) else []


def _size(value: int | None) -> str:
    """Bytes in the units `reb-ray env list` and `env gc` print the same images in."""
    return "-" if value is None else size_text(value)


def _env_lines(row: dict, evicted_by: str | None = None, presence: tuple[bool | None, str] | None = None) -> list[str]:
    """The environment the agent left: its manifest (path, sha256 digest of the JSON bytes) and
    whether the container was kept as an image (its id and sizes only when kept: an image not
    kept was removed; `evicted_by`: the attempt whose disk budget removed it since; `presence`:
    whether the image is still on its node, reb_ray.environment.keep.image_presence). Nothing
    when the attempt predates environment capture."""
    columns = ("env_manifest_path", "env_capture_error", "env_kept", "env_keep_policy")
    if all(row.get(c) is None for c in columns):
        return []
    if row.get("env_manifest_path"):
        text = (f"env      manifest {row['env_manifest_path']} (sha256 {_fmt(row.get('env_manifest_digest'))}, "
                f"{_fmt(row.get('env_manifest_bytes'))} bytes of JSON, gzipped on disk)")
    else:
        text = f"env      no manifest ({_fmt(row.get('env_capture_error'))})"
    if row.get("env_kept"):
        text += (f"; kept as image {_fmt(row.get('env_image_tag'))} ({str(row.get('env_image_id') or '-')[:19]}) on "
                 f"{_fmt(row.get('node'))}: its layer {_size(row.get('env_image_bytes'))}, whole image "
                 f"{_size(row.get('env_image_total_bytes'))}")
        if evicted_by:
            text += f"; since removed by the node's disk budget (at {evicted_by})"
        elif presence is not None:
            there, why = presence
            text += "; still there" if there else f"; {why}" if there is False else f" ({why})"
    else:
        kept = "not decided" if row.get("env_kept") is None else "no"
        text += f"; kept: {kept} (policy {_fmt(row.get('env_keep_policy'))})"
    if row.get("env_keep_error"):
        text += f"; keep error: {row['env_keep_error']}"
    return [text]


def _presence(row: dict) -> tuple[bool | None, str] | None:
    """reb_ray.environment.keep.image_presence for a kept attempt (imported here: the module
    loads the sandbox package, which an attempt that kept nothing does not need)."""
    if not row.get("env_kept"):
        return None
    from reb_ray.environment.keep import image_presence

    return image_presence(row)


def _limits_line(row: dict) -> str:
    """Whether the sandbox's limits (memory, pids, CPUs) were enforced by its engine
    (`sandbox_limits_enforced`: rootless Podman without cgroup delegation does not; a sandbox
    with no container, local, has none); unknown for rows that predate the column."""
    enforced = row.get("sandbox_limits_enforced")
    what = {True: "enforced", False: "NOT enforced (the engine could not apply them; only the disk quota was watched)",
            None: "unknown (not recorded)"}[enforced]
    return f"sandbox  {_fmt(row.get('sandbox_provider'))}; memory, pids and CPU limits {what}"


def _evicted_by(output_dir: Path, row: dict) -> str | None:
    """The trial whose settle removed this attempt's kept image under the node's disk budget
    (its row's env_evicted names the image's tag), or None when no row of the output says so."""
    tag = row.get("env_image_tag")
    if not row.get("env_kept") or not tag:
        return None
    table = read_trials(output_dir, columns=["sweep_id", "trial_id", "attempt", "env_evicted"])
    for other in table.to_pylist():
        if tag in (other.get("env_evicted") or []):
            return f"{other['trial_id']} attempt {other['attempt']} of sweep {other['sweep_id']}"
    return None


def _verification_lines(output_dir: Path, row: dict) -> list[str]:
    """The attempt's rebuild verifications (`reb-ray env verify`, `sweep --verify-exports`), from
    <output>/environments/verifications.jsonl, oldest first: the verdict line, the rebuild's
    seconds against the agent phase's, and the export directory."""
    out = []
    for record in read_verifications(output_dir) or []:
        if attempt_key(record) != (row["sweep_id"], row["trial_id"], row["attempt"]):
            continue
        text = f"verify   {record.get('verdict') or '-'}"
        build, source = record.get("build_s"), record.get("source_agent_wall_time_s")
        if build is not None:
            text += f"; rebuilt in {build:.1f} s" + (f" ({build / source:.2f}x the agent phase's {source:.1f} s)" if source else "")
        if record.get("export"):
            text += f"; export {record['export']}"
        out.append(text)
    return out


def _grading_lines(output_dir: Path, row: dict, every=None) -> list[str]:
    """Every grading of the attempt by its probes, oldest first: the run's own and each re-probe
    of its kept environment (`reb-ray regrade --rerun-probes`, sweep `<sweep>-reprobe`), each
    with the toolbox that graded it, its C0..C5 verdicts and what changed against the run's
    own; the one shown here is marked. Nothing when the attempt was never re-probed."""
    source_sweep = row.get("reused_from") if row["sweep_id"].endswith(REPROBE_SUFFIX) else row["sweep_id"]
    if not source_sweep:
        return []
    gradings = []
    for sweep in (source_sweep, source_sweep + REPROBE_SUFFIX):
        rows = every if every is not None else read_trial(output_dir, row["trial_id"])
        gradings += [r for r in _of_sweep(rows, sweep).to_pylist()
                     if r["attempt"] == row["attempt"] and r["status"] == "scored"]
    if len(gradings) < 2 or gradings[0]["sweep_id"] != source_sweep:
        return []
    source = gradings[0]
    lines = [f"gradings of attempt {row['attempt']} ({len(gradings)}, oldest first; re-probes ran on its kept image):"]
    for i, grading in enumerate(gradings):
        stages = " ".join(f"{s} {v or '-'}" for s, v in verdicts(grading).items())
        what = "the run's own" if i == 0 else f"re-probed, finished {_fmt(grading.get('finished_at'))}"
        text = f"  {grading['sweep_id']} ({what}; toolbox {_fmt(grading.get('probe_toolbox'))}): {stages}"
        if i:
            text += "; " + ("changed " + ", ".join(differences(source, grading)) if differences(source, grading) else "same verdicts")
        shown = grading["sweep_id"] == row["sweep_id"] and grading.get("finished_at") == row.get("finished_at")
        lines.append(text + ("  <- shown" if shown else ""))
    return lines


def _report_lines(stages: list[dict], row: dict) -> list[str]:
    report = next((s for s in stages if s["stage"] == "report"), None)
    head = f"report   {_fmt(row.get('report_status'))} (source {_fmt(row.get('report_source'))})"
    if row.get("c5_report_fault_keys"):  # contract slips: counted by C5, never a reason to skip a stage
        head += f", contract faults in {', '.join(row['c5_report_fault_keys'])}"
    if report is None or not report.get("raw"):
        return [head + (f": {report['reason']}" if report and report.get("reason") else "")]
    try:
        text = json.dumps(json.loads(report["raw"]), indent=None)
    except ValueError:
        text = report["raw"]
    return [head + ":", f"  {text[:2000]}"]


def _shortcut_lines(row: dict) -> list[str]:
    """What the interpreter is, who owns what C0 resolved, start-up hooks and suspicious actions
    (reb_ray.grading.startup); "-" where unknown (an attempt older than these checks)."""
    unowned = row.get("c0_unowned")
    modules = row.get("c0_unowned_modules") or []
    hooks = row.get("startup_hooks")
    lines = [f"checks   python_path {_fmt(row.get('report_python_path'))} is {_fmt(row.get('python_path_kind'))}; "
             f"C0 unowned {_fmt(unowned)}" + (f" ({', '.join(modules[:10])})" if modules else "")
             + f"; start-up hooks {'-' if hooks is None else len(hooks)}"]
    lines.extend(f"  hook: {hook}" for hook in hooks or [])
    actions = row.get("suspicious_actions")
    if actions is None:
        lines.append("suspicious actions: - (not recorded)")
    else:
        lines.append(f"suspicious actions ({len(actions)})" + (":" if actions else ": none"))
        lines.extend(f"  ! {action}" for action in actions)
    return lines


def _stage_lines(stages: list[dict]) -> list[str]:
    lines = ["stages:"]
    for s in stages:  # in the order the attempt recorded them
        parts = [f"  {s['stage']:<10} {s['status']:<8}", _fmt(s.get("failure_category"))]
        if s.get("exit_code") is not None:
            parts.append(f"exit {s['exit_code']}")
        if s.get("duration_s") is not None:
            parts.append(f"{s['duration_s']:.1f} s")
        if s.get("witness_status"):
            parts.append(f"witness {s['witness_status']} ({_fmt(s.get('witness_interpreters'))} interpreter(s), "
                         f"{_fmt(s.get('witness_repo_files'))} pinned file(s))")
        if s.get("reason"):
            parts.append(str(s["reason"])[:300])
        lines.append("  ".join(parts))
    return lines


def _repo_lines(row: dict) -> list[str]:
    """What the agent changed in the tracked files and what was put back before the probes."""
    if row.get("repo_modified") is None and row.get("repo_restored") is None:
        return []
    changed = ", ".join(row.get("repo_modified_files") or []) or "nothing"
    restored = row.get("repo_restored_files")
    back = ("unknown" if restored is None else ", ".join(restored) or "nothing") + (" (HEAD moved)" if row.get("repo_head_moved") else "")
    return [f"repo     changed (git status): {changed}; restored to the pinned commit: {back} "
            f"(restore {'done' if row.get('repo_restored') else 'failed' if row.get('repo_restored') is False else 'unknown'})"]


def _attempt(row: dict) -> str:
    category = row.get("failure_category")
    return f"{row['attempt']} {row['status']}" + (f" {category}" if category else "")


_TRIAL_FILES = (("agent log", "agent_log_path"), ("transcript", "trajectory_path"), ("trajectory", "atif_path"),
                ("request log", "llm_log_path"),
                ("network log", "network_log_path"), ("env manifest", "env_manifest_path"))


def _file_lines(output_dir: Path, row: dict, stages: list[dict]) -> list[str]:
    """Every log of the attempt: those its rows name (the trial's, then each stage's, in the
    order recorded), then any other file in the attempt's artifact directory, with sizes;
    paths relative to the output directory. A named file that is not there says so."""
    from reb_ray.trial.artifacts import artifact_dir

    named = [(name, row.get(key)) for name, key in _TRIAL_FILES]
    named += [(f"{s['stage']} log", s.get("log_path")) for s in stages]
    seen: set[str] = set()  # a stage row may name the trial's own log (the agent stage): listed once
    named = [(name, path) for name, path in named if path and not (path in seen or seen.add(path))]
    directory = output_dir / artifact_dir(row["sweep_id"], row["trial_id"], row["attempt"])
    known = {path for _, path in named}
    if directory.is_dir():  # logs no column names (written by a newer harness, or left by a cut attempt)
        named += [("other", f.relative_to(output_dir).as_posix()) for f in sorted(directory.rglob("*"))
                  if f.is_file() and not f.name.startswith(".") and f.relative_to(output_dir).as_posix() not in known]
    if not named:
        return ["files    none stored"]
    # "files", not "logs": the trajectory and the environment manifest are among them; the paths
    # are the output directory's, which the header names (the shell may be elsewhere).
    lines = [f"files    {len(named)} file(s) of attempt {row['attempt']}, paths under {output_dir}:"]
    for name, path in named:
        try:
            size = f"{(output_dir / path).stat().st_size} bytes"
        except OSError:
            size = "missing"
        lines.append(f"  {name:<14} {path} ({size})")
    return lines


def show_trial(output_dir: Path, trial_id: str, sweep_id: str | None = None, attempt: int | None = None) -> str:
    """The text `reb-ray trial show` prints (module docstring). Raises RebRayError for a trial or
    attempt that is not there (naming what is) or an unreadable results shard."""
    output_dir = Path(output_dir)
    # The trial's rows of every sweep, read once from the row groups that hold them (a large
    # output is not read whole): the attempt shown and its gradings come from them.
    every = read_trial(output_dir, trial_id)
    row, attempts = _pick(output_dir, trial_id, sweep_id, attempt, every)
    stages = [s for s in read_trial(output_dir, trial_id, row["sweep_id"], stages=True).to_pylist()
              if s["attempt"] == row["attempt"]]
    lines = [
        f"trial {trial_id} of sweep {row['sweep_id']}: attempt {row['attempt']} ({len(attempts)} recorded), "
        f"task {row['task_id']}, node {_fmt(row['node'])}",
        f"status   {row['status']}; failure owner {_fmt(row['failure_owner'])}, category {_fmt(row['failure_category'])}"
        + (f"; reason: {row['failure_reason']}" if row.get("failure_reason") else ""),
        "attempts " + "; ".join(_attempt(r) for r in attempts),
        f"agent    {row['agent']} (kind {_fmt(row['agent_kind'])}, model {_fmt(row['agent_model'])}, version "
        f"{_fmt(row['agent_version'])}); exit {_fmt(row['agent_exit_code'])} after {_fmt(row['agent_wall_time_s'], '.1f')} s; "
        f"limit fired: {_fmt(row['agent_limit'])}",
        *_llm_lines(row),
        *_command_lines(output_dir, row),
        *_report_lines(stages, row),
        *_repo_lines(row),
        *_env_lines(row, _evicted_by(output_dir, row), _presence(row)),
        _limits_line(row),
        *_verification_lines(output_dir, row),
        *_grading_lines(output_dir, row, every),
        *_shortcut_lines(row),
        *_stage_lines(stages),
        *_file_lines(output_dir, row, stages),
    ]
    return printable("\n".join(lines))  # every line may hold the agent's words
