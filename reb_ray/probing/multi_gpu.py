"""C4 (multi GPU): run a task's distributed command with R ranks on a free rendezvous port.

Host side of the probe. The task's `stages.multi_gpu.command` is what EACH RANK runs (a script
with its arguments, optionally led by `python`/`python3`, or `-m module ...`); the probe wraps
it in the task's launcher with the rank count and a rendezvous port chosen here, so that two
C4 probes on one node never share a port. Rules per launcher (`launch_command`):

| launcher    | shell line run in the sandbox (PY = the report's interpreter, quoted)                      |
|-------------|---------------------------------------------------------------------------------------------|
| torchrun    | PY -m torch.distributed.run --nproc_per_node=R --master_addr=127.0.0.1 --master_port=PORT T |
| accelerate  | PY -m accelerate.commands.launch --num_processes R --main_process_port PORT T               |
| deepspeed   | PY -m deepspeed.launcher.runner --num_gpus R --master_addr 127.0.0.1 --master_port PORT T   |
| python      | the command as-is; MASTER_ADDR=127.0.0.1, MASTER_PORT=PORT, WORLD_SIZE=R in its env        |

T is the command with a leading `python`/`python3` word removed (the launcher starts the rank
interpreters itself); for deepspeed a leading `-m` becomes `--module`. Leading `VAR=value`
assignments of a shell line stay in front of the launcher. `python` is for frameworks that
spawn their ranks themselves (Lightning DDP, vLLM tensor parallel, detectron2's launcher).
The task command must not contain the launcher itself.

GPUs: the sandbox sees its assigned devices numbered from 0, so ranks get
CUDA_VISIBLE_DEVICES=0..R-1. With fewer assigned GPUs than ranks nothing runs and the record
says `insufficient_hardware` (the paper's label: a non-success that is not the agent's). The
`cpu_gloo` switch runs with no GPU at all and REB_RAY_C4_BACKEND=gloo (tests, CPU nodes).

After the run every process of it is found and killed, also ranks that escaped the exec's
process tree (a rank stuck in a rendezvous that never completes must not outlive the stage
and hold its GPU); their pids are recorded.
Grading is separate and pure: reb_ray.grading.multi_gpu.grade_multi_gpu.
"""

from __future__ import annotations

import fcntl
import random
import re
import shlex
import tempfile
import threading
import time
import uuid
from pathlib import Path

from reb_ray.models.task import MultiGpuStageSpec
from reb_ray.probing.command import run_stage_command
from reb_ray.sandbox import ExecResult, Sandbox
from reb_ray.sandbox.output import OutputSink

#: Environment variable test scripts read to pick their backend ("gloo" under `cpu_gloo`).
BACKEND_ENV = "REB_RAY_C4_BACKEND"
#: Environment variable whose value tags every process of one C4 run (found and killed after it).
RUN_TAG_ENV = "REB_RAY_C4_RUN"
MASTER_ADDR = "127.0.0.1"
#: Seconds a handed-out port stays reserved against being handed out again on this node.
RECENT_S = 900.0
#: Attempts at finding a port that no recent C4 run on this node was given.
PORT_ATTEMPTS = 20
#: Launches per run: one more, on a fresh port, when the rendezvous could not bind its port.
MAX_LAUNCHES = 2
#: Fallback port range (below Linux's default ephemeral range 32768-60999, where outgoing
#: connections take their source ports) when the sandbox has no python3 to bind port 0.
FALLBACK_RANGE = (20000, 32767)
#: Node-wide registry file (shared by the trial processes of one node, e.g. Ray workers).
REGISTRY_FILE = Path(tempfile.gettempdir()) / "reb-ray-c4-ports"

_BIND_ZERO = (
    "import socket\n"
    "s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n"
    "s.bind(('', 0))\n"
    "print(s.getsockname()[1])\n"
)
_PORT_IN_USE = re.compile(r"EADDRINUSE|[Aa]ddress already in use")
_ASSIGNMENTS = re.compile(r"^\s*((?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*)")
_PYTHON_WORD = re.compile(r"^python3?(?=\s|$)\s*")
_LAUNCHER_NEEDLES = {
    "torchrun": ["torch.distributed.run", "torchrun", "torch.distributed.launch"],
    "accelerate": ["accelerate.commands.launch", "accelerate launch"],
    "deepspeed": ["deepspeed.launcher", "deepspeed"],
    "python": [],
}

_recent: dict[int, float] = {}
_recent_lock = threading.Lock()


# ------------------------------------------------------------------------------------ ports

