"""Reading Harbor tasks: a directory with task.toml, instruction.md, environment/, tests/test.sh.

A Harbor task (the format of the `harbor` package, task.toml schema 1.x) becomes a `HarborTask`:
what reb-ray needs to run it, each value from the place Harbor reads it:

    instruction.md                         -> prompt
    [agent] timeout_sec                    -> agent_timeout_s (None: reb-ray's default applies)
    [verifier] timeout_sec                 -> verifier_timeout_s (Harbor's default 600 s)
    [verifier] env                         -> verifier_env
    [environment] cpus, memory_mb,         -> cpus, memory_mb, storage_mb, gpus (None: unset)
                  storage_mb, gpus
    [environment] network_mode or the      -> internet (False for "no-network"; an allow-list is
                  older allow_internet        refused: reb-ray has no per-host policy for it)
    [environment] build_timeout_sec        -> build_timeout_s (600 s)
    [environment] workdir                  -> workdir (None: the image's WORKDIR)
    [environment] docker_image             -> docker_image (a prebuilt image instead of the Dockerfile)
    [solution] env                         -> solution_env
    environment/Dockerfile                 -> dockerfile (the build context is environment/)
    solution/solve.sh                      -> solve (None: no oracle solution)

What reb-ray does not run is refused with one line naming the file and the key: multi-step tasks
([[steps]]), Windows tasks, a separate verifier environment, compose files (extra services), MCP
servers and TPUs. Unknown keys elsewhere are ignored, as Harbor ignores them.
"""

from __future__ import annotations

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib
from dataclasses import dataclass, field
from pathlib import Path

from reb_ray.errors import RebRayError

TASK_FILE = "task.toml"
#: Harbor's defaults (harbor.models.task.config): verifier and build timeouts, seconds.
VERIFIER_TIMEOUT_S = 600.0
BUILD_TIMEOUT_S = 600.0


class HarborTaskError(RebRayError):
    """A Harbor task reb-ray cannot read or run; the message is one line naming file and key."""


@dataclass(frozen=True)
class HarborTask:
    """One Harbor task as reb-ray runs it (module docstring: where each field comes from)."""

    id: str
    task_dir: Path
    prompt: str
    agent_timeout_s: float | None
    verifier_timeout_s: float
    build_timeout_s: float
    cpus: float | None
    memory_mb: int | None
    storage_mb: int | None
    gpus: int
    internet: bool
    workdir: str | None
    docker_image: str | None
    verifier_env: dict[str, str] = field(default_factory=dict)
    solution_env: dict[str, str] = field(default_factory=dict)

    @property
    def environment_dir(self) -> Path:
        return self.task_dir / "environment"

    @property
    def dockerfile(self) -> Path:
        return self.environment_dir / "Dockerfile"

    @property
    def tests_dir(self) -> Path:
        return self.task_dir / "tests"

    @property
    def solution_dir(self) -> Path:
        return self.task_dir / "solution"

    @property
    def solve(self) -> Path | None:
        """solution/solve.sh when the task has one (the `oracle` agent runs it), else None."""
        path = self.solution_dir / "solve.sh"
        return path if path.is_file() else None


def _number(data: dict, key: str, where: str, kind: type = float) -> float | int | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or \
            (kind is int and not float(value).is_integer()):
        raise HarborTaskError(f"{where}: {key} = {value!r}: must be a non-negative {'integer' if kind is int else 'number'}")
    return kind(value)


def _table(data: dict, name: str, where: str) -> dict:
    value = data.get(name, {})
    if not isinstance(value, dict):
        raise HarborTaskError(f"{where}: [{name}] must be a table")
    return value


def _internet(env: dict, where: str) -> bool:
    mode = env.get("network_mode")
    if mode is None:
        allow = env.get("allow_internet")
        return True if allow is None else bool(allow)
    if mode == "no-network":
        return False
    if mode == "public":
        return True
    if mode == "allowlist":
        raise HarborTaskError(f"{where}: environment.network_mode = \"allowlist\": reb-ray runs a Harbor task with "
                              "the internet or without it, not through a per-host allow-list")
    raise HarborTaskError(f"{where}: environment.network_mode = {mode!r}: valid: public, no-network")


