"""`reference`: rebuilds the task's stored reference environment inside the sandbox.

A task's reference (`tasks/<suite>/<task>/reference/`, written by `reb-ray tasks reference`)
is the recipe of an environment that was verified by rebuilding: a Dockerfile, the locks, the
source manifest, the source agent's report and `reference.toml` (the stages it passed, the
hardware it ran on). This agent replays that recipe in the trial's sandbox instead of building
anything of its own, so `reb-ray tasks verify` can show that each task is solvable: the probes
then judge the rebuilt environment exactly as they judge an agent's.

The recipe's Dockerfile is replayed in order, with the grammar `reb-ray env export` writes:

- `ENV K=V ...`: set for every later `RUN` (never for the probes: what the probes need is in
  the report's `env`, as for any agent);
- `COPY SRC DEST`: SRC from the reference directory put at DEST; `repo` is skipped (the sandbox
  already holds the task's repository at its pinned commit), `certs` becomes a directory
  holding the sandbox's CA bundle (`$PIP_CERT`) as `ca.pem` when it has one (as `reb-ray env
  verify` lends the node's to the build), and a missing `wheels` is skipped (a reference holds
  no wheels: pip takes the lock's exact versions, hashes checked, from the node's package cache,
  a wheelhouse or the index);
- `RUN CMD`: `sh -c CMD` in the current `WORKDIR`, with the agent's environment (the node's
  find-links) and REPLAY_ENV under the recipe's `ENV`; the first one that fails ends the phase
  with its exit code (a lock naming a version that does not exist fails here, as it would in
  `docker build`). `RUN PYTHON -m venv DIR` alone (what an export writes first) makes the
  same venv without ensurepip's byte-compiling (VENV_WITHOUT_COMPILING);
- `FROM`, `USER`: noted only (the sandbox image is the sweep's; sandbox commands run as its user).

When every step succeeded, the stored report is written to the trial's report path. When one
failed, no report is written: the recipe did not build, and every stage is the agent's failure.
The agent needs a sandbox with its own filesystem (`fixed_paths`): the recipe creates the
environment at the same absolute prefix the source agent used.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import time
from pathlib import Path

from reb_ray.agents.base import Agent, AgentContext, AgentRun
from reb_ray.sandbox import Sandbox

#: The directory of a task that holds its reference recipe.
REFERENCE_DIR = "reference"
#: The recipe files `reb-ray tasks reference` stores (reference.toml and README.md besides).
RECIPE_FILES = ("Dockerfile", "requirements.lock", "requirements.nohash.lock", "manifest.json", "report.json")
_MAX_OUTPUT = 200_000  # characters of the steps' output kept for the agent's log
#: Under the recipe's own `ENV`: pip installs without byte-compiling (`PIP_COMPILE=0`, pip's
#: variable for `--compile`; `PIP_NO_COMPILE=1` would turn compiling on). Bytecode is no part
#: of an environment (Python writes what a run imports on first import), and compiling what a
#: torch lock installs is about 30 s of one core of the replay's 45.
REPLAY_ENV = {"PIP_COMPILE": "0"}
#: `RUN PYTHON -m venv DIR` with nothing else: an absolute interpreter and directory.
_PLAIN_VENV = re.compile(r"^(/[\w./+-]+) -m venv (/[\w./+-]+)$")
#: `PYTHON -m venv DIR` ($1, $2) as the same venv, made faster: ensurepip installs the wheels it
#: names and byte-compiles them (about 5 s of CPU in the sandbox image, 40% of a small
#: reference's agent phase). Here the interpreter's own pip installs those very versions from
#: ensurepip's wheel directory, isolated from pip's settings as ensurepip is, by the venv's
#: interpreter of the same name (the scripts' first lines) and without compiling (bytecode is no
#: part of an environment: Python writes it on first import); pyvenv.cfg gets the command
#: line `-m venv` writes. Where anything of that is missing (a pip without `--python`,
#: ensurepip's wheels bundled inside Python) it is plain ensurepip, as recorded.
VENV_WITHOUT_COMPILING = r"""
wanted="$("$1" -I -c 'import ensurepip, os
p = ensurepip._get_packages().values()
print(*sorted({"--find-links=" + os.path.dirname(x.wheel_path) for x in p}),
      *[os.path.basename(x.wheel_path).split("-")[0] + "==" + x.version for x in p])' 2>/dev/null)" \
  && [ -n "$wanted" ] && "$1" -m venv --without-pip "$2" \
  && "$1" -m pip --isolated --python "$2/bin/${1##*/}" install -q --no-compile --no-index $wanted \
  && sed -i "s|^command = .*|command = $1 -m venv $2|" "$2/pyvenv.cfg" && exit 0
