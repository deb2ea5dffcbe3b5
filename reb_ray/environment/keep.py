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
removes an image labelled KEPT (reb_ray/sandbox/reaper.py); only a user does. Row columns: env_keep_policy,
env_kept (true/false; null when nothing was decided: capture never ran), env_image_id,
env_image_bytes (the new layer's bytes: what keeping costs on the node's disk, the sandbox image
being shared), env_image_total_bytes (the whole image, base included), env_commit_s. An image
committed and then removed (not kept) leaves IMAGE_COLUMNS null: no such image exists; its
env_commit_s stays (the commit did take that time).
"""

from __future__ import annotations

import hashlib
import re
import time

KEEP_POLICIES = ("none", "successes", "scored", "all")
KEPT_REPOSITORY = "reb-ray/env"
from reb_ray.sandbox.ownership import KEPT_ENV as KEPT
from reb_ray.sandbox.ownership import OWNER_HOST, OWNER_PID, OWNER_START

KEPT_NODE = "reb-ray.env-node"
KEPT_DIGEST = "reb-ray.env-manifest-digest"
COMMAND_STAGES = ("c1", "c3", "c4")
#: The row columns describing the kept image: null unless env_kept is true.
IMAGE_COLUMNS = ("env_image_id", "env_image_tag", "env_image_bytes", "env_image_total_bytes")


def image_tag(sweep_id: str, trial_id: str, attempt: int) -> str:
    """A Docker tag naming one attempt: readable parts plus a hash of the full identity (a
    tag allows [A-Za-z0-9_.-], at most 128 characters)."""
    def safe(text: str, n: int) -> str:
        return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)[:n].strip("._-") or "x"

    digest = hashlib.sha256(f"{sweep_id}\0{trial_id}\0{attempt}".encode()).hexdigest()[:10]
    return f"{safe(sweep_id, 40)}-{safe(trial_id, 60)}-a{attempt}-{digest}"


def is_success(row: dict, stages: list[dict]) -> bool:
    """A scored attempt whose environment ran the repository's code: a command stage succeeded."""
    return row.get("status") == "scored" and any(s["stage"] in COMMAND_STAGES and s["status"] == "success" for s in stages)


def wanted(policy: str, row: dict, stages: list[dict]) -> bool:
    """Whether `policy` keeps the attempt of `row` (its settled status) and `stages`."""
    if policy == "all":
        return True
    if policy == "scored":
        return row.get("status") == "scored"
    if policy == "successes":
        return is_success(row, stages)
    return False


def commit(sandbox, labels: dict[str, str]) -> dict:
    """Commit the docker `sandbox`'s container to a kept-environment image (not yet decided:
    `settle` removes it unless kept). Returns the row columns (env_image_id, env_image_bytes,
    env_image_total_bytes, env_commit_s). Raises docker errors."""
    config = sandbox.config
    tag = image_tag(config.sweep_id, config.trial_id, config.attempt)
    started = time.monotonic()
    # No owner: a kept image outlives the process that made it, so no owner rule (of this
    # reaper or an older one) ever applies to it.
    changes = [f"LABEL {KEPT}=true", *(f'LABEL {k}=""' for k in (OWNER_HOST, OWNER_PID, OWNER_START))]
    changes += [f'LABEL {k}="{v}"' for k, v in labels.items()]
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


def kept_images(client, sweep_id: str | None = None, trial_id: str | None = None, attempt: int | None = None) -> list:
    """This node's kept-environment images, filtered by sweep, trial and attempt when given."""
    from reb_ray.sandbox.ownership import ATTEMPT, SWEEP, TRIAL

    labels = [f"{KEPT}=true"]
    if sweep_id is not None:
        labels.append(f"{SWEEP}={sweep_id}")
    if trial_id is not None:
        labels.append(f"{TRIAL}={trial_id}")
    if attempt is not None:
        labels.append(f"{ATTEMPT}={attempt}")
    return client.images.list(filters={"label": labels})
