"""The environment's prefix file by file: the kept image's against the rebuilt image's.

A rebuild is the environment only when its files are: the same stage verdicts and the same
package list still leave room for a file patched inside site-packages (the kept image prints the
patched version, the rebuild the stock one) or a file no recipe step made (a stub written by
hand). `prefix_digests` reads an image's prefix (the reported interpreter's `sys.prefix`) as
the image holds it, from outside: a container of the image is created but never started, and
the engine's archive of that directory is hashed on the host (sha256 per regular file, the
target of each symlink), so no code of the agent runs. `compare_prefixes` lists what differs,
leaving out what the export documents as expected to differ (EXPECTED_TO_DIFFER): byte-compiled
caches, the installer's own bookkeeping in `*.dist-info` (RECORD, INSTALLER, REQUESTED,
direct_url.json: which installer ran and which packages were asked for by name),
`pyvenv.cfg` (the command that made the venv), and a venv's `bin/python*` links when both
sides are links (they name the same base interpreter by one of its names, `python3` or
`python3.11`, as the command that made the venv did; a link replaced by a file still differs).
"""

from __future__ import annotations

import hashlib
import posixpath
import tarfile
from typing import Any, Iterator

from reb_ray.sandbox.image_files import image_archive

#: Path patterns (relative to the prefix) a rebuild may change: module docstring.
EXPECTED_TO_DIFFER = ("__pycache__/", "*.pyc", "*.dist-info/RECORD", "*.dist-info/INSTALLER",
                      "*.dist-info/REQUESTED", "*.dist-info/direct_url.json", "pyvenv.cfg")
#: Files named per list at most.
MAX_NAMED = 50
#: Prefixes not compared: the system's own interpreter (its prefix is all of /usr).
SYSTEM_PREFIXES = ("/usr", "/usr/local", "/")


def expected_to_differ(rel: str) -> bool:
    """True for a path (relative to the prefix) EXPECTED_TO_DIFFER names."""
    parts = rel.split("/")
    if "__pycache__" in parts or rel.endswith((".pyc", ".pyo")) or rel == "pyvenv.cfg":
        return True
    return len(parts) >= 2 and parts[-2].endswith(".dist-info") and parts[-1] in (
        "RECORD", "INSTALLER", "REQUESTED", "direct_url.json")


def _interpreter_links(rel: str, kept: str | None, rebuilt: str | None) -> bool:
    """True for a venv's `bin/python*` that is a link on both sides (module docstring)."""
    return (rel.startswith("bin/python") and "/" not in rel[len("bin/"):] and (kept or "").startswith("link:")
            and (rebuilt or "").startswith("link:"))


class _Stream:
    """The engine's archive chunks as a file object for tarfile's streaming mode."""

    def __init__(self, chunks: Iterator[bytes]):
        self.chunks, self.buffer = iter(chunks), b""

    def read(self, size: int = -1) -> bytes:
        while size < 0 or len(self.buffer) < size:
            try:
                self.buffer += next(self.chunks)
            except StopIteration:
                break
        if size < 0:
            out, self.buffer = self.buffer, b""
        else:
            out, self.buffer = self.buffer[:size], self.buffer[size:]
        return out


def digests_of_archive(chunks: Iterator[bytes]) -> dict[str, str]:
    """{path relative to the archive's top directory: "sha256:<hex>" | "link:<target>"} of a tar
    stream (the engine's archive of one directory)."""
    out: dict[str, str] = {}
    with tarfile.open(fileobj=_Stream(chunks), mode="r|") as archive:
        for member in archive:
            parts = member.name.split("/", 1)
            if len(parts) < 2 or not parts[1]:
                continue
            rel = parts[1]
            if member.issym():
                out[rel] = f"link:{member.linkname}"
            elif member.isfile():
                h = hashlib.sha256()
                handle = archive.extractfile(member)
                for block in iter(lambda: handle.read(1 << 20), b""):
                    h.update(block)
                out[rel] = f"sha256:{h.hexdigest()}"
    return out


def prefix_digests(client: Any, image: str, prefix: str) -> dict[str, str]:
    """`digests_of_archive` of directory `prefix` in `image`, read without running the image
    (`reb_ray.sandbox.image_files`). Raises what the engine's client raises."""
    with image_archive(client, image, prefix) as stream:
        return digests_of_archive(stream)


def compare_prefixes(kept: dict[str, str], rebuilt: dict[str, str]) -> dict[str, Any]:
    """{"modified": files whose content differs, "uncaptured": files of the kept prefix the
    rebuild lacks, "extra": files only the rebuild has, "compared": files compared, "ignored":
    files left out as expected to differ}; paths relative to the prefix, sorted, at most
    MAX_NAMED each (the counts are whole)."""
    modified, uncaptured, extra = [], [], []
    compared = ignored = 0
    for rel in sorted(set(kept) | set(rebuilt)):
        if expected_to_differ(rel) or _interpreter_links(rel, kept.get(rel), rebuilt.get(rel)):
            ignored += 1
            continue
        compared += 1
        if rel not in rebuilt:
            uncaptured.append(rel)
        elif rel not in kept:
            extra.append(rel)
        elif kept[rel] != rebuilt[rel]:
            modified.append(rel)
    return {"modified": modified[:MAX_NAMED], "modified_count": len(modified), "uncaptured": uncaptured[:MAX_NAMED],
            "uncaptured_count": len(uncaptured), "extra": extra[:MAX_NAMED], "extra_count": len(extra),
            "compared": compared, "ignored": ignored}


def comparable_prefix(prefix: str | None) -> bool:
    """Whether the prefix is an environment of its own (a venv, a conda environment), not the
    system's interpreter, whose prefix is the whole of /usr."""
    return bool(prefix) and posixpath.normpath(prefix) not in SYSTEM_PREFIXES


__all__ = ["EXPECTED_TO_DIFFER", "comparable_prefix", "compare_prefixes", "digests_of_archive", "expected_to_differ",
           "prefix_digests"]
