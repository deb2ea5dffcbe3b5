"""Every node prepared and checked for a sweep, at sweep start and on each
node that joins during it.

On each node a zero-CPU task pinned to it (so a full node still answers) first reaps what dead
owners left there (our containers, and per-attempt images: `reap`), then
checks the node for the sweep (reb_ray/node_health.check_node): Docker healthy, the sandbox
image present, free disk, the sweep's mirror and asset directories present. A node that only
lacks the image gets it from the driver: the driver `docker save`s it once per sweep into a
temporary file, and each such node pulls the archive in 32 MiB chunks through Ray's object
store and `docker load`s it (no registry, no shared filesystem), then is checked again. A node
that fails gets no slots; the caller names it in one line (`NodeVerdict.line`).

The checks run asynchronously (`NodeChecks.refs` go into the driver's `ray.wait`), so a node
loading the image, or joining mid-sweep, never stalls trials on the others.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from reb_ray.node.health import NodeHealth
from reb_ray.orchestrators.cluster_status import SLOT_RESOURCE
from reb_ray.sandbox import capabilities_of

CHECK_TIMEOUT_S = 120.0  # a node's reap and check (Docker's answers, nvidia-smi)
LOAD_TIMEOUT_S = 1800.0  # a node's `docker load` of the shipped image (GBs over the network)


@dataclass(frozen=True)
class NodeRequirements:
    """What a node must have for a sweep: `image` (the docker sandbox's tag; None for sandboxes
    without Docker), `min_free_bytes` free for trials (SweepConfig.cluster.min_free_bytes, the trial's
    own preflight threshold), and `paths`: (what, directory) pairs every node must hold."""

    image: str | None
    min_free_bytes: int
    paths: tuple[tuple[str, str], ...] = ()
    sandbox: str = "docker"  # the provider whose engine holds the image (docker, podman)

    @classmethod
    def for_sweep(cls, config, image: str | None) -> "NodeRequirements":
        """A sweep's requirements: its asset cache (--assets) and repository mirrors
        (--repo-mirror). Wheelhouses are left out: Docker creates a missing bind source as an
        empty directory, and pip then falls back to the index, so a node without one still runs."""
        paths = [("assets", str(config.assets_dir))] if config.assets_dir else []
        paths += [("repo mirror", str(p)) for p in config.repo_mirrors]
        return cls(image if capabilities_of(config.sandbox.provider).image else None, config.cluster.min_free_bytes, tuple(paths),
                   config.sandbox.provider)


@dataclass
class NodeVerdict:
    """One node's preparation and check. `slot_cap`: its `reb_ray_slot` resource (None: not
    declared, uncapped). `health`: its own check (None when it gave none: `error` says why).
    `reaped`: containers and images it removed; `image_loaded`: it got the image shipped."""

    node_id: str
    address: str
    cpus: float
    gpus: int
    slot_cap: int | None
    health: NodeHealth | None = None
    error: str | None = None
    reaped: int = 0
    image_loaded: bool = False
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None and self.health is not None and self.health.ok

    @property
    def reason(self) -> str:
        """Why the node fails, in one line ('' when it passes)."""
        if self.error is not None:
            return self.error
        return "; ".join(self.health.problems) if self.health is not None else ""

    def line(self) -> str:
        """`node <id12> (<address>) gets no trials: <reason>` for the terminal and the log."""
        return f"node {self.node_id[:12]} ({self.address}) gets no trials: {self.reason}"


@ray.remote(num_cpus=0)
def _prepare_here(req: NodeRequirements, archive: list | None) -> tuple[NodeHealth, int, bool]:
    """Reap, load the shipped archive when given and the image is missing, check. Runs on the node.
    First the host scratch directories dead owners left (`reap_scratch`); `reaped` counts the
    containers and per-attempt images removed with an engine."""
    from reb_ray.errors import RebRayError
    from reb_ray.node.health import check_node
    from reb_ray.sandbox.scratch import reap_scratch

    reap_scratch()
    reaped, loaded = 0, False
    if req.image is not None:
        from reb_ray.sandbox import provider_class
        from reb_ray.sandbox.docker.image import load_image
        from reb_ray.sandbox.docker.reaper import reap

        try:
            client = provider_class(req.sandbox).connect_engine(timeout=30)
            reaped = len(reap(client))  # containers, then per-attempt images
            if archive is not None and not _has(client, req.image):
                load_image(client, req.image, (ray.get(ref) for ref in archive))
                loaded = True
        except RebRayError as exc:
            health = check_node(req.image, min_free_bytes=req.min_free_bytes, paths=req.paths, sandbox=req.sandbox)
            if health.docker is None:  # Docker answers: the failure was the load's
                return replace(health, problems=[*health.problems, str(exc)]), reaped, loaded
            return health, reaped, loaded
    return check_node(req.image, min_free_bytes=req.min_free_bytes, paths=req.paths, sandbox=req.sandbox), reaped, loaded


def _has(client, tag: str) -> bool:
    from docker.errors import ImageNotFound

    try:
        client.images.get(tag)
        return True
    except ImageNotFound:
        return False


def _only_image_missing(health: NodeHealth) -> bool:
    return health.docker is None and health.image_present is False and len(health.problems) == 1


class ImageArchive:
    """The sandbox image as an archive on the driver, made on first need (`docker save` once per
    sweep) and put into Ray's object store in chunks while nodes load it."""

    def __init__(self, image: str, sandbox: str = "docker") -> None:
        self.image = image
        self.sandbox = sandbox  # the provider whose engine on the driver saves it (docker, podman)
        self._dir: tempfile.TemporaryDirectory | None = None
        self.path: Path | None = None
        self.size_bytes = 0

    def chunk_refs(self) -> list[ray.ObjectRef]:
        """The archive's chunks in the object store (one list per batch of loading nodes; the
        object store frees them once those nodes are done). Raises RebRayError when the driver
        cannot save the image."""
        from reb_ray.sandbox import provider_class
        from reb_ray.sandbox.docker.image import ARCHIVE_CHUNK_BYTES, save_image

        if self.path is None:
            self._dir = tempfile.TemporaryDirectory(prefix="reb-ray-image-")
            path = Path(self._dir.name) / "image.tar"
            self.size_bytes = save_image(provider_class(self.sandbox).connect_engine(), self.image, path)
            self.path = path
        refs = []
        with open(self.path, "rb") as f:
            while chunk := f.read(ARCHIVE_CHUNK_BYTES):
                refs.append(ray.put(chunk))
        return refs

    def close(self) -> None:
        if self._dir is not None:
            self._dir.cleanup()
            self._dir, self.path = None, None


