"""reb_ray.sweep.run: a sweep refused before its first trial leaves the disk as it found it."""

from __future__ import annotations

import pytest

from reb_ray.errors import RebRayError
from reb_ray.models.sweep import SweepConfig
from reb_ray.sweep.run import run_sweep


@pytest.mark.parametrize("bad, message", [({"tasks": "numpy-trainr"}, "matches no task"),
                                          ({"suite": "demoo"}, "unknown suite 'demoo'")])
def test_a_bad_suite_or_task_pattern_leaves_no_output_directory_behind(tmp_path, bad, message):
    """A misspelt --tasks or --suite is a usage error (one line) before anything runs; the
    output directory the sweep made to check it can write there is removed again, and one that
    was already there, with what it holds, stays. No Ray starts: the refusal comes first, and the
    `sleep` sandbox needs no engine."""
    fresh = tmp_path / "fresh"
    with pytest.raises(RebRayError, match=message):
        run_sweep(SweepConfig(output=fresh, agents=["noop"], sandbox="sleep", **bad), show_progress=False)
    assert not fresh.exists()

    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "notes.txt").write_text("mine")
    with pytest.raises(RebRayError, match=message):
        run_sweep(SweepConfig(output=kept, agents=["noop"], sandbox="sleep", **bad), show_progress=False)
    assert (kept / "notes.txt").read_text() == "mine"
