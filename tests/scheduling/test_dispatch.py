"""The dispatch rules (issue 12, item 1), driven by a small discrete-event loop: pure, no Ray."""

from __future__ import annotations

import heapq

from reb_ray.scheduling.dispatch import Dispatcher, Job


def _dispatcher(nodes: dict[str, int], cpu_slots: int = 0, max_running: int | None = None) -> Dispatcher:
    d = Dispatcher(max_running)
    for node, gpus in nodes.items():
        for i in range(gpus):
            d.add_slot(f"{node}/g{i}", node, True)
    for i in range(cpu_slots):
        d.add_slot(f"cpu{i}", "cpu-node", False)
    return d


def simulate(d: Dispatcher, durations: dict, already: list[tuple[float, str, list[str]]] = ()) -> dict:
    """Run every submitted job for its true duration from t=0; {job key: (start time, slot keys)}.
    `already`: jobs started before, as (end time, key, slot keys)."""
    now, events, started = 0.0, list(already), {}
    heapq.heapify(events)
    while True:
        for job, keys in d.assign(now):
            started[job.key] = (now, keys)
            heapq.heappush(events, (now + durations[job.key], job.key, keys))
        if not events:
            return started
        now, _key, keys = heapq.heappop(events)
        d.finish(keys)


def test_longest_expected_first_within_a_class():
    d = _dispatcher({"a": 1})
    for key, seconds in (("short", 1), ("long", 10), ("mid", 5)):
        d.submit(Job(key, 1, seconds))
    started = simulate(d, {"short": 1, "long": 10, "mid": 5})
    assert sorted(started, key=lambda k: started[k][0]) == ["long", "mid", "short"]


def test_a_two_gpu_trial_gets_two_slots_of_one_node_never_one_of_each():
    d = _dispatcher({"a": 2, "b": 2})
    for key in ("busy1", "busy2", "busy3"):
        d.submit(Job(key, 1, 10))
    placed = {job.key: keys for job, keys in d.assign(0)}
    assert placed == {"busy1": ["a/g0"], "busy2": ["a/g1"], "busy3": ["b/g0"]}  # best fit keeps b's pair longest
    d.submit(Job("pair", 2, 100))
    d.finish(placed["busy2"])
    assert d.assign(1) == []  # one free slot on each node: not a pair
    d.finish(placed["busy1"])
    ((job, keys),) = d.assign(2)
    assert job.key == "pair" and keys == ["a/g1", "a/g0"]


def test_no_head_of_line_blocking_a_small_trial_runs_while_a_big_one_waits():
    d = _dispatcher({"a": 2, "b": 2})
    for key in ("busy1", "busy2", "busy3"):
        d.submit(Job(key, 1, 50))
    d.assign(0)  # a full, one slot of b free
    d.submit(Job("pair", 2, 100))
    d.submit(Job("single", 1, 20))
    # The pair fits nowhere now (it reserves a node); the single takes the free slot meanwhile.
    ((job, keys),) = d.assign(1)
    assert (job.key, keys) == ("single", ["b/g1"])
    assert d.pending == 1


def test_a_waiting_two_gpu_trial_is_not_starved_by_a_stream_of_one_gpu_trials():
    # One node, two GPU slots; one slot is busy until t=10. Long 1-GPU trials keep coming; the
    # 2-GPU trial (the longest) must start at t=10, not after every 1-GPU trial.
    d = _dispatcher({"a": 2})
    d.submit(Job("first", 1, 10))
    ((_, first_keys),) = d.assign(0)
    durations = {"pair": 100.0, "filler": 4.0}
    d.submit(Job("pair", 2, 100))
    for i in range(20):
        durations[f"single{i}"] = 50.0
        d.submit(Job(f"single{i}", 1, 50))
    d.submit(Job("filler", 1, 4))  # short enough to run before the pair's slots are both free
    starts = simulate(d, durations, [(10.0, "first", first_keys)])
    assert starts["filler"][0] == 0.0  # backfilled into the drained slot: back before t=10
    assert starts["pair"][0] == 10.0 and sorted(starts["pair"][1]) == ["a/g0", "a/g1"]
    assert all(starts[f"single{i}"][0] >= 110.0 for i in range(20))


def test_cpu_trials_use_gpu_slots_only_when_no_gpu_trial_waits():
    d = _dispatcher({"a": 1}, cpu_slots=1)
    d.submit(Job("gpu1", 1, 10))
    d.submit(Job("gpu2", 1, 10))
    d.submit(Job("cpu1", 0, 30))
    d.submit(Job("cpu2", 0, 30))
    starts = simulate(d, {"gpu1": 10, "gpu2": 10, "cpu1": 30, "cpu2": 30})
    assert starts["cpu1"] == (0.0, ["cpu0"])
    assert starts["gpu2"] == (10.0, ["a/g0"])
    assert starts["cpu2"] == (20.0, ["a/g0"])  # the GPU slot, once no GPU trial waited


