"""The published artifacts of a distribution, read by the harness from outside the sandbox.

What an installed distribution's files should hash to comes from the artifact that was
published under its name and version, never from the sandbox (whose RECORD the agent can
rewrite). `Published.candidates(name, version)` lists the artifacts of that name and version
and `Published.record(artifact)` reads a wheel's RECORD ({path: "sha256=<b64>"}), from, in
order:

1. local wheel directories the harness trusts: the node's package cache (filled by the
   harness from the index, pip checking every hash), the node's wheelhouses, and the wheels the
   sandbox image ships (`/usr/share/python-wheels`, which `python3 -m venv` installs pip and
   setuptools from: Debian's own builds, read from the image, not from the sandbox);
2. the package index's simple API (PEP 691 JSON): the file list of the project, each with its
   sha256; only the RECORD of a remote wheel is read, by HTTP range requests on the zip's
   central directory and that one member (a few requests, tens of kB, whatever the wheel's size).

`Published.member(artifact, path)` reads one other member of a wheel the same way (setuptools'
`setuptools/command/editable_wheel.py`, whose template an editable install's finder module is
compared with: reb_ray.grading.editable).

RECORDs and members read are kept on disk under the cache directory, named by the artifact's
file name and sha256, so a node reads each one once. An index that cannot be reached leaves the artifacts
unknown (None), never "absent": a distribution that cannot be looked up is unverifiable, not a
failure.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import logging
import os
import re
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

DEFAULT_INDEX = "https://pypi.org/simple"
#: Seconds one request to the index may take.
HTTP_TIMEOUT_S = 20.0
#: Bytes fetched per range request of a remote wheel (its central directory is at the end).
BLOCK = 256 * 1024
_JSON = "application/vnd.pypi.simple.v1+json"


def canonical(name: str) -> str:
    """PEP 503's normalised project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _version_key(version: str) -> str:
    return version.strip().lower()


@dataclass(frozen=True)
class Artifact:
    """One published file of a distribution: its file name, kind (wheel or sdist), where it is
    (a local path, or a URL), its sha256 (hex; None when the source does not say), its size
    and the tags of a wheel's name ({"cp311-cp311-manylinux_2_28_x86_64", ...})."""

    filename: str
    kind: str
    location: str
    sha256: str | None
    size: int | None
    source: str

    @property
    def tags(self) -> set[str]:
        if self.kind != "wheel":
            return set()
        parts = self.filename[:-4].split("-")
        if len(parts) < 5:
            return set()
        py, abi, plat = parts[-3:]
        return {f"{p}-{a}-{x}" for p in py.split(".") for a in abi.split(".") for x in plat.split(".")}


def parse_filename(filename: str) -> tuple[str, str, str] | None:
    """(canonical name, version, kind) of a wheel or sdist file name; None for anything else."""
    if filename.endswith(".whl"):
        parts = filename[:-4].split("-")
        if len(parts) >= 5:
            return canonical(parts[0]), parts[1], "wheel"
        return None
    for suffix in (".tar.gz", ".zip", ".tar.bz2", ".tgz"):
        if filename.endswith(suffix):
            stem = filename[: -len(suffix)]
            name, _, version = stem.rpartition("-")
            if name and version:
                return canonical(name), version, "sdist"
    return None


class _RangeFile(io.RawIOBase):
    """A remote file read by HTTP range requests, in BLOCK-sized blocks (for zipfile)."""

    def __init__(self, url: str, size: int):
        self.url, self.size, self.pos, self.blocks = url, size, 0, {}
        self.requests = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = offset if whence == 0 else self.pos + offset if whence == 1 else self.size + offset
        return self.pos

    def _block(self, index: int) -> bytes:
        if index not in self.blocks:
            start = index * BLOCK
            end = min(self.size, start + BLOCK) - 1
            req = urllib.request.Request(self.url, headers={"Range": f"bytes={start}-{end}"})
            with urllib.request.urlopen(req, timeout=HTTP_TIMEOUT_S) as resp:
                data = resp.read()
            self.requests += 1
            if resp.status != 206 and len(data) == self.size:  # the server ignored the range
                data = data[start:end + 1]
            self.blocks[index] = data
        return self.blocks[index]

    def readinto(self, buffer) -> int:
        want = min(len(buffer), max(0, self.size - self.pos))
        got = bytearray()
        while len(got) < want:
            index, offset = divmod(self.pos + len(got), BLOCK)
            chunk = self._block(index)[offset: offset + want - len(got)]
            if not chunk:
                break
            got += chunk
        buffer[: len(got)] = got
        self.pos += len(got)
        return len(got)


def record_of_zip(fileobj) -> dict[str, str] | None:
    """{path: hash} of the RECORD in a wheel (a zip file object); None when it has none."""
    with zipfile.ZipFile(fileobj) as archive:
        names = [n for n in archive.namelist() if n.count("/") == 1 and n.endswith(".dist-info/RECORD")]
        if not names:
            return None
        text = archive.read(names[0]).decode("utf-8", "replace")
    out = {}
    for row in csv.reader(io.StringIO(text)):
        if row and row[0]:
            out[row[0]] = row[1] if len(row) > 1 else ""
    return out


def member_of_zip(fileobj, member: str) -> bytes | None:
    """The bytes of `member` in a wheel (a zip file object); None when it has no such member."""
    with zipfile.ZipFile(fileobj) as archive:
        try:
            return archive.read(member)
        except KeyError:
            return None


