"""The asset cache: models and datasets the probes need, fetched ahead of time.

Probes run offline (HF_HUB_OFFLINE=1 and friends), so a missing asset fails fast instead of a
download that hangs; `reb-ray assets fetch` fills the cache on a machine with internet access,
and the cache directory is then mounted read-only into sandboxes (`--assets DIR`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from reb_ray.errors import RebRayError
from reb_ray.models.task import HF_HOME_DIR, Asset, TaskSpec


@dataclass
class FetchResult:
    """One asset: `state` is "present", "fetched" or "failed" (with a one-line `detail`)."""

    task_id: str
    asset: str
    state: str
    detail: str = ""


def _download(url: str, dest: Path, timeout_s: float) -> None:
    """Stream `url` to `dest` atomically (temp file + rename)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.")
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout_s) as response:
            shutil.copyfileobj(response, out, length=1024 * 1024)
        os.replace(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _snapshot(asset: Asset, cache: Path) -> None:
    """Download an hf:// asset: into `cache/path` as plain files, or into the hub cache under
    `cache/huggingface/hub` (layout "hf_cache", what HF_HOME-relative offline loading reads).
    The endpoint is huggingface_hub's own (HF_ENDPOINT, e.g. a mirror)."""
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise RebRayError("hf:// assets need huggingface_hub: pip install 'reb-ray[assets]'") from None
    repo_type, repo_id = asset.hf_repo  # type: ignore[misc]
    patterns = list(asset.include) or None
    if asset.layout == "hf_cache":
        snapshot_download(repo_id=repo_id, repo_type=repo_type, allow_patterns=patterns,
                          cache_dir=str(cache / HF_HOME_DIR / "hub"))
    else:
        snapshot_download(repo_id=repo_id, repo_type=repo_type, allow_patterns=patterns, local_dir=str(cache / asset.path))


def fetch_asset(task: TaskSpec, asset: Asset, cache: Path, timeout_s: float = 600) -> FetchResult:
    """Fetch one asset into `cache` (at `asset.cache_path`) unless present. Never raises for a
    failed fetch: the result says "failed" with a one-line detail naming the source."""
    if asset.present_in(cache):
        return FetchResult(task.id, asset.name, "present")
    if asset.source is None:
        return FetchResult(task.id, asset.name, "failed",
                           "no source in task.toml: place it by hand at " + str(cache / asset.cache_path))
    try:
        if asset.hf_repo is not None:
            _snapshot(asset, cache)
        else:
            _download(asset.source, cache / asset.path, timeout_s)
    except Exception as exc:  # noqa: BLE001 - network, HTTP and hub errors all become a "failed" line
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        return FetchResult(task.id, asset.name, "failed", f"{asset.source}: {type(exc).__name__}: {first[:200]}")
    return FetchResult(task.id, asset.name, "fetched")


def fetch_assets(tasks: list[TaskSpec], cache: Path) -> list[FetchResult]:
    """Fetch every asset of `tasks` into `cache`."""
    cache.mkdir(parents=True, exist_ok=True)
    return [fetch_asset(task, asset, cache) for task in tasks for asset in task.assets]


def missing_by_stage(task: TaskSpec, cache: Path | None) -> dict[str, list[Asset]]:
    """Applicable command stage (c1, c3, c4) -> the assets it needs (`Asset.stages`) that are not
    in `cache` (all of them when no cache is given); stages missing nothing are left out."""
    applicable = {"c1": task.supports_cpu, "c3": task.supports_single_gpu, "c4": task.supports_multi_gpu}
    out: dict[str, list[Asset]] = {}
    for stage, applies in applicable.items():
        missing = [a for a in task.assets_needed_by(stage) if applies and (cache is None or not a.present_in(cache))]
        if missing:
            out[stage] = missing
    return out
