"""Run a repository script (e.g. example.py) with CUDA as torch's default device.

    python run_on_device.py --entrypoint example.py --device cuda [--local-rank N]

Stands for the paper harness's benchmark_scripts/entrypoint_wrapper.py. example.py builds its
model and random inputs with plain torch calls and no device argument; this wrapper pins a GPU
(--local-rank, else LOCAL_RANK from torchrun, else 0), makes it torch's default device, and runs
the script as __main__ (one independent forward pass per rank, no DDP). --device cpu runs it
with no GPU visible. Writes nothing; the script prints its output shape.
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entrypoint", required=True, type=Path)
    parser.add_argument("--device", required=True, choices=("cpu", "cuda"))
    parser.add_argument("--local-rank", type=int, default=None)
    args = parser.parse_args()

    script = args.entrypoint.resolve()
    if not script.is_file():
        sys.exit(f"entrypoint {script} not found")
    sys.path.insert(0, str(script.parent))  # the script imports the repository's package

    if args.device == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    else:
        import torch

        if not torch.cuda.is_available():
            sys.exit("--device cuda but CUDA is not available")
        rank = args.local_rank if args.local_rank is not None else int(os.environ.get("LOCAL_RANK", 0))
        torch.cuda.set_device(rank)
        torch.set_default_device(f"cuda:{rank}")
        print(f"running {script.name} on cuda:{rank}", flush=True)

    runpy.run_path(str(script), run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
