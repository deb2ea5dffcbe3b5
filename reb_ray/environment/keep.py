"""Keep: the agent's exact environment as a Docker image on the node that ran it.

`--keep-environments` (KEEP_POLICIES) decides which attempts keep theirs:

- `none`: nothing is committed;
- `successes` (the default): scored attempts whose environment ran the repository's code,
  i.e. at least one command stage (C1, C3 or C4) succeeded;
- `scored`: every scored attempt (an agent's failures included: they are what a probe fix may
  turn around);
- `all`: every attempt that reached the capture, infra errors included.

Whether an attempt is a success is known only after the probe phase, but the probes write
into the sandbox (their toolbox, outputs), so under any policy but `none` the agent's
container is committed right after the capture, before any probe runs (`commit`), and the
image is removed again at the attempt's end when the policy does not keep it (`settle`).

A kept image is `reb-ray/env:<tag>` (`image_tag`), labelled KEPT=true plus the sweep, trial
and attempt (Docker copies the container's labels onto the image), the node, and the
manifest's digest; its owner labels are emptied (it has no owner process). The reaper never
removes an image labelled KEPT (reb_ray.sandbox.docker.reaper); only a user does. Row columns: env_keep_policy,
env_kept (true/false; null when nothing was decided: capture never ran), env_image_id,
env_image_bytes (the new layer's bytes: what keeping costs on the node's disk, the sandbox image
being shared), env_image_total_bytes (the whole image, base included), env_commit_s. An image
committed and then removed (not kept) leaves IMAGE_COLUMNS null: no such image exists; its
env_commit_s stays (the commit did take that time).

The node's disk budget (`apply_budget`, `--env-disk-budget-gb`): the kept images of a node, all
sweeps together, may hold at most the budget in bytes, counted as each image's own layer (what
keeping it costs: the sandbox image below it is shared and stays anyway). After every kept
commit, and by hand with `reb-ray env gc`, images over the budget are removed: first any image
larger than the whole budget (it can never fit), then the oldest (by creation time) until the
rest fits. An image a container still uses (a verification or regrade running from it) is
left and reported. The default budget (`default_budget`) is 50 GiB, lowered to half of what the
kept images could have on the Docker data root (its free bytes plus what kept images hold
already), so keeping never takes more than half a node's free disk.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterable, Mapping

KEEP_POLICIES = ("none", "successes", "scored", "all")
KEPT_REPOSITORY = "reb-ray/env"
from reb_ray.sandbox.ownership import KEPT_ENV as KEPT
from reb_ray.sandbox.ownership import OWNER_HOST, OWNER_PID, OWNER_START, RUN

KEPT_NODE = "reb-ray.env-node"
KEPT_DIGEST = "reb-ray.env-manifest-digest"
#: What a kept image is, in its own labels (`docker inspect`): the task, the agent, the trial's
#: index, the reb-ray version that made it, and one line saying it in words.
KEPT_TASK = "reb-ray.task"
KEPT_AGENT = "reb-ray.agent"
KEPT_TRIAL_INDEX = "reb-ray.trial-index"
KEPT_VERSION = "reb-ray.version"
KEPT_DESCRIPTION = "org.opencontainers.image.description"
COMMAND_STAGES = ("c1", "c3", "c4")
#: The row columns describing the kept image: null unless env_kept is true.
IMAGE_COLUMNS = ("env_image_id", "env_image_tag", "env_image_bytes", "env_image_total_bytes")
GiB = 1024**3
#: The default budget's cap, bytes, and the share of the kept images' possible disk it may take.
DEFAULT_BUDGET_CAP_BYTES = 50 * GiB
DEFAULT_BUDGET_DISK_SHARE = 0.5


def image_tag(sweep_id: str, trial_id: str, attempt: int, run: str | None = None) -> str:
    """A Docker tag naming one attempt: readable parts plus a hash of the full identity (a
    tag allows [A-Za-z0-9_.-], at most 128 characters). `run` is the sweep run's token
    (`TrialSpec.run_id`): two output directories of one configuration share the sweep id,
    trial ids and attempt numbers, and without it the second run's commit would take the
    first's tag, leaving its kept image untagged and an export by tag saving the wrong one."""
    def safe(text: str, n: int) -> str:
        return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)[:n].strip("._-") or "x"

    key = f"{sweep_id}\0{trial_id}\0{attempt}" + (f"\0{run}" if run else "")
    digest = hashlib.sha256(key.encode()).hexdigest()[:10]
    return f"{safe(sweep_id, 40)}-{safe(trial_id, 60)}-a{attempt}-{digest}"