echo "reference: the venv made with ensurepip" >&2
exec "$1" -m venv "$2"
"""


def reference_dir(task) -> Path:
    """Where `task`'s reference recipe lies: `<task_dir>/reference`."""
    return Path(task.task_dir) / REFERENCE_DIR


def replayed_files(where: Path) -> list[Path]:
    """The files of the reference directory `where` that the replay reads, sorted: the
    Dockerfile, every source its `COPY` steps take from the directory (a directory source with
    all its files; `repo` and an absent `certs` or `wheels` are not read from it), and the stored
    report. A Dockerfile the replay cannot parse counts alone (with the report): the replay
    stops at it. An empty list when there is no Dockerfile."""
    dockerfile = where / "Dockerfile"
    if not dockerfile.is_file():
        return []
    files = {dockerfile}
    try:
        steps = parse_dockerfile(dockerfile.read_text())
    except (ValueError, UnicodeDecodeError):
        steps = []
    for word, args in steps:
        if word != "COPY":
            continue
        try:
            *sources, _ = shlex.split(args)
        except ValueError:
            continue
        for src in sources:
            path = where / src
            if src == "repo" or not path.exists():
                continue
            files.update(p for p in ([path] if path.is_file() else path.rglob("*")) if p.is_file())
    if (where / "report.json").is_file():
        files.add(where / "report.json")
    return sorted(files)


def recipe_digest(task) -> str | None:
    """The 16-hex sha256 of `task`'s reference recipe as the replay reads it (replayed_files:
    each file's path relative to the reference directory and its bytes), so that a changed
    Dockerfile, lock or report is another recipe; None when the task has no recipe. The
    reference.toml and README are left out: they describe the recipe, the replay never reads
    them."""
    where = reference_dir(task)
    files = replayed_files(where)
    if not files:
        return None
    digest = hashlib.sha256()
    for path in files:
        name = path.relative_to(where).as_posix().encode()
        data = path.read_bytes()
        digest.update(b"%d:%s%d:" % (len(name), name, len(data)))
        digest.update(data)
    return digest.hexdigest()[:16]


def parse_dockerfile(text: str) -> list[tuple[str, str]]:
    """The recipe's instructions, in order: (INSTRUCTION upper-cased, its arguments), with
    backslash continuations joined and comments and blank lines dropped. Raises ValueError
    naming the line of an instruction the replay does not know."""
    steps, pending, number = [], "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        word, _, rest = line.strip().partition(" ")
        word = word.upper()
        if word not in ("FROM", "USER", "ENV", "COPY", "RUN", "WORKDIR"):
            raise ValueError(f"Dockerfile line {number}: {word} is not an instruction the reference agent replays")
        steps.append((word, rest.strip()))
    if pending:
        raise ValueError("Dockerfile: the last line ends in a continuation")
    return steps


def parse_env(args: str) -> dict[str, str]:
    """`ENV K=V K2="v 2"` as {K: V, K2: "v 2"} (shell quoting, as Docker reads it)."""
    out = {}
    for word in shlex.split(args):
        key, sep, value = word.partition("=")
        if not sep:
            raise ValueError(f"ENV {args!r}: {word!r} is not KEY=VALUE")
        out[key] = value
    return out