def is_harbor_task(path: Path) -> bool:
    """Whether `path` looks like a Harbor task: task.toml beside instruction.md and tests/."""
    return (path / TASK_FILE).is_file() and (path / "instruction.md").is_file() and (path / "tests").is_dir()


def load_harbor_task(path: Path) -> HarborTask:
    """Read the Harbor task in directory `path`. Raises HarborTaskError (one line naming the
    file and the key) for what is missing, malformed or not runnable by reb-ray."""
    path = Path(path).resolve()
    where = str(path / TASK_FILE)
    try:
        data = tomllib.loads((path / TASK_FILE).read_text(encoding="utf-8"))
    except OSError as exc:
        raise HarborTaskError(f"{where}: cannot read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise HarborTaskError(f"{where}: TOML syntax error: {exc}".replace("\n", " ")) from None
    if data.get("steps"):
        raise HarborTaskError(f"{where}: [[steps]]: multi-step tasks are not run by reb-ray")
    agent, verifier, env = (_table(data, name, where) for name in ("agent", "verifier", "environment"))
    solution = _table(data, "solution", where)
    if str(env.get("os", "linux")).lower() != "linux":
        raise HarborTaskError(f"{where}: environment.os = {env['os']!r}: reb-ray runs Linux tasks only")
    for key, why in (("mcp_servers", "MCP servers"), ("tpu", "TPUs")):
        if env.get(key):
            raise HarborTaskError(f"{where}: environment.{key}: {why} are not provided by reb-ray")
    if verifier.get("environment") or verifier.get("environment_mode") == "separate":
        raise HarborTaskError(f"{where}: verifier.environment: a separate verifier environment is not run by reb-ray")
    try:
        prompt = (path / "instruction.md").read_text(encoding="utf-8")
    except OSError as exc:
        raise HarborTaskError(f"{path / 'instruction.md'}: cannot read: {exc.strerror or exc}") from None
    if not (path / "tests" / "test.sh").is_file():
        raise HarborTaskError(f"{path / 'tests'}: no test.sh (the verifier reb-ray runs)")
    for compose in ("docker-compose.yaml", "docker-compose.yml"):
        if (path / "environment" / compose).is_file():
            raise HarborTaskError(f"{path / 'environment' / compose}: extra compose services are not run by reb-ray")
    docker_image = env.get("docker_image")
    if docker_image is None and not (path / "environment" / "Dockerfile").is_file():
        raise HarborTaskError(f"{path / 'environment'}: no Dockerfile and no environment.docker_image")
    for name, table in (("verifier.env", verifier.get("env", {})), ("solution.env", solution.get("env", {}))):
        if not isinstance(table, dict) or not all(isinstance(v, str) for v in table.values()):
            raise HarborTaskError(f"{where}: {name} must map names to strings")
    timeout = _number(agent, "timeout_sec", where)
    return HarborTask(
        id=path.name, task_dir=path, prompt=prompt,
        agent_timeout_s=timeout if timeout else None,
        verifier_timeout_s=_number(verifier, "timeout_sec", where) or VERIFIER_TIMEOUT_S,
        build_timeout_s=_number(env, "build_timeout_sec", where) or BUILD_TIMEOUT_S,
        cpus=_number(env, "cpus", where), memory_mb=_number(env, "memory_mb", where, int),  # type: ignore[arg-type]
        storage_mb=_number(env, "storage_mb", where, int), gpus=_number(env, "gpus", where, int) or 0,  # type: ignore[arg-type]
        internet=_internet(env, where), workdir=env.get("workdir"), docker_image=docker_image,
        verifier_env=dict(verifier.get("env", {})), solution_env=dict(solution.get("env", {})))


def find_harbor_tasks(path: Path) -> list[HarborTask]:
    """The Harbor tasks at `path`: the task itself, or every task directory directly under it
    (sorted by name; hidden and `_` directories skipped). Raises HarborTaskError when there is
    none, and for the first task that cannot be read."""
    path = Path(path)
    if is_harbor_task(path):
        return [load_harbor_task(path)]
    if not path.is_dir():
        raise HarborTaskError(f"{path}: no such directory")
    dirs = sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))
    tasks = [load_harbor_task(p) for p in dirs if (p / TASK_FILE).is_file()]
    if not tasks:
        raise HarborTaskError(f"{path}: neither a Harbor task nor a directory of them (task.toml, instruction.md, tests/)")
    return tasks
