"""Witness start-up through PYTHONPATH (stdlib only): start the hook, then the environment's own
sitecustomize, so that an interpreter behaves as it would without this directory.

The probe phase puts this directory first on PYTHONPATH for a command stage with
REB_RAY_WITNESS={"nonce", "out", "repo"} (JSON). The `.pth` line in the interpreter's
site-packages starts the same hook; whichever runs first wins (see _reb_ray_witness.py). The
chained sitecustomize is found with this directory left out of the search, and its errors
surface as they would have without the hook.
"""

import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))


def _start():
    try:
        import json
        config = json.loads(os.environ.get("REB_RAY_WITNESS") or "null")
        if not isinstance(config, dict):
            return
        sys.path.insert(0, _here)
        try:
            import _reb_ray_witness
        finally:
            sys.path.remove(_here)
        _reb_ray_witness.start(config["nonce"], config["out"], config["repo"], "sitecustomize")
    except Exception:
        pass


def _chain():
    """Import the sitecustomize this one shadows, if any, under the same name."""
    import importlib.machinery
    import importlib.util
    path = [p for p in sys.path if os.path.abspath(p or ".") != _here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


_start()
_chain()
