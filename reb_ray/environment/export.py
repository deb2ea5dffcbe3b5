"""Export: a directory a user takes away that rebuilds an attempt's environment.

`export(output, trial_id, out, attempt=None, sweep_id=None, image=False)` reads the attempt's
trials row and environment manifest (reb_ray.environment.capture) and writes `out`. The two
halves are apart because they need different machines: `read_source` reads the results store
(the driver's output directory), `write_export` writes from what the node it runs on holds (the
repository placed there, the wheels of its package cache, its kept image), so an export can be
written on the node that built the environment with only plain data shipped to it. It writes:

- `Dockerfile`: FROM the sandbox image the attempt ran in (its tag; its id in a comment), the
  system packages the agent added installed at their exact versions (apt), the repository
  copied to the same path, the interpreter's environment created at the same prefix (a venv
  with the same base interpreter and pyvenv.cfg options, a conda environment from its explicit
  package list, or the image's own interpreter), the packages installed with `--no-deps` from
  the locks, the repository's editable install redone, the report's `env` as ENV lines, and the
  agent's report put back at its path;
- `requirements.lock`: `name==version --hash=sha256:...` of every index-installed package
  whose wheel the node held (installed with --require-hashes); `requirements.nohash.lock`:
  exact pins whose wheel hash is unknown and direct references (VCS at its commit, URLs);
- `wheels/` (unless `wheels=False`): those wheels, so the build needs no index when every
  package has one (`PIP_NO_INDEX` is then set in the build);
- `certs/`: empty; a CA bundle put there as `ca.pem` is what pip trusts while building (a
  network whose TLS is intercepted); `conda-explicit.txt` for a conda environment; `manifest.json`, `report.json`;
  `export.json` (what was exported, from where, and every step left out); `README.md`;
- `image.tar` (`image=True`): the kept image itself (`docker save`), when the attempt's node
  is this one and the image is still there.

What cannot be rebuilt from a recipe is listed in README.md and `export.json`'s `not_captured`
(e.g. an editable install of a directory outside the repository, a package whose installer is
unknown, files the agent put outside the environment's prefix): the export never pretends.
The sandbox image's own packages are no gap (`from_image`: the FROM line rebuilds them), nor are
the files the harness itself put in the sandbox (HARNESS_PATHS) or the report the recipe puts
back; README.md says "unknown" where the manifest does not know a value.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from reb_ray.environment.prefix_files import EXPECTED_TO_DIFFER
from reb_ray.errors import RebRayError

ENV_DIR = "/opt/reb-ray-env"  # where the export's files go inside the rebuilt image
EXPORT_VERSION = 1
_SAFE_PIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_SAFE_VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.+!_-]*$")
#: Debian's directory of the Python modules its packages (dpkg) install: an entry there with no
#: INSTALLER file is a system package's, rebuilt by the FROM line or the recipe's apt step.
DPKG_SITE = "/usr/lib/python3/dist-packages"


def harness_paths(repo_dir: str) -> tuple[str, ...]:
    """The sandbox paths reb-ray itself writes (the agent's work directory beside the
    repository, the agent toolchain mount, the capture's and the probes' scratch): never what
    an agent built, so never listed as the agent's changes."""
    import posixpath

    from reb_ray.agents.toolchain import AGENT_MOUNT
    from reb_ray.environment.capture import SANDBOX_DIR

    return (posixpath.normpath(f"{repo_dir}/../.reb-ray-agent"), AGENT_MOUNT, SANDBOX_DIR, "/tmp/reb-ray-out")


def _known(value) -> str:
    """A manifest value for README text: "unknown" for a missing one, never Python's None."""
    return "unknown" if value is None or value == "" else str(value)


def _group_of(path: str) -> str:
    """The filesystem diff's group of a path: its first three components (probes/env_manifest.py)."""
    return "/" + "/".join([p for p in path.split("/") if p][:3])


