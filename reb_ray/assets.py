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
from reb_ray.models.task import Asset, TaskSpec


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


def _snapshot(repo_id: str, dest: Path) -> None:
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise RebRayError("hf:// assets need huggingface_hub: pip install huggingface_hub") from None
    snapshot_download(repo_id=repo_id, local_dir=str(dest))


def fetch_asset(task: TaskSpec, asset: Asset, cache: Path, timeout_s: float = 600) -> FetchResult:
    """Fetch one asset into `cache/asset.path` unless present. Never raises for a failed fetch."""
    dest = cache / asset.path
    if dest.exists():
        return FetchResult(task.id, asset.name, "present")
    if asset.source is None:
        return FetchResult(task.id, asset.name, "failed", "no source in task.toml: place it by hand at " + str(dest))
    try:
        if asset.source.startswith("hf://"):
            _snapshot(asset.source.removeprefix("hf://"), dest)
        else:
            _download(asset.source, dest, timeout_s)
    except (OSError, RebRayError, ValueError) as exc:
        return FetchResult(task.id, asset.name, "failed", f"{asset.source}: {str(exc).splitlines()[0][:200]}")
    return FetchResult(task.id, asset.name, "fetched")


def fetch_assets(tasks: list[TaskSpec], cache: Path) -> list[FetchResult]:
    """Fetch every asset of `tasks` into `cache`."""
    cache.mkdir(parents=True, exist_ok=True)
    return [fetch_asset(task, asset, cache) for task in tasks for asset in task.assets]