def _reserve(port: int) -> bool:
    """Record `port` as handed out now unless this process or another process on the node
    handed it out in the last RECENT_S seconds. True when it is reserved for the caller."""
    now = time.monotonic()
    with _recent_lock:
        for old in [p for p, t in _recent.items() if now - t > RECENT_S]:
            del _recent[old]
        if port in _recent:
            return False
        if not _reserve_on_node(port):
            return False
        _recent[port] = now
        return True


def _reserve_on_node(port: int) -> bool:
    """The node-wide half of `_reserve`: a small file of `port wall_time` lines under flock.

    Separate processes on one node (Ray workers running trials with the local provider or
    `network=host`) share the host's ports. An unusable file never blocks a run: then only
    the in-process registry applies.
    """
    try:
        with open(REGISTRY_FILE, "a+") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            f.seek(0)
            now = time.time()
            live: dict[int, float] = {}
            for line in f.read().splitlines():
                parts = line.split()
                if len(parts) == 2 and parts[0].isdigit():
                    try:
                        stamp = float(parts[1])
                    except ValueError:
                        continue
                    if now - stamp <= RECENT_S:
                        live[int(parts[0])] = stamp
            if port in live:
                return False
            live[port] = now
            f.seek(0)
            f.truncate()
            f.write("".join(f"{p} {t:.3f}\n" for p, t in live.items()))
            return True
    except OSError:
        return True


def _bound_port(sandbox: Sandbox) -> int | None:
    """A port the kernel in the sandbox's network namespace gave to bind(0), or None when the
    sandbox has no working python3."""
    res = sandbox.exec(["python3", "-c", _BIND_ZERO], timeout=30)
    text = res.output.strip().splitlines()
    if res.ok and text and text[-1].isdigit():
        return int(text[-1])
    return None


def _ports_in_use(sandbox: Sandbox) -> set[int]:
    """Local TCP ports in use in the sandbox's network namespace, from /proc/net/tcp{,6}."""
    res = sandbox.exec(["cat", "/proc/net/tcp", "/proc/net/tcp6"], timeout=30)
    used = set()
    for line in res.output.splitlines():
        fields = line.split()
        if len(fields) > 1 and ":" in fields[1]:
            try:
                used.add(int(fields[1].rsplit(":", 1)[1], 16))
            except ValueError:
                continue
    return used


def choose_port(sandbox: Sandbox) -> int:
    """A free TCP port for one C4 run's rendezvous, chosen inside the sandbox (its network
    namespace: its own for a bridged container, the host's for the local provider or
    `network=host`).

    The sandbox's python3 binds port 0 and the kernel's choice is taken; a port this node
    handed out in the last RECENT_S seconds (in-process registry under a lock, plus a node-wide
    file) is refused and another drawn, PORT_ATTEMPTS times at most. Without python3 (the agent
    removed it) a random port in FALLBACK_RANGE not listed in /proc/net/tcp{,6} is used.
    The caller records the port. Raises RebRayError (SandboxGone) when the sandbox is gone,
    RuntimeError when no unreserved port was found.
    """
    used: set[int] | None = None
    for _ in range(PORT_ATTEMPTS):
        port = _bound_port(sandbox) if used is None else None
        if port is None:
            if used is None:
                used = _ports_in_use(sandbox)
            port = random.randint(*FALLBACK_RANGE)
            if port in used:
                continue
        if _reserve(port):
            return port
    raise RuntimeError(f"no free rendezvous port after {PORT_ATTEMPTS} attempts")


# ------------------------------------------------------------------------------ the launch line

def _split_target(stage: MultiGpuStageSpec) -> tuple[str, str]:
    """(leading `VAR=value ` assignments, the per-rank target without a leading python word)."""
    command = stage.command
    if isinstance(command, list):
        argv = list(command)
        if argv and argv[0] in ("python", "python3"):
            argv = argv[1:]
        return "", shlex.join(argv)
    assert command is not None  # an applicable stage has a command (validated)
    match = _ASSIGNMENTS.match(command)
    prefix = match.group(1) if match else ""
    rest = command[match.end():] if match else command.lstrip()
    return prefix, _PYTHON_WORD.sub("", rest, count=1)


def launch_command(stage: MultiGpuStageSpec, python_path: str, port: int, ranks: int) -> str:
    """The shell line that starts `ranks` ranks of `stage.command` with its launcher,
    rendezvous on 127.0.0.1:`port` (see the module docstring for the rule per launcher).

    `python_path` is the report's interpreter (absolute). Raises ValueError for a command that
    is empty once its `python` word is removed.
    """
    if stage.launcher == "python":
        return stage.command if isinstance(stage.command, str) else shlex.join(stage.command)
    prefix, target = _split_target(stage)
    if not target.strip():
        raise ValueError(f"C4 command {stage.command!r} names no script to launch")
    py = shlex.quote(python_path)
    if stage.launcher == "torchrun":
        head = (f"{py} -m torch.distributed.run --nproc_per_node={ranks} "
                f"--master_addr={MASTER_ADDR} --master_port={port}")
    elif stage.launcher == "accelerate":
        head = f"{py} -m accelerate.commands.launch --num_processes {ranks} --main_process_port {port}"
    elif stage.launcher == "deepspeed":
        head = (f"{py} -m deepspeed.launcher.runner --num_gpus {ranks} "
                f"--master_addr {MASTER_ADDR} --master_port {port}")
        target = re.sub(r"^-m(?=\s)", "--module", target)
    else:  # pragma: no cover - the model's Literal forbids others
        raise ValueError(f"unknown launcher {stage.launcher!r}")
    return f"{prefix}{head} {target}"


