"""The node's package cache: read-only to trials, filled by the harness from the index.

A cache that trials write into lets one trial's agent change what later trials install (a
poisoned wheel), which breaks the independence of trials. So the node's cache is a flat
directory of wheels mounted read-only at CACHE_MOUNT and given to pip as find-links (pip
lists find-links candidates before the index's, so a cached wheel of the version pip chose is
used instead of a download). Each trial's own pip cache (~/.cache/pip) is in its container
and goes with it.

The harness fills the cache after a trial (`fill`): it lists the distributions installed in
the interpreter the agent reported (only names and versions are taken from the trial, checked
against a strict pattern), and downloads the missing ones itself, with `pip download
--no-deps --only-binary=:all:` for that interpreter's Python version, in a fresh container of
the same image that runs no agent code. pip checks every download against the index's sha256,
so the cache only ever holds files as the index serves them. Requirements that have no
wheel on the index (a repository's own package, sdists) are remembered in MISSING_FILE and
not tried again.
"""

from __future__ import annotations

import json
import re
import shlex
import uuid
from pathlib import Path

from reb_ray.sandbox.base import Sandbox, SandboxConfig

CACHE_MOUNT = "/opt/reb-ray/pip-cache"
MISSING_FILE = ".not-on-index"
MAX_REQUIREMENTS = 500
FILL_TIMEOUT_S = 600.0
_REQUIREMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}==[A-Za-z0-9][A-Za-z0-9.+!_-]{0,63}$")
_LIST = ("import json, sys; from importlib import metadata as m; "
         "print(json.dumps([sys.version_info[:2], sorted({(d.metadata['Name'], d.version) for d in m.distributions() "
         "if d.metadata['Name']})]))")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _key(name: str, version: str) -> str:
    return f"{_canonical(name)}=={version}"


def cached_requirements(cache_dir: Path) -> set[str]:
    """`name==version` (name canonical, `_` for runs of -_.) of every wheel in the cache, plus
    those remembered as not on the index."""
    have = set()
    for wheel in cache_dir.glob("*.whl"):
        parts = wheel.name.split("-")
        if len(parts) >= 5:
            have.add(_key(parts[0], parts[1]))
    missing = cache_dir / MISSING_FILE
    if missing.is_file():
        have.update(_key(*line.strip().split("==", 1)) for line in missing.read_text().splitlines() if "==" in line)
    return have


def installed(sandbox: Sandbox, python: str) -> tuple[str, list[str]] | None:
    """The Python version ("3.11") and the `name==version` requirements installed in `python`
    inside the sandbox; None when it cannot be listed. Names failing the pattern are dropped."""
    result = sandbox.exec([python, "-I", "-c", _LIST], timeout=120)
    if not result.ok:
        return None
    try:
        (major, minor), dists = json.loads(result.output.strip().splitlines()[-1])
    except (ValueError, IndexError, TypeError):
        return None
    reqs = [f"{name}=={version}" for name, version in dists if _REQUIREMENT.match(f"{name}=={version}")]
    return f"{int(major)}.{int(minor)}", reqs[:MAX_REQUIREMENTS]


def fill(cache_dir: Path, base: SandboxConfig, python_version: str, requirements: list[str],
         provider: str = "docker") -> list[str]:
    """Download the wheels of `requirements` missing from `cache_dir`, in a harness container
    of sandbox `provider` (docker or podman: the trial's engine) made from `base` (its image,
    network and CA bundle). Returns the requirements fetched. Raises RebRayError when the
    container cannot start (the caller records, never fails the trial)."""
    from reb_ray.sandbox import provider_class

    have = cached_requirements(cache_dir)
    wanted = [r for r in requirements if _key(*r.split("==")) not in have]
    if not wanted:
        return []
    config = SandboxConfig(image=base.image, network=base.network, ca_bundle=base.ca_bundle, cpus=base.cpus,
                           memory_bytes=base.memory_bytes, rw_mounts={str(cache_dir): "/cache"},
                           sweep_id=base.sweep_id, trial_id=base.trial_id, attempt=base.attempt,
                           labels={"reb-ray.role": "package-cache-fill"})
    # Each fill downloads into its own directory and moves finished wheels in (rename: atomic),
    # so concurrent fills on one node never expose a partial file.
    incoming = f"/cache/.incoming-{uuid.uuid4().hex[:12]}"
    script = (f'mkdir -p {incoming}; for r in "$@"; do python3 -m pip download -q --no-deps --only-binary=:all: '
              f'--no-cache-dir --python-version {shlex.quote(python_version)} -d {incoming}/w "$r" >/dev/null 2>&1 '
              f'|| echo "$r" >> {incoming}/missing; done; mv {incoming}/w/*.whl /cache/ 2>/dev/null; '
              f'cat {incoming}/missing >> /cache/{MISSING_FILE} 2>/dev/null; rm -rf {incoming}; true')
    with provider_class(provider)(config) as box:  # type: ignore[call-arg]
        box.exec(["sh", "-c", script, "fill", *wanted], timeout=FILL_TIMEOUT_S,
                 env={"PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_FIND_LINKS": ""})
    wheels = {_key(w.name.split("-")[0], w.name.split("-")[1]) for w in cache_dir.glob("*.whl")}
    return [r for r in wanted if _key(*r.split("==")) in wheels]