def is_success(row: Mapping[str, Any], statuses: Iterable[tuple[str, str | None]]) -> bool:
    """A scored attempt whose environment ran the repository's code: a command stage succeeded.
    `statuses`: (stage, status) of each of the attempt's stage rows."""
    return row.get("status") == "scored" and any(stage in COMMAND_STAGES and status == "success"
                                                 for stage, status in statuses)


def wanted(policy: str, row: Mapping[str, Any], statuses: Iterable[tuple[str, str | None]]) -> bool:
    """Whether `policy` keeps the attempt of `row` (its settled status) and its stage rows'
    (stage, status) pairs `statuses`."""
    if policy == "all":
        return True
    if policy == "scored":
        return row.get("status") == "scored"
    if policy == "successes":
        return is_success(row, statuses)
    return False


def identity_labels(trial_id: str, attempt: int) -> dict[str, str]:
    """The labels saying what a kept image is, from its trial id `<agent>/<task_id>/<index>`
    (an agent named `a/b` keeps its slash: the task and index are the last two parts)."""
    from reb_ray import __version__

    agent, task, index = trial_id.rsplit("/", 2) if trial_id.count("/") >= 2 else (None, None, None)
    labels = {KEPT_VERSION: __version__}
    if task:
        labels.update({KEPT_TASK: task, KEPT_AGENT: agent, KEPT_TRIAL_INDEX: index})
    labels[KEPT_DESCRIPTION] = (f"reb-ray kept environment: agent {agent} on task {task}, trial {trial_id} attempt "
                                f"{attempt}" if task else f"reb-ray kept environment of trial {trial_id} attempt {attempt}")
    return labels


def _quoted(value: str) -> str:
    """A LABEL value as one Dockerfile word: in double quotes, with `\\` and `"` escaped."""
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def commit(sandbox, labels: dict[str, str]) -> dict:
    """Commit the docker `sandbox`'s container to a kept-environment image (not yet decided:
    `settle` removes it unless kept). Returns the row columns (env_image_id, env_image_bytes,
    env_image_total_bytes, env_commit_s). Raises docker errors."""
    config = sandbox.config
    tag = image_tag(config.sweep_id, config.trial_id, config.attempt, config.labels.get(RUN))
    started = time.monotonic()
    # No owner: a kept image outlives the process that made it, so no owner rule (of this
    # reaper or an older one) ever applies to it.
    changes = [f"LABEL {KEPT}=true", *(f'LABEL {k}=""' for k in (OWNER_HOST, OWNER_PID, OWNER_START))]
    changes += [f'LABEL {k}={_quoted(v)}' for k, v in {**identity_labels(config.trial_id, config.attempt), **labels}.items()]
    image = sandbox.commit_image(repository=KEPT_REPOSITORY, tag=tag, changes=changes)  # docker or podman
    seconds = time.monotonic() - started
    image_id = image["Id"]
    history = sandbox.client.api.history(image_id)
    total = sandbox.client.api.inspect_image(image_id).get("Size")
    return {"env_image_id": image_id, "env_image_bytes": history[0].get("Size") if history else None,
            "env_image_total_bytes": total, "env_commit_s": seconds, "env_image_tag": f"{KEPT_REPOSITORY}:{tag}"}


def remove(client, image_id: str) -> str | None:
    """Remove an image not kept; returns a one-line problem, else None (gone already is fine)."""
    from docker.errors import DockerException, NotFound

    try:
        client.api.remove_image(image_id, force=True)
    except NotFound:
        pass
    except DockerException as exc:
        return f"kept-environment image {image_id[:19]}: {str(exc).splitlines()[0][:200]}"
    return None