def from_image(manifest: dict, dist: dict) -> bool:
    """Whether `dist` is the sandbox image's own, not the agent's: its directory lies in no group
    of the container's filesystem diff (the diff known and complete: the agent changed nothing
    there), or it is a system package's module (DPKG_SITE, no installer) while the system
    package diff is known (the image's or one the recipe's apt step installs). The FROM line
    rebuilds it; it is not a gap."""
    location = dist.get("location") or ""
    if not location:
        return False
    fs = manifest.get("filesystem") or {}
    if fs.get("groups") is not None and not fs.get("groups_left_out"):
        touched = {g["path"] for g in fs["groups"]}
        if _group_of(location) not in touched and not any(_in(t, location) for t in touched):
            return True
    return (not dist.get("installer") and _in(location, DPKG_SITE)
            and manifest.get("system_packages") is not None)


def find_attempt(output: Path, trial_id: str, attempt: int | None = None, sweep_id: str | None = None) -> dict:
    """The trials row of `trial_id`'s attempt (`attempt`, else its latest scored one) in
    `output`. Raises RebRayError naming what is missing."""
    from reb_ray.results.read import read_trials, source_sweep

    rows = [r for r in read_trials(output, sweep_id).to_pylist() if r["trial_id"] == trial_id]
    # Sweeps that only regrade or reuse this one's attempts hold no environment of their own: the source's is meant.
    if not rows:
        raise RebRayError(f"{output}: no trial {trial_id!r}" + (f" in sweep {sweep_id!r}" if sweep_id else ""))
    sweeps = sorted({r["sweep_id"] for r in rows})
    source = source_sweep(rows)
    if len(sweeps) > 1 and sweep_id is None and source is not None:
        rows = [r for r in rows if r["sweep_id"] == source]  # gradings and reusers hold no environment of their own
    elif len(sweeps) > 1 and sweep_id is None:
        raise RebRayError(f"{output}: trial {trial_id!r} is in sweeps {', '.join(sweeps)}: name one with --sweep-id")
    if attempt is not None:
        chosen = [r for r in rows if r["attempt"] == attempt]
        if not chosen:
            raise RebRayError(f"{output}: trial {trial_id!r} has no attempt {attempt} "
                              f"(attempts: {', '.join(str(r['attempt']) for r in sorted(rows, key=lambda r: r['attempt']))})")
        return chosen[-1]
    scored = [r for r in rows if r["status"] == "scored"] or rows
    return max(scored, key=lambda r: r["attempt"])


def load_manifest(output: Path, row: dict) -> dict:
    """The attempt's stored manifest. Raises RebRayError when it has none."""
    rel = row.get("env_manifest_path")
    if not rel:
        why = row.get("env_capture_error") or "it was recorded before environments were captured"
        raise RebRayError(f"trial {row['trial_id']!r} attempt {row['attempt']} has no environment manifest: {why}")
    try:
        return json.loads(gzip.decompress((output / rel).read_bytes()))
    except (OSError, ValueError, EOFError) as exc:
        raise RebRayError(f"{output / rel}: cannot read the environment manifest ({exc})") from None


def stage_rows(output: Path, row: dict) -> list[dict]:
    """The stages rows of the row's attempt."""
    from reb_ray.results.read import read_stages

    return [s for s in read_stages(output, row["sweep_id"]).to_pylist()
            if s["trial_id"] == row["trial_id"] and s["attempt"] == row["attempt"]]


def _in(path: str | None, root: str) -> bool:
    return bool(path) and (path == root or path.startswith(root.rstrip("/") + "/"))


def _local_path(url: str | None) -> str | None:
    return url[len("file://"):] if url and url.startswith("file://") else None


