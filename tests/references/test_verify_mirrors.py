"""A fetched task's export is verified from the sweep's repository mirrors, never its remote:
real git, a real noop trial in Docker, a real export and `docker build`."""

from __future__ import annotations

from pathlib import Path

import pytest

from reb_ray.models.sweep import SweepConfig, TrialSpec
from reb_ray.results.parquet_sink import ParquetSink
from reb_ray.suite.load import load_suite
from reb_ray.trial import run_trial
from reb_ray.testing.suite import write_task
from tests.helpers.git import mirrored_repo


@pytest.mark.timeout(900)  # a trial, then two exports with a --no-cache rebuild each: minutes on a busy node
def test_verify_exports_places_a_fetched_repository_from_the_mirrors(sandbox_image, docker_client, tmp_path):
    from reb_ray.sweep.env_verify import verify
    from reb_ray.sweep.verify_exports import verify_exports

    mirrors, (commit,) = mirrored_repo(tmp_path, {"main.py": "print('tiny ran')\n"})
    root = tmp_path / "suites"
    # Fetched from a remote this node cannot reach (`.invalid` never resolves): only a mirror
    # places its repository. Its CPU stage needs nothing beyond the image's Python.
    write_task(root, "mirrored", "tiny", category="1_cpu", cpu='command = "python main.py"',
               git=("https://git.example.invalid/someone/tiny", commit))
    task = load_suite("mirrored", root)[0]

    config = SweepConfig(suite="mirrored", tasks_root=root, output=tmp_path / "out", repo_mirrors=[mirrors],
                         keep_environments="none", agents=["noop"], wheelhouses=[])
    outcome = run_trial(TrialSpec(sweep_id="mirrored-s", agent="noop", task=task, trial_index=0, config=config,
                                  image=sandbox_image))
    assert outcome.trial["c1_status"] == "success", outcome.trial["failure_reason"]
    with ParquetSink(config.output.dir, flush_interval_s=0) as sink:
        sink.write([outcome.trial], outcome.stages)

    [record] = verify_exports(config.output.dir, "mirrored-s", root, [mirrors])
    assert record["verdict"] == "reproducible: yes", record
    # The same export without the mirrors: the verification trial cannot place the repository.
    without = verify(Path(record["export"]), tasks_root=root)
    assert without["reproducible"] is None and "infra_clone" in without["verdict"], without["verdict"]
