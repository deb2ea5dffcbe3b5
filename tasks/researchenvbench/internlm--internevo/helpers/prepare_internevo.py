"""Prepare a one-step InternEvo training run: tokenized Alpaca sample + a tiny-model config.

Stands for the paper harness's prepare_assets.sh (Alpaca sample tokenized with the repository's own
tools/alpaca_tokenizer.py) and the minimal_config.py its run_*_gpu_entrypoint.sh generated.
Run from the repository root:

    python prepare_internevo.py --alpaca alpaca_data.json --tokenizer tokenizer.model --out DIR

writes
    DIR/alpaca_sample.json              the first --max-examples records of alpaca_data.json
    DIR/tokenized/{train,valid}/en/     dataset.bin + dataset.bin.meta (tools/alpaca_tokenizer.py)
    DIR/minimal_config.py               2-layer InternLM2 model (hidden 256, seq 32), 1 step,
                                        micro_bsz 1, no checkpoints, flash-attn off
and prints the config's path. Everything is built in a temporary directory that is renamed to DIR,
so several ranks may run this at once; an existing DIR is reused.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

CONFIG = '''\
JOB_NAME = "reb_ray_internevo_smoke"
DO_ALERT = False

SEQ_LEN = 32
VOCAB_SIZE = 92544  # internlm2 tokenizer.model

model_type = "INTERNLM2"
model = dict(
    num_chunks=1,
    checkpoint=False,
    dtype="torch.float16",
    embed_split_hidden=True,
    num_layers=2,
    hidden_size=256,
    vocab_size=VOCAB_SIZE,
    embed_grad_scale=1,
    parallel_output=True,
    num_attention_heads=8,
    num_kv_attention_heads=8,
    mlp_ratio=4,
    multiple_of=128,
    norm_type="rmsnorm",
    qk_interleaved=False,
    apply_post_layer_norm=False,
    no_bias=True,
    layer_norm_epsilon=1e-5,
    rope_base=10000,
    norm_head=True,
    use_flash_attn=False,
)

parallel = dict(
    zero1=dict(size=1),
    tensor=dict(size=1, mode="mtp"),
    pipeline=dict(size=1, interleaved_overlap=False, mode="1F1B"),
    weight=dict(size=1, overlap=False),
    expert=dict(size=-1, no_tp=False),
    expert_weight=dict(size=1, overlap=False),
)

ckpt = dict(
    enable_save_ckpt=False,
    auto_resume=False,
    load_ckpt_folder=None,
    load_ckpt_info=None,
    checkpoint_every=10**9,
)

data = dict(
    type="tokenized",
    seq_len=SEQ_LEN,
    micro_num=1,
    micro_bsz=1,
    valid_micro_num=1,
    valid_every=0,
    pack_sample_into_one=False,
    total_steps=1,
    skip_batches="",
    rampup_batch_size="",
    min_length=0,
    train_folder={train!r},
    valid_folder={valid!r},
    use_shm=False,
    empty_cache_and_diag_interval=200,
    diag_outlier_ratio=1.1,
    tokenizer_path={tokenizer!r},
)

loss = dict(label_smoothing=0)

hybrid_zero_optimizer = dict(
    overlap_sync_grad=False,
    overlap_sync_param=False,
    reduce_bucket_size=64 * 1024 * 1024,
    clip_grad_norm=1.0,
)

adam = dict(lr=1e-4, adam_beta1=0.9, adam_beta2=0.95, adam_beta2_c=0, adam_eps=1e-8, weight_decay=0.01)

lr_scheduler = dict(total_steps=data["total_steps"], init_steps=0, warmup_ratio=0.0, eta_min=1e-5, last_epoch=-1)

beta2_scheduler = dict(init_beta2=adam["adam_beta2"], c=adam["adam_beta2_c"], cur_iter=-1)

enable_tb = True
tensorboard_folder = {tensorboard!r}
'''


def build(args: argparse.Namespace, work: str, final: str) -> None:
    with open(args.alpaca, encoding="utf-8") as f:
        records = json.load(f)
    if not isinstance(records, list) or not records:
        raise SystemExit(f"{args.alpaca}: expected a non-empty JSON array")
    sample = os.path.join(work, "alpaca_sample.json")
    with open(sample, "w", encoding="utf-8") as f:
        json.dump(records[: args.max_examples], f, ensure_ascii=False)
    # the repository's own tokenizer script (bin/meta layout that train.py's tokenized loader reads)
    subprocess.run([sys.executable, "tools/alpaca_tokenizer.py", sample, os.path.join(work, "tokenized"),
                    args.tokenizer, "--split_ratio", "0.1"], check=True)
    text = CONFIG.format(train=os.path.join(final, "tokenized", "train"),
                         valid=os.path.join(final, "tokenized", "valid"),
                         tokenizer=os.path.abspath(args.tokenizer),
                         tensorboard=os.path.join(os.path.dirname(final), "internevo-tensorboard"))
    with open(os.path.join(work, "minimal_config.py"), "w", encoding="utf-8") as f:
        f.write(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--alpaca", required=True, help="Stanford Alpaca alpaca_data.json")
    parser.add_argument("--tokenizer", required=True, help="internlm2 SentencePiece tokenizer.model")
    parser.add_argument("--out", required=True, help="directory to create")
    parser.add_argument("--max-examples", type=int, default=64)
    args = parser.parse_args()

    final = os.path.abspath(args.out)
    config = os.path.join(final, "minimal_config.py")
    if not os.path.exists(config):
        os.makedirs(os.path.dirname(final), exist_ok=True)
        work = tempfile.mkdtemp(prefix=".internevo-", dir=os.path.dirname(final))
        try:
            build(args, work, final)
            os.rename(work, final)
        except OSError:
            if not os.path.exists(config):  # not another rank's finished copy: a real failure
                raise
        finally:
            shutil.rmtree(work, ignore_errors=True)
    print(config)


if __name__ == "__main__":
    main()