def plan(manifest: dict) -> dict:
    """What the recipe installs, from the manifest: {hashed: [(name, version, sha256, wheel)],
    pinned: [requirement line], editable: [path in the repository], not_captured: [line]}."""
    interp = manifest.get("interpreter") or {}
    prefix = interp.get("prefix")
    repo = manifest.get("repo_dir") or "/work/repo"
    hashed, pinned, editable, not_captured = [], [], [], []
    for dist in manifest.get("distributions") or []:
        if dist.get("shadowed"):
            continue
        name, version, source = dist.get("name") or "", dist.get("version") or "", dist.get("source") or {}
        kind = source.get("kind")
        if not prefix or not _in(dist.get("location"), prefix):
            continue  # the image's own packages (a venv with system site packages sees them too)
        if from_image(manifest, dist):
            continue  # in the sandbox image before the agent ran: FROM rebuilds it
        if not _SAFE_PIN.match(name) or (version and not _SAFE_VERSION.match(version)):
            not_captured.append(f"{name!r} {_known(version)!r}: not a name and version pip accepts")
            continue
        if kind in ("editable", "egg_link", "local_dir"):
            path = _local_path(source.get("url"))
            if path and _in(path, repo):
                editable.append(path) if kind != "local_dir" else pinned.append(f"{path}")
            else:
                not_captured.append(f"{name} {_known(version)}: installed from {_known(path or source.get('url'))}, "
                                    "outside the repository")
        elif kind == "vcs" and source.get("url") and source.get("commit_id"):
            pinned.append(f"{name} @ {source.get('vcs', 'git')}+{source['url']}@{source['commit_id']}")
        elif kind == "archive_url" and source.get("url"):
            pinned.append(f"{name} @ {source['url']}")
        elif kind == "wheel_file":
            wheel = dist.get("wheel")
            if wheel:
                hashed.append((name, version, wheel["sha256"], wheel["file"]))
            else:
                pinned.append(f"{name}=={version}")
                not_captured.append(f"{name} {version}: installed from the wheel file {source.get('url')}, not found on this node")
        elif kind == "index":
            wheel = dist.get("wheel")
            if wheel:
                hashed.append((name, version, wheel["sha256"], wheel["file"]))
            else:
                pinned.append(f"{name}=={version}")
        else:
            not_captured.append(f"{name} {_known(version)}: installer {_known(dist.get('installer'))}, source unknown")
    return {"hashed": hashed, "pinned": pinned, "editable": editable, "not_captured": not_captured}


def _env_steps(manifest: dict, not_captured: list[str]) -> tuple[list[str], str]:
    """(Dockerfile RUN lines that create the environment at its prefix, the python to install with)."""
    interp = manifest.get("interpreter") or {}
    prefix, base = interp.get("prefix"), interp.get("base_prefix")
    version = ".".join(str(interp.get("version") or "").split(".")[:2])
    conda = manifest.get("conda")
    if conda:
        root = conda.get("root")
        create = f"{root}/bin/conda create -y -p {prefix} --file {ENV_DIR}/conda-explicit.txt" if prefix != root else \
            f"{root}/bin/conda install -y -p {prefix} --file {ENV_DIR}/conda-explicit.txt"
        not_captured.append(f"the conda installation at {root} itself is assumed present in the base image "
                            "(a conda the agent installed is not rebuilt by this recipe)")
        return [f"RUN {create}"], f"{prefix}/bin/python"
    if interp.get("venv"):
        cfg = interp.get("pyvenv_cfg") or ""
        system = "--system-site-packages " if re.search(r"include-system-site-packages\s*=\s*true", cfg) else ""
        return [f"RUN {base}/bin/python{version} -m venv {system}{prefix}"], f"{prefix}/bin/python"
    return [], interp.get("path") or "python3"


