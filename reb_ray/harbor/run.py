"""Running many Harbor trials on one node, placed as reb-ray places its GPU trials.

Every (agent, task) is a `Job` of reb-ray's dispatcher (reb_ray.scheduling.dispatch): a task
asking for k GPUs runs on k GPU slots of the node at once (a gang: the trial gets all k GPU ids,
and no other trial holds them until it ends), a CPU task on a CPU slot, longest expected first,
with no head-of-line blocking. The node has one GPU slot per GPU id given and `cpu_slots` CPU
slots. A task asking for more GPUs than the node has is never started: its outcome is the
hardware's (`insufficient_hardware`), decided from the counts.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path

from reb_ray.harbor.task import HarborTask
from reb_ray.harbor.trial import DEFAULT_AGENT_TIMEOUT_S, HarborOutcome
from reb_ray.scheduling.dispatch import Dispatcher, Job

NODE = "local"
#: runner(task, agent, gpus) -> outcome: one attempt holding those physical GPU ids.
Runner = Callable[[HarborTask, str, list[str]], HarborOutcome]


def expected_s(task: HarborTask) -> float:
    """What the dispatcher expects a trial to take (s): its agent and verifier limits."""
    return (task.agent_timeout_s or DEFAULT_AGENT_TIMEOUT_S) + task.verifier_timeout_s


def run_all(tasks: list[HarborTask], agents: list[str], runner: Runner, gpu_ids: list[str],
            cpu_slots: int) -> list[HarborOutcome]:
    """Run every (agent, task) with `runner`, placed by the dispatcher on this node's slots
    (module docstring); outcomes in (agent, task) order."""
    dispatcher = Dispatcher()
    for gpu in gpu_ids:
        dispatcher.add_slot(("gpu", gpu), NODE, gpu=True)
    for i in range(max(1, cpu_slots)):
        dispatcher.add_slot(("cpu", i), NODE, gpu=False)
    order = [(agent, task) for agent in agents for task in tasks]
    results: dict[tuple[str, str], HarborOutcome] = {}
    by_key = {}
    for seq, (agent, task) in enumerate(order):
        key = (agent, task.id)
        if task.gpus > len(gpu_ids):
            results[key] = HarborOutcome(task.id, agent, status="scored", owner="hardware",
                                         category="insufficient_hardware",
                                         reason=f"asks for {task.gpus} GPU(s); the node has {len(gpu_ids)}")
            continue
        by_key[key] = task
        dispatcher.submit(Job(key=key, gpus=task.gpus, expected_s=expected_s(task), seq=seq))
    lock = threading.Lock()
    started = time.monotonic()
    running: dict[Future, tuple[tuple[str, str], list]] = {}
    with ThreadPoolExecutor(max_workers=len(gpu_ids) + max(1, cpu_slots)) as pool:
        while True:
            with lock:
                placed = dispatcher.assign(time.monotonic() - started)
            for job, slots in placed:
                agent, _ = job.key
                gpus = [slot[1] for slot in slots if slot[0] == "gpu"] if job.gpus else []
                running[pool.submit(runner, by_key[job.key], agent, gpus)] = (job.key, slots)
            if not running:
                break
            done, _ = wait(list(running), return_when=FIRST_COMPLETED)
            for future in done:
                key, slots = running.pop(future)
                results[key] = future.result()
                with lock:
                    dispatcher.finish(slots)
    return [results[(agent, task.id)] for agent, task in order]


def log_dir_for(output: Path, agent: str, task: HarborTask) -> Path:
    """Where one trial's logs go under the run's output directory."""
    return output / "trials" / agent / task.id