# ------------------------------------------------------------------------------- leftovers

# $1: the run's tag line (VAR=id); $2: the lister's own tag line; $3: "1" to match cmdlines too.
# NEEDLES (env): newline-separated strings; a process whose cmdline holds one is a leftover.
# Prints "pid cmdline" per leftover found in the first round, kills them all (SIGKILL), repeats
# while any is found, and prints "REMAINING pid" for those still alive at the end.
_LEFTOVER_SCRIPT = r"""
me=$$
tag=$1 lister=$2 bycmd=$3
nl='
'
scan() {
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    [ "$p" = "$me" ] && continue
    [ "$p" = 1 ] && continue
    e=$(tr '\0' '\n' < "$d/environ" 2>/dev/null) || continue
    case "$nl$e$nl" in *"$nl$lister$nl"*) continue ;; esac
    hit=
    case "$nl$e$nl" in *"$nl$tag$nl"*) hit=1 ;; esac
    if [ -z "$hit" ] && [ "$bycmd" = 1 ]; then
      c=$(tr '\0' ' ' < "$d/cmdline" 2>/dev/null)
      if [ -n "$c" ]; then
        IFS=$nl; set -f
        for n in $NEEDLES; do
          [ -n "$n" ] && case "$c" in *"$n"*) hit=1 ;; esac
        done
        unset IFS; set +f
      fi
    fi
    [ -n "$hit" ] && echo "$p $(tr '\0' ' ' < "$d/cmdline" 2>/dev/null)"
  done
}
first=$(scan)
[ -n "$first" ] && printf '%s\n' "$first"
found=$first
for round in 1 2 3 4 5; do
  [ -z "$found" ] && break
  printf '%s\n' "$found" | while read -r p rest; do kill -9 "$p" 2>/dev/null; done
  sleep 0.1
  found=$(scan)
done
[ -n "$found" ] && printf '%s\n' "$found" | while read -r p rest; do echo "REMAINING $p"; done
exit 0
"""


def _needles(stage: MultiGpuStageSpec) -> list[str]:
    """Strings whose presence in a process's command line marks it as part of this run: the
    launcher's module names and the target's scripts (`*.py` words, the `-m` module)."""
    needles = list(_LAUNCHER_NEEDLES.get(stage.launcher, []))
    try:
        words = stage.command if isinstance(stage.command, list) else shlex.split(stage.command or "")
    except ValueError:
        words = (stage.command or "").split()
    for i, word in enumerate(words):
        if word.endswith(".py") and len(word) > 3:
            needles.append(word)
        elif word in ("-m", "--module") and i + 1 < len(words):
            needles.append(words[i + 1])
    return sorted(set(needles))


def kill_run_leftovers(sandbox: Sandbox, tag: str, needles: list[str]) -> tuple[list[int], list[int]]:
    """Find and SIGKILL every process of one C4 run: those carrying `RUN_TAG_ENV=tag` in their
    environment and, in a sandbox with its own process namespace (not the local provider,
    which shares the host's), those whose command line mentions a string of `needles`.

    Returns (pids found, pids still alive after the kills); both should be empty after an
    exec that ended normally or by its timeout.
    """
    lister = f"REB_RAY_C4_LISTER={uuid.uuid4().hex}"
    by_cmdline = "1" if sandbox.capabilities.own_processes else "0"
    res = sandbox.exec(
        ["/bin/sh", "-c", _LEFTOVER_SCRIPT, "leftovers", f"{RUN_TAG_ENV}={tag}", lister, by_cmdline],
        timeout=60,
        env={"NEEDLES": "\n".join(needles), lister.split("=", 1)[0]: lister.split("=", 1)[1]},
    )
    found, remaining = [], []
    for line in res.output.splitlines():
        head = line.split(" ", 1)[0]
        if head.isdigit():
            found.append(int(head))
        elif line.startswith("REMAINING ") and line[10:].strip().isdigit():
            remaining.append(int(line[10:].strip()))
    return found, remaining


# ------------------------------------------------------------------------------------ the run