class ReferenceAgent(Agent):
    """Replays the task's reference recipe (module docstring)."""

    name = "reference"
    trusted = True
    calls_no_model = True

    def run(self, sandbox: Sandbox, ctx: AgentContext) -> AgentRun:
        started = time.monotonic()
        log: list[str] = []

        def fail(why: str, exit_code: int | None = 1, timed_out: bool = False) -> AgentRun:
            log.append(f"reference: {why}")
            return AgentRun(exit_code=exit_code, timed_out=timed_out, wall_time_s=time.monotonic() - started,
                            output="\n".join(log)[-_MAX_OUTPUT:],
                            limit=f"agent_timeout_s={ctx.timeout_s:g}" if timed_out else None)

        if ctx.task is None:
            return fail("no task in the agent's context: the reference agent runs only inside a trial")
        where = reference_dir(ctx.task)
        if not (where / "Dockerfile").is_file():
            return fail(f"task {ctx.task.id!r} has no reference recipe ({where}/Dockerfile): "
                        "make one with `reb-ray tasks reference`")
        if not sandbox.capabilities.fixed_paths:
            return fail(f"the {sandbox.provider} sandbox has no filesystem of its own: the recipe creates its "
                        "environment at a fixed prefix, so it needs a container sandbox (docker, podman)")
        try:
            steps = parse_dockerfile((where / "Dockerfile").read_text())
        except ValueError as exc:
            return fail(f"{where}/Dockerfile: {exc}")
        env: dict[str, str] = dict(REPLAY_ENV)
        workdir = ctx.repo_dir
        for word, args in steps:
            remaining = ctx.timeout_s - (time.monotonic() - started)
            if remaining <= 0:
                return fail(f"the agent phase's limit of {ctx.timeout_s:g} s ran out before `{word} {args}`",
                            exit_code=None, timed_out=True)
            if word in ("FROM", "USER"):
                log.append(f"# {word} {args} (noted: the sandbox image and user are the sweep's)")
            elif word == "WORKDIR":
                workdir = args
            elif word == "ENV":
                try:
                    env.update(parse_env(args))
                except ValueError as exc:
                    return fail(f"{where}/Dockerfile: {exc}")
            elif word == "COPY":
                problem = self._copy(sandbox, where, args, ctx, log)
                if problem:
                    return fail(problem)
            else:  # RUN
                log.append(f"$ {args}")
                command = ["sh", "-c", args]
                if venv := _PLAIN_VENV.match(args):
                    command = ["sh", "-c", VENV_WITHOUT_COMPILING, "venv", *venv.groups()]
                result = sandbox.exec(command, timeout=remaining, env={**ctx.env, **env}, workdir=workdir)
                log.append(result.output.rstrip())
                if result.timed_out:
                    return fail(f"`RUN {args}` ran past the agent phase's limit", exit_code=None, timed_out=True)
                if not result.ok:
                    return fail(f"`RUN {args}` exited {result.exit_code}: the recipe does not rebuild",
                                exit_code=result.exit_code if result.exit_code else 1)
        report = where / "report.json"
        if report.is_file():
            try:
                json.loads(report.read_text())
            except ValueError as exc:
                return fail(f"{report}: not JSON ({exc})")
            sandbox.exec(["mkdir", "-p", str(Path(ctx.report_path).parent)], timeout=60)
            sandbox.put(report, ctx.report_path)
            log.append(f"reference: the stored report put at {ctx.report_path}")
        else:
            log.append("reference: no stored report; the recipe's own steps wrote whatever report there is")
        return AgentRun(exit_code=0, timed_out=False, wall_time_s=time.monotonic() - started,
                        output="\n".join(log)[-_MAX_OUTPUT:])

    @staticmethod
    def _copy(sandbox: Sandbox, where: Path, args: str, ctx: AgentContext, log: list[str]) -> str | None:
        """One `COPY SRC... DEST` of the recipe (module docstring); a one-line problem, or None."""
        words = shlex.split(args)
        if len(words) < 2 or any(w.startswith("--") for w in words):
            return f"{where}/Dockerfile: COPY {args!r}: the replay takes `COPY SRC... DEST` only"
        *sources, dest = words
        for src in sources:
            if src == "repo":
                log.append(f"# COPY repo {dest}: the sandbox already holds the task's repository at {ctx.repo_dir}")
                if dest.rstrip("/") != ctx.repo_dir.rstrip("/"):
                    return (f"the recipe puts the repository at {dest}, the sandbox holds it at {ctx.repo_dir}: "
                            "the editable install would name another path")
                continue
            path = where / src
            target = dest.rstrip("/") + "/" + Path(src).name if (len(sources) > 1 or dest.endswith("/")) else dest
            if src == "certs" and not path.exists():
                # The node's CA bundle, as `reb-ray env verify` lends it to the build: the
                # recipe's pip reads certs/ca.pem (a network whose TLS is intercepted is the node's).
                sandbox.exec(["sh", "-c", 'mkdir -p "$1" && if [ -n "$PIP_CERT" ] && [ -f "$PIP_CERT" ]; then '
                              'cp "$PIP_CERT" "$1/ca.pem"; fi', "certs", target], timeout=60)
                log.append(f"# COPY certs {dest}: the sandbox's CA bundle when it has one")
                continue
            if src == "wheels" and not path.exists():
                log.append(f"# COPY wheels {dest}: a reference holds no wheels; pip takes the locked versions "
                           "from the node's package cache or the index")
                continue
            if not path.exists():
                return f"{where}: the recipe copies {src}, which the reference directory does not hold"
            sandbox.put(path, target)
            log.append(f"# COPY {src} -> {target}")
        return None
