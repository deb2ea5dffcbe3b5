"""Task specs: the schema of `tasks/<suite>/<task-id>/task.toml` (loaders: reb_ray.suite.load).

A task is one repository at one commit (or bundled source) plus the probe definitions of its
runtime stages. Every model forbids unknown keys so a typo in a task file is an error, and
every error reaches the user as one `TaskSpecError` line naming file, field path and value:

    tasks/demo/numpy-trainer/task.toml: stages.cpu.timeout_s = -5: Input should be greater than 0

Example task.toml:

    id = "numpy-trainer"
    suite = "demo"
    category = "1_cpu"
    c0_baseline_total = 1
    source = { bundled = "repo" }        # or { git = "https://github.com/o/n", commit = "<40 hex>" }

    [stages.cpu]
    command = "python train.py --steps 5"
    timeout_s = 120
    success = { exit_code = 0, log_pattern = "final loss" }

    [stages.single_gpu]
    applicable = false
    skip_reason = "demo suite is CPU-only"
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from reb_ray.errors import RebRayError

TASK_FILE = "task.toml"
NOT_DEFINED = "not defined"
HELPERS_DIR = "helpers"  # next to task.toml; in the sandbox at $REB_RAY_HELPERS during probes only
MAX_SIDE_LOGS = 8  # side logs per stage (each collected as a bounded tail into the stage row)
HF_HOME_DIR = "huggingface"  # HF_HOME inside the asset cache (probe_phase.probe_env)  # skip_reason of a stage whose table is absent

_HELPER_REF_RE = re.compile(r"\$\{?REB_RAY_HELPERS\}?/([\w.\-/]*[\w\-])")
_SHA_RE = re.compile(r"[0-9a-fA-F]{40}")
# https://host/owner/name(.git), ssh://git@host/owner/name.git, git@host:owner/name.git
_GIT_URL_RE = re.compile(r"^(?:[a-z][a-z0-9+.-]*://[^/]+/|[^@/\s]+@[^:/\s]+:)(?:[^\s]+/)?(?P<owner>[^/\s]+)/(?P<name>[^/\s]+?)(?:\.git)?/?$")


class TaskSpecError(RebRayError):
    """A task file or suite is invalid; the message is one line naming file, field and value."""


def _relative_path(value: str, what: str) -> str:
    """Check that `value` is a relative POSIX path that stays inside its base directory."""
    path = PurePosixPath(value)
    if not value or path.is_absolute() or ".." in path.parts:
        raise PydanticCustomError("relative_path", "{what} must be a relative path without '..'", {"what": what})
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SuccessRule(_Strict):
    """How a stage's run is judged: the exit code must match and, if set, the regex must match the log.

    `log_pattern` is a Python regex searched (re.search, MULTILINE) in the combined stdout+stderr.
    """

    exit_code: int = 0
    log_pattern: str | None = None

    @field_validator("log_pattern")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise PydanticCustomError("regex", "not a valid regex: {err}", {"err": str(exc)}) from None
        return value

    def matches(self, exit_code: int | None, log: str, pattern_matched: bool | None = None) -> bool:
        """True when `exit_code` equals the expected one and the log pattern (if any) is found.

        `pattern_matched` is the verdict of the search over the whole output made while it
        streamed (ExecResult.pattern_matches); when given it decides, since `log` may be only
        the kept head and tail. Without it the pattern is searched in `log`.
        """
        if exit_code != self.exit_code:
            return False
        if self.log_pattern is None:
            return True
        if pattern_matched is not None:
            return pattern_matched
        return re.search(self.log_pattern, log, re.MULTILINE) is not None


class StageSpec(_Strict):
    """One runtime stage (cpu or single_gpu) of a task.

    `command` is a shell line (str, run with `sh -c`) or an argv list; it runs in `workdir`
    (relative to the repository root) with `env` added, killed after `timeout_s` seconds.
    A stage that is not applicable carries a `skip_reason` instead of a command.

    `side_logs`: files the command writes besides its output (a helper server's log), absolute
    or relative to `workdir`; removed before the stage runs and collected after it (the last
    reb_ray.probing.side_logs.TAIL_BYTES of each) into the stage row. `deviation`: how this stage's command or
    success rule deliberately differs from the paper's release (shown by `reb-ray tasks list`);
    null when it follows the release.
    """

    applicable: bool = True
    skip_reason: str | None = Field(default=None, validate_default=True)
    command: str | list[str] | None = Field(default=None, validate_default=True)
    env: dict[str, str] = Field(default_factory=dict)
    workdir: str = "."
    timeout_s: float = Field(default=600.0, gt=0)
    success: SuccessRule = Field(default_factory=SuccessRule)
    side_logs: list[str] = Field(default_factory=list, max_length=MAX_SIDE_LOGS)
    deviation: str | None = None

    @field_validator("side_logs")
    @classmethod
    def _side_logs(cls, value: list[str]) -> list[str]:
        for path in value:
            if not path.strip() or ".." in PurePosixPath(path).parts:
                raise PydanticCustomError("side_log", "side log {path} must be a file path without '..'",
                                          {"path": repr(path)})
        if len(set(value)) != len(value):
            raise PydanticCustomError("duplicate", "side logs are listed twice")
        return value

    @field_validator("deviation")
    @classmethod
    def _deviation(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise PydanticCustomError("deviation", "deviation must say what differs (or be left out)")
        return value

    @field_validator("skip_reason")
    @classmethod
    def _skip_reason(cls, value: str | None, info: ValidationInfo) -> str | None:
        applicable = info.data.get("applicable", True)
        if not applicable and not (value and value.strip()):
            raise PydanticCustomError("missing", "Field required when applicable = false")
        if applicable and value is not None:
            raise PydanticCustomError("skip_reason", "only allowed when applicable = false")
        return value

    @field_validator("command")
    @classmethod
    def _command(cls, value: str | list[str] | None, info: ValidationInfo) -> str | list[str] | None:
        if value is None:
            if info.data.get("applicable", True):
                raise PydanticCustomError("missing", "Field required when the stage is applicable")
            return None
        if (isinstance(value, str) and not value.strip()) or (isinstance(value, list) and not value):
            raise PydanticCustomError("command", "command must not be empty")
        task_dir = (info.context or {}).get("task_dir")
        text = value if isinstance(value, str) else " ".join(value)
        for used in _HELPER_REF_RE.findall(text) if task_dir is not None else ():
            if not (Path(task_dir) / HELPERS_DIR / used).exists():
                raise PydanticCustomError("helper_missing", "uses $REB_RAY_HELPERS/{used} but {dir}/{used} is not in "
                                          "the task directory", {"used": used, "dir": HELPERS_DIR})
        return value

    @field_validator("workdir")
    @classmethod
    def _workdir(cls, value: str) -> str:
        return _relative_path(value, "workdir")

    @property
    def is_shell(self) -> bool:
        """True when `command` is a shell line rather than an argv list."""
        return isinstance(self.command, str)


class MultiGpuStageSpec(StageSpec):
    """The multi-GPU stage: a StageSpec plus how ranks are launched and how many.

    `launcher` names the tool the command uses (torchrun, accelerate, deepspeed or plain
    python spawning its own processes); `ranks` is the number of processes, one GPU each.
    """

    launcher: Literal["torchrun", "accelerate", "deepspeed", "python"] = "torchrun"
    ranks: int = Field(default=2, ge=2)


class CudaCheckSpec(_Strict):
    """C2 (CUDA alignment) needs no command: it applies to every task, as in the paper (44 of
    44), unless a task opts out with `applicable = false` and a `skip_reason` (CPU-only suites)."""

    applicable: bool = True
    skip_reason: str | None = None

    @model_validator(mode="after")
    def _reason(self) -> CudaCheckSpec:
        if not self.applicable and not (self.skip_reason and self.skip_reason.strip()):
            raise PydanticCustomError("missing", "skip_reason is required when applicable = false")
        return self


def _not_defined(cls: type[StageSpec]) -> Any:
    return lambda: cls(applicable=False, skip_reason=NOT_DEFINED)


class Stages(_Strict):
    """The three runtime stages; a missing table is not applicable with skip_reason "not defined"."""

    cpu: StageSpec = Field(default_factory=_not_defined(StageSpec))
    single_gpu: StageSpec = Field(default_factory=_not_defined(StageSpec))
    multi_gpu: MultiGpuStageSpec = Field(default_factory=_not_defined(MultiGpuStageSpec))
    cuda: CudaCheckSpec = Field(default_factory=CudaCheckSpec)


class TaskSource(_Strict):
    """Where the repository comes from: `{git = URL, commit = 40-hex sha}` or `{bundled = path}`.

    A bundled path is relative to the task directory and must exist there when the task is
    loaded from a file.
    """

    git: str | None = None
    commit: str | None = Field(default=None, validate_default=True)
    bundled: str | None = None

    @field_validator("git")
    @classmethod
    def _git(cls, value: str | None) -> str | None:
        if value is not None and not _GIT_URL_RE.match(value):
            raise PydanticCustomError("git_url", "not a git URL of the form https://host/owner/name")
        return value

    @field_validator("commit")
    @classmethod
    def _commit(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            if info.data.get("git") is not None:
                raise PydanticCustomError("missing", "Field required with git (a 40-hex commit sha)")
            return None
        if not _SHA_RE.fullmatch(value):
            raise PydanticCustomError("commit", "must be a full commit sha (40 hex characters)")
        return value.lower()

    @field_validator("bundled")
    @classmethod
    def _bundled(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return None
        _relative_path(value, "bundled")
        task_dir = (info.context or {}).get("task_dir")
        if task_dir is not None and not (Path(task_dir) / value).exists():
            raise PydanticCustomError("path_missing", "no such path in the task directory")
        return value

    @model_validator(mode="after")
    def _exactly_one(self) -> TaskSource:
        if (self.git is None) == (self.bundled is None):
            raise PydanticCustomError("source", "give exactly one of {git, commit} or {bundled}")
        if self.bundled is not None and self.commit is not None:
            raise PydanticCustomError("source", "commit only goes with git, not with bundled")
        return self

    @property
    def kind(self) -> Literal["git", "bundled"]:
        """"git" or "bundled"."""
        return "git" if self.git is not None else "bundled"

    @property
    def owner_repo(self) -> str | None:
        """"owner/name" parsed from the git URL (None for bundled source)."""
        if self.git is None:
            return None
        match = _GIT_URL_RE.match(self.git)
        assert match is not None  # validated
        return f"{match['owner']}/{match['name']}"

    @property
    def label(self) -> str:
        """Short human/JSON label: "owner/name" for git, "bundled:<path>" for bundled source."""
        return self.owner_repo if self.git is not None else f"bundled:{self.bundled}"  # type: ignore[return-value]


class Asset(_Strict):
    """A model, dataset or file the probes need, at `path` relative to the asset cache.

    `source` says where `reb-ray assets fetch` gets it: an http(s) URL (one file),
    `hf://<repo_id>` (a Hugging Face model snapshot) or `hf://datasets/<repo_id>` (a dataset
    snapshot); hf:// needs `huggingface_hub`.

    `layout` says how it lies in the cache:
    - "files" (default): plain files at `path` (commands name them as `$REB_RAY_ASSETS/<path>`).
    - "hf_cache": the Hugging Face hub cache layout under `huggingface/` (probes run with
      HF_HOME=$REB_RAY_ASSETS/huggingface and HF_HUB_OFFLINE=1), for code that loads the model
      by its Hugging Face id (`from_pretrained("org/name")`) rather than by a path. `path` is then
      "huggingface" (the default) and the snapshot lies at `cache_path`.

    `include` (hf:// only): glob patterns of the repository files to fetch (huggingface_hub's
    allow_patterns), e.g. ["*.json", "*.txt"] for a tokenizer without the multi-GB weights; empty
    fetches the whole snapshot.

    `stages`: the stages whose command needs the asset, from c1 (cpu), c3 (single_gpu) and c4
    (multi_gpu); C0, C2, C5 and env size run no task command and never need one. Default: all
    three command stages, because a command may read any asset of its task and only the spec's
    author knows which; the default can leave a stage unmeasured that did not need the asset,
    never grade one that did. A stage named here must apply to the task. When the asset is
    missing, the trial fails before the agent runs (infra_assets_missing), or with
    `--skip-missing-assets` only these stages are left unmeasured.
    """

    name: str = Field(min_length=1)
    kind: Literal["model", "dataset", "file"]
    path: str | None = Field(default=None, validate_default=True)
    source: str | None = Field(default=None, pattern=r"^(https?://|hf://)\S+$")
    layout: Literal["files", "hf_cache"] = "files"
    include: list[str] = Field(default_factory=list)
    stages: list[Literal["c1", "c3", "c4"]] = Field(default_factory=lambda: ["c1", "c3", "c4"], min_length=1)

    @field_validator("stages")
    @classmethod
    def _unique_stages(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise PydanticCustomError("duplicate", "a stage is listed twice")
        return value

    @field_validator("path")
    @classmethod
    def _path(cls, value: str | None) -> str | None:
        return None if value is None else _relative_path(value, "path")

    @model_validator(mode="after")
    def _layout(self) -> Asset:
        if self.include and (self.source is None or not self.source.startswith("hf://")):
            raise PydanticCustomError("include", "include (file patterns) only goes with source = \"hf://...\"")
        if self.layout == "files":
            if self.path is None:
                raise PydanticCustomError("missing", "path is required (relative to the asset cache)")
            return self
        if self.source is None or not self.source.startswith("hf://"):
            raise PydanticCustomError("layout", "layout = \"hf_cache\" needs source = \"hf://<repo_id>\"")
        if self.path not in (None, HF_HOME_DIR):
            raise PydanticCustomError("layout", "with layout = \"hf_cache\" path must be {home} (HF_HOME)",
                                      {"home": repr(HF_HOME_DIR)})
        object.__setattr__(self, "path", HF_HOME_DIR)
        return self

    @property
    def hf_repo(self) -> tuple[str, str] | None:
        """(repo_type, repo_id) of an hf:// source: ("dataset", "org/name") for hf://datasets/...,
        ("model", "org/name") otherwise; None for other sources."""
        if self.source is None or not self.source.startswith("hf://"):
            return None
        rest = self.source.removeprefix("hf://")
        for prefix, repo_type in (("datasets/", "dataset"), ("models/", "model")):
            if rest.startswith(prefix):
                return repo_type, rest.removeprefix(prefix)
        return "model", rest

    @property
    def cache_path(self) -> str:
        """Where the asset lies, relative to the asset cache: `path` for "files"; for "hf_cache"
        the hub's repo folder, e.g. huggingface/hub/models--org--name (huggingface_hub's
        `repo_folder_name` rule)."""
        if self.layout == "files":
            return self.path  # type: ignore[return-value]
        repo_type, repo_id = self.hf_repo  # type: ignore[misc]
        return f"{HF_HOME_DIR}/hub/{repo_type}s--{repo_id.replace('/', '--')}"

    def present_in(self, cache: Path) -> bool:
        """True when the asset is in `cache`: the path exists ("files"), or the hub folder has a
        refs/main and a non-empty snapshot ("hf_cache", what an offline `from_pretrained` needs)."""
        where = cache / self.cache_path
        if self.layout == "files":
            return where.exists()
        snapshots = where / "snapshots"
        return (where / "refs" / "main").is_file() and snapshots.is_dir() and any(
            any(snap.iterdir()) for snap in snapshots.iterdir() if snap.is_dir())


class HarborRef(_Strict):
    """A Harbor task entered into a sweep (reb_ray.harbor.sweep): the GPUs its `[environment]`
    asks for and the 16-hex digest of its files (task.toml, instruction.md, environment/, tests/,
    solution/), which stands for the task in the sweep's scoring identity. Never read from a
    task file: the Harbor loader sets it."""

    gpus: int = Field(default=0, ge=0)
    digest: str = Field(min_length=1)


class TaskSpec(_Strict):
    """One task: a repository at a commit (or bundled) with its stage probes and assets.

    `id` must equal the task directory's name and `suite` its parent's name. `task_dir` is
    the task's directory, set by the loader (never read from the file). `c0_baseline_total`
    is the C0 denominator, None if unknown: every distinct top-level module the repository
    imports, standard library and the repository's own modules included (the paper's rule and
    the canonical totals of c0_baseline_totals.json; `reb-ray tasks c0-baseline` recomputes it).
    `prompt_appendix` is text appended to the agent prompt for this task only (notes for the
    agent: never a probe command; reb_ray.agents.prompt).
    """

    id: str = Field(min_length=1)
    suite: str = Field(min_length=1)
    category: str = Field(min_length=1)
    c0_baseline_total: int | None = Field(default=None, ge=0)
    source: TaskSource
    stages: Stages = Field(default_factory=Stages)
    assets: list[Asset] = Field(default_factory=list)
    prompt_appendix: str | None = Field(default=None, min_length=1)
    task_dir: Path = Field(default=Path("."), exclude=True)
    # Set for a Harbor task only (its directory is `task_dir`): the trial then runs the Harbor
    # way (reb_ray.harbor.sweep) instead of reb-ray's phases. Excluded from dumps, so the
    # digest of every reb-ray task stays what it was.
    harbor: HarborRef | None = Field(default=None, exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _inject_task_dir(cls, data: Any, info: ValidationInfo) -> Any:
        task_dir = (info.context or {}).get("task_dir")
        if task_dir is None or not isinstance(data, dict):
            return data
        for key in ("task_dir", "harbor"):
            if key in data:
                raise PydanticCustomError("extra_forbidden", "{key} is set by the loader, not the file", {"key": key})
        return {**data, "task_dir": Path(task_dir)}

    @field_validator("id", "suite")
    @classmethod
    def _matches_directory(cls, value: str, info: ValidationInfo) -> str:
        task_dir = (info.context or {}).get("task_dir")
        if task_dir is not None:
            expected = Path(task_dir).name if info.field_name == "id" else Path(task_dir).parent.name
            if value != expected:
                raise PydanticCustomError("directory", "must equal the directory name {expected}", {"expected": repr(expected)})
        return value

    @field_validator("assets")
    @classmethod
    def _unique_assets(cls, value: list[Asset]) -> list[Asset]:
        names = [asset.name for asset in value]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise PydanticCustomError("duplicate", "duplicate asset names: {names}", {"names": ", ".join(dupes)})
        return value

    @field_validator("assets")
    @classmethod
    def _asset_stages_apply(cls, value: list[Asset], info: ValidationInfo) -> list[Asset]:
        stages = info.data.get("stages")
        if stages is None:
            return value  # the stages table itself is invalid; that error is reported
        applicable = {"c1": stages.cpu, "c3": stages.single_gpu, "c4": stages.multi_gpu}
        for i, asset in enumerate(value):
            if "stages" not in asset.model_fields_set:
                continue  # the default names every command stage; those that do not apply are skipped
            for stage in asset.stages:
                if not applicable[stage].applicable:
                    raise PydanticCustomError("stage_not_applicable", "{stage} does not apply to this task",
                                              {"i": i, "stage": stage, "stages": asset.stages})
        return value

    def assets_needed_by(self, stage: str) -> list[Asset]:
        """The assets whose `stages` list `stage` (c1, c3 or c4; [] for any other stage)."""
        return [asset for asset in self.assets if stage in asset.stages]

    @property
    def supports_cpu(self) -> bool:
        """The CPU stage (C1) is applicable."""
        return self.stages.cpu.applicable

    @property
    def supports_single_gpu(self) -> bool:
        """The single-GPU stage (C3) is applicable."""
        return self.stages.single_gpu.applicable

    @property
    def supports_multi_gpu(self) -> bool:
        """The multi-GPU stage (C4) is applicable."""
        return self.stages.multi_gpu.applicable

    @property
    def deviations(self) -> dict[str, str]:
        """{stage name (cpu, single_gpu, multi_gpu): how its command or success rule deliberately
        differs from the paper's release}, applicable stages only, in stage order; empty when every
        stage follows the release. `reb-ray tasks list` and the report's note show these."""
        return {name: stage.deviation for name in ("cpu", "single_gpu", "multi_gpu")
                if (stage := getattr(self.stages, name)).applicable and stage.deviation}

    @property
    def gpus_needed(self) -> int:
        """GPUs a trial must hold: the most any applicable stage needs. C2 (a CUDA kernel must
        run) and C3 need 1, C4 its `ranks`, C1 none; so every task with C2 gets a GPU, also one
        whose only GPU stage is C2 (without one its C2 could only be insufficient_hardware).
        A Harbor task needs what its `[environment] gpus` says."""
        if self.harbor is not None:
            return self.harbor.gpus
        needed = 1 if self.supports_single_gpu or self.stages.cuda.applicable else 0
        if self.supports_multi_gpu:
            needed = max(needed, self.stages.multi_gpu.ranks)
        return needed

    @property
    def repo_path(self) -> Path | None:
        """Absolute path of bundled source (None for git source)."""
        return None if self.source.bundled is None else self.task_dir / self.source.bundled