def _record(stage: MultiGpuStageSpec, gpus: list[str], **fields) -> dict:
    base = {
        "status_hint": None, "port": None, "ports_tried": [], "ranks": stage.ranks,
        "launcher": stage.launcher, "command": None, "gpus": list(gpus), "cuda_visible_devices": None,
        "backend": None, "exit_code": None, "timed_out": False, "duration_s": None, "output": "",
        "output_truncated": False, "output_dropped_bytes": 0, "leftover_pids": [], "leftovers_remaining": [],
        "output_total_bytes": 0, "log_pattern_matched": None,
    }
    base.update(fields)
    return base


def run_multi_gpu(sandbox: Sandbox, stage: MultiGpuStageSpec, repo_dir: str, python_path: str, shim_dir: str,
                  gpus: list[str], cpu_gloo: bool = False, sink: OutputSink | None = None) -> dict:
    """Run the C4 stage once and return its raw record (a JSON-able dict; grade it with
    reb_ray.grading.multi_gpu.grade_multi_gpu).

    `gpus` are the GPUs assigned to the sandbox (physical ids; only their number matters here:
    inside, devices count from 0). With fewer than `stage.ranks` and no `cpu_gloo`, nothing
    runs and `status_hint` is "insufficient_hardware". `cpu_gloo` runs with CUDA_VISIBLE_DEVICES
    empty and REB_RAY_C4_BACKEND=gloo. `stage.timeout_s` (seconds) bounds the whole stage, a
    relaunch on a fresh port after a port clash included; `duration_s` is the wall time of all
    launches. `output` is the exec's bounded head+tail of the last launch, `output_total_bytes`
    all it printed, `log_pattern_matched` whether the success rule's pattern matched its whole
    output (null without a pattern); `sink` gets the output of every launch. `leftover_pids` are
    processes of the run found alive after it (then killed; expected empty).
    Raises RebRayError (SandboxGone) when the sandbox itself is gone.
    """
    ranks = stage.ranks
    if not cpu_gloo and len(gpus) < ranks:
        return _record(stage, gpus, status_hint="insufficient_hardware")
    visible = "" if cpu_gloo else ",".join(str(i) for i in range(ranks))
    tag = uuid.uuid4().hex
    ports: list[int] = []
    started = time.monotonic()
    while True:
        port = choose_port(sandbox)
        ports.append(port)
        line = launch_command(stage, python_path, port, ranks)
        env = {**stage.env, RUN_TAG_ENV: tag}
        if cpu_gloo:
            env[BACKEND_ENV] = "gloo"
        if stage.launcher == "python":
            env.update({"MASTER_ADDR": MASTER_ADDR, "MASTER_PORT": str(port), "WORLD_SIZE": str(ranks)})
        remaining = stage.timeout_s - (time.monotonic() - started)
        launch = stage.model_copy(update={"command": line, "env": env, "timeout_s": max(remaining, 1.0)})
        res = run_stage_command(sandbox, launch, repo_dir, python_path, shim_dir, visible_gpus=visible, sink=sink)
        clash = (not res.ok and not res.timed_out and _PORT_IN_USE.search(res.output[-16384:]) is not None)
        left = stage.timeout_s - (time.monotonic() - started)
        if not clash or len(ports) >= MAX_LAUNCHES or left < 5.0:
            break
    duration = time.monotonic() - started
    found, alive = kill_run_leftovers(sandbox, tag, _needles(stage))
    return _record(
        stage, gpus, port=port, ports_tried=ports, command=line, cuda_visible_devices=visible,
        backend="gloo" if cpu_gloo else None, exit_code=res.exit_code, timed_out=res.timed_out,
        duration_s=duration, output=res.output, output_truncated=res.truncated,
        output_dropped_bytes=res.dropped_bytes, leftover_pids=found, leftovers_remaining=alive,
        output_total_bytes=res.total_bytes, log_pattern_matched=res.pattern_matches.get(stage.success.log_pattern or ""),
    )


def record_as_exec_result(stage: MultiGpuStageSpec, raw: dict) -> ExecResult | None:
    """The last launch of a `run_multi_gpu` record as an ExecResult (for the stage row's kept
    output and evidence columns); None when nothing ran (insufficient_hardware)."""
    if raw.get("status_hint") == "insufficient_hardware":
        return None
    pattern, matched = stage.success.log_pattern, raw.get("log_pattern_matched")
    return ExecResult(exit_code=raw.get("exit_code"), timed_out=bool(raw.get("timed_out")),
                      duration_s=raw.get("duration_s") or 0.0, output=raw.get("output") or "",
                      total_bytes=raw.get("output_total_bytes") or 0,
                      pattern_matches={pattern: matched} if pattern is not None and matched is not None else {})