def dockerfile(manifest: dict, steps: dict, has_wheels: bool, report_name: str | None) -> str:
    """The Dockerfile text (see the module docstring)."""
    image = manifest.get("image") or {}
    repo = manifest.get("repo_dir") or "/work/repo"
    lines = ["# Rebuilds the environment an agent built in a reb-ray trial (README.md).",
             f"# trial {manifest.get('trial_id')} attempt {manifest.get('attempt')} of sweep {manifest.get('sweep_id')}",
             f"# sandbox image id: {image.get('id')}",
             f"FROM {image.get('tag')}", "USER root", "ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1"]
    system = (manifest.get("system_packages") or {})
    wanted = {**system.get("added", {}), **{k: v[1] for k, v in system.get("changed", {}).items()}}
    if wanted:
        pins = " ".join(f"{k.split(':')[0]}={v}" for k, v in sorted(wanted.items()))
        lines.append(f"RUN apt-get update && apt-get install -y --no-install-recommends {pins} && rm -rf /var/lib/apt/lists/*")
    lines.append(f"COPY repo {repo}")
    lines.append(f"COPY requirements.lock requirements.nohash.lock {ENV_DIR}/")
    if manifest.get("conda"):
        lines.append(f"COPY conda-explicit.txt {ENV_DIR}/")
    if has_wheels:
        lines.append(f"COPY wheels {ENV_DIR}/wheels")
    # certs/ca.pem, when present, is the CA bundle of the build host's TLS-intercepting proxy
    # (`reb-ray env verify` puts the node's there); pip uses it only while building.
    lines.append(f"COPY certs {ENV_DIR}/certs")
    env_lines, python = _env_steps(manifest, steps["not_captured"])
    lines += env_lines
    find_links = f" --find-links {ENV_DIR}/wheels" if has_wheels else ""
    offline = "PIP_NO_INDEX=1 " if has_wheels and not steps["pinned"] else ""
    brk = "PIP_BREAK_SYSTEM_PACKAGES=1 " if not (manifest.get("interpreter") or {}).get("venv") else ""
    brk = f'{brk}PIP_CERT="$(ls {ENV_DIR}/certs/ca.pem 2>/dev/null)" '
    installer = [(n, v, h) for n, v, h, _ in steps["hashed"] if n.lower() == "pip"]
    if installer:
        # The locked pip first: pip writes the console scripts (bin/*) of what it installs from
        # a template that changes between its releases, so an environment whose pip was
        # upgraded before its packages were installed (`pip install -U pip` first, the usual
        # recipe) is rebuilt file for file only by that pip, not by the venv's bundled one. The
        # rest of the lock leaves it out: its own scripts (bin/pip*) were written by the pip
        # that installed it, and a reinstall by itself would rewrite them.
        name, version, digest = installer[0]
        lines.append(f"RUN printf '%s\\n' '{name}=={version} --hash=sha256:{digest}' > /tmp/reb-ray-pip.lock && "
                     f"{brk}{offline}{python} -m pip install --no-deps --force-reinstall --require-hashes"
                     f"{find_links} -r /tmp/reb-ray-pip.lock && rm -f /tmp/reb-ray-pip.lock")
    if installer and len(steps["hashed"]) > 1:
        lines.append(f"RUN grep -v -i '^pip==' {ENV_DIR}/requirements.lock > /tmp/reb-ray-rest.lock; "
                     f"{brk}{offline}{python} -m pip install --no-deps --force-reinstall --require-hashes"
                     f"{find_links} -r /tmp/reb-ray-rest.lock && rm -f /tmp/reb-ray-rest.lock")
    elif steps["hashed"] and not installer:
        # --force-reinstall: what the environment's creation put in first (a venv's ensurepip
        # pip and setuptools, Debian's patched builds) is replaced by the locked wheels even at
        # the same version, which pip would otherwise call satisfied.
        lines.append(f"RUN {brk}{offline}{python} -m pip install --no-deps --force-reinstall --require-hashes"
                     f"{find_links} -r {ENV_DIR}/requirements.lock")
    if steps["pinned"]:
        lines.append(f"RUN {brk}{python} -m pip install --no-deps{find_links} -r {ENV_DIR}/requirements.nohash.lock")
    for path in steps["editable"]:
        lines.append(f"RUN {brk}{python} -m pip install --no-deps{find_links} -e {path}")
    env = (manifest.get("report") or {}).get("env") or {}
    for key, value in sorted(env.items()):
        if re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", key) and isinstance(value, str):
            lines.append(f"ENV {key}={json.dumps(value)}")
    if report_name:
        lines.append(f"COPY {report_name} {ENV_DIR}/report.json")
        if manifest.get("report_path"):
            lines.append(f"RUN mkdir -p {Path(manifest['report_path']).parent} && cp {ENV_DIR}/report.json {manifest['report_path']}")
    lines.append(f"WORKDIR {repo}")
    return "\n".join(lines) + "\n"


