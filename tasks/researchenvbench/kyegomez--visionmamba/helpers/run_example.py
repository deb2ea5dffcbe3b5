"""Run the repository's example.py on one device, with the two fixes the paper's harness applied.

    python run_example.py --device cpu|cuda [--script example.py]

Run from the repository root. Nothing in the repository is changed; the fixes live in this
process only:

1. example.py builds `Vim(dim=256, heads=8, ...)`. Vim hands every keyword it does not know on to
   VisionEncoderMambaBlock, whose __init__ at the pinned commit takes dim, dt_rank, dim_inner and
   d_state only, so the unmodified example stops with a TypeError in any environment. The
   block's __init__ is wrapped to drop the keywords it does not declare (`heads`), named once on
   stderr.
2. VisionEncoderMambaBlock.process_direction prints a whole activation tensor on every call (two
   per block, 24 per forward pass at depth 12); its standard output is discarded while it runs.

If vision_mamba.model does not import (a dependency missing from the environment), nothing is
wrapped and example.py runs as is, so the failure is the environment's own error.

Device: torch's default device becomes --device before example.py runs as __main__. With cuda
the device is the one of LOCAL_RANK (set per rank by torchrun; 0 otherwise), and the run fails at
once when torch sees no CUDA device. Python 3.8 syntax (it runs under the agent's interpreter).
"""

import argparse
import contextlib
import functools
import inspect
import io
import os
import runpy
import sys


def drop_unknown_keywords(cls):
    """Wrap cls.__init__ so that keywords its signature does not name are dropped (named on stderr
    the first time); an __init__ that takes **kwargs is left alone."""
    original = cls.__init__
    params = inspect.signature(original).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    known = set(params)
    reported = []

    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        unknown = sorted(k for k in kwargs if k not in known)
        if unknown and not reported:
            reported.append(unknown)
            print("[run_example] %s.__init__ does not take %s: dropped" % (cls.__name__, ", ".join(unknown)),
                  file=sys.stderr, flush=True)
        for name in unknown:
            del kwargs[name]
        original(self, *args, **kwargs)

    cls.__init__ = __init__


def discard_stdout(cls, name):
    """Wrap method `name` of cls so that what it prints is thrown away."""
    original = getattr(cls, name)

    @functools.wraps(original)
    def quiet(*args, **kwargs):
        with contextlib.redirect_stdout(io.StringIO()):
            return original(*args, **kwargs)

    setattr(cls, name, quiet)


def set_device(device):
    import torch

    if device == "cuda":
        if not torch.cuda.is_available():
            sys.exit("[run_example] --device cuda, but torch sees no CUDA device")
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    if hasattr(torch, "set_default_device"):  # torch >= 2.0
        torch.set_default_device(device)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), required=True)
    parser.add_argument("--script", default="example.py", help="the repository's script (default example.py)")
    args = parser.parse_args()
    sys.path.insert(0, os.getcwd())  # the repository's packages, as `python example.py` would see them
    set_device(args.device)
    try:
        import vision_mamba.model as model
    except Exception as exc:  # the environment's own failure shows when example.py imports it
        print("[run_example] vision_mamba.model does not import (%s): running %s unchanged"
              % (type(exc).__name__, args.script), file=sys.stderr, flush=True)
    else:
        block = model.VisionEncoderMambaBlock
        drop_unknown_keywords(block)
        if hasattr(block, "process_direction"):
            discard_stdout(block, "process_direction")
    sys.argv = [args.script]
    runpy.run_path(args.script, run_name="__main__")


if __name__ == "__main__":
    main()