class Published:
    """Published artifacts from `local_dirs` and the index at `index_url` (None: no index),
    RECORDs cached under `cache_dir` (module docstring)."""

    def __init__(self, local_dirs: list[Path], index_url: str | None = DEFAULT_INDEX,
                 cache_dir: Path | None = None):
        self.local_dirs = [Path(d) for d in local_dirs if d and Path(d).is_dir()]
        self.index_url = index_url.rstrip("/") if index_url else None
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self._local: dict[tuple[str, str], list[Artifact]] | None = None
        self._projects: dict[str, list[Artifact] | None] = {}
        self.index_errors: list[str] = []
        self.remote_requests = 0

    def _local_index(self) -> dict[tuple[str, str], list[Artifact]]:
        if self._local is None:
            self._local = {}
            for directory in self.local_dirs:
                for path in sorted(directory.iterdir()):
                    parsed = parse_filename(path.name)
                    if parsed and path.is_file():
                        name, version, kind = parsed
                        self._local.setdefault((name, _version_key(version)), []).append(
                            Artifact(path.name, kind, str(path), None, path.stat().st_size, f"local:{directory}"))
        return self._local

    def _project(self, name: str) -> list[Artifact] | None:
        """Every file of project `name` on the index; None when the index could not answer (an
        unknown project is [])."""
        key = canonical(name)
        if key in self._projects:
            return self._projects[key]
        if not self.index_url:
            self._projects[key] = None
            return None
        req = urllib.request.Request(f"{self.index_url}/{key}/", headers={"Accept": _JSON})
        try:
            with urllib.request.urlopen(req, timeout=HTTP_TIMEOUT_S) as resp:
                data = json.loads(resp.read())
            self.remote_requests += 1
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                self._projects[key] = []
                return []
            self.index_errors.append(f"{key}: HTTP {exc.code}")
            self._projects[key] = None
            return None
        except (OSError, ValueError) as exc:
            self.index_errors.append(f"{key}: {type(exc).__name__}: {exc}"[:200])
            self._projects[key] = None
            return None
        files = []
        for entry in data.get("files") or []:
            parsed = parse_filename(str(entry.get("filename") or ""))
            if not parsed:
                continue
            files.append(Artifact(entry["filename"], parsed[2], str(entry.get("url") or ""),
                                  (entry.get("hashes") or {}).get("sha256"), entry.get("size"), "index"))
        self._projects[key] = files
        return files

    def local_candidates(self, name: str, version: str) -> list[Artifact]:
        """The artifacts of `name`==`version` in the local directories."""
        return list(self._local_index().get((canonical(name), _version_key(version)), []))

    def candidates(self, name: str, version: str) -> list[Artifact] | None:
        """The artifacts of `name`==`version`: local ones first, then the index's; None when no
        local one exists and the index could not answer."""
        key = (canonical(name), _version_key(version))
        local = self.local_candidates(name, version)
        project = self._project(name)
        if project is None:
            return local or None
        remote = [a for a in project if (parse_filename(a.filename) or ("", ""))[1].lower() == key[1]]
        return local + remote

    def _cache_path(self, artifact: Artifact) -> Path | None:
        if not self.cache_dir:
            return None
        tag = (artifact.sha256 or f"size{artifact.size}")[:16]
        return self.cache_dir / f"{artifact.filename}.{tag}.json"

    def member(self, artifact: Artifact, path: str) -> bytes | None:
        """The bytes of the member `path` of wheel `artifact`; None when the wheel lacks it or
        cannot be read (logged). Cached on disk like RECORDs (a wheel lacking it is not cached)."""
        if artifact.kind != "wheel":
            return None
        base = self._cache_path(artifact)
        cached = base.with_name(base.name[: -len(".json")] + "." + hashlib.sha256(path.encode()).hexdigest()[:12]
                                + ".member") if base is not None else None
        if cached is not None and cached.is_file():
            try:
                return cached.read_bytes()
            except OSError:
                pass
        try:
            if artifact.source.startswith("local:"):
                with open(artifact.location, "rb") as f:
                    got = member_of_zip(f, path)
            else:
                if not artifact.size:
                    return None
                remote = _RangeFile(artifact.location, int(artifact.size))
                got = member_of_zip(io.BufferedReader(remote, BLOCK), path)
                self.remote_requests += remote.requests
        except (OSError, zipfile.BadZipFile, ValueError) as exc:
            log.warning("cannot read %s of %s: %s", path, artifact.filename, exc)
            return None
        if got is not None and cached is not None:
            try:
                cached.parent.mkdir(parents=True, exist_ok=True)
                tmp = cached.with_suffix(f".tmp{os.getpid()}")
                tmp.write_bytes(got)
                os.replace(tmp, cached)
            except OSError:
                pass
        return got

    def record(self, artifact: Artifact) -> dict[str, str] | None:
        """The RECORD of wheel `artifact`; None when it cannot be read (logged)."""
        if artifact.kind != "wheel":
            return None
        cached = self._cache_path(artifact)
        if cached is not None and cached.is_file():
            try:
                return json.loads(cached.read_text())
            except ValueError:
                pass
        try:
            if artifact.source.startswith("local:"):
                with open(artifact.location, "rb") as f:
                    got = record_of_zip(f)
            else:
                if not artifact.size:
                    return None
                remote = _RangeFile(artifact.location, int(artifact.size))
                got = record_of_zip(io.BufferedReader(remote, BLOCK))
                self.remote_requests += remote.requests
        except (OSError, zipfile.BadZipFile, ValueError, KeyError) as exc:
            log.warning("cannot read the RECORD of %s: %s", artifact.filename, exc)
            return None
        if got is not None and cached is not None:
            try:
                cached.parent.mkdir(parents=True, exist_ok=True)
                tmp = cached.with_suffix(f".tmp{os.getpid()}")
                tmp.write_text(json.dumps(got))
                os.replace(tmp, cached)
            except OSError:
                pass
        return got


__all__ = ["Artifact", "DEFAULT_INDEX", "Published", "canonical", "member_of_zip", "parse_filename", "record_of_zip"]
