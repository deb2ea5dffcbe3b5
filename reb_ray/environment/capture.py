"""Capture: the environment manifest of one attempt, taken between the agent and probe phases.

After the agent's leftovers are stopped and its report is read, and before any probe puts
anything into the sandbox, the harness records what the agent built, as one JSON document
(MANIFEST_VERSION) stored beside the attempt's logs as `env_manifest.json.gz`:

- `interpreter`, `distributions`, `conda`, `activation`: from the stdlib program
  probes/env_manifest.py, run with the sandbox image's python3 against the report's
  interpreter (see its docstring). Each distribution installed from an index whose wheel the
  node holds (its wheelhouses and package cache) gets `wheel`: the file name and its sha256, so
  an export can pin it by hash;
- `system_packages`: the dpkg database after the agent against the sandbox image's own (read
  once per image id from a created, never started, container and kept under
  ~/.cache/reb-ray/images/): added, removed, and changed packages; null when either is unknown;
- `filesystem`: the container's filesystem diff (`docker diff`) outside the repository:
  counts of added, changed and deleted paths, and the regular files and bytes under each group
  (the path's first three components), largest first; the deleted paths themselves (at most
  DELETED_KEPT);
- `report`: the report's python_path and its `env` (the variables the agent says its
  interpreter needs), and `image`: the sandbox image's tag, id and environment;
- `commands`: the commands the agent ran, in order, with exit codes where known: from its
  stored transcript (an LLM agent), else from its full log's `$ command` / `exit N` lines (the
  heuristic agent's own log); null when neither has any.

The manifest is masked like every artifact (the agent's credentials never appear in it), and
`env_manifest_digest` is the sha256 (hex) of the stored JSON bytes, uncompressed;
`env_manifest_bytes` their length; `env_capture_s` the seconds the capture took. Capture never
fails the trial: what it cannot read is null in the manifest, and a capture that fails as a
whole leaves the columns null with `env_capture_error` saying why.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import posixpath
import re
import tarfile
import time
import uuid
from pathlib import Path

from reb_ray.errors import RebRayError
from reb_ray.paths import bundled_dir
from reb_ray.redact import MASK
from reb_ray.sandbox.image_files import image_archive

MANIFEST_VERSION = 1
MANIFEST_NAME = "env_manifest"
MANIFEST_SUFFIX = ".json.gz"
PROGRAM = "env_manifest.py"
SANDBOX_DIR = "/tmp/.reb-ray-env-capture"
CAPTURE_TIMEOUT_S = 300.0
DELETED_KEPT = 200
GROUPS_KEPT = 60
#: The system python3 of the sandbox image, which runs the capture program.
SYSTEM_PYTHON = "/usr/bin/python3"
_HEURISTIC_CMD = re.compile(r"^\[heuristic\] \$ (.*)$")
_HEURISTIC_EXIT = re.compile(r"^\[heuristic\] exit (-?\d+)$")


def program_path() -> Path:
    """The in-sandbox capture program (probes/env_manifest.py)."""
    return bundled_dir("probes") / PROGRAM


def summarise_diff(entries: list[dict] | None, repo_dir: str, ignore: tuple[str, ...] = ()) -> tuple[dict | None, list[str]]:
    """(counts and deleted paths, the added or changed paths to size) of a `docker diff`
    listing ([{Path, Kind}]; Kind 0 changed, 1 added, 2 deleted), leaving out the repository
    and the `ignore` prefixes. (None, []) when the listing is unknown."""
    if entries is None:
        return None, []
    repo = repo_dir.rstrip("/")
    counts = {"added": 0, "changed": 0, "deleted": 0}
    deleted: list[str] = []
    to_size: list[str] = []
    for entry in entries:
        path, kind = entry.get("Path") or "", entry.get("Kind")
        if path == repo or path.startswith(repo + "/") or any(path == p or path.startswith(p + "/") for p in ignore):
            continue
        if kind == 2:
            counts["deleted"] += 1
            if len(deleted) < DELETED_KEPT:
                deleted.append(path)
        else:
            counts["added" if kind == 1 else "changed"] += 1
            to_size.append(path)
    return {**counts, "deleted_paths": sorted(deleted)}, to_size


def dpkg_diff(image: dict[str, str] | None, after: dict[str, str] | None) -> dict | None:
    """System packages the agent added, removed or changed: {"added": {pkg: version},
    "removed": {pkg: version}, "changed": {pkg: [image's, now]}}; None when either list is unknown."""
    if image is None or after is None:
        return None
    return {"added": {k: v for k, v in sorted(after.items()) if k not in image},
            "removed": {k: v for k, v in sorted(image.items()) if k not in after},
            "changed": {k: [image[k], v] for k, v in sorted(after.items()) if k in image and image[k] != v}}


def parse_dpkg_status(text: str) -> dict[str, str]:
    """{"pkg:arch": version} of the installed packages in a dpkg status file's text (the same
    rule as probes/env_manifest.py)."""
    packages = {}
    for block in text.split("\n\n"):
        fields = {}
        for line in block.splitlines():
            if line[:1] not in (" ", "\t") and ":" in line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        if fields.get("Package") and fields.get("Status", "").endswith(" installed"):
            packages[f"{fields['Package']}:{fields.get('Architecture', '')}"] = fields.get("Version")
    return packages


def image_cache_dir() -> Path:
    return Path.home() / ".cache" / "reb-ray" / "images"


def image_dpkg(client, image: str) -> dict[str, str] | None:
    """The sandbox image's installed system packages, read from a created (never started)
    container's /var/lib/dpkg/status and cached per image id; None when unreadable."""
    try:
        image_id = client.images.get(image).id
    except Exception:  # noqa: BLE001 - unknown, never fatal
        return None
    cached = image_cache_dir() / f"{image_id.replace(':', '_')}.dpkg.json"
    if cached.is_file():
        try:
            return json.loads(cached.read_text())
        except ValueError:
            pass
    try:
        with image_archive(client, image_id, "/var/lib/dpkg/status", labels={"reb-ray.role": "image-dpkg"}) as stream:
            data = io.BytesIO(b"".join(stream))
        with tarfile.open(fileobj=data) as tar:
            member = tar.extractfile(tar.getmembers()[0])
            packages = parse_dpkg_status(member.read().decode(errors="replace")) if member else None
    except Exception:  # noqa: BLE001 - an image without dpkg: unknown
        return None
    if packages is not None:
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_name(f".{cached.name}.{uuid.uuid4().hex[:8]}")
        tmp.write_text(json.dumps(packages, sort_keys=True))
        tmp.replace(cached)
    return packages


_SHA_MEMO: dict[tuple[str, int, float], str] = {}


def file_sha256(path: Path) -> str:
    """sha256 (hex) of a file, remembered per (path, size, mtime) for the process."""
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime)
    if key not in _SHA_MEMO:
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        _SHA_MEMO[key] = digest.hexdigest()
    return _SHA_MEMO[key]


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _compatible(wheel: str, python_version: str | None) -> bool:
    """Whether a wheel's python/abi tags fit CPython `python_version` ("3.11")."""
    parts = wheel[:-4].split("-")
    if len(parts) < 5:
        return False
    py, abi = parts[-3], parts[-2]
    if python_version is None:
        return True
    cp = "cp" + python_version.replace(".", "")
    tags = py.split(".")
    return (cp in tags and abi in (cp, "abi3", "none")) or (abi in ("none", "abi3") and any(t in ("py3", "py2.py3") or t.startswith("py3") or t == "py2" or t.startswith("cp3") for t in tags))


def locate_wheels(distributions: list[dict], wheel_dirs: list[Path], python_version: str | None) -> int:
    """Add `wheel` {file, sha256} to each index-installed distribution whose wheel of that exact
    version (and a tag fitting the interpreter) is in `wheel_dirs`; returns how many were found."""
    by_key: dict[str, list[Path]] = {}
    for folder in wheel_dirs:
        if not folder.is_dir():
            continue
        for wheel in folder.glob("*.whl"):
            parts = wheel.name.split("-")
            if len(parts) >= 5 and _compatible(wheel.name, python_version):
                by_key.setdefault(f"{canonical(parts[0])}=={parts[1]}", []).append(wheel)
    found = 0
    for dist in distributions:
        source = dist.get("source") or {}
        if dist.get("shadowed") or source.get("kind") != "index" or not dist.get("version"):
            continue
        candidates = by_key.get(f"{canonical(dist['name'])}=={dist['version']}")
        if candidates:
            wheel = sorted(candidates)[0]
            try:
                dist["wheel"] = {"file": wheel.name, "sha256": file_sha256(wheel)}
                found += 1
            except OSError:
                pass
    return found


def commands_from_log(text: str) -> list[dict]:
    """The heuristic agent's `[heuristic] $ cmd` lines, each with the `[heuristic] exit N` that
    follows it (None when none does before the next command)."""
    found: list[dict] = []
    for line in text.splitlines():
        if m := _HEURISTIC_CMD.match(line):
            found.append({"command": m.group(1), "exit_code": None})
        elif (m := _HEURISTIC_EXIT.match(line)) and found and found[-1]["exit_code"] is None:
            found[-1]["exit_code"] = int(m.group(1))
    return found


def agent_commands(output_dir: Path, row: dict) -> dict | None:
    """{"source": "trajectory" | "agent_log", "list": [{command, exit_code}]} of the commands the
    agent ran (its stored transcript first, then its full log); None when neither names any."""
    from reb_ray.llm.transcript import commands

    if row.get("trajectory_path"):
        try:
            listed = commands(gzip.decompress((output_dir / row["trajectory_path"]).read_bytes()))
        except (OSError, EOFError, gzip.BadGzipFile):
            listed = []
        if listed:
            return {"source": "trajectory", "list": [{"command": c.command, "exit_code": c.exit_code} for c in listed]}
    if row.get("agent_log_path"):
        try:
            text = gzip.decompress((output_dir / row["agent_log_path"]).read_bytes()).decode(errors="replace")
        except (OSError, EOFError, gzip.BadGzipFile):
            text = ""
        listed = commands_from_log(text)
        if listed:
            return {"source": "agent_log", "list": listed}
    return None


def run_program(sandbox, python: str, repo_dir: str, changed: list[str]) -> dict:
    """Run probes/env_manifest.py in `sandbox` (as root, the image's python3) for `python`;
    its JSON answer. Raises RebRayError when it does not answer; removes its files."""
    # As root in a container (the agent may have dropped to another user); a host-process
    # provider runs everything as the harness's own user and takes no `user`.
    as_root = {"user": "root"} if sandbox.capabilities.image else {}
    # A container's /tmp is its own; a host-process sandbox shares the host's, so its files go
    # beside its work directory (two trials at once on one host never remove each other's).
    where = posixpath.normpath(f"{sandbox.workdir}/../.reb-ray-env-capture") if sandbox.capabilities.host_paths \
        else SANDBOX_DIR
    sandbox.put(program_path(), f"{where}/{PROGRAM}")
    try:
        sandbox.write_bytes(f"{where}/changed.txt", "\n".join(changed).encode(errors="replace"))
        result = sandbox.exec([SYSTEM_PYTHON, f"{where}/{PROGRAM}", python, repo_dir, f"{where}/changed.txt"],
                              timeout=CAPTURE_TIMEOUT_S, **as_root)
    finally:
        try:
            sandbox.exec(["rm", "-rf", where], timeout=60, **as_root)
        except RebRayError:
            pass
    if not result.ok:
        raise RebRayError(f"the capture program failed (exit {result.exit_code}): {result.output[-300:]}")
    lines = [line for line in result.output.strip().splitlines() if line.startswith("{")]
    if not lines:
        raise RebRayError("the capture program printed no JSON")
    return json.loads(lines[-1])


def build_manifest(*, program: dict, diff: dict | None, dpkg: dict | None, commands: dict | None, report,
                   image: dict, identity: dict) -> dict:
    """The manifest document from its parts (see the module docstring for each key)."""
    groups = program.get("changed")
    fs = None
    if diff is not None:
        ordered = sorted(((p, f, b) for p, (f, b) in (groups or {}).items()), key=lambda g: (-g[2], g[0]))
        fs = {**diff, "groups": [{"path": p, "files": f, "bytes": b} for p, f, b in ordered[:GROUPS_KEPT]],
              "groups_left_out": max(len(ordered) - GROUPS_KEPT, 0),
              "bytes": sum(b for _, _, b in ordered) if groups is not None else None}
    env = report.written.get("env") if report is not None else None
    return {
        "manifest_version": MANIFEST_VERSION, **identity, "image": image,
        "report": {"python_path": report.python_path if report is not None else None,
                   "env": env if isinstance(env, dict) else None},
        "interpreter": program.get("interpreter"),
        "distributions": program.get("distributions") or [],
        "conda": program.get("conda"),
        "system_packages": dpkg,
        "filesystem": fs,
        "activation": program.get("activation"),
        "commands": commands,
    }


def encode(manifest: dict, secrets: list[str]) -> bytes:
    """The stored bytes: sorted-key JSON, the agent's credentials masked."""
    data = json.dumps(manifest, sort_keys=True, indent=1, default=str).encode()
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        data = data.replace(secret.encode(), MASK.encode())
    return data


def capture(rec, sandbox, spec, repo_dir: str, report, secrets: list[str]) -> dict | None:
    """Take, store and record the manifest of the attempt in `sandbox` (a docker sandbox: the
    filesystem diff and the image's packages need the daemon; other providers get the program's
    part only). Returns the manifest, or None when it could not be taken (the row says why)."""
    started = time.monotonic()
    try:
        # A container sandbox lists the files changed since its image (and its engine holds that
        # image, whose packages the manifest compares with): docker, podman.
        engine_diff = sandbox.capabilities.filesystem_diff
        entries = sandbox.filesystem_changes() if engine_diff else None
        from reb_ray.agents import REPORT_PATH

        diff, to_size = summarise_diff(entries, repo_dir, ignore=(SANDBOX_DIR, "/tmp/reb-ray-out"))
        python = report.python_path if report is not None else SYSTEM_PYTHON
        program = run_program(sandbox, python, repo_dir, to_size)
        interp = program.get("interpreter") or {}
        wheel_dirs = [*spec.config.sandbox.wheelhouses, *([spec.config.sandbox.pip_cache_dir] if spec.config.sandbox.pip_cache else [])]
        version = interp.get("version")
        locate_wheels(program.get("distributions") or [], [Path(d) for d in wheel_dirs],
                      ".".join(version.split(".")[:2]) if version else None)
        image_info: dict = {"tag": spec.image, "id": None, "env": None}
        dpkg = None
        if engine_diff:
            try:
                img = sandbox.client.images.get(spec.image)
                image_info.update(id=img.id, env=img.attrs.get("Config", {}).get("Env"))
            except Exception:  # noqa: BLE001 - unknown
                pass
            if entries is not None and any(e.get("Path") == "/var/lib/dpkg/status" for e in entries):
                dpkg = dpkg_diff(image_dpkg(sandbox.client, spec.image), program.get("dpkg"))
            elif program.get("dpkg") is not None:
                dpkg = {"added": {}, "removed": {}, "changed": {}}  # the package database is the image's
        identity = {"sweep_id": spec.sweep_id, "trial_id": spec.trial_id, "attempt": spec.attempt,
                    "task_id": spec.task.id, "suite": spec.task.suite, "agent": spec.agent,
                    "node": rec.result.identity.node, "repo_commit": rec.result.setup.repo_commit, "repo_dir": repo_dir,
                    "report_path": REPORT_PATH if sandbox.capabilities.fixed_paths else None}
        manifest = build_manifest(program=program, diff=diff, dpkg=dpkg,
                                  commands=agent_commands(rec.artifacts.output_dir, rec.row), report=report,
                                  image=image_info, identity=identity)
        data = encode(manifest, secrets)
        path = rec.artifacts.write(MANIFEST_NAME, data, suffix=MANIFEST_SUFFIX)
        env = rec.result.environment
        env.env_manifest_path, env.env_manifest_digest = path, hashlib.sha256(data).hexdigest() if path else None
        env.env_manifest_bytes, env.env_capture_s = len(data) if path else None, time.monotonic() - started
        return manifest
    except Exception as exc:  # noqa: BLE001 - capture never fails the trial
        env = rec.result.environment
        env.env_capture_error, env.env_capture_s = f"{type(exc).__name__}: {str(exc)[:300]}", time.monotonic() - started
        return None