def _copy_repo(row: dict, dest: Path, tasks_root: Path | None, mirrors: list[Path], task=None) -> None:
    """The task's repository at the attempt's pinned commit, into `dest`. `task`: its TaskSpec
    when the caller loaded it (else it is loaded from `tasks_root`)."""
    import tempfile

    from reb_ray.suite.load import find_task
    from reb_ray.suite.placement import place_repo

    if task is None:
        task = find_task(row["suite"], row["task_id"], tasks_root, "place its repository")
    with tempfile.TemporaryDirectory(prefix="reb-ray-export-") as tmp:
        placed = place_repo(task, Path(tmp), mirrors)
        if row.get("repo_commit") and placed.commit != row["repo_commit"]:
            raise RebRayError(f"task {row['task_id']!r} is now at commit {placed.commit}, the attempt ran "
                              f"{row['repo_commit']}: the export would not be the same repository")
        shutil.copytree(placed.path, dest, symlinks=True)


@dataclass(frozen=True)
class ExportSource:
    """What an export reads of the results store, read where the output directory is: the
    attempt's trials row, its manifest, the agent's stored report (raw JSON, None when none was
    stored), its stages' statuses, and the output directory the export names. Plain data, so
    the rest of the export (`write_export`) can run on another node than the one holding the
    output directory: the node that built the environment, whose package cache holds its wheels."""

    row: dict
    manifest: dict
    report: str | None
    stages: dict[str, str]
    output: str


def read_source(output: Path, trial_id: str, attempt: int | None = None, sweep_id: str | None = None) -> ExportSource:
    """The `ExportSource` of `trial_id`'s attempt in `output` (`find_attempt`'s choice). Raises
    RebRayError with one line on what is missing."""
    output = Path(output)
    row = find_attempt(output, trial_id, attempt, sweep_id)
    manifest = load_manifest(output, row)
    stages = stage_rows(output, row)
    report = next((s.get("raw") for s in stages if s["stage"] == "report"), None)
    return ExportSource(row=row, manifest=manifest, report=report or None,
                        stages={s["stage"]: s["status"] for s in stages}, output=str(output.resolve()))


def export(output: Path, trial_id: str, out: Path, attempt: int | None = None, sweep_id: str | None = None,
           image: bool = False, wheels: bool = True, wheel_dirs: list[Path] | None = None,
           tasks_root: Path | None = None, mirrors: list[Path] | None = None) -> dict:
    """Write the export of `trial_id`'s attempt into `out` (must not exist or be empty); returns
    export.json's content. Raises RebRayError with one line on what is missing."""
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise RebRayError(f"{out}: exists and is not empty")
    return write_export(read_source(output, trial_id, attempt, sweep_id), out, image=image, wheels=wheels,
                        wheel_dirs=wheel_dirs, tasks_root=tasks_root, mirrors=mirrors)


_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9][A-Za-z0-9.+!_-]*)$")


def built_from_sdists(pinned: list[str], index_url: str | None = None) -> list[dict]:
    """The unhashed `name==version` pins whose version the index publishes as an sdist and no
    wheel (so pip builds them from that sdist): [{"name", "version", "file", "sha256"}], the
    sdist's file and sha256 as the index lists them. An index that cannot be reached gives []
    (the README then says nothing of it, as before)."""
    from reb_ray.probing.published import DEFAULT_INDEX, Published

    published = Published([], index_url=index_url or DEFAULT_INDEX)
    out = []
    for line in pinned:
        match = _PIN.match(line.strip())
        if not match:
            continue
        found = published.candidates(*match.groups()) or []
        sdists = [a for a in found if a.kind == "sdist"]
        if sdists and not any(a.kind == "wheel" for a in found):
            out.append({"name": match[1], "version": match[2], "file": sdists[0].filename, "sha256": sdists[0].sha256})
    return out


