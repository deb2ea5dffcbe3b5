"""Cut torchft's train_ddp.py down to one step of batch 1 (imported by Python at start-up).

    PYTHONPATH=$REB_RAY_HELPERS/site python -m torch.distributed.run ... train_ddp.py

Stands for the paper harness's benchmark_scripts/sitecustomize.py: train_ddp.py has no flags
(batch 64, 2 loader workers, 10000 steps, a 1 GB embedding, and it sets CUDA_VISIBLE_DEVICES
itself), so the harness ran it unchanged with these patches, each applied when the module it
touches is first imported (nothing is imported here up front):

- REB_TORCHFT_MAX_STEPS=N: torchft Manager.current_step() reports 10**9 once N steps are done,
  so train_ddp.py's own `current_step() >= 10000` exit ends the run;
- REB_TORCHFT_BATCH_SIZE / REB_TORCHFT_NUM_WORKERS: StatefulDataLoader's batch_size/num_workers;
- REB_TORCHFT_EMBEDDING_CAP=N: nn.Embedding tables hold at most N rows (the paper: 1000);
- REB_TORCHFT_FORCE_CPU=1: CUDA_VISIBLE_DEVICES / XPU_VISIBLE_DEVICES stay "" whatever the
  script assigns (the CPU stage).

Writes nothing. Any other sitecustomize on sys.path still runs after this one.
"""

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys


def _int(name, minimum=1):
    try:
        value = int(os.environ.get(name, ""))
    except ValueError:
        return None
    return value if value >= minimum else None


def _patch_manager(module):
    max_steps = _int("REB_TORCHFT_MAX_STEPS")
    if max_steps is None:
        return
    current_step = module.Manager.current_step

    def capped(self):
        step = current_step(self)
        return 10**9 if step >= max_steps else step

    module.Manager.current_step = capped


def _patch_loader(module):
    overrides = {k: v for k, v in (("batch_size", _int("REB_TORCHFT_BATCH_SIZE")),
                                   ("num_workers", _int("REB_TORCHFT_NUM_WORKERS", 0))) if v is not None}
    if not overrides:
        return
    cls = module.StatefulDataLoader
    init = cls.__init__

    def small(self, *args, **kwargs):
        kwargs.update(overrides)
        init(self, *args, **kwargs)

    cls.__init__ = small


def _patch_embedding(module):
    cap = _int("REB_TORCHFT_EMBEDDING_CAP")
    if cap is None:
        return
    init = module.Embedding.__init__

    def capped(self, num_embeddings, embedding_dim, *args, **kwargs):
        init(self, min(int(num_embeddings), cap), embedding_dim, *args, **kwargs)

    module.Embedding.__init__ = capped


PATCHES = {
    "torchft.manager": _patch_manager,
    "torchdata.stateful_dataloader": _patch_loader,
    "torch.nn.modules.sparse": _patch_embedding,
}


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs PATCHES[name](module) right after module `name` has been executed."""

    def find_spec(self, name, path=None, target=None):
        patch = PATCHES.get(name)
        if patch is None:
            return None
        spec = None
        for finder in sys.meta_path:  # the finders after this one (also editable-install finders)
            if finder is not self and hasattr(finder, "find_spec"):
                spec = finder.find_spec(name, path, target)
                if spec is not None:
                    break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_patch(module):
            exec_module(module)
            patch(module)

        spec.loader.exec_module = exec_and_patch
        return spec


class _CpuOnlyEnviron(type(os.environ)):
    def __setitem__(self, key, value):
        if key in ("CUDA_VISIBLE_DEVICES", "XPU_VISIBLE_DEVICES"):
            value = ""
        super().__setitem__(key, value)


def _chain_next_sitecustomize():
    here = os.path.dirname(os.path.abspath(__file__))
    others = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", others)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


if os.environ.get("REB_TORCHFT_FORCE_CPU") == "1":
    os.environ.__class__ = _CpuOnlyEnviron
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    os.environ["XPU_VISIBLE_DEVICES"] = ""
sys.meta_path.insert(0, _AfterImport())
_chain_next_sitecustomize()
