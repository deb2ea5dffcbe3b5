"""A one-step LoRA fine-tuning config for scripts/train_voxcpm_finetune.py, with a one-row manifest.

Stands for the config the paper harness wrote to build_output/single_gpu/config.yaml (and the
one-line manifest of its prepare step): same keys as the repo's conf/voxcpm_v1/
voxcpm_finetune_lora.yaml, cut to one iteration of batch 1.

    python make_voxcpm_config.py --pretrained DIR --out OUT [--repo .]

Writes OUT/train.jsonl: the first row of the repo's examples/train_data_example.jsonl (the repo's
examples/example.wav with its transcript), its audio path made absolute; and OUT/config.yaml:
pretrained_path DIR (the VoxCPM-0.5B snapshot), that manifest, no validation set, batch 1,
num_iters/max_steps 1, no warmup, no token filter, LoRA r 4 on the LM and DiT, checkpoints and
tensorboard logs under OUT. Stdlib only (the YAML values are written as JSON scalars).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

EXAMPLE_MANIFEST = "examples/train_data_example.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pretrained", required=True, type=Path, help="VoxCPM model directory")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--repo", default=".", type=Path, help="repository root (default: cwd)")
    args = parser.parse_args()

    repo, out = args.repo.resolve(), args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    first = json.loads((repo / EXAMPLE_MANIFEST).read_text(encoding="utf-8").splitlines()[0])
    audio = Path(first["audio"])
    first["audio"] = str(audio if audio.is_absolute() else repo / audio)
    if not Path(first["audio"]).is_file():
        raise SystemExit(f"{EXAMPLE_MANIFEST}: audio {first['audio']} not found")
    manifest = out / "train.jsonl"
    manifest.write_text(json.dumps(first, ensure_ascii=False) + "\n", encoding="utf-8")

    q = json.dumps
    config = f"""\
pretrained_path: {q(str(args.pretrained))}
train_manifest: {q(str(manifest))}
val_manifest: ""
sample_rate: 16000
batch_size: 1
grad_accum_steps: 1
num_workers: 0
num_iters: 1
log_interval: 1
valid_interval: 1000000
save_interval: 1000000
learning_rate: 0.0001
weight_decay: 0.01
warmup_steps: 0
max_steps: 1
max_batch_tokens: 0
save_path: {q(str(out / "checkpoints"))}
tensorboard: {q(str(out / "tensorboard"))}
lambdas:
  loss/diff: 1.0
  loss/stop: 1.0
lora:
  enable_lm: true
  enable_dit: true
  enable_proj: false
  r: 4
  alpha: 4
  dropout: 0.0
"""
    (out / "config.yaml").write_text(config, encoding="utf-8")
    print(f"wrote {out}/config.yaml and {manifest.name} ({first['audio']})")


if __name__ == "__main__":
    main()
