"""A Harbor task's sandbox image: built from its environment/Dockerfile once per node and digest.

The image is tagged `reb-ray/harbor-env:<task>-<digest>`, the digest covering the Dockerfile as
built (after the `FROM` mapping) and every file of the build context, so a changed task is a
new image and an unchanged one is built once per node however many trials run it (concurrent
trials of one digest in a process wait for the one build). The build's output is kept in the log directory
(`build-<digest>.log`); a build that fails is the infrastructure's (`BuildFailed`), never the
agent's, and names its log.

Air-gapped and mirrored clusters: a Dockerfile's `FROM` names an image of a registry the node
may not reach. `image_map` rewrites it before the build: a key names the image as written, or
without its digest, or without its registry (`python:3.13-slim-bookworm` matches
`public.ecr.aws/docker/library/python:3.13-slim-bookworm@sha256:...`), or is an fnmatch
pattern over those forms (`python:3.*`); the value is the local image or mirror to use. A key
ending in `/` is a registry prefix, and the value the mirror registry that replaces it
(`docker.io/` -> `mirror.internal:5000/`). When the build cannot get a base image, the error is
one line naming the image and the option.
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
import subprocess
import tempfile
import threading
from pathlib import Path

from reb_ray.errors import InfraError

IMAGE_REPO = "reb-ray/harbor-env"
MAP_OPTION = "--image-map"
_FROM = re.compile(r"^(\s*FROM\s+)((?:--\S+\s+)*)(\S+)(.*)$", re.IGNORECASE)
#: What Docker's build says when it cannot get a base image (no registry, no such image).
_UNREACHABLE = re.compile(r"pull access denied|failed to resolve source metadata|failed to do request|"
                          r"dial tcp|no such host|i/o timeout|manifest unknown|not found: manifest|"
                          r"repository does not exist|TLS handshake timeout|connection refused", re.IGNORECASE)
_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


class BuildFailed(InfraError):
    """A Harbor task's image did not build: the infrastructure's failure (category infra_sandbox:
    no sandbox could be made), retried as a new attempt like any infrastructure failure."""

    def __init__(self, reason: str) -> None:
        super().__init__("infra_sandbox", reason)

    def __reduce__(self):
        return type(self), (str(self),)


def reference_forms(ref: str) -> list[str]:
    """The names an image reference answers to in a mapping: as written, without its digest,
    without its registry (and Docker Hub's `library/`), and without both."""
    forms = [ref]
    bare = ref.split("@", 1)[0]
    forms.append(bare)
    for name in (ref, bare):
        first, _, rest = name.partition("/")
        if rest and ("." in first or ":" in first or first == "localhost"):
            short = rest
            for prefix in ("docker/library/", "library/"):
                short = short.removeprefix(prefix)
            forms.append(short)
    return list(dict.fromkeys(forms))


def map_image(ref: str, image_map: dict[str, str]) -> str:
    """The image to build FROM instead of `ref` (module docstring: the rules), or `ref`."""
    for key, value in image_map.items():
        if key.endswith("/") and ref.startswith(key):
            return value + ref[len(key):]
    forms = reference_forms(ref)
    for key, value in image_map.items():
        if key in forms:
            return value
    for key, value in image_map.items():
        if any(ch in key for ch in "*?[") and any(fnmatch.fnmatchcase(form, key) for form in forms):
            return value
    return ref


def parse_image_map(pairs: list[str]) -> dict[str, str]:
    """`SRC=DEST` option values as a mapping; raises ValueError naming a value without `=`."""
    out = {}
    for pair in pairs:
        src, sep, dest = pair.partition("=")
        if not sep or not src.strip() or not dest.strip():
            raise ValueError(f"{MAP_OPTION} {pair!r}: expected FROM-IMAGE=LOCAL-IMAGE (or REGISTRY/=MIRROR/)")
        out[src.strip()] = dest.strip()
    return out


def mapped_dockerfile(text: str, image_map: dict[str, str]) -> tuple[str, list[str]]:
    """The Dockerfile with each `FROM` image mapped, and the base images it then names (stage
    names of a multi-stage build left out)."""
    stages: set[str] = set()
    bases: list[str] = []
    lines = []
    for line in text.splitlines():
        match = _FROM.match(line)
        if match is None:
            lines.append(line)
            continue
        head, flags, ref, tail = match.groups()
        if ref.lower() in stages or ref.lower() == "scratch":
            lines.append(line)
        else:
            ref = map_image(ref, image_map)
            bases.append(ref)
            lines.append(f"{head}{flags}{ref}{tail}")
        alias = re.search(r"\s+AS\s+(\S+)", tail, re.IGNORECASE)
        if alias:
            stages.add(alias.group(1).lower())
    return "\n".join(lines) + "\n", bases


def context_digest(context: Path, dockerfile_text: str) -> str:
    """16 hex digits of sha256 over the Dockerfile as built and every file of the context (its
    path and bytes, sorted), so a changed task is another image."""
    digest = hashlib.sha256(dockerfile_text.encode())
    for path in sorted(p for p in context.rglob("*") if p.is_file()):
        name = path.relative_to(context).as_posix().encode()
        data = path.read_bytes()
        digest.update(b"%d:%s%d:" % (len(name), name, len(data)))
        digest.update(data)
    return digest.hexdigest()[:16]


def _image_exists(tag: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", tag], capture_output=True).returncode == 0


def _lock(key: str) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(key, threading.Lock())


#: Where the sandbox's init goes in a task's image: a reb-ray sandbox runs an init as PID 1 (it
#: reaps orphans and tells the harness's keep-alive apart), and a task image rarely has one.
INIT_PATH = "/usr/local/bin/reb-ray-init"


def with_init(text: str, init_image: str) -> str:
    """The Dockerfile with reb-ray's init (the sandbox image's static tini) as its entrypoint."""
    return (text.rstrip("\n") + "\n# reb-ray: the sandbox's init as PID 1\n"
            f"COPY --from={init_image} /usr/bin/tini-static {INIT_PATH}\n"
            f'ENTRYPOINT ["{INIT_PATH}", "--"]\n')


def ensure_image(task_id: str, context: Path, dockerfile: Path, image_map: dict[str, str], log_dir: Path,
                 timeout_s: float, init_image: str) -> str:
    """The tag of the task's image, built now unless this node has it (module docstring), with
    the init of `init_image` (the reb-ray sandbox image) as its entrypoint (with_init).
    Raises BuildFailed with one line: the unreachable base image and the mapping option, or the
    build's last line and its kept log."""
    text, bases = mapped_dockerfile(dockerfile.read_text(encoding="utf-8"), image_map)
    text = with_init(text, init_image)
    digest = context_digest(context, text)
    safe = re.sub(r"[^a-z0-9_.-]", "-", task_id.lower())[:60].strip("-.") or "task"
    tag = f"{IMAGE_REPO}:{safe}-{digest}"
    with _lock(tag):
        if _image_exists(tag):
            return tag
        log_dir.mkdir(parents=True, exist_ok=True)
        log = log_dir / f"build-{safe}-{digest}.log"
        with tempfile.NamedTemporaryFile("w", suffix=".Dockerfile", delete=False) as fh:
            fh.write(text)
        try:
            with open(log, "w") as out:
                proc = subprocess.run(["docker", "build", "-f", fh.name, "-t", tag, str(context)],
                                      stdout=out, stderr=subprocess.STDOUT, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise BuildFailed(f"{dockerfile}: the build passed its {timeout_s:g} s (build log {log})") from None
        finally:
            Path(fh.name).unlink(missing_ok=True)
        if proc.returncode != 0:
            output = log.read_text(errors="replace")
            missing = [ref for ref in bases if not _image_exists(ref)]
            if missing and _UNREACHABLE.search(output):
                raise BuildFailed(f"{dockerfile}: base image {missing[0]} cannot be pulled here; map it to a local "
                                  f"image or a mirror with {MAP_OPTION} {missing[0].split('@')[0]}=IMAGE (build log {log})")
            last = next((line for line in reversed(output.splitlines()) if line.strip()), "")
            raise BuildFailed(f"{dockerfile}: docker build exited {proc.returncode}: {last.strip()[:200]} (build log {log})")
    return tag