def write_export(source: ExportSource, out: Path, image: bool = False, wheels: bool = True,
                 wheel_dirs: list[Path] | None = None, tasks_root: Path | None = None,
                 mirrors: list[Path] | None = None, task=None) -> dict:
    """Write the export of `source` into `out` (must not exist or be empty) from what this node
    holds: the repository placed from `task` (else the suite under `tasks_root`) and `mirrors`,
    the wheels from `wheel_dirs` (default: this node's package cache and wheelhouse), the kept
    image (`image`) from this node's Docker. Returns export.json's content. Raises RebRayError
    with one line on what is missing."""
    from reb_ray.models.sweep import NODE_WHEELHOUSE, SweepConfig

    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise RebRayError(f"{out}: exists and is not empty")
    row, manifest, report = source.row, source.manifest, source.report
    steps = plan(manifest)
    out.mkdir(parents=True, exist_ok=True)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    if report:
        (out / "report.json").write_text(report)
    _copy_repo(row, out / "repo", tasks_root, mirrors or [], task)
    (out / "certs").mkdir()
    (out / "requirements.lock").write_text("".join(f"{n}=={v} --hash=sha256:{h}\n" for n, v, h, _ in steps["hashed"]))
    sdists = built_from_sdists(steps["pinned"])
    (out / "requirements.nohash.lock").write_text("".join(f"{line}\n" for line in steps["pinned"]) + "".join(
        f"# {s['name']}=={s['version']} is built from the sdist {s['file']} (sha256 {s['sha256']})\n" for s in sdists))
    if manifest.get("conda"):
        urls = [p["url"] + (f"#{p['md5']}" if p.get("md5") else "") for p in manifest["conda"]["packages"] if p.get("url")]
        (out / "conda-explicit.txt").write_text("@EXPLICIT\n" + "".join(f"{u}\n" for u in urls))
    copied, missing = 0, []
    if wheels and steps["hashed"]:
        dirs = wheel_dirs if wheel_dirs is not None else [SweepConfig().sandbox.pip_cache_dir,
                                                          *([NODE_WHEELHOUSE] if NODE_WHEELHOUSE.is_dir() else [])]
        (out / "wheels").mkdir()
        for name, version, _, file in steps["hashed"]:
            found = next((d / file for d in dirs if (d / file).is_file()), None)
            if found is None:
                missing.append(file)
                continue
            shutil.copy2(found, out / "wheels" / file)
            copied += 1
        if missing:
            steps["not_captured"].append(f"wheels not on this node ({', '.join(missing)}): the build downloads them")
    has_wheels = copied > 0
    (out / "Dockerfile").write_text(dockerfile(manifest, steps, has_wheels, "report.json" if report else None))
    (out / ".dockerignore").write_text("image.tar\nverification.json\nexport.json\nREADME.md\n")  # not sent to the daemon
    archive = None
    if image:
        archive = _save_image(row, out / "image.tar")
    info = {"export_version": EXPORT_VERSION, "output": source.output, "sweep_id": row["sweep_id"],
            "trial_id": row["trial_id"], "attempt": row["attempt"], "task_id": row["task_id"], "suite": row["suite"],
            "agent": row["agent"], "node": row["node"], "env_manifest_digest": row.get("env_manifest_digest"),
            "agent_wall_time_s": row.get("agent_wall_time_s"), "kept_image": row.get("env_image_tag"),
            "image_archive": archive, "report_put_back": manifest.get("report_path") if report else None,
            "locked_hashed": len(steps["hashed"]), "locked_unhashed": len(steps["pinned"]),
            "editable": steps["editable"], "wheels": copied, "not_captured": steps["not_captured"],
            "stages": dict(source.stages), "sdists": sdists}
    (out / "export.json").write_text(json.dumps(info, indent=1) + "\n")
    (out / "README.md").write_text(readme(manifest, info))
    return info