@dataclass
class _Pending:
    verdict: NodeVerdict
    started: float
    timeout_s: float
    archive: list | None = None  # the chunk refs this node loads (kept alive until it is done)


@dataclass
class NodeChecks:
    """The driver's node checks in flight. `submit` a node (a `ray.nodes()` entry); put `refs()`
    into `ray.wait`; hand each ready ref to `on_ready`, which gives the node's verdict, or None
    when the node now loads the shipped image (its ref is then in `refs()` again).
    `expire(now)` gives the verdicts of checks past their timeout."""

    requirements: NodeRequirements
    check_timeout_s: float = CHECK_TIMEOUT_S
    load_timeout_s: float = LOAD_TIMEOUT_S
    seen: set[str] = field(default_factory=set)  # every node id ever submitted
    _pending: dict = field(default_factory=dict)  # ObjectRef -> _Pending
    _archive: ImageArchive | None = None

    def submit(self, node: dict) -> None:
        node_id = node["NodeID"]
        self.seen.add(node_id)
        resources = node.get("Resources", {})
        slots = resources.get(SLOT_RESOURCE)
        verdict = NodeVerdict(node_id, node.get("NodeManagerAddress", "?"), resources.get("CPU", 0.0),
                              int(resources.get("GPU", 0)), None if slots is None else int(slots))
        self._launch(verdict, None, self.check_timeout_s)

    def refs(self) -> list[ray.ObjectRef]:
        return list(self._pending)

    @property
    def busy(self) -> bool:
        return bool(self._pending)

    def on_ready(self, ref: ray.ObjectRef) -> NodeVerdict | None:
        pending = self._pending.pop(ref)
        verdict = pending.verdict
        try:
            health, reaped, loaded = ray.get(ref)
        except ray.exceptions.RayError as exc:
            verdict.error = "no check: " + (str(exc).strip().splitlines() or [type(exc).__name__])[-1][:200]
            return self._done(verdict, pending)
        verdict.health, verdict.reaped = health, verdict.reaped + reaped
        verdict.image_loaded = verdict.image_loaded or loaded
        if pending.archive is None and self.requirements.image is not None and _only_image_missing(health):
            from reb_ray.errors import RebRayError

            try:
                archive = self._image_archive().chunk_refs()
            except RebRayError as exc:
                verdict.error = f"image {self.requirements.image} missing, and shipping it failed: {exc}"
                return self._done(verdict, pending)
            self._launch(verdict, archive, self.load_timeout_s, started=pending.started)
            return None
        return self._done(verdict, pending)

    def expire(self, now: float) -> list[NodeVerdict]:
        late = [(ref, p) for ref, p in self._pending.items() if now - p.started > p.timeout_s]
        verdicts = []
        for ref, pending in late:
            del self._pending[ref]
            ray.cancel(ref, force=True)
            pending.verdict.error = f"no check: no answer within {pending.timeout_s:.0f} s"
            verdicts.append(self._done(pending.verdict, pending))
        return verdicts

    def close(self) -> None:
        """Cancel checks still in flight and remove the driver's image archive."""
        for ref in list(self._pending):
            ray.cancel(ref, force=True)
        self._pending.clear()
        if self._archive is not None:
            self._archive.close()

    def _launch(self, verdict: NodeVerdict, archive: list | None, timeout_s: float, started: float | None = None) -> None:
        ref = _prepare_here.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(verdict.node_id, soft=False),
        ).remote(self.requirements, archive)
        self._pending[ref] = _Pending(verdict, started if started is not None else time.monotonic(), timeout_s, archive)

    def _done(self, verdict: NodeVerdict, pending: _Pending) -> NodeVerdict:
        verdict.seconds = time.monotonic() - pending.started
        return verdict

    def _image_archive(self) -> ImageArchive:
        if self._archive is None:
            self._archive = ImageArchive(self.requirements.image, self.requirements.sandbox)
        return self._archive


def check_all(checks: NodeChecks, nodes: list[dict]) -> tuple[list[NodeVerdict], list[NodeVerdict]]:
    """Submit `nodes` and wait until each has its first verdict: (passed, failed). Nodes that
    now load the shipped image are still in `checks` (they join like a node that joins later),
    unless none passed: then it waits for them too, since a sweep needs one node to start."""
    for node in nodes:
        checks.submit(node)
    passed, failed = [], []
    while any(p.archive is None for p in checks._pending.values()) or (checks.busy and not passed):
        ready, _ = ray.wait(checks.refs(), num_returns=1, timeout=1.0)
        done = [checks.on_ready(ref) for ref in ready] + checks.expire(time.monotonic())
        for verdict in done:
            if verdict is not None:
                (passed if verdict.ok else failed).append(verdict)
    return passed, failed


def alive_nodes() -> list[dict]:
    """The cluster's alive nodes now (one GCS call: cheap enough to poll every few seconds)."""
    return [n for n in ray.nodes() if n.get("Alive")]