def kept_images(client, sweep_id: str | None = None, trial_id: str | None = None, attempt: int | None = None,
                only: set[str] | None = None) -> list:
    """This node's kept-environment images, filtered by sweep, trial and attempt when given, and
    to the image ids in `only` when given (`recorded_images` of an output directory). An image
    another process removes while they are listed (the disk budget of a concurrent sweep, `env
    gc`) is simply not among them."""
    from reb_ray.sandbox.docker.docker_client import labelled_images
    from reb_ray.sandbox.ownership import ATTEMPT, SWEEP, TRIAL

    labels = [f"{KEPT}=true"]
    if sweep_id is not None:
        labels.append(f"{SWEEP}={sweep_id}")
    if trial_id is not None:
        labels.append(f"{TRIAL}={trial_id}")
    if attempt is not None:
        labels.append(f"{ATTEMPT}={attempt}")
    return labelled_images(client, labels, only)


@dataclass(frozen=True)
class KeptImage:
    """One kept-environment image on the node: its id, tag, creation time (UTC), its own
    layer's bytes (null when Docker gave no history) and the attempt it keeps."""

    id: str
    tag: str
    created: datetime
    layer_bytes: int | None
    sweep_id: str | None = None
    trial_id: str | None = None
    attempt: str | None = None


@dataclass
class GcResult:
    """What one application of the budget did: the budget (bytes), the images removed and
    those kept (oldest first), and the ones that could not be removed with why."""

    budget_bytes: int
    removed: list[KeptImage] = field(default_factory=list)
    kept: list[KeptImage] = field(default_factory=list)
    failed: list[tuple[KeptImage, str]] = field(default_factory=list)

    @property
    def kept_bytes(self) -> int:
        return sum(i.layer_bytes or 0 for i in self.kept) + sum(i.layer_bytes or 0 for i, _ in self.failed)


def parse_created(text: str) -> datetime:
    """Docker's `Created` (RFC 3339 with up to 9 fraction digits, trailing zeros dropped) as a
    UTC datetime; the fraction is cut to microseconds. Compared as text these would misorder
    (".12345Z" sorts after ".123456789Z")."""
    m = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)", text.strip())
    if not m:
        raise ValueError(f"image creation time {text!r} is not RFC 3339")
    base, fraction, zone = m.groups()
    zone = "+00:00" if zone == "Z" else zone
    parsed = datetime.fromisoformat(f"{base}.{(fraction or '0')[:6].ljust(6, '0')}{zone}")
    return parsed.astimezone(timezone.utc)


def _layer_bytes(client, image_id: str) -> int | None:
    """The bytes of the image's top layer (a kept image is one commit on the sandbox image)."""
    try:
        history = client.api.history(image_id)
    except Exception:  # noqa: BLE001 - removed meanwhile: unknown, and it no longer counts
        return None
    return history[0].get("Size") if history else None


def recorded_images(output) -> set[str]:
    """The ids of the kept images the trials rows under the output directory `output` record
    (`env_image_id`). A sweep id is derived from the configuration, so two users' sweeps of one
    configuration into different output directories share it; the images a directory's own
    rows name are what that directory's sweeps kept. Raises RebRayError (one line) when
    `output` holds no trials dataset."""
    from pathlib import Path

    from reb_ray.errors import RebRayError
    from reb_ray.results.read import read_trials

    if not (Path(output) / "trials").is_dir():
        raise RebRayError(f"--output {output}: no trials/ dataset here (is it a sweep's --output directory?)")
    column = read_trials(output, columns=["env_image_id"]).column("env_image_id").to_pylist()
    return {image_id for image_id in column if image_id}


def list_kept(client, sweep_id: str | None = None, only: set[str] | None = None) -> list[KeptImage]:
    """This node's kept-environment images (of `sweep_id` only when given; only those whose id
    is in `only` when given), oldest first."""
    from reb_ray.sandbox.ownership import ATTEMPT, SWEEP, TRIAL

    out = []
    for image in kept_images(client, sweep_id, only=only):
        labels = image.labels or {}
        out.append(KeptImage(id=image.id, tag=image.tags[0] if image.tags else image.id[:19],
                             created=parse_created(image.attrs["Created"]), layer_bytes=_layer_bytes(client, image.id),
                             sweep_id=labels.get(SWEEP), trial_id=labels.get(TRIAL), attempt=labels.get(ATTEMPT)))
    return sorted(out, key=lambda i: (i.created, i.id))


