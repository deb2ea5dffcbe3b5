"""The probe phase's sandboxes in a sweep whose agent phases share GPUs.

A GPU cannot be added to a running container, so in a `--share-gpus-in-agent-phase` sweep a
docker trial changes containers between the phases (docs/DECISIONS.md, "Agent-phase GPU
sharing"): its agent container was created with `lease.agent_gpus` (devices visible, held by
nobody); after the leftovers are killed and the report is read, it is committed to a
per-attempt image on this node and removed; the probe phase waits for its exclusive lease, then
runs in a new container from that image with exactly the leased GPUs, and C1 runs in one more
container from it with no GPU device at all (a repository that sets CUDA_VISIBLE_DEVICES itself
still sees none). The image carries the attempt's labels plus `reb-ray.attempt-image=true`, so
the reaper removes it when its owner is gone (`reap`); `close()` removes it on
every other path. The local and sleeping providers have no devices (their GPUs are only
CUDA_VISIBLE_DEVICES), so there the same sandbox carries on with the leased GPUs.

Its columns (`ProbePhaseResult`): `probe_image_commit_s` and `probe_image_bytes` (the commit's seconds and the new
layer's bytes; null when nothing was committed), `probe_gpu_wait_s` (seconds waiting for the lease).
"""

from __future__ import annotations

import time
import uuid
from contextlib import contextmanager
from typing import Any, Iterator

from docker.errors import DockerException, NotFound

from reb_ray.errors import RebRayError
from reb_ray.trial.gpu_lease import GpuLease
from reb_ray.models.task import TaskSpec
from reb_ray.probing.task_helpers import install_task_helpers
from reb_ray.probing.toolbox import install_toolbox
from reb_ray.sandbox import Sandbox, SandboxConfig
from reb_ray.sandbox.ownership import ATTEMPT_IMAGE
from reb_ray.trial.record import TrialRecorder

ATTEMPT_REPOSITORY = "reb-ray/attempt"


class PhaseSplit:
    """One attempt's move from its agent sandbox to its probe sandboxes; always `close()` it.

    `agent_gpus` are what the agent sandbox is created with. `probe_sandbox(agent_box)` returns
    (the probe phase's sandbox, its leased GPU ids); `c1_opener()` then gives what opens the
    GPU-less sandbox C1 runs in (`c1_sandbox`, a context manager: toolbox and the task's helpers
    installed), or None where the provider has no devices to leave out.
    """

    def __init__(self, rec: TrialRecorder, lease: GpuLease, task: TaskSpec) -> None:
        self.rec, self.lease, self.task = rec, lease, task
        self.agent_gpus = list(lease.agent_gpus)
        self.image: str | None = None
        self._client: Any = None  # the agent sandbox's docker client, once committed
        self._provider: Any = None  # the agent sandbox's class, once committed
        self._config: SandboxConfig | None = None
        self._opened: list[Sandbox] = []

    def probe_sandbox(self, agent_box: Sandbox) -> tuple[Sandbox, list[str]]:
        """Commit and remove a docker agent sandbox, wait for the lease, open the probe sandbox.

        The commit comes first, so the wait holds no container; the lease is held from here
        until `close()`. Raises RebRayError (infra) when the commit or the new container fails.
        """
        if agent_box.capabilities.commit:
            self._commit(agent_box)
            agent_box.close()
        started = time.monotonic()
        gpus = self.lease.acquire()
        self.rec.result.probe.probe_gpu_wait_s = time.monotonic() - started
        if self.image is None:
            agent_box.lease_gpus(gpus)
            return agent_box, gpus
        return self._open(gpus), gpus

    def agent_config(self, config: SandboxConfig) -> SandboxConfig:
        """The agent sandbox's config: `agent_gpus` shown, held by nobody."""
        return config.model_copy(update={"gpus": list(self.agent_gpus), "shared_gpus": True})

    def release_gpus(self) -> None:
        """Give the lease back now (the GPU stages are done); `close()` does it on every path."""
        self.lease.release()

    @contextmanager
    def c1_sandbox(self) -> Iterator[Sandbox]:
        """A container from the attempt's image with no GPU device, toolbox and helpers in it."""
        box = self._open([])
        try:
            install_task_helpers(box, self.task, install_toolbox(box))
            yield box
        finally:
            box.close()

    def c1_opener(self):
        """`c1_sandbox` once a docker agent sandbox was committed, else None (C1 then runs in the
        probe sandbox, whose provider has no GPU device to leave out)."""
        return self.c1_sandbox if self.image is not None else None

    def _commit(self, agent_box: Sandbox) -> None:
        from reb_ray.sandbox.docker.docker_sandbox import DockerSandbox

        assert isinstance(agent_box, DockerSandbox)
        self._client, self._config = agent_box.client, agent_box.config
        self._provider = type(agent_box)  # the probe sandboxes run on the same engine (docker or podman)
        tag = uuid.uuid4().hex[:12]
        started = time.monotonic()
        try:
            # The container's labels (managed, sweep, trial, attempt, owner) become the image's.
            image = agent_box.commit_image(repository=ATTEMPT_REPOSITORY, tag=tag, changes=[f"LABEL {ATTEMPT_IMAGE}=true"])
            self.image = image["Id"]
            layer = self._client.api.history(self.image)[0].get("Size")
        except DockerException as exc:
            raise RebRayError(f"cannot commit the agent's sandbox {agent_box.id[:12]} for the probe phase: "
                              f"{str(exc).splitlines()[0][:300]}") from None
        self.rec.result.probe.probe_image_commit_s, self.rec.result.probe.probe_image_bytes = time.monotonic() - started, layer

    def box_config(self, gpus: list[str]) -> SandboxConfig:
        """The config of a sandbox from the attempt's image holding exactly `gpus` (none: no
        device request at all). The agent toolchain stays out (agent phase only); the other
        mounts, limits, network and labels are the agent sandbox's."""
        assert self._config is not None and self.image is not None, "nothing committed yet"
        return self._config.model_copy(update={"image": self.image, "gpus": list(gpus), "shared_gpus": False,
                                               "propagated_mounts": {}})

    def _open(self, gpus: list[str]) -> Sandbox:
        box = self._provider(self.box_config(gpus), client=self._client)
        self._opened.append(box)
        return box

    def close(self) -> str | None:
        """Remove the sandboxes opened here and the image, release the lease; never raises.
        Returns what could not be removed (one line), else None."""
        problems = []
        for box in self._opened:
            try:
                box.close()
            except Exception as exc:  # noqa: BLE001 - the image and the lease must still go
                problems.append(f"sandbox {getattr(box, 'id', '?')[:12]}: {exc}")
        try:
            self.lease.release()
        except Exception as exc:  # noqa: BLE001 - a lost lease actor frees its GPUs with it
            problems.append(f"lease release: {exc}")
        if self.image is not None:
            try:
                self._client.api.remove_image(self.image, force=True)
            except NotFound:
                pass
            except DockerException as exc:
                problems.append(f"image {self.image[:19]}: {str(exc).splitlines()[0][:200]}")
        return "; ".join(problems) or None
