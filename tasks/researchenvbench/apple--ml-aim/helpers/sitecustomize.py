"""Compatibility shims for aim-v1/main_attnprobe.py at the pinned commit (writes nothing).

Stands for the paper harness's benchmark_scripts/sitecustomize.py (with its head checkpoint
sanitising step of prepare_assets.sh). Python imports this module at start-up when the stage
puts $REB_RAY_HELPERS on PYTHONPATH; it only installs an import hook, so nothing changes until
the repository's own `aim.v1` modules are imported:

* aim.v1.mixins: `AIMMixin.forward` returns the logits alone while main_attnprobe.evaluate()
  unpacks `output, _ = model(...)`; a non-tuple result is returned as `(logits, None)`.
* aim.v1.utils: the published attention-probe head checkpoints hold `head.linear.bias`, which
  the model (AttentionPoolingClassifier(linear_bias=False)) lacks, so the strict load fails;
  `merge_state_dicts` drops that key.
"""

import importlib.abc
import importlib.util
import sys


def _patch_mixins(module):
    forward = module.AIMMixin.forward

    def forward_pair(self, *args, **kwargs):
        out = forward(self, *args, **kwargs)
        return out if isinstance(out, tuple) and len(out) == 2 else (out, None)

    module.AIMMixin.forward = forward_pair


def _patch_utils(module):
    merge = module.merge_state_dicts

    def merge_without_head_bias(backbone_state_dict, head_state_dict, **kwargs):
        head_state_dict = {k: v for k, v in head_state_dict.items() if k != "head.linear.bias"}
        return merge(backbone_state_dict, head_state_dict, **kwargs)

    module.merge_state_dicts = merge_without_head_bias


_PATCHES = {"aim.v1.mixins": _patch_mixins, "aim.v1.utils": _patch_utils}


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name not in _PATCHES:
            return None
        sys.meta_path.remove(self)  # let the normal finders locate the module
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_patch(module):
            exec_module(module)
            _PATCHES[name](module)

        spec.loader.exec_module = exec_and_patch
        return spec


sys.meta_path.insert(0, _Finder())
