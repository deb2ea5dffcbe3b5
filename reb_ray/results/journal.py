"""The compaction journal: the commit point that makes a file swap all-or-nothing.

A journal `<output>/.reb-ray/journal/<uuid>.json` lists a swap's inputs (files to delete,
relative to the output directory) and outputs ([temporary path, final path] pairs of complete,
fsynced files). It is written whole (temp, fsync, rename), so it either exists complete or not
at all. Once it exists the swap is decided: `finish` renames the outputs into place, deletes the
inputs, then the journal; each step is idempotent, so a crash anywhere inside is finished by
running it again (`recover`, at every sink's first write and every compaction's start).
Readers apply an unfinished journal without changing anything (layout.part_files).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable
from pathlib import Path

from reb_ray.errors import RebRayError
from reb_ray.results.atomic import publish, temp_path
from reb_ray.results.layout import JOURNAL_DIR, LEGACY_PREFIX, TMP_DIR, fsync_dir

Step = Callable[[str], None]


def no_step(name: str) -> None:
    """The default step hook: nothing."""


def commit(output_dir: Path, inputs: list[Path], outputs: list[tuple[Path, Path]], step: Step) -> None:
    """Write the journal (the commit point), then finish it."""
    def rel(path: Path) -> str:
        return str(Path(path).relative_to(output_dir))

    journal = {"inputs": [rel(p) for p in inputs], "outputs": [[rel(t), rel(f)] for t, f in outputs]}
    directory = output_dir / JOURNAL_DIR
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{uuid.uuid4().hex}.json"
    tmp = temp_path(output_dir, path)
    with open(tmp, "w") as f:
        json.dump(journal, f)
        f.flush()
        os.fsync(f.fileno())
    publish(tmp, path)
    step("committed")
    finish(output_dir, path, journal, step)


def finish(output_dir: Path, path: Path, journal: dict, step: Step) -> None:
    """Rename the journal's outputs into place, delete its inputs, delete it. Idempotent, so a
    crash anywhere in here is finished by running it again (`recover`)."""
    for i, (tmp_rel, final_rel) in enumerate(journal["outputs"]):
        tmp, final = output_dir / tmp_rel, output_dir / final_rel
        try:
            publish(tmp, final)
        except FileNotFoundError:
            if not final.exists():  # neither name: the file is gone, which no crash can cause
                raise RebRayError(f"compaction journal {path}: {tmp_rel} and {final_rel} are both missing") from None
        step(f"renamed {i}")
    parents = set()
    for i, rel in enumerate(journal["inputs"]):
        (output_dir / rel).unlink(missing_ok=True)
        parents.add((output_dir / rel).parent)
        step(f"removed {i}")
    for parent in parents:
        fsync_dir(parent)
        if parent.name.startswith(LEGACY_PREFIX) and parent.is_dir() and not any(parent.iterdir()):
            parent.rmdir()
    path.unlink(missing_ok=True)
    fsync_dir(path.parent)
    step("done")


def recover(output_dir: Path, remove_temps: bool = False) -> int:
    """Finish every compaction whose journal was committed and whose process died; returns how
    many. With `remove_temps` (only under the exclusive lock, when no sink is mid-write) also
    delete leftover temporary files. Raises RebRayError for a journal that cannot be parsed."""
    output_dir = Path(output_dir)
    directory = output_dir / JOURNAL_DIR
    done = 0
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        try:
            journal = json.loads(path.read_text())
        except FileNotFoundError:  # another writer finished it meanwhile
            continue
        except (OSError, ValueError) as exc:
            raise RebRayError(f"compaction journal {path} is unreadable ({exc}); move it away and run reb-ray compact") from exc
        finish(output_dir, path, journal, no_step)
        done += 1
    tmp_dir = output_dir / TMP_DIR
    if remove_temps and tmp_dir.is_dir():
        for leftover in tmp_dir.iterdir():
            leftover.unlink(missing_ok=True)
    return done
