"""The environment phase of a trial: capture, then commit, between the agent and probe phases.

`EnvironmentPhase` is what the trial flow calls: `run(sandbox, repo_dir, report)` right after
the between-phases step (leftovers stopped, report read, repository restored) and before the
probe phase; `settle()` at the attempt's end, on every path, once the trial's status is known
(keep the image or remove it, `keep.wanted`). Nothing here ever fails the trial: a capture or a
commit that fails leaves its columns null and says why in env_capture_error / env_keep_error.

After an image is kept, the node's disk budget is applied (`keep.apply_budget`, oldest first):
the row records the budget (env_disk_budget_bytes), the tags of the images this settle removed
(env_evicted: other attempts' kept images, whose own rows still say kept) and the bytes the
node's kept images hold afterwards (env_node_kept_bytes). When this attempt's own image is
larger than the whole budget it is the one removed: env_kept false, and env_keep_error says so.
"""

from __future__ import annotations

from reb_ray.environment import capture as capture_mod
from reb_ray.environment import keep
from reb_ray.environment.keep import KEPT_DIGEST, KEPT_NODE
from reb_ray.sizes import size_text


class EnvironmentPhase:
    """One attempt's capture and kept image (see the module docstring)."""

    def __init__(self, rec, spec, secrets: list[str]) -> None:
        self.rec, self.spec, self.secrets = rec, spec, list(secrets)
        self.policy = spec.config.output.keep_environments
        self.client = None
        self.image_id: str | None = None
        self.env = rec.result.environment  # this phase's part of the attempt's result
        self.env.env_keep_policy = self.policy

    def run(self, sandbox, repo_dir: str, report) -> None:
        """Capture the manifest, then (policy not `none`, a sandbox that can commit) commit it."""
        capture_mod.capture(self.rec, sandbox, self.spec, repo_dir, report, self.secrets)
        if self.policy == "none" or not sandbox.capabilities.commit:
            return
        labels = {KEPT_NODE: str(self.rec.result.identity.node or "")}
        if self.env.env_manifest_digest:
            labels[KEPT_DIGEST] = self.env.env_manifest_digest
        try:
            columns = keep.commit(sandbox, labels)
        except Exception as exc:  # noqa: BLE001 - keeping never fails the trial
            self.env.env_keep_error = f"commit failed: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
            return
        self.client, self.image_id = sandbox.client, columns["env_image_id"]
        self.env.set(**columns)

    def settle(self) -> None:
        """Keep the committed image when the policy wants this attempt, else remove it."""
        if self.image_id is None:
            if self.env.capture_tried:
                self.env.env_kept = False
            return
        if keep.wanted(self.policy, self.rec.row, [(s.stage, s.status) for s in self.rec.stages]):
            self.env.env_kept = True
            self._apply_budget()
            return
        problem = keep.remove(self.client, self.image_id)
        # The image is gone: nothing of it (id, tag, sizes) describes the attempt any more.
        self.env.set(env_kept=False, **{column: None for column in keep.IMAGE_COLUMNS})
        if problem:
            self.env.env_keep_error = problem
        self.image_id = None

    def _apply_budget(self) -> None:
        """The node's disk budget, applied after this attempt's image was kept (module docstring)."""
        budget = self.spec.config.output.env_disk_budget_bytes
        try:
            result = keep.apply_budget(self.client, budget)
        except Exception as exc:  # noqa: BLE001 - a budget that cannot be applied never fails the trial
            self.env.env_keep_error = f"disk budget not applied: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
            return
        own = next((i for i in result.removed if i.id == self.image_id), None)
        self.env.env_disk_budget_bytes, self.env.env_node_kept_bytes = result.budget_bytes, result.kept_bytes
        self.env.env_evicted = [i.tag for i in result.removed if i.id != self.image_id]
        if own is not None:
            self.env.set(env_kept=False, **{column: None for column in keep.IMAGE_COLUMNS})
            self.env.env_keep_error = (f"not kept: its layer of {size_text(own.layer_bytes)} exceeds the node's "
                                       f"env disk budget of {size_text(result.budget_bytes)}")
            self.image_id = None
