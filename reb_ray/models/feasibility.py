"""Stages a task spec makes impossible to pass, whatever the agent builds.

A stage that no environment can pass caps every agent's score on it, and the failure is
charged to the agent although the spec caused it. `impossible_stages(task)` lists each
applicable stage that breaks one of these construction rules (an empty list: none):

- `gpus`: the trial's GPU allotment (`TaskSpec.gpus_needed`) covers the stage: C2 needs 1
  GPU (a CUDA kernel must run), C3 exactly 1, C4 its `ranks`; C1 runs with every GPU hidden.
  With fewer, the probe records `insufficient_hardware` every time.
- `command`: a command stage (C1, C3, C4) has a non-empty command.
- `devices`: the stage's `env` does not set CUDA_VISIBLE_DEVICES (the probe sets it from the
  stage's allotment: "" for C1, "0" for C3, "0..ranks-1" for C4); nor does a command name a
  device index at or past the stage's allotment (`CUDA_VISIBLE_DEVICES=N`, `cuda:N`).
- `ranks`: a C4 command started by a launcher (torchrun, accelerate, deepspeed) does not start
  that launcher again itself (the probe wraps it); a C4 command that spawns its own ranks
  (launcher python) asks for at most `ranks` processes where it names a count
  (--nproc_per_node, --num_processes, --num_gpus): only `ranks` GPUs are visible.
- `output`: a stage whose success rule has a log pattern keeps its output on the stream the
  pattern is searched in (the command's stdout+stderr): no `exec >file` at the top of a shell
  line, no trailing `>/dev/null`, no torchrun `--redirects` without `--tee`.
- `assets`: every path under $REB_RAY_ASSETS a stage's command or env uses lies in (or holds)
  an asset that lists the stage, so a missing one is reported before the run (infra_assets_missing,
  or the stage left unmeasured) instead of failing as the agent's; and every asset is needed by
  at least one applicable stage (else it is never checked before a run).

These are rules about the spec alone (no repository, no sandbox), so `reb-ray tasks validate`
and the suite's tests can apply them to every task.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from posixpath import normpath

from reb_ray.models.task import StageSpec, TaskSpec

#: GPUs each stage needs (C4: its ranks, filled in per task). C0, C5 and env size run no
#: task command and need none.
STAGE_GPUS = {"c1": 0, "c2": 1, "c3": 1}

_ASSET_REF = re.compile(r"\$\{?REB_RAY_ASSETS\}?((?:/[^\s\"';&|()<>`$*?\[\]\\]*)?)")
_DEVICE_ASSIGN = re.compile(r"\bCUDA_VISIBLE_DEVICES=([0-9][0-9,]*)(?![0-9,])")
_CUDA_INDEX = re.compile(r"\bcuda:([0-9]+)\b")
_LAUNCHER_IN_COMMAND = re.compile(
    r"(?<![\w.-])(torchrun|torch\.distributed\.(?:run|launch)|accelerate(?:\.commands)?[ .]launch|deepspeed\.launcher"
    r"|(?:^|[;&|({]\s*)deepspeed(?=\s))")
_RANK_COUNT = re.compile(r"--(?:nproc[-_]per[-_]node|num[-_]processes|num[-_]gpus)[= ]([0-9]+)")
_EXEC_REDIRECT = re.compile(r"(?:^|[;&|]\s*)exec\s+(?:1?>|&>)")
_TRAILING_NULL = re.compile(r"(?:&>|(?<![\d&])1?>)\s*/dev/null(?:\s+2>&1)?\s*$")  # stdout, not `2>/dev/null`
_TORCHRUN_REDIRECTS = re.compile(r"(?:^|\s)(?:--redirects|-r)[= ]")
_TORCHRUN_TEE = re.compile(r"(?:^|\s)(?:--tee|-t)[= ]")


@dataclass(frozen=True)
class Impossible:
    """One broken rule: the stage (c1..c4), the rule's name (see the module docstring) and
    what is wrong, in one line."""

    stage: str
    rule: str
    detail: str

    def line(self, task_id: str) -> str:
        return f"{task_id} {self.stage}: {self.rule}: {self.detail}"


def _text(stage: StageSpec) -> str:
    command = stage.command
    if command is None:
        return ""
    return command if isinstance(command, str) else " ".join(command)


def _command_stages(task: TaskSpec) -> dict[str, StageSpec]:
    """The applicable command stages by name (c1, c3, c4)."""
    stages = {"c1": task.stages.cpu, "c3": task.stages.single_gpu, "c4": task.stages.multi_gpu}
    return {name: stage for name, stage in stages.items() if stage.applicable}


def stage_gpus(task: TaskSpec) -> dict[str, int]:
    """{applicable stage: GPUs it needs}: C1 0, C2 1, C3 1, C4 its ranks."""
    needs = {name: STAGE_GPUS[name] for name in ("c1", "c3") if name in _command_stages(task)}
    if task.stages.cuda.applicable:
        needs["c2"] = STAGE_GPUS["c2"]
    if task.supports_multi_gpu:
        needs["c4"] = task.stages.multi_gpu.ranks
    return dict(sorted(needs.items()))


def _asset_refs(stage: StageSpec) -> list[str]:
    """Paths under the asset cache that the stage's command or env names (relative, normalised;
    "" for the cache itself). A glob or variable ends the path: what precedes it is taken."""
    texts = [_text(stage), *stage.env.values()]
    refs = []
    for text in texts:
        for match in _ASSET_REF.finditer(text):
            rel = match.group(1).strip("/")
            refs.append(normpath(rel) if rel else "")
    return refs


def _covers(asset_path: str, ref: str) -> bool:
    """The asset at `asset_path` is the referenced path, lies under it, or holds it."""
    if ref == "":
        return True
    return asset_path == ref or asset_path.startswith(ref + "/") or ref.startswith(asset_path + "/")


def impossible_stages(task: TaskSpec) -> list[Impossible]:
    """Every construction rule (module docstring) an applicable stage of `task` breaks."""
    found: list[Impossible] = []
    allotted = task.gpus_needed
    for name, need in stage_gpus(task).items():
        if need > allotted:
            found.append(Impossible(name, "gpus", f"needs {need} GPU(s), the trial holds {allotted}"))
    commands = _command_stages(task)
    for name, stage in commands.items():
        found += _stage_rules(task, name, stage)
    for asset in task.assets:
        if not any(stage in commands for stage in asset.stages):
            found.append(Impossible(",".join(asset.stages), "assets",
                                    f"asset {asset.name!r} is needed by no applicable stage, so it is never "
                                    "checked before a run"))
    return found


def _stage_rules(task: TaskSpec, name: str, stage: StageSpec) -> list[Impossible]:
    found: list[Impossible] = []
    text = _text(stage)
    if not text.strip():
        return [Impossible(name, "command", "no command")]
    devices = {"c1": 0, "c3": 1, "c4": task.stages.multi_gpu.ranks}[name]
    if "CUDA_VISIBLE_DEVICES" in stage.env:
        found.append(Impossible(name, "devices", f"env sets CUDA_VISIBLE_DEVICES={stage.env['CUDA_VISIBLE_DEVICES']!r}; "
                                "the probe sets it from the stage's GPUs"))
    for match in [*_DEVICE_ASSIGN.finditer(text), *_CUDA_INDEX.finditer(text)]:
        indices = [int(i) for i in match.group(1).split(",") if i]
        if any(i >= devices for i in indices):
            found.append(Impossible(name, "devices", f"{match.group(0)!r} names a device past the {devices} "
                                    "the stage sees"))
    if name == "c4":
        found += _rank_rules(task, text)
    pattern = stage.success.log_pattern
    if pattern is not None and stage.is_shell:
        if _EXEC_REDIRECT.search(text) or _TRAILING_NULL.search(text.rstrip()):
            found.append(Impossible(name, "output", f"log pattern {pattern!r} is searched in output the command "
                                    "sends elsewhere"))
    if pattern is not None and name == "c4" and task.stages.multi_gpu.launcher == "torchrun" \
            and _TORCHRUN_REDIRECTS.search(text) and not _TORCHRUN_TEE.search(text):
        found.append(Impossible(name, "output", f"log pattern {pattern!r}: torchrun --redirects without --tee "
                                "keeps the ranks' output out of the stage's log"))
    paths = [a.cache_path for a in task.assets if name in a.stages]
    for ref in _asset_refs(stage):
        if not any(_covers(path, ref) for path in paths):
            found.append(Impossible(name, "assets", f"uses $REB_RAY_ASSETS/{ref}, which no asset listing {name} "
                                    "provides"))
    return found


def _rank_rules(task: TaskSpec, text: str) -> list[Impossible]:
    stage = task.stages.multi_gpu
    if stage.launcher != "python":
        match = _LAUNCHER_IN_COMMAND.search(text)
        if match:
            return [Impossible("c4", "ranks", f"launcher {stage.launcher} wraps the command, which starts "
                               f"{match.group(1).strip(' ;&|({')!r} again")]
        return []
    return [Impossible("c4", "ranks", f"{m.group(0)!r} asks for more processes than the {stage.ranks} ranks' GPUs")
            for m in _RANK_COUNT.finditer(text) if int(m.group(1)) > stage.ranks]