def test_max_running_caps_concurrent_trials_and_gangs_count_once():
    d = _dispatcher({"a": 4}, max_running=2)
    for key, gpus in (("p1", 2), ("s1", 1), ("s2", 1)):
        d.submit(Job(key, gpus, 10))
    started = d.assign(0)
    assert [j.key for j, _ in started] == ["p1", "s1"] and d.running == 2
    d.finish(started[1][1])
    assert [j.key for j, _ in d.assign(10)] == ["s2"]


def test_lost_slots_leave_jobs_that_no_node_can_hold():
    d = _dispatcher({"a": 2, "b": 1})
    d.submit(Job("pair", 2, 10))
    d.submit(Job("single", 1, 10))
    d.remove_slot("a/g1")
    assert d.node_gpu_slots() == {"a": 1, "b": 1}
    assert [j.key for j in d.take_larger_than(1)] == ["pair"]
    assert d.pending == 1
    assert [j.key for j in d.take_larger_than(-1)] == ["single"]  # no slot at all: nothing can run


def test_the_policy_stays_within_a_few_percent_of_the_lower_bound():
    """1,000 jobs of mixed needs on 16 nodes x 4 GPUs, estimates 20% off: makespan / lower bound."""
    import random

    rng = random.Random(7)
    d = _dispatcher({f"n{i:02d}": 4 for i in range(16)}, cpu_slots=32)
    durations, gpu_seconds = {}, 0.0
    for i in range(1000):
        gpus = rng.choices((0, 1, 2), weights=(25, 45, 30))[0]
        durations[i] = rng.uniform(20, 100)
        gpu_seconds += gpus * durations[i]
        d.submit(Job(i, gpus, durations[i] * rng.uniform(0.8, 1.2)))
    starts = simulate(d, durations)
    makespan = max(starts[i][0] + durations[i] for i in durations)
    lower_bound = max(gpu_seconds / 64, max(durations.values()))
    assert makespan / lower_bound < 1.05


def test_mixed_nodes_a_two_gpu_trial_is_not_starved_by_a_stream_of_one_gpu_trials():
    """1-, 2- and 4-GPU nodes; 1-GPU trials of staggered lengths keep freeing one slot at a time.
    A greedy rule would hand each freed slot to the next 1-GPU trial; the reservation drains a
    node that can hold the pair, so it starts once that node's running trials end."""
    d = _dispatcher({"one-a": 1, "one-b": 1, "two": 2, "four": 4})
    durations = {}
    for i in range(80):
        durations[f"s{i}"] = 10 + (i % 7)
        d.submit(Job(f"s{i}", 1, durations[f"s{i}"]))
    durations["pair"] = 5
    d.submit(Job("pair", 2, 5))  # the shortest: longest-first alone would leave it to the very end
    started = simulate(d, durations)
    at, keys = started["pair"]
    assert len({k.split("/")[0] for k in keys}) == 1 and keys[0].split("/")[0] in ("two", "four")
    assert at <= 16 + 1e-9, at  # within the longest running trial's end, not after the 80 others
    assert max(t for t, _ in started.values()) > 80  # the stream really went on after it


def _sharing(nodes: dict[str, tuple[int, int]]) -> Dispatcher:
    """Sharing slots: {node: (slots, GPUs its lease holds)}."""
    d = Dispatcher()
    for node, (slots, gpus) in nodes.items():
        for i in range(slots):
            d.add_slot(f"{node}/s{i}", node, True, gpus)
    return d


def test_sharing_a_trial_goes_only_to_a_node_with_the_gpus_it_leases():
    d = _sharing({"one": (3, 1), "two": (3, 2)})
    for i in range(4):
        d.submit(Job(f"pair{i}", 1, 100 - i, lease=2))
    placed = {job.key: keys[0].split("/")[0] for job, keys in d.assign(0)}
    assert placed == {"pair0": "two", "pair1": "two", "pair2": "two"}  # never the 1-GPU node; pair3 waits
    assert d.pending == 1
    d.submit(Job("single", 1, 1000, lease=1))
    ((job, keys),) = d.assign(1)
    assert (job.key, keys[0].split("/")[0]) == ("single", "one")
    d.finish(["two/s0"])
    d.submit(Job("single2", 1, 1000, lease=1))
    placed = {job.key: keys[0].split("/")[0] for job, keys in d.assign(2)}
    # The 2-GPU node's free slot goes to the trial only it can run, though the other is longer.
    assert placed == {"pair3": "two", "single2": "one"}
    assert d.take_larger_than(1, 2) == [] and d.pending == 0
    d.submit(Job("pair9", 1, 5, lease=2))
    assert [j.key for j in d.take_larger_than(1, 1)] == ["pair9"]  # the 2-GPU node is gone: no one can


def test_sharing_a_trial_goes_to_the_node_whose_gpus_are_least_leased_per_gpu():
    d = _sharing({"one": (4, 1), "four": (4, 4)})
    for i in range(6):
        d.submit(Job(f"t{i}", 1, 50, lease=1))
    placed = [keys[0].split("/")[0] for _job, keys in d.assign(0)]
    # Per GPU: the 4-GPU node takes four before the 1-GPU node takes a second.
    assert placed.count("four") == 4 and placed.count("one") == 2
    assert placed[:2] == ["one", "four"]  # the smallest node first at equal load
