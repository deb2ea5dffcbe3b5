"""Write a tiny synthetic nuPlan-style training set for train_predictor.py.

Stands for the paper harness's prepare step, which generated a one-sample dataset in the
`.npz` layout that diffusion_planner/utils/dataset.py (DiffusionPlannerData) reads, since the
real nuPlan cache is hundreds of GB.

    python make_sample.py --out DIR [--samples 1] [--agent_num 2] [--time_len 2] ...

Writes DIR/sample_<i>.npz (the keys DiffusionPlannerData reads, shaped by the sizes given,
which must match the train_predictor.py flags of the same names) and DIR/train_list.json
(the file names, for --train_set_list). Values are seeded random numbers, so every agent,
lane and object is a valid (non-zero, unmasked) entry. Files are written atomically.
Needs numpy only.
"""

import argparse
import json
import os
import tempfile

import numpy as np


def sample(rng, a):
    def f(*shape, scale=1.0):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    return {
        "ego_current_state": f(10),
        "ego_agent_future": f(a.future_len, 3, scale=5.0),
        "neighbor_agents_past": f(a.agent_num, a.time_len, 11, scale=5.0),
        "neighbor_agents_future": f(a.agent_num, a.future_len, 3, scale=5.0),
        "lanes": f(a.lane_num, a.lane_len, 12, scale=5.0),
        "lanes_speed_limit": np.full((a.lane_num, 1), 10.0, dtype=np.float32),
        "lanes_has_speed_limit": np.ones((a.lane_num, 1), dtype=bool),
        "route_lanes": f(a.route_num, a.route_len, 12, scale=5.0),
        "route_lanes_speed_limit": np.full((a.route_num, 1), 10.0, dtype=np.float32),
        "route_lanes_has_speed_limit": np.ones((a.route_num, 1), dtype=bool),
        "static_objects": f(a.static_objects_num, 10, scale=5.0),
    }


def write_atomic(path, write):
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
    with os.fdopen(fd, "wb") as fh:
        write(fh)
    os.replace(tmp, path)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--samples", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    for name, default in (("agent_num", 2), ("time_len", 2), ("future_len", 8), ("lane_num", 2),
                          ("lane_len", 4), ("route_num", 1), ("route_len", 4), ("static_objects_num", 1)):
        p.add_argument(f"--{name}", type=int, default=default)
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    rng = np.random.default_rng(a.seed)
    names = []
    for i in range(a.samples):
        name = f"sample_{i}.npz"
        arrays = sample(rng, a)
        write_atomic(os.path.join(a.out, name), lambda fh: np.savez(fh, **arrays))
        names.append(name)
    write_atomic(os.path.join(a.out, "train_list.json"), lambda fh: fh.write(json.dumps(names).encode()))
    print(f"wrote {len(names)} sample(s) and train_list.json to {a.out}")


if __name__ == "__main__":
    main()