def _save_image(row: dict, dest: Path) -> str:
    """`docker save` of the attempt's kept image into `dest`. Raises RebRayError when it is not
    kept, or kept on another node."""
    import socket

    if not row.get("env_kept") or not row.get("env_image_id"):
        raise RebRayError(f"trial {row['trial_id']!r} attempt {row['attempt']} kept no image "
                          f"(policy {row.get('env_keep_policy')!r}): export without --image")
    if row.get("node") != socket.gethostname():
        raise RebRayError(f"the kept image of trial {row['trial_id']!r} is on node {row['node']!r}: run the export there")
    proc = subprocess.run(["docker", "save", "-o", str(dest), row["env_image_tag"] or row["env_image_id"]],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RebRayError(f"docker save {row['env_image_tag']}: {proc.stderr.strip()[:300]}")
    return dest.name


def _environment_text(manifest: dict, info: dict) -> str:
    """What the recipe does for the environment, in the README's words: a venv or conda
    environment is created at the same prefix; an interpreter of the image (a system python) is
    installed into, not created; the locks are named only when they hold packages, the wheels
    directory only when it was written."""
    interp = manifest.get("interpreter") or {}
    if manifest.get("conda") or interp.get("venv"):
        parts = ["creates the environment at the same prefix"]
    else:
        parts = [f"uses the image's own interpreter `{_known(interp.get('path'))}` (the agent made no environment)"]
    hashed, unhashed = info.get("locked_hashed") or 0, info.get("locked_unhashed") or 0
    if hashed:
        parts.append(f"installs {hashed} package(s) from `requirements.lock` by exact version and sha256"
                     + (" (their wheels are in `wheels/`)" if info.get("wheels") else ""))
    if unhashed:
        parts.append(f"{'and ' if hashed else 'installs '}{unhashed}{'' if hashed else ' package(s)'} from "
                     "`requirements.nohash.lock` (exact pins or "
                     "direct references without a known hash)")
    if not hashed and not unhashed:
        parts.append("installs no package (the agent added none to it)")
    return ", ".join(parts[:1]) + (" and " + " ".join(parts[1:]) if len(parts) > 1 else "")


def readme(manifest: dict, info: dict) -> str:
    """README.md of an export."""
    interp = manifest.get("interpreter") or {}
    gaps = "\n".join(f"- {line}" for line in info["not_captured"]) or "- nothing the manifest knows of"
    gaps += "".join(f"\n- {s['name']} {s['version']} is built from the sdist {s['file']} (sha256 {s['sha256']}): "
                    "the rebuild compiles it again, so its files may differ from the kept ones"
                    for s in info.get("sdists") or [])
    fs = manifest.get("filesystem") or {}
    # Not the agent's or rebuilt: the prefix itself, reb-ray's own files, the report put back.
    skip = [interp.get("prefix") or "/nonexistent", *harness_paths(manifest.get("repo_dir") or "/work/repo")]
    if info.get("report_put_back"):
        skip.append(info["report_put_back"])
    outside = [g for g in fs.get("groups") or [] if not any(_in(g["path"], root) for root in skip)]
    outside_text = "\n".join(f"- {g['path']}: {g['files']} files, {g['bytes']} bytes" for g in outside[:20]) or "- none"
    image_part = (f"\n`image.tar` is the exact image the agent left (`docker load -i image.tar`, then "
                  f"`docker run -it {info['kept_image']} bash`).\n") if info.get("image_archive") else ""
    report_text = (f"The agent's report is put back at\n`{info['report_put_back']}`." if info.get("report_put_back")
                   else "No report of the agent is put back (none was stored).")
    return f"""# Environment of {info['trial_id']} (attempt {info['attempt']}, sweep {info['sweep_id']})

The agent `{info['agent']}` built this environment for the task `{info['task_id']}` ({info['suite']})
on node `{_known(info['node'])}`. Its interpreter is `{_known(interp.get('path'))}` (Python {_known(interp.get('version'))},
prefix `{_known(interp.get('prefix'))}`). Stages of the source attempt: {', '.join(f'{k} {v}' for k, v in info['stages'].items())}.

## Build and use

    docker build -t my-env .
    docker run -it my-env {_known(interp.get('path'))} -c 'import sys; print(sys.prefix)'

The build starts from the sandbox image the trial ran in (`FROM` line; it must be on the machine:
`reb-ray image build`), installs the system packages the agent added at their versions, copies
the repository to `{_known(manifest.get('repo_dir'))}`, {_environment_text(manifest, info)}, then redoes the editable install
of the repository ({', '.join(info['editable']) or 'none'}). {report_text} `reb-ray env verify .` rebuilds it and runs the probes on it.
It also compares the rebuilt prefix with the kept image's, file by file (sha256), except what a
rebuild is expected to change: {', '.join(f'`{p}`' for p in EXPECTED_TO_DIFFER)}; a file the
rebuild changed or lacks makes it `reproducible: no`, with the files named.
{image_part}
## What the recipe could not capture

{gaps}

Paths the agent changed outside the environment's prefix and the repository (the container's
filesystem diff; not rebuilt by the recipe unless listed above):

{outside_text}

The commands the agent ran are in `manifest.json` (`commands`), the full manifest beside them.
"""
