"""Host side of the installed-code check: hash in the sandbox, compare with what was published.

`check_installed` runs probes/installed_files.py in the sandbox with the image's python3
(`-I -S`: no site hook, no PYTHONPATH of the agent's; the way every probe of the toolbox runs,
after the agent's processes were stopped), on the directories the start-up probe found on the
reported interpreter's import path. It reads the published artifact of every distribution found
there from outside the sandbox (reb_ray.probing.published: the node's package cache, its
wheelhouses, the sandbox image's own wheels, the index) and returns the check's record
(`reb_ray.grading.installed.judge`), which the probe phase stores with the stages that read it.

Why the hashing runs in the sandbox and not on the host's copy of the container's files: it
is how the toolbox's probes already observe (the witness collector, the start-up probe), it
works for every provider with a filesystem (docker, podman, the local one), and it never makes
the host follow a symlink the agent planted. What the host trusts are the published hashes
and its own judgement of them; the probe only reads bytes. Never raises: a check that could
not run is recorded as such and changes no verdict.
"""

from __future__ import annotations

import hashlib
import io
import logging
import posixpath
import tarfile
import time
from pathlib import Path

from reb_ray.grading.editable import TEMPLATE_MEMBER, template_of, templates_wanted
from reb_ray.grading.installed import compare, judge, linux_forms, own_files
from reb_ray.probing.facts import facts_env
from reb_ray.probing.published import Artifact, Published
from reb_ray.probing.record import run_json_probe
from reb_ray.sandbox import Sandbox
from reb_ray.sandbox.image_files import image_archive

log = logging.getLogger(__name__)

#: Seconds the in-sandbox hashing may take (a CPU torch environment: about a GiB of files).
PROBE_TIMEOUT_S = 300.0
#: Candidate artifacts whose RECORD is read per distribution at most.
MAX_CANDIDATES = 4
#: Where the sandbox image keeps the wheels `python3 -m venv` installs from.
IMAGE_WHEELS = "/usr/share/python-wheels"

_LAUNCH = ('py=/usr/bin/python3; [ -x "$py" ] || py=$(command -v python3) || exit 127; '
           'script=$1; shift; exec "$py" -I -S "$script" "$@"')


def cache_root() -> Path:
    """Where the published RECORDs and the images' wheels are kept on this node."""
    from reb_ray.probing.toolbox import cache_root as reb_ray_cache

    return reb_ray_cache() / "published"


def image_wheels(image: str | None, provider: type[Sandbox] | None) -> Path | None:
    """A host directory holding the wheels the sandbox image `image` ships (IMAGE_WHEELS),
    copied out of a container of the image that never starts, once per image and node; None
    when the provider has no images or the copy fails."""
    if not image or provider is None or not provider.capabilities.image:
        return None
    try:
        client = provider.connect_engine(timeout=30)
        image_id = client.images.get(image).id.split(":")[-1][:16]
    except Exception as exc:  # noqa: BLE001 - no image wheels: the index still answers
        log.warning("cannot read the sandbox image %s: %s", image, exc)
        return None
    target = cache_root() / "image-wheels" / image_id
    if (target / ".done").is_file():
        return target
    try:
        with image_archive(client, image, IMAGE_WHEELS) as stream:
            data = io.BytesIO(b"".join(stream))
        target.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=data) as archive:
            for member in archive.getmembers():
                name = posixpath.basename(member.name)
                if member.isfile() and name.endswith(".whl") and "/" not in name:
                    (target / name).write_bytes(archive.extractfile(member).read())
        (target / ".done").write_text(image + "\n")
        return target
    except Exception as exc:  # noqa: BLE001
        log.warning("cannot copy %s out of %s: %s", IMAGE_WHEELS, image, exc)
        return target if (target / ".done").is_file() else None