def plan_eviction(images: list[KeptImage], budget_bytes: int) -> tuple[list[KeptImage], list[KeptImage]]:
    """(to remove, to keep) so the kept layers' bytes fit `budget_bytes`: first every image
    larger than the whole budget, then the oldest, until the rest fits. An image of unknown size
    counts 0 and is not removed (it cannot be weighed; the next application sees it again). Both lists oldest first."""
    if budget_bytes < 0:
        raise ValueError(f"env disk budget {budget_bytes} bytes: must be >= 0")
    ordered = sorted(images, key=lambda i: (i.created, i.id))
    remove = [i for i in ordered if (i.layer_bytes or 0) > budget_bytes]
    keep = [i for i in ordered if i not in remove]
    total = sum(i.layer_bytes or 0 for i in keep)
    for image in list(keep):
        if total <= budget_bytes:
            break
        if image.layer_bytes:  # removing one of unknown size frees nothing known
            keep.remove(image)
            remove.append(image)
            total -= image.layer_bytes
    return sorted(remove, key=lambda i: (i.created, i.id)), keep


def docker_root_free_bytes(client) -> int | None:
    """Free bytes of the filesystem holding Docker's data root, when this process can see it
    (the daemon may run elsewhere); None otherwise."""
    try:
        root = client.info().get("DockerRootDir")
        return shutil.disk_usage(root).free if root else None
    except Exception:  # noqa: BLE001 - no such path here, or no daemon answer: unknown
        return None


def default_budget(client, kept_bytes: int) -> int:
    """The default budget, bytes: DEFAULT_BUDGET_CAP_BYTES, or half of (the data root's free
    bytes + `kept_bytes`, what kept images hold already) when that is less. The cap alone when
    the data root cannot be seen."""
    free = docker_root_free_bytes(client)
    if free is None:
        return DEFAULT_BUDGET_CAP_BYTES
    return min(DEFAULT_BUDGET_CAP_BYTES, int(DEFAULT_BUDGET_DISK_SHARE * (free + kept_bytes)))


def apply_budget(client, budget_bytes: int | None = None, sweep_id: str | None = None,
                 only: set[str] | None = None) -> GcResult:
    """Remove kept images over `budget_bytes` (None: `default_budget`) on this node, by
    `plan_eviction`; `sweep_id` restricts both the count and the removals to one sweep's, and
    `only` (image ids: `recorded_images` of an output directory) to those images. An image in
    use by a container, or whose removal fails, stays and is listed in `failed`."""
    from docker.errors import DockerException, NotFound

    images = list_kept(client, sweep_id, only)
    if budget_bytes is None:
        budget_bytes = default_budget(client, sum(i.layer_bytes or 0 for i in images))
    remove, keep = plan_eviction(images, budget_bytes)
    result = GcResult(budget_bytes=budget_bytes, kept=keep)
    for image in remove:
        try:
            client.api.remove_image(image.id, force=False)
        except NotFound:
            pass  # another attempt's settle on this node removed it first: gone is what was wanted
        except DockerException as exc:
            result.failed.append((image, str(exc).splitlines()[0][:200]))
            continue
        result.removed.append(image)
    return result


def image_presence(row: dict, timeout_s: float = 10.0) -> tuple[bool | None, str]:
    """Whether the kept image a trials `row` records is still on its node: (True, ""), (False,
    why it is gone), or (None, why it could not be told): the row's node is another host than
    this one, its sandbox engine is not Docker, or Docker does not answer. Asks the Docker CLI
    (`docker image inspect`, by image id) rather than the SDK, so a reader such as `trial show`
    loads no Docker client for one question."""
    import socket
    import subprocess

    image = row.get("env_image_id") or row.get("env_image_tag")
    node = row.get("node")
    if not row.get("env_kept") or not image:
        return None, "not kept"
    if node and node != socket.gethostname():
        return None, f"kept on node {node}, not this host ({socket.gethostname()}): not checked from here"
    if (row.get("sandbox_provider") or "docker") != "docker":
        return None, f"kept by {row.get('sandbox_provider')}: not checked"
    try:
        done = subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", image], capture_output=True,
                              text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"docker does not answer ({type(exc).__name__}): not checked"
    if done.returncode == 0:
        return True, ""
    if "no such image" in done.stderr.lower():
        return False, f"the image is gone from node {node or socket.gethostname()} (removed since)"
    return None, f"docker does not answer ({done.stderr.strip()[:200] or 'exit ' + str(done.returncode)}): not checked"
