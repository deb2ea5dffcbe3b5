"""Harbor trials placed like reb-ray's GPU trials, on a simulated node with four GPUs.

No GPU exists here, so the runner is a real small stand-in: it records which GPU ids its trial
held, from when to when, and sleeps. The placement is reb-ray's dispatcher, unchanged."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from pathlib import Path

from reb_ray.harbor.run import run_all
from reb_ray.harbor.task import load_harbor_task
from reb_ray.harbor.trial import HarborOutcome
from tests.harbor.test_task import write_task


def tasks_asking(tmp_path: Path, gpus: dict[str, int]):
    base = load_harbor_task(write_task(tmp_path, "base", toml=""))
    return [replace(base, id=name, gpus=n, agent_timeout_s=60.0 * (1 + n)) for name, n in gpus.items()]


class HoldingRunner:
    """Holds the given GPU ids for `seconds`, recording (task, gpus, start, end)."""

    def __init__(self, seconds: float = 0.2) -> None:
        self.seconds, self.held, self.lock = seconds, [], threading.Lock()

    def __call__(self, task, agent, gpus):
        start = time.monotonic()
        time.sleep(self.seconds)
        with self.lock:
            self.held.append((task.id, tuple(gpus), start, time.monotonic()))
        return HarborOutcome(task.id, agent, reward=1.0, gpus=list(gpus))


def test_a_two_gpu_task_holds_two_gpus_of_its_node_exclusively(tmp_path):
    tasks = tasks_asking(tmp_path, {"pair-a": 2, "pair-b": 2, "one-a": 1, "one-b": 1, "one-c": 1, "cpu": 0})
    runner = HoldingRunner()
    outcomes = run_all(tasks, ["oracle"], runner, gpu_ids=["0", "1", "2", "3"], cpu_slots=1)
    assert [o.task_id for o in outcomes] == [t.id for t in tasks]
    held = {task: gpus for task, gpus, _, _ in runner.held}
    assert len(held["pair-a"]) == 2 == len(set(held["pair-a"])) and len(held["pair-b"]) == 2
    assert all(len(held[name]) == 1 for name in ("one-a", "one-b", "one-c")) and held["cpu"] == ()
    for i, (task, gpus, start, end) in enumerate(runner.held):
        for other, other_gpus, other_start, other_end in runner.held[i + 1:]:
            overlap = start < other_end and other_start < end
            assert not (overlap and set(gpus) & set(other_gpus)), f"{task} and {other} shared a GPU at once"


def test_a_task_asking_more_gpus_than_the_node_has_is_the_hardwares(tmp_path):
    tasks = tasks_asking(tmp_path, {"eight": 8, "one": 1})
    runner = HoldingRunner(0.01)
    outcomes = run_all(tasks, ["oracle", "noop"], runner, gpu_ids=["0", "1"], cpu_slots=1)
    eight = [o for o in outcomes if o.task_id == "eight"]
    assert [(o.owner, o.category, o.reward) for o in eight] == [("hardware", "insufficient_hardware", None)] * 2
    assert sorted(task for task, *_ in runner.held) == ["one", "one"]