def directories(startup: dict | None, repo_dir: str | None = None) -> tuple[list[str], list[str]]:
    """(site directories: the interpreter's site-packages and the directories its `.pth` files
    add, other directories of its import path) from the start-up probe's record. The repository
    and directories below it are left out: that is the repository's own code (an editable
    install's `.pth` names `src/`), which the comparison with the pinned commit judges, and no
    published artifact could own."""
    if not isinstance(startup, dict):
        return [], []
    sites = [d for d in startup.get("site_dirs") or [] if isinstance(d, str)]
    info = startup.get("interpreter") if isinstance(startup.get("interpreter"), dict) else {}
    sys_path = {posixpath.normpath(p) for p in info.get("sys_path") or [] if isinstance(p, str)}
    stdlib = [posixpath.join(str(p), "lib") for p in (info.get("prefix"), info.get("base_prefix")) if p]
    others = []
    for d in startup.get("path_dirs") or []:
        if not isinstance(d, str) or d in sites:
            continue
        if repo_dir and (d == repo_dir.rstrip("/") or d.startswith(repo_dir.rstrip("/") + "/")):
            continue
        added = d not in sys_path and "-packages" in d or d not in sys_path and not any(
            d.startswith(s + "/python") for s in stdlib)
        (sites if added else others).append(d)  # a directory a .pth file adds is read as a site one
    return sites, others


def _rank(artifacts: list[Artifact], tags: list[str]) -> list[Artifact]:
    """Wheels to read first: those with an installed tag, then those of the same Linux
    platform under another name (a repaired wheel's WHEEL keeps `linux_x86_64`), local ones first."""
    wanted, linux = set(tags), linux_forms(tags)
    wheels = [a for a in artifacts if a.kind == "wheel"]
    return sorted(wheels, key=lambda a: (not (a.tags & wanted), not (linux_forms(a.tags) & linux),
                                         not a.source.startswith("local:")))


def lookup(dist: dict, published: Published) -> dict:
    """The candidates of one distribution (reb_ray.grading.installed.judge_dist's `lookup`):
    the wheels of its name and version, the one whose tags match its WHEEL first; RECORDs are
    read one after another until one matches every file."""
    name, version = dist.get("name"), dist.get("version")
    if not name or not version:
        return {"candidates": [], "index": "ok", "sdists": []}
    out: dict = {"candidates": [], "index": "ok", "sdists": []}
    files = dist.get("files") or {}

    def read(artifacts: list[Artifact]) -> bool:
        for artifact in _rank(artifacts, dist.get("tags") or [])[:MAX_CANDIDATES]:
            record = published.record(artifact)
            if record is None:
                continue
            out["candidates"].append({"artifact": artifact.filename, "source": artifact.source, "record": record,
                                      "tags": sorted(artifact.tags)})
            got = compare(files, record)
            if not got["modified"] and not got["added"] and got["matched"]:
                return True
        return False

    if read(published.local_candidates(name, version)):
        return out  # a local artifact matches: the index is not asked
    found = published.candidates(name, version)
    if found is None:
        out["index"] = "unreachable"
        return out
    out["sdists"] = [[a.filename, a.sha256] for a in found if a.kind == "sdist"][:2]
    read([a for a in found if not a.source.startswith("local:")])
    return out


def finder_templates(versions: list[str], published: Published) -> dict[str, dict]:
    """{setuptools version: {"template": setuptools' `_FINDER_TEMPLATE` or None, "source": the
    wheel it was read from, "sha256": the template's hex digest, "why": why there is none}}, read
    from the published setuptools wheels of each version (local artifacts first, then the index,
    one member by range requests; cached on disk), never from the sandbox."""
    out: dict[str, dict] = {}
    for version in versions:
        got = {"template": None, "source": None, "sha256": None, "why": None}
        artifacts = [a for a in published.local_candidates("setuptools", version) if a.kind == "wheel"]
        if not artifacts:
            found = published.candidates("setuptools", version)
            artifacts = [a for a in found or [] if a.kind == "wheel"]
            if found is None:
                got["why"] = "no local setuptools wheel and the index could not be reached"
            elif not artifacts:
                got["why"] = f"no published wheel of setuptools=={version}"
        for artifact in artifacts[:MAX_CANDIDATES]:
            data = published.member(artifact, TEMPLATE_MEMBER)
            template = template_of(data.decode("utf-8", "replace")) if data is not None else None
            if template is not None:
                got.update(template=template, source=f"{artifact.filename} ({artifact.source})",
                           sha256=hashlib.sha256(template.encode()).hexdigest(), why=None)
                break
            got["why"] = f"{artifact.filename} has no {TEMPLATE_MEMBER} with a _FINDER_TEMPLATE"
        out[version] = got
    return out


