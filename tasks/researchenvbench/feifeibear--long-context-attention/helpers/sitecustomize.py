"""Accept `--attn_type torch` in benchmark/benchmark_longctx.py (loaded via PYTHONPATH=$REB_RAY_HELPERS).

Stands for the paper harness's benchmark_scripts/sitecustomize.py: the benchmark's argparse offers
`--attn_type torch`, but at the pinned commit yunchang.kernels.AttnType has no member named "torch"
(only torch_math / torch_flash / torch_efficient / torch_cudnn), so AttnType.from_string("torch")
raises. This maps "torch" to AttnType.TORCH_EFFICIENT (PyTorch's memory-efficient SDPA), so the
benchmark runs without flash-attn. Writes nothing. Any other name is resolved as before.
"""


def _accept_torch_attn_type() -> None:
    try:
        from yunchang.kernels import AttnType
    except Exception:  # yunchang not importable: nothing to patch, let the entrypoint report it
        return
    resolve = AttnType.from_string.__func__

    def from_string(cls, name):
        return cls.TORCH_EFFICIENT if name == "torch" else resolve(cls, name)

    AttnType.from_string = classmethod(from_string)


_accept_torch_attn_type()