def check_installed(sandbox: Sandbox, toolbox: str, startup: dict | None, published: Published,
                    timeout_s: float = PROBE_TIMEOUT_S, repo_dir: str | None = None) -> dict:
    """The check's record for the reported interpreter whose start-up probe record is `startup`
    (module docstring), the repository at `repo_dir` left out; {"error": ...} when it could not
    run. Never raises."""
    started = time.monotonic()
    sites, others = directories(startup, repo_dir)
    if not sites and not others:
        return {"error": "the start-up probe found no import path to check"}
    script = posixpath.join(toolbox, "probes", "installed_files.py")

    def argv(out: str) -> list[str]:
        args = ["sh", "-c", _LAUNCH, "installed", script, "--out", out]
        for d in sites:
            args += ["--site", d]
        for d in others:
            args += ["--path-dir", d]
        return args

    try:
        listing, _ = run_json_probe(sandbox, "installed", toolbox, argv, timeout_s, facts_env())
        listing = own_files(listing)  # a namespace package's files are judged by their own distribution
        lookups = {}
        t = time.monotonic()
        for dist in (listing or {}).get("dists") or []:
            if isinstance(dist, dict) and not (dist.get("kind") == "egg-info" and str(dist.get("dir")).startswith("/usr/")):
                lookups[f"{dist.get('dir')}/{dist.get('info')}"] = lookup(dist, published)
        templates = finder_templates(templates_wanted(listing), published)
        summary = judge(listing, lookups, templates, repo_dir)
        summary["finder_templates"] = {v: {k: got[k] for k in ("source", "sha256", "why")} for v, got in templates.items()}
        summary["lookup_s"] = round(time.monotonic() - t, 3)
        summary["index_errors"] = published.index_errors[:5]
    except Exception as exc:  # noqa: BLE001 - the check is evidence; its failure is recorded, never raised
        log.warning("installed-code check failed: %s", exc)
        summary = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    summary["check_s"] = round(time.monotonic() - started, 3)
    return summary


def run_check(sandbox: Sandbox, toolbox: str, startup: dict | None, spec, repo_dir: str | None = None) -> dict | None:
    """The check for trial `spec` (a TrialSpec), the repository at `repo_dir` left out: published artifacts from the node's package
    cache (when the sweep shares one), its wheelhouses, the sweep's sandbox image's own wheels
    and the index. None where the sandbox's interpreters are the host's (the local provider:
    trusted built-in agents only), so nothing is judged there. Never raises."""
    if not sandbox.capabilities.own_interpreters:
        return None
    try:
        from reb_ray.sandbox import provider_class

        box = spec.config.sandbox
        local = ([Path(box.pip_cache_dir)] if box.pip_cache else []) + [Path(d) for d in box.wheelhouses]
        wheels = image_wheels(spec.image, provider_class(box.provider))
        published = Published(local + ([wheels] if wheels else []), cache_dir=cache_root() / "records")
    except Exception as exc:  # noqa: BLE001 - recorded, never raised
        return {"error": f"published artifacts unavailable: {type(exc).__name__}: {exc}"[:300]}
    return check_installed(sandbox, toolbox, startup, published, repo_dir=repo_dir)


def with_repo_imports(summary: dict, c0_raw: dict) -> dict:
    """A copy of the check's record with `repo_imports`: {top-level module: the file it
    resolves to} of the repository's static imports as the C0 probe resolved them (installed
    code only), which a command stage's grade counts as imported (a module whose import ended
    the process is missing from the witness's lists)."""
    owners = c0_raw.get("import_owners") if isinstance(c0_raw.get("import_owners"), dict) else {}
    imports = {name: got["path"] for name, got in sorted(owners.items()) if isinstance(got, dict)
               and isinstance(got.get("path"), str) and got.get("owner") not in ("repository", "stdlib")}
    return {**summary, "repo_imports": imports}


__all__ = ["check_installed", "directories", "finder_templates", "image_wheels", "lookup", "run_check",
           "with_repo_imports"]
