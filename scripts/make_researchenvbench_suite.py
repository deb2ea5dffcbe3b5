#!/usr/bin/env python3
"""Write tasks/researchenvbench/<task-id>/task.toml for the 44 tasks of the ResearchEnvBench paper.

    python scripts/make_researchenvbench_suite.py [--data DIR] [--out DIR]

Input: the paper's run matrix `tasks.csv` (one row per repository) and the canonical C0 totals
`c0_baseline_totals.json` (cross-checked: any mismatch aborts). Stdlib only; the written files
are parsed back with tomllib and compared with what was meant to be written.

The CSV's stage entries are notes for humans ("same main.py --devices 0 (CUDA_VISIBLE_DEVICES=0)"),
not command lines. They are transcribed by a few generic rules, in this order:

1. `skipped <reason>` (or an unsupported stage) -> applicable = false, skip_reason = <reason>.
2. Parenthesised notes and "on GPU0" / "with CUDA_VISIBLE_DEVICES=0,1" are dropped: the
   harness sets GPU visibility itself. A leading `cd DIR;` becomes the stage's workdir.
3. `same <script> <flags>` is the base command (cpu entry; for multi_gpu the single-GPU command)
   with <flags> merged in: a flag or `key=value` already there is replaced (also a dotted
   `a.b.max_steps=1` by `max_steps=1`), others are appended. A GPU stage built from a CPU command
   gets its `accelerator=cpu` / `--accelerator cpu` / `--device cpu` switched to the GPU value.
4. `<placeholders>` are replaced per task (EXTRA below): by `$REB_RAY_ASSETS/<task-id>/<name>`
   of a declared asset, by a path in the repository, or by a literal value; `--outdir ...`
   becomes a scratch directory; an elided `script ... flags` takes the base command's arguments.
5. multi_gpu: the launcher (torch.distributed.run/torchrun, accelerate, deepspeed) and its own
   options are cut off, because the harness adds it with the rank count and a free port; any
   other entry (Lightning, detectron2, tensor parallel, device_map) runs as-is with launcher
   "python".

Entries that are prose rather than a command (HTTP-server smoke tests, `python -c: ...`, runpy)
are written by hand in EXTRA[task].cmd, next to the CSV text they transcribe (kept as a comment
above each stage in the generated file). What the CSV notes leave out of the paper's release scripts
(run_{cpu,single_gpu,multi_gpu}_entrypoint.sh: exported PYTHONPATH, success checks, flags) is added
in FIDELITY, and every remaining difference from those scripts is named in DEVIATIONS, written as
the stage's `deviation`; scripts/compare_release.py lists any difference no deviation names. Where the paper's harness generated a config or a tiny
dataset that the CSV does not spell out, the spec says `# TODO(helper)`.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import shlex
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = Path("/work/shared/data/researchenvbench")
SUITE = "researchenvbench"
STAGES = ("cpu", "single_gpu", "multi_gpu")
TIMEOUT_S = {"cpu": 600, "single_gpu": 600, "multi_gpu": 1200}  # the release: runner.py --timeout-sec
RANKS = 2
OUT = "/tmp/reb-ray-out"  # scratch directory for outputs the CSV writes as `--outdir ...`
ASSETS_VAR = "$REB_RAY_ASSETS"
HELPERS_VAR = "$REB_RAY_HELPERS"  # the task's helpers/ directory, in the sandbox during probes only
# the release's `export PYTHONPATH="$repo_root[/src]${PYTHONPATH:+:$PYTHONPATH}"`: the repository (or its src/)
# importable without an install, as the release ran it
PYPATH_ROOT = "PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}"
PYPATH_SRC = "PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
ASSET_CACHE = ("asset cache instead of the release's prepare step: {what}")
OUTPUT_FLAGS = ("--outdir", "--output_dir", "--output-dir", "--saved_path")
PROSE = {"same", "then", "with", "on", "per", "batch", "one", "fast", "mode", "small", "nproc",
         "starter", "server", "request", "skipped", "..."}

# ----------------------------------------------------------------------------------- per task


@dataclass
class Extra:
    """What a task's CSV row cannot say by itself.

    subs: placeholder text (as in the CSV, with its <>) -> replacement; "{A}" stands for
        `$REB_RAY_ASSETS/<task-id>`, "{O}" for the scratch directory and "{H}" for
        `$REB_RAY_HELPERS`, the task's `helpers/` directory (tiny configs, one-sample dataset
        generators, wrappers: part of the probe toolbox, never visible to the agent).
    assets: (name, kind, source or None[, path under the task's asset dir]), or `hf_cached(...)`
        for a snapshot the code loads by its Hugging Face id.
    asset_stages: asset name -> the stages whose command needs it (c1, c3, c4), written as the
        asset's `stages`; an asset not named here gets the spec's default, every command stage,
        so a missing asset leaves (with --skip-missing-assets) no stage measured that may need it.
    cmd: stage -> hand-written shell line (for prose entries); may use {A} and {O}.
    flags: stage -> extra flags merged like a `same` entry's (values the notes state).
    env / workdir: stage -> stage env table / workdir (every stage already gets the probe env:
        offline mode, HF_HOME in the read-only asset cache, a writable HF_DATASETS_CACHE).
    setup: shell line run before the command of every stage not started by a launcher.
    log: stage -> success log pattern.
    launcher: the multi-GPU launcher when the entry's words would mislead (e.g. "no torchrun").
    side_logs: stage -> files the command writes besides its output (a helper server's log),
        collected into the stage row after it runs.
    prefix: stage -> `VAR=value ...` assignments the command runs with (exported before a setup
        line; in front of the launcher for a launched multi-GPU command), e.g. the release's
        PYTHONPATH.
    deviation: stage -> how the stage deliberately differs from the release's script (command,
        environment, timeout, success rule), written beside the command in the spec and shown by
        `reb-ray tasks list`. It must name each element that differs (an option, a variable, a
        helper, `timeout`): scripts/compare_release.py counts a difference as documented only then.
    todo: lines written as `# TODO(helper): ...` at the top of the spec.
    """

    subs: dict[str, str] = field(default_factory=dict)
    assets: list[tuple] = field(default_factory=list)
    asset_stages: dict[str, list[str]] = field(default_factory=dict)
    cmd: dict[str, str] = field(default_factory=dict)
    flags: dict[str, str] = field(default_factory=dict)
    env: dict[str, dict[str, str]] = field(default_factory=dict)
    workdir: dict[str, str] = field(default_factory=dict)
    setup: str | None = None
    log: dict[str, str] = field(default_factory=dict)
    launcher: str | None = None
    side_logs: dict[str, list[str]] = field(default_factory=dict)
    prefix: dict[str, str] = field(default_factory=dict)
    deviation: dict[str, str] = field(default_factory=dict)
    todo: list[str] = field(default_factory=list)


def hf(repo: str) -> str:
    return f"hf://{repo}"


def hf_dataset(repo: str) -> str:
    return f"hf://datasets/{repo}"


def hf_cached(repo: str, kind: str = "model", include: list[str] | None = None) -> dict:
    """An asset in the Hugging Face hub cache layout (HF_HOME=$REB_RAY_ASSETS/huggingface), for
    code that calls from_pretrained("org/name") / load_dataset("org/name") by id; `include`:
    file globs to fetch when the code reads only part of the snapshot (e.g. a tokenizer)."""
    source = hf_dataset(repo) if kind == "dataset" else hf(repo)
    asset = {"name": repo, "kind": kind, "source": source, "layout": "hf_cache"}
    return {**asset, "include": include} if include else asset


def hf_file(repo: str, path: str) -> str:
    return f"https://huggingface.co/{repo}/resolve/main/{path}"


HF_CACHE_TODO = ("the code loads {what} by Hugging Face id; probes run offline with "
                 "HF_HOME=$REB_RAY_ASSETS/huggingface, so the snapshot must also be in that cache")
BENCH_SCRIPT_TODO = ("{name} is a helper the paper's harness wrote (benchmark_scripts/), not part "
                     "of the repository: place it in the asset cache by hand")


def http_smoke(server: str, port: int, request: str, wait_s: int = 600) -> str:
    """Start `server` in the background, wait (bounded) for 127.0.0.1:`port`, run the stdlib
    Python `request` once, stop the server, and exit with the request's status."""
    return f"""\
{server} > /tmp/reb-ray-server.log 2>&1 &
server=$!
SERVER_PID=$server python - <<'PY'
import os, socket, sys, time, urllib.request
def alive(pid):
    try:
        return open(f"/proc/{{pid}}/stat").read().rsplit(") ", 1)[1][0] != "Z"
    except OSError:
        return False
deadline = time.monotonic() + {wait_s}
while True:
    try:
        socket.create_connection(("127.0.0.1", {port}), timeout=2).close()
        break
    except OSError:
        if not alive(os.environ["SERVER_PID"]):
            sys.exit("server exited before opening port {port}")
        if time.monotonic() > deadline:
            sys.exit("server did not open port {port} within {wait_s} s")
        time.sleep(1)
{request.strip()}
PY
rc=$?
kill $server 2>/dev/null
tail -n 40 /tmp/reb-ray-server.log
exit $rc
"""


SENSEVOICE_POST = """\
import uuid
wav = os.path.join(os.environ["REB_RAY_ASSETS"], "funaudiollm--sensevoice", "asr_example_en.wav")
b = uuid.uuid4().hex
body = (f'--{b}\\r\\nContent-Disposition: form-data; name="files"; filename="asr_example_en.wav"\\r\\n'
        'Content-Type: audio/wav\\r\\n\\r\\n').encode() + open(wav, "rb").read() + (
        f'\\r\\n--{b}\\r\\nContent-Disposition: form-data; name="lang"\\r\\n\\r\\nen\\r\\n--{b}--\\r\\n').encode()
req = urllib.request.Request("http://127.0.0.1:50000/api/v1/asr", data=body,
                             headers={"Content-Type": f"multipart/form-data; boundary={b}"})
with urllib.request.urlopen(req, timeout=600) as r:
    text = r.read().decode("utf-8", "replace")
print(r.status, text[:500])
import json
reply = json.loads(text)
sys.exit(0 if isinstance(reply, dict) and "result" in reply else "unexpected response schema (missing 'result')")
"""

KOKORO_POST = """\
import json
req = urllib.request.Request(
    "http://127.0.0.1:8880/v1/audio/speech",
    data=json.dumps({"model": "kokoro", "input": "Hello world.", "voice": "af_heart",
                     "response_format": "wav"}).encode(),
    headers={"Content-Type": "application/json"})
with urllib.request.urlopen(req, timeout=600) as r:
    audio = r.read()
print(r.status, len(audio), "bytes")
sys.exit(0 if len(audio) >= 256 else "audio response shorter than 256 bytes")
"""

# the release's environment for the server (its start-cpu.sh / start-gpu.sh minus USE_ONNX), with the model dir
# in the asset cache; the release answers within its 600 s budget and requires >= 256 bytes of audio
KOKORO_ENV = ("PYTHONPATH=.:api MODEL_DIR=$REB_RAY_ASSETS/remsky--kokoro-fastapi/models "
              "VOICES_DIR=src/voices/v1_0 TEMP_FILE_DIR=/tmp/reb-ray-out/kokoro/temp_files")
# api.py and train_ds load the model by its ModelScope id "iic/SenseVoiceSmall"; funasr uses a local
# directory of that name (relative to the working directory) as is, without asking the hub.
# (its own line: joined by && it would go into the background with the server, whose pid $! must be)
SENSEVOICE_LINK = "mkdir -p iic && ln -sfn {A}/SenseVoiceSmall iic/SenseVoiceSmall || exit 1\n"

# PYTHONPATH as the repo's examples/music_generation/path.sh sets it (repo root + Matcha-TTS submodule)
INSPIREMUSIC_PATH = "PYTHONPATH=$PWD:$PWD/third_party/Matcha-TTS${PYTHONPATH:+:$PYTHONPATH}"

F5_INFER = ("python -m f5_tts.infer.infer_cli --model F5TTS_v1_Base "
            "--ckpt_file {A}/F5-TTS/F5TTS_v1_Base/model_1250000.safetensors "
            "--ref_audio infer/examples/basic/basic_ref_en.wav "
            "--ref_text 'Some call me nature, others call me mother nature.' "
            "--gen_text 'Here we generate something just for test.' --nfe_step 1 --output_dir {O}/f5-tts")

# the release's LLM(...) arguments: eager mode (no CUDA-graph capture) and a 256-token context
NANOVLLM = ("python -c \"from nanovllm import LLM, SamplingParams; "
            "llm = LLM('$REB_RAY_ASSETS/geeeekexplorer--nano-vllm/Qwen3-0.6B', enforce_eager=True, "
            "tensor_parallel_size={tp}, max_model_len=256, max_num_batched_tokens=512, max_num_seqs=1); "
            "out = llm.generate(['Hello'], SamplingParams(temperature=0.6, max_tokens=1), use_tqdm=False); "
            "print(out[0]['text'])\"")

# helpers/run_example.py: example.py as the release ran it (the `heads` keyword dropped, the tensor dumps
# discarded, torch's default device set); per rank under torchrun on the device of LOCAL_RANK
VISIONMAMBA = "python {{H}}/run_example.py --device {device}"

TORCHFT_LIGHTHOUSE_LOG = "/tmp/reb-ray-lighthouse.log"  # a side log of every torchft stage
TORCHFT_LIGHTHOUSE_ADDR = "/tmp/reb-ray-lighthouse.addr"
# As the release starts it: torchft's LighthouseServer on a free port (bind [::]:0, min_replicas 1, join
# timeout 60 s), its address read from what it prints (waiting up to 100 x 0.1 s), exit 3 without one.
TORCHFT_LIGHTHOUSE = (
    "python -c \"import time; from torchft.coordination import LighthouseServer; "
    "lh = LighthouseServer(bind='[::]:0', min_replicas=1, join_timeout_ms=60000); "
    "print(lh.address(), flush=True); time.sleep(10 ** 6)\" "
    f"> {TORCHFT_LIGHTHOUSE_ADDR} 2> {TORCHFT_LIGHTHOUSE_LOG} & lh=$!; "
    f"for i in $(seq 100); do [ -s {TORCHFT_LIGHTHOUSE_ADDR} ] && break; sleep 0.1; done; "
    f"export TORCHFT_LIGHTHOUSE=\"$(head -n 1 {TORCHFT_LIGHTHOUSE_ADDR} | tr -d '\\r')\"; "
    "if [ -z \"$TORCHFT_LIGHTHOUSE\" ]; then echo 'failed to start lighthouse'; kill $lh; exit 3; fi; "
    "echo \"TORCHFT_LIGHTHOUSE=$TORCHFT_LIGHTHOUSE\"; export TORCH_HOME={A}/torch; "
    # helpers/site/sitecustomize.py (the paper's sitecustomize): 1 step, batch 1, no loader workers,
    # the 1 GB embedding capped at 1000 rows, as the paper ran train_ddp.py; the repository root after it
    "export PYTHONPATH={H}/site:$PWD${PYTHONPATH:+:$PYTHONPATH} REB_TORCHFT_MAX_STEPS=1 REB_TORCHFT_BATCH_SIZE=1 "
    "REB_TORCHFT_NUM_WORKERS=0 REB_TORCHFT_EMBEDDING_CAP=1000; ")
TORCHFT_CIFAR = "mkdir -p cifar && tar -xzf {A}/cifar-10-python.tar.gz -C cifar"


def torchft_single(port: int, cpu: bool = False) -> str:
    # train_ddp.py sets CUDA_VISIBLE_DEVICES itself: on the CPU stage the sitecustomize keeps it ""
    force_cpu = "export REB_TORCHFT_FORCE_CPU=1; " if cpu else ""
    return (f"{TORCHFT_CIFAR} && {{ {TORCHFT_LIGHTHOUSE}export REPLICA_GROUP_ID=0 NUM_REPLICA_GROUPS=1; {force_cpu}"
            f"python -m torch.distributed.run --standalone --nproc_per_node 1 --master_port {port} train_ddp.py; "
            "rc=$?; kill $lh; exit $rc; }")


TORCHFT_MULTI = (
    f"{TORCHFT_CIFAR} && {{ {TORCHFT_LIGHTHOUSE}export NUM_REPLICA_GROUPS=2; "
    "REPLICA_GROUP_ID=0 CUDA_VISIBLE_DEVICES=0 python -m torch.distributed.run --nnodes=1 --nproc_per_node=1 "
    "--master_port=29600 train_ddp.py & g0=$!; "
    "REPLICA_GROUP_ID=1 CUDA_VISIBLE_DEVICES=1 python -m torch.distributed.run --nnodes=1 --nproc_per_node=1 "
    "--master_port=29601 train_ddp.py & g1=$!; "
    "wait $g0; r0=$?; wait $g1; r1=$?; kill $lh; [ $r0 -eq 0 ] && [ $r1 -eq 0 ]; }")

LONGCTX = ("benchmark/benchmark_longctx.py --ring_impl_type <t> --nheads 2 --group_num 1 --head_size 32 "
           "--seq_len 32 --ulysses_degree 1 --batch_size 1 --fwd_only --attn_type torch --no_causal")

# As the release: time-boxed (8 s), then SIGINT, and the starter must exit 0 on it (--preserve-status
# passes its own status on; its SIGINT handler stops the engine and exits 0), so a crash on shutdown fails.
LMCACHE = ("timeout -s INT --preserve-status 8s python -m lmcache.v1.standalone --config <cfg> --model-name <model> "
           "--worker-id {rank} --world-size {world} --kv-shape 2,2,8,2,8 "
           "--kvcache-shape-spec \"(2,2,8,2,8):float16:2\" --kv-dtype float16 --device {device}")

KVPRESS = ("frac=$(python {{H}}/one_sample_fraction.py simonjegou/loogle shortdep_qa) && "
           "python evaluation/evaluate.py --dataset loogle --data_dir shortdep_qa --model <tiny llama> "
           "--press_name knorm --compression_ratio 0.5 --fraction $frac --max_new_tokens 1 "
           "--max_context_length 128 --seed 42 --device {device} --output_dir {{O}}/{out} --log_level INFO")

INTERNEVO_PREP = "--alpaca {A}/alpaca_data.json --tokenizer {A}/tokenizer.model --out {O}/internevo"

CHITU_PROMPTS = "--src {A}/tinyshakespeare.txt --out {O}/chitu/tinyshakespeare_sharegpt.json"
CHITU_OVERRIDES = ("hydra.output_subdir=.hydra models.tokenizer_path=<path> infer.tp_size={tp} infer.pp_size=1 "
                   "infer.dp_size=1 infer.ep_size=1 infer.max_reqs=1 infer.max_seq_len=32 "
                   "infer.prefill_chunk_size=1 infer.use_cuda_graph=False infer.attn_type=ref benchmark.iters=1 "
                   "benchmark.num_reqs_list=[1] benchmark.input_len=8 benchmark.output_len=8 "
                   "benchmark.dataset=sharegpt benchmark.dataset_path={{O}}/chitu/tinyshakespeare_sharegpt.json "
                   "hydra.run.dir={{O}}/chitu/hydra")

# zhengyinan-air--diffusion-planner: the 1-sample set written by helpers/make_sample.py (its default
# sizes match DP_TINY) and the paper harness's small model / 1 epoch (warm_up_epoch <= train_epochs).
DP_DATA = "--train_set {data} --train_set_list {data}/train_list.json"
DP_TINY = ("--train_epochs 1 --warm_up_epoch 1 --num_workers 0 --use_data_augment false --use_wandb false --notes scimlopsbench "
           "--save_dir {O}/diffusion-planner --agent_num 2 --predicted_neighbor_num 1 --time_len 2 --future_len 8 "
           "--lane_num 2 --lane_len 4 --route_num 1 --route_len 4 --static_objects_num 1 "
           "--encoder_depth 1 --decoder_depth 1 --num_heads 2 --hidden_dim 64")
DP_IMPORTS = "python -c \"import timm, tensorboard, wandb\""
RELF1_TASKS = ("driver-dnf", "driver-position", "driver-top3")

OPEN_SORA_CKPTS = ("--model.from_pretrained {A}/Open-Sora-v2/Open_Sora_v2.safetensors "
                   "--ae.from_pretrained {A}/Open-Sora-v2/hunyuan_vae.safetensors "
                   "--t5.from_pretrained {A}/google/t5-v1_1-xxl --clip.from_pretrained {A}/openai/clip-vit-large-patch14")

OLYMPUS_SAMPLE = "python {H}/make_olympus_sample.py --src {A}/Olympus.json --out {O}/olympus/olympus-sample.json"
OLYMPUS_ARGS = ("--model_name_or_path <Mipha-3B> --version v0 --data_path {O}/olympus/olympus-sample.json "
                "--image_folder {O}/olympus --tune_mm_mlp_adapter True --freeze_vision_tower True "
                "--freeze_backbone True --mm_use_im_start_end False --mm_use_im_patch_token False "
                "--image_aspect_ratio pad --group_by_modality_length False --overwrite_output_dir True "
                "--max_steps 1 --per_device_train_batch_size 1 --gradient_accumulation_steps 1 --evaluation_strategy no "
                "--save_strategy no --learning_rate 1e-6 --logging_steps 1 --tf32 False --model_max_length 128 "
                "--gradient_checkpointing False --dataloader_num_workers 0 --lazy_preprocess True --report_to none "
                "--output_dir {O}/olympus/out")

SANA_PREP = ("python {H}/patch_sana_config.py configs/sana_config/1024ms/Sana_600M_img1024.yaml "
             "<patched Sana_600M_img1024.yaml> && python {H}/ensure_null_embed.py --root {O}/sana/null_embed "
             "--text-encoder gemma-2-2b-it --max-length 300 --hidden-size 2304")
SANA_ARGS = ("--config_path=<patched Sana_600M_img1024.yaml> --work_dir={O}/sana/work --report_to=tensorboard "
             "--name=scimlops_{stage} \"--data.data_dir=[{A}/toy_data]\" --data.type=SanaWebDatasetMS --data.load_vae_feat=true "
             "--load_from={A}/Sana_600M_1024px/checkpoints/Sana_600M_1024px_MultiLing.pth "
             "--train.train_batch_size=1 --train.num_workers=0 --train.early_stop_hours=0 --train.visualize=false "
             "--train.local_save_vis=false --train.null_embed_root={O}/sana/null_embed "
             "--train.valid_prompt_embed_root={O}/sana/valid_prompt_embed")

RENDERFORMER_SCENE = ("python scene_processor/convert_scene.py examples/{scene}.json "
                      "--mesh_path {dir}/{scene}.obj --output_h5_path {dir}/{scene}.h5")

FINETRAINERS_CONFIG = ("python {H}/make_dataset_config.py --data-root {A}/crush-smol "
                       "--out {O}/finetrainers/dataset_config.json")
FINETRAINERS_FAIL = ("--fail-regex \"An error occurred during training:\" "
                     "--fail-regex \"Traceback \\(most recent call last\\):\"")
# the release's single-GPU rendezvous: one process with the rank variables and a free port on 127.0.0.1
FREE_PORT = "$(python -c \"import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])\")"
FINETRAINERS_ARGS = ("--model_name wan --pretrained_model_name_or_path {A}/Wan2.1-T2V-1.3B-Diffusers "
                     "--dataset_config {O}/finetrainers/dataset_config.json --training_type lora "
                     "--target_modules \"blocks.*(to_q|to_k|to_v|to_out.0)\" --batch_size 1 --train_steps 1 "
                     "--max_data_samples 1 --checkpointing_steps 0 --report_to none "
                     "--output_dir {O}/finetrainers/out --logging_dir {O}/finetrainers/logs")

MNIST_FILES = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
               "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")

# ---- helpers-g1 tasks: command pieces shared by their stages
TEXO = ("python src/train.py hydra.run.dir={{O}}/texo/{stage} hydra.job.chdir=false {trainer} trainer.num_nodes=1 "
        "trainer.precision=32-true +trainer.max_steps=1 trainer.max_epochs=1 +trainer.limit_train_batches=1 "
        "+trainer.limit_val_batches=0 +trainer.num_sanity_val_steps=0 trainer.val_check_interval=1 "
        "trainer.log_every_n_steps=1 +trainer.enable_checkpointing=false trainer.logger=false 'trainer.callbacks=[]' "
        "training.lr_scheduler.num_training_steps=1 training.lr_scheduler.num_warmup_steps=0 "
        "data.train_batch_size=1 data.val_batch_size=1 data.num_workers=1 "
        "data.train_dataset_path={{O}}/texo/UniMER-Train-1 data.eval_dataset_path={{O}}/texo/UniMER-Train-1 "
        "data.text_processor.tokenizer_path=data/unimernet_tokenizer model.pretrained={{A}}/formulanet.pt")

AIM_BACKBONE = "aim_600m_2bimgs_attnprobe_backbone.pth"
AIM_HEAD = "aim_600m_2bimgs_attnprobe_head_last_layers.pth"
AIM_ENV = "PYTHONPATH={H}${PYTHONPATH:+:$PYTHONPATH}"  # helpers/sitecustomize.py
AIM_ARGS = (f"--model aim-600M --batch-size 1 --num_workers 0 --data-path {{A}}/imagefolder --probe-layers last "
            f"--backbone-ckpt-path {{A}}/{AIM_BACKBONE} --head-ckpt-path {{A}}/{AIM_HEAD}")

DT_OPTIONS = ("python {{H}}/make_drunet_options.py --pretrained {{A}}/drunet --out {{O}}/deep-tempest/{stage} "
              "--gpu-ids {gpus} --pairs {pairs} --batch {batch}")
# tasks.csv: torchrun --dist True, "falls back to DataParallel dist=False on sampler error" (the repo passes both
# shuffle=True and a DistributedSampler to its DataLoader, which torch rejects)
DT_MULTI = ("{ python -m torch.distributed.run --nproc_per_node=2 --master_addr=$MASTER_ADDR --master_port=$MASTER_PORT "
            "end-to-end/main_train_drunet.py --opt {O}/deep-tempest/multi_gpu/options.json --dist True "
            "> {O}/deep-tempest/multi_gpu/ddp.log 2>&1; rc=$?; cat {O}/deep-tempest/multi_gpu/ddp.log; "
            "if [ $rc -ne 0 ] && grep -q 'sampler option is mutually exclusive with shuffle' {O}/deep-tempest/multi_gpu/ddp.log; then "
            "echo 'dist=True failed on the sampler/shuffle conflict: DataParallel fallback (dist=False)'; "
            "python end-to-end/main_train_drunet.py --opt {O}/deep-tempest/multi_gpu/options.json; rc=$?; fi; "
            "exit $rc; }")

LCM = ("python -m lcm.train launcher=standalone +pretrain=mse hydra.run.dir={{O}}/lcm/{stage}/hydra "
       "++trainer.output_dir={{O}}/lcm/{stage} ++trainer.use_submitit=false ++trainer.model_arch=toy_base_lcm "
       "'++trainer.model_arch_overrides={{sonar_normalizer_name:dummy_sonar_normalizer}}' "
       "++trainer.max_steps=1 ++trainer.use_fsdp=false ++trainer.dtype=torch.float32 "
       "++trainer.data_loading_config.batch_size=1 ++trainer.data_loading_config.max_tokens=0 "
       "++trainer.validation_data_loading_config.batch_size=1 ++trainer.validation_data_loading_config.max_tokens=0 "
       "++trainer.training_data.0.parquet_path={{O}}/lcm/data ++trainer.validation_data.0.parquet_path={{O}}/lcm/data "
       "++trainer.validate_every_n_steps=1000000 ++trainer.checkpoint_every_n_steps=1000000 "
       "++trainer.save_model_every_n_steps=1000000 ++trainer.publish_metrics_every_n_steps=1")

SAPIENS_CFG = "seg/configs/sapiens_normal/normal_general/sapiens_0.3b_normal_general-1024x768.py"
SAPIENS_CKPT = "sapiens_0.3b_epoch_1600_clean.pth"
SAPIENS_DATA = "python {H}/make_toy_subset.py --zips {A}/sapiens_toy_dataset --out {O}/sapiens/data"
# `dataset_train.data_root` would not reach train_dataloader (mmengine copies the dict): set the list element
SAPIENS_OPTIONS = (f"--cfg-options dataset_train.data_root={{O}}/sapiens/data "
                   f"train_dataloader.dataset.datasets.0.data_root={{O}}/sapiens/data "
                   f"model.backbone.init_cfg.checkpoint={{A}}/{SAPIENS_CKPT} train_dataloader.batch_size=1 "
                   "train_dataloader.num_workers=0 train_dataloader.persistent_workers=False "
                   "train_dataloader.dataset.metainfo.from_file=seg/configs/_base_/datasets/render_people.py "
                   "norm_cfg.type=BN train_cfg.max_epochs=1 train_cfg.val_interval=999999 default_hooks.logger.interval=1 "
                   "default_hooks.checkpoint.interval=999999 default_hooks.visualization.interval=999999")

EXTRA: dict[str, Extra] = {
    "auto1111sdk--auto1111sdk": Extra(
        # the release's arguments: Lightning's batch size is data.params.batch_size (a top-level batch_size=1
        # reaches nothing), one training batch, no validation or sanity batches, no test, the image logger off
        cmd={stage: ("python auto1111sdk/modules/generative/main.py "
                     "--base auto1111sdk/modules/generative/configs/example_training/toy/mnist.yaml --no_base_name True "
                     f"--train True --no-test True --logdir {{O}}/auto1111sdk/{stage}/lightning_logs "
                     f"--accelerator {accelerator} --devices {devices} data.params.batch_size=1 data.params.num_workers=0 "
                     "lightning.trainer.max_steps=1 lightning.trainer.limit_train_batches=1 "
                     "lightning.trainer.limit_val_batches=0 lightning.trainer.num_sanity_val_steps=0 "
                     "lightning.callbacks.image_logger.params.disabled=true")
             for stage, accelerator, devices in (("cpu", "cpu", "1"), ("single_gpu", "gpu", "0"),
                                                 ("multi_gpu", "gpu", "0,1"))},
        assets=[(f, "dataset", f"https://storage.googleapis.com/cvdf-datasets/mnist/{f}", f"mnist/{f}")
                for f in MNIST_FILES],
        # torchvision.datasets.MNIST(root=".data/", download=True) finds the unpacked files and downloads nothing
        setup=("mkdir -p .data/MNIST/raw && for f in {A}/mnist/*.gz; do "
               "gunzip -c \"$f\" > .data/MNIST/raw/$(basename \"$f\" .gz); done"),
    ),
    "depthanything--depth-anything-v2": Extra(
        subs={"<ckpt>": "{A}/Depth-Anything-V2-Metric-Hypersim-Small/depth_anything_v2_metric_hypersim_vits.pth",
              "<1 img>": "assets/examples/demo01.jpg"},
        assets=[("Depth-Anything-V2-Metric-Hypersim-Small", "model",
                 hf("depth-anything/Depth-Anything-V2-Metric-Hypersim-Small"))],
    ),
    "funaudiollm--funmusic": Extra(
        assets=[("InspireMusic-Base", "model", hf("FunAudioLLM/InspireMusic-Base"))],
        # '... fast mode': the remaining inference.py arguments of the paper's run, one sample, <= 1 s of audio
        cmd={"single_gpu": "python {H}/prepare_inspiremusic.py --model-dir {A}/InspireMusic-Base --out {O}/funmusic && "
                           f"{INSPIREMUSIC_PATH} python inspiremusic/bin/inference.py --task text-to-music --gpu 0 "
                           "--config {O}/funmusic/inspiremusic.yaml --prompt_data {O}/funmusic/data_1row.list "
                           "--llm_model {A}/InspireMusic-Base/llm.pt --music_tokenizer {A}/InspireMusic-Base/music_tokenizer "
                           "--wavtokenizer {A}/InspireMusic-Base/wavtokenizer --result_dir {O}/funmusic/infer "
                           "--chorus intro --fast --min_generate_audio_seconds 0.0 --max_generate_audio_seconds 1.0 "
                           "--output_sample_rate 24000 --format wav",
             # per rank (own scratch dir, no race): the max_epoch=1 config and the 1-row list, then train.py
             "multi_gpu": "--no_python sh -c 'python {H}/prepare_inspiremusic.py --model-dir {A}/InspireMusic-Base "
                          "--out {O}/funmusic-rank${LOCAL_RANK:-0} && "
                          f"{INSPIREMUSIC_PATH} exec python inspiremusic/bin/train.py --train_engine torch_ddp --model flow "
                          "--config {O}/funmusic-rank${LOCAL_RANK:-0}/inspiremusic.yaml "
                          "--train_data {O}/funmusic-rank${LOCAL_RANK:-0}/data_1row.list "
                          "--cv_data {O}/funmusic-rank${LOCAL_RANK:-0}/data_1row.list "
                          "--model_dir {O}/funmusic-rank${LOCAL_RANK:-0}/model_dir "
                          "--tensorboard_dir {O}/funmusic-rank${LOCAL_RANK:-0}/tensorboard "
                          "--ddp.dist_backend nccl --num_workers 1 --prefetch 2 --pin_memory'"},
    ),
    "funaudiollm--sensevoice": Extra(
        assets=[("asr_example_en.wav", "file",
                 "https://isv-data.oss-cn-hangzhou.aliyuncs.com/ics/MaaS/ASR/test_audio/asr_example_en.wav"),
                # the Hugging Face copy of ModelScope's iic/SenseVoiceSmall (configuration.json, config.yaml,
                # model.pt, am.mvn, BPE model)
                ("SenseVoiceSmall", "model", hf("FunAudioLLM/SenseVoiceSmall"))],
        # the release waits 90 s for api.py to answer and requires the reply to hold a "result" key
        cmd={"cpu": SENSEVOICE_LINK + http_smoke("SENSEVOICE_DEVICE=cpu python api.py", 50000, SENSEVOICE_POST,
                                                 wait_s=90),
             "single_gpu": SENSEVOICE_LINK + http_smoke("SENSEVOICE_DEVICE=cuda:0 python api.py", 50000,
                                                        SENSEVOICE_POST, wait_s=90),
             # <funasr>/bin/train_ds.py is funasr's installed trainer: the same file as `-m funasr.bin.train_ds`;
             # arguments as the repo's finetune.sh, cut to 1 epoch over a 2-row jsonl (one row per rank)
             # written per rank by the helper; the link as above (ln -s: a concurrent rank's link is kept)
             "multi_gpu": "--no_python sh -c 'mkdir -p iic; ln -s {A}/SenseVoiceSmall iic/SenseVoiceSmall 2>/dev/null; "
                          "python {H}/make_sensevoice_jsonl.py --wav {A}/asr_example_en.wav "
                          "--out {O}/sensevoice-data-rank${LOCAL_RANK:-0} && "
                          "exec python -m funasr.bin.train_ds ++model=iic/SenseVoiceSmall ++trust_remote_code=true "
                          "++train_data_set_list={O}/sensevoice-data-rank${LOCAL_RANK:-0}/train.jsonl "
                          "++valid_data_set_list={O}/sensevoice-data-rank${LOCAL_RANK:-0}/val.jsonl "
                          "++dataset_conf.data_split_num=1 ++dataset_conf.batch_sampler=BatchSampler "
                          "++dataset_conf.batch_size=6000 ++dataset_conf.sort_size=2 ++dataset_conf.batch_type=token "
                          "++dataset_conf.num_workers=0 ++train_conf.max_epoch=1 ++train_conf.log_interval=1 "
                          "++train_conf.resume=false ++train_conf.validate_interval=1000000000 "
                          "++train_conf.save_checkpoint_interval=1000000000 ++train_conf.keep_nbest_models=1 "
                          "++train_conf.avg_nbest_model=1 ++train_conf.use_deepspeed=false "
                          "++train_conf.deepspeed_config=deepspeed_conf/ds_stage1.json ++optim_conf.lr=0.0002 "
                          "++output_dir={O}/sensevoice'"},
    ),
    "geeeekexplorer--nano-vllm": Extra(
        assets=[("Qwen3-0.6B", "model", hf("Qwen/Qwen3-0.6B"))],
        asset_stages={"Qwen3-0.6B": ["c3", "c4"]},  # both commands load it; C0 and C2 need nothing
        cmd={"single_gpu": NANOVLLM.format(tp=1), "multi_gpu": NANOVLLM.format(tp=2)},
        launcher="python",  # tensor parallel: nano-vllm starts its own rank processes
    ),
    "haozheliu-st--t-gate": Extra(
        # main.py loads PixArt-alpha/PixArt-XL-2-1024-MS by id for --model pixart_alpha, the first of the
        # paper's candidates that downloads anonymously. Prompt and the cache-interval flags as the paper's
        # harness ran it (one step leaves no room for sp_interval 5 / warm_up 2).
        subs={"<first anonymous candidate e.g. pixart_alpha>": "pixart_alpha",
              "<p>": "'Astronaut in a jungle, cold color palette, muted colors, detailed, 8k'"},
        flags={"single_gpu": "--sp_interval 1 --fi_interval 1 --warm_up 0"},
        assets=[hf_cached("PixArt-alpha/PixArt-XL-2-1024-MS")],
    ),
    "internlm--internevo": Extra(
        # helpers/prepare_internevo.py: Alpaca sample -> the repo's tools/alpaca_tokenizer.py -> bin/meta,
        # and the 2-layer, 1-step minimal_config.py the paper's harness generated (InternEvo has no CPU path).
        subs={"<generated minimal_config.py>": "{O}/internevo/minimal_config.py",
              "<minimal_config.py>": "{O}/internevo/minimal_config.py"},
        assets=[("alpaca_data.json", "dataset",
                 "https://raw.githubusercontent.com/tatsu-lab/stanford_alpaca/main/alpaca_data.json"),
                ("tokenizer.model", "model", hf_file("internlm/internlm2-7b", "tokenizer.model"))],
        setup=f"python {{H}}/prepare_internevo.py {INTERNEVO_PREP}",
        # torchrun starts the ranks: each prepares (the helper builds in a temporary dir and renames it,
        # so the ranks share one copy), then becomes train.py
        cmd={"multi_gpu": f"--no_python bash -c 'python \"$REB_RAY_HELPERS/prepare_internevo.py\" {INTERNEVO_PREP} "
                          "&& exec python train.py --config {O}/internevo/minimal_config.py --launcher torch'"},
    ),
    "krlabsorg--lettucedetect": Extra(
        # helpers/make_ragbench_min.py: 2 RAGTruth train responses -> a 1 train + 1 dev RAGBench-format
        # json, and an empty RAGTruth json (the paper's prepare step)
        subs={"<empty>": "{O}/lettucedetect/ragtruth_empty.json",
              "<2-sample json>": "{O}/lettucedetect/ragbench_min.json",
              "<ettin-17m>": "{A}/ettin-encoder-17m"},
        assets=[("ettin-encoder-17m", "model", hf("jhu-clsp/ettin-encoder-17m")),
                *((f, "dataset", f"https://raw.githubusercontent.com/ParticleMedia/RAGTruth/main/dataset/{f}",
                   f"ragtruth/{f}") for f in ("response.jsonl", "source_info.jsonl"))],
        # the CPU and single-GPU commands read all three (the setup line the RAGTruth files, train.py
        # the encoder); C0 and C2 need none
        asset_stages={name: ["c1", "c3"] for name in ("ettin-encoder-17m", "response.jsonl", "source_info.jsonl")},
        setup="python {H}/make_ragbench_min.py --ragtruth {A}/ragtruth --out {O}/lettucedetect",
        flags={"cpu": "--output-dir {O}/lettucedetect/model --learning-rate 1e-5"},
        log={"cpu": "Starting training on cpu"},
    ),
    "lmcache--lmcache": Extra(
        subs={"<cfg>": "{H}/lmcache.yaml", "<model>": "{A}/tiny-gpt2"},
        # musique_s.json: fetched by the paper's prepare step as the dataset asset; the standalone
        # starter itself reads no prompts (it fills the cache with generated KV tensors).
        assets=[("tiny-gpt2", "model", hf("sshleifer/tiny-gpt2")),
                ("musique_s.json", "dataset",
                 "https://raw.githubusercontent.com/YaoJiayi/CacheBlend/main/inputs/musique_s.json")],
        cmd={"cpu": LMCACHE.format(rank=0, world=1, device="cpu"),
             "single_gpu": LMCACHE.format(rank=0, world=1, device="cuda"),
             "multi_gpu": "--no_python bash -c '" + LMCACHE.format(rank="$LOCAL_RANK", world=2,
                                                                    device="cuda:$LOCAL_RANK") + "'"},
    ),
    "liheyoung--depth-anything": Extra(
        # one of the README example images: one inference step, as the paper's harness ran it
        subs={"<examples>": "assets/examples/demo1.png"},
        # run.py: DepthAnything.from_pretrained('LiheYoung/depth_anything_vits14')
        assets=[hf_cached("LiheYoung/depth_anything_vits14")],
    ),
    "moonshotai--moba": Extra(
        subs={"<tiny llama>": "{A}/tiny-random-LlamaForCausalLM"},
        assets=[("tiny-random-LlamaForCausalLM", "model", hf("hf-internal-testing/tiny-random-LlamaForCausalLM"))],
    ),
    "nvidia--kvpress": Extra(
        subs={"<tiny llama>": "{A}/tiny-random-LlamaForCausalLM"},
        assets=[("tiny-random-LlamaForCausalLM", "model", hf("hf-internal-testing/tiny-random-LlamaForCausalLM")),
                hf_cached("simonjegou/loogle", kind="dataset")],
        # '<1 sample>': helpers/one_sample_fraction.py prints 1/len(shortdep_qa test); one output dir
        # per stage (evaluate.py skips a run whose results file exists, and the name has no device)
        cmd={"cpu": KVPRESS.format(device="cpu", out="kvpress-cpu"),
             "single_gpu": KVPRESS.format(device="cuda:0", out="kvpress-single-gpu"),
             "multi_gpu": KVPRESS.format(device="auto", out="kvpress-multi-gpu")},
    ),
    "nvlabs--sana": Extra(
        # The paper's recipe: the repo config with its empty model.resume_from set to `latest` (no checkpoint
        # in the fresh work dir, so train.py starts from --load_from), a zero null embedding where train.py
        # looks for it, toy_data's precomputed VAE latents (--data.load_vae_feat=true, as the repo's own
        # training docs/CI run toy_data), batch 1, and early_stop_hours=0: train.py saves and returns after
        # its first step. train.py still loads the gemma-2-2b-it text encoder by Hugging Face id.
        subs={"<patched Sana_600M_img1024.yaml>": "{O}/sana/Sana_600M_img1024.yaml"},
        assets=[("Sana_600M_1024px", "model", hf("Efficient-Large-Model/Sana_600M_1024px")),
                ("toy_data", "dataset", hf_dataset("Efficient-Large-Model/toy_data")),
                hf_cached("Efficient-Large-Model/gemma-2-2b-it"),
                hf_cached("mit-han-lab/dc-ae-f32c32-sana-1.0")],
        cmd={"single_gpu": f"{SANA_PREP} && python -m torch.distributed.run --nproc_per_node=1 "
                           f"train_scripts/train.py {SANA_ARGS.replace('{stage}', 'single_gpu')}",
             # torchrun starts this per rank (--no_python); both ranks write the same files atomically
             "multi_gpu": f"--no_python sh -c '{SANA_PREP} && exec python train_scripts/train.py "
                          f"{SANA_ARGS.replace('{stage}', 'multi_gpu')}'"},
    ),
    "openbmb--voxcpm": Extra(
        assets=[("VoxCPM-0.5B", "model", hf("openbmb/VoxCPM-0.5B"))],
        cmd={"single_gpu": "python {H}/make_voxcpm_config.py --pretrained {A}/VoxCPM-0.5B --out {O}/voxcpm && "
                           "python scripts/train_voxcpm_finetune.py --config_path {O}/voxcpm/config.yaml"},
    ),
    "ringbdstack--socialed": Extra(
        # helpers/sbert_smoke.py: our equivalent of the paper's benchmark_scripts/socialed_sbert_smoketest.py
        # (SocialED.detector.SBERT on the first rows of Event2012.npy; per-rank slices under torchrun)
        assets=[("Event2012.npy", "dataset",
                 "https://github.com/ChenBeici/SocialED_datasets/raw/main/npy_data/Event2012.npy"),
                ("paraphrase-MiniLM-L6-v2", "model", hf("sentence-transformers/paraphrase-MiniLM-L6-v2"))],
        cmd={"cpu": "python -u {H}/sbert_smoke.py --data {A}/Event2012.npy --model {A}/paraphrase-MiniLM-L6-v2 "
                    "--max-samples 12",
             "single_gpu": "python -u {H}/sbert_smoke.py --data {A}/Event2012.npy --model {A}/paraphrase-MiniLM-L6-v2 "
                           "--max-samples 12 --require-gpu-count 1",
             "multi_gpu": "python -u {H}/sbert_smoke.py --data {A}/Event2012.npy --model {A}/paraphrase-MiniLM-L6-v2 "
                          "--max-samples 12 --distributed --require-gpu-count 2"},
    ),
    "swivid--f5-tts": Extra(
        assets=[("model_1250000.safetensors", "model", hf_file("SWivid/F5-TTS", "F5TTS_v1_Base/model_1250000.safetensors"),
                 "F5-TTS/F5TTS_v1_Base/model_1250000.safetensors"),
                hf_cached("charactr/vocos-mel-24khz")],  # utils_infer.load_vocoder: hf_hub_download by id
        # '...': infer_cli's reference clip as its basic.toml names it (resolved inside the f5_tts package),
        # that clip's transcript and infer_cli's own default test sentence
        cmd={"cpu": F5_INFER + " --output_file infer_cpu.wav --device cpu",
             "single_gpu": F5_INFER + " --output_file infer_single_gpu.wav --device cuda",
             # accelerate options first, then per rank: a 2-row set (one sample per rank) in data/<name>_pinyin,
             # where train.py looks for datasets.name=<name>; config overrides as the paper's run (1 epoch, batch 1)
             "multi_gpu": "--mixed_precision no --dynamo_backend no --no_python sh -c '"
                          "python {H}/make_f5_dataset.py --wav src/f5_tts/infer/examples/basic/basic_ref_en.wav "
                          "--text \"Some call me nature, others call me mother nature.\" --rows 2 "
                          "--out data/reb_ray_smoke_rank${LOCAL_RANK:-0}_pinyin && "
                          "exec python src/f5_tts/train/train.py --config-name F5TTS_Small.yaml "
                          "hydra.run.dir={O}/f5-tts-hydra-rank${LOCAL_RANK:-0} ckpts.save_dir=ckpts/reb_ray_smoke "
                          "ckpts.logger=null ckpts.log_samples=False ckpts.save_per_updates=999999 "
                          "ckpts.keep_last_n_checkpoints=0 ckpts.last_per_updates=999999 "
                          "datasets.name=reb_ray_smoke_rank${LOCAL_RANK:-0} datasets.batch_size_type=sample "
                          "datasets.batch_size_per_gpu=1 datasets.max_samples=1 datasets.num_workers=1 "
                          "optim.epochs=1 optim.num_warmup_updates=0 optim.grad_accumulation_steps=1'"},
    ),
    "zhengyinan-air--diffusion-planner": Extra(
        # Flags as the paper's run_*_entrypoint.sh passed them at the pin; the pin (3558eac) is not in the
        # fetched mirror, they were checked against train_predictor.py at 5659e49 (main, 2025-04-05).
        # Released checkpoint (tasks.csv assets); train_predictor.py trains from scratch and never reads it.
        assets=[("Diffusion-Planner", "model", hf("ZhengYinan2001/Diffusion-Planner"))],
        # the release's runner first requires timm, tensorboard and wandb to import (--ensure-module)
        setup=f"{DP_IMPORTS} && python {{H}}/make_sample.py --out {{O}}/diffusion-planner-data",
        flags={"cpu": "--name scimlopsbench_cpu " + DP_DATA.format(data="{O}/diffusion-planner-data") + " " + DP_TINY,
               "single_gpu": "--name scimlopsbench_single_gpu"},
        # Each rank writes its own copy of the sample (no race between ranks) and passes torchrun's
        # port on: ddp_setup_universal() overwrites MASTER_PORT with --port (default 22323).
        cmd={"multi_gpu": f"--no_python bash -c '{DP_IMPORTS} && "
                          "python {H}/make_sample.py --out {O}/diffusion-planner-data-$LOCAL_RANK "
                          "&& exec python train_predictor.py --name scimlopsbench_multi_gpu --device cuda "
                          "--batch_size 2 --port $MASTER_PORT "
                          + DP_DATA.format(data="{O}/diffusion-planner-data-$LOCAL_RANK") + " " + DP_TINY + "'"},
    ),
    "alephpi--texo": Extra(
        # the paper's Hydra overrides: 1 step, batch 1, logger/checkpoints/validation off, the tokenizer path
        # that cfg.data only holds as an unresolved ${model.tokenizer_path}, and FormulaNet-S weights
        assets=[("UniMER-Train", "dataset", hf_dataset("alephpi/UniMER-Train")),
                ("formulanet.pt", "model", hf_file("alephpi/FormulaNet", "checkpoints/formulanet.pt"))],
        setup="python {H}/make_unimer_subset.py --snapshot {A}/UniMER-Train --out {O}/texo/UniMER-Train-1",
        cmd={"cpu": TEXO.format(stage="cpu", trainer="trainer.accelerator=cpu trainer.devices=1"),
             "single_gpu": TEXO.format(stage="single_gpu", trainer="trainer.accelerator=gpu trainer.devices=1"),
             "multi_gpu": TEXO.format(stage="multi_gpu",
                                      trainer="+trainer.strategy=ddp trainer.accelerator=gpu trainer.devices=2")},
    ),
    "apple--ml-aim": Extra(
        # dog.jpg lies as a 1-image ImageFolder (val/<class>/); sitecustomize.py (on PYTHONPATH) stands for the
        # paper's compatibility patches (forward returning (logits, None), head checkpoint without linear bias)
        assets=[(AIM_BACKBONE, "model", hf_file("apple/AIM", AIM_BACKBONE)),
                (AIM_HEAD, "model", hf_file("apple/AIM", AIM_HEAD)),
                ("dog.jpg", "dataset", "https://raw.githubusercontent.com/pytorch/hub/master/images/dog.jpg",
                 "imagefolder/val/dog/dog.jpg")],
        cmd={"single_gpu": f"{AIM_ENV} python -m torch.distributed.run --standalone --nproc-per-node=1 "
                           f"aim-v1/main_attnprobe.py {AIM_ARGS}",
             "multi_gpu": f"{AIM_ENV} python aim-v1/main_attnprobe.py {AIM_ARGS}"},
    ),
    "apple--ml-mdm": Extra(
        # "cd ml-mdm-matryoshka": the package lives in that folder of the repository (configs/, tests/ are
        # relative to it). Flags as the paper's harness: the repo's one-image sample list tests/test_files/
        # (images_00000.tar), flan-t5-small as text model (by id, from the HF cache), 1 diffusion step, fp32.
        workdir={"cpu": "ml-mdm-matryoshka", "single_gpu": "ml-mdm-matryoshka", "multi_gpu": "ml-mdm-matryoshka"},
        flags={"cpu": "--file-list=tests/test_files/sample_training_0.tsv --multinode=0 --output-dir={O}/ml-mdm "
                      "--text-model=google/flan-t5-small --num_diffusion_steps=1 --model_output_scale=0 --fp16=0"},
        assets=[hf_cached("google/flan-t5-small")],
    ),
    "emidan19--deep-tempest": Extra(
        # make_drunet_options.py writes the options JSON (gpu_ids, batch, 1 epoch = 1 iteration) and copies the
        # repo's examples/ screenshot pairs as the mini dataset; the weights come from the authors' ownCloud share
        assets=[("drunet", "model", "https://www.fing.edu.uy/owncloud/index.php/s/IaZugHCrw5K1AcB/download")],
        cmd={"cpu": DT_OPTIONS.format(stage="cpu", gpus="''", pairs=1, batch=1) +
                    " && python end-to-end/main_train_drunet.py --opt {O}/deep-tempest/cpu/options.json",
             "single_gpu": DT_OPTIONS.format(stage="single_gpu", gpus="0", pairs=1, batch=1) +
                           " && python end-to-end/main_train_drunet.py --opt {O}/deep-tempest/single_gpu/options.json",
             "multi_gpu": DT_OPTIONS.format(stage="multi_gpu", gpus="0,1", pairs=2, batch=2) + " && " + DT_MULTI},
        # torchrun is in the line (rendezvous on the harness's MASTER_PORT) so that the paper's fallback can follow
        launcher="python",
    ),
    "facebookresearch--large_concept_model": Extra(
        # the paper's overrides (all ++trainer.*: the CSV's bare `use_fsdp=false` is no top-level key); Hydra's
        # override grammar takes a list index as `.0.`, not `[0]`
        setup="python {H}/make_sonar_parquet.py --out {O}/lcm/data",
        cmd={"cpu": LCM.format(stage="cpu") + " ++trainer.fake_gang_device=cpu",
             "single_gpu": LCM.format(stage="single_gpu") + " ++trainer.fake_gang_device=cuda:0",
             "multi_gpu": "python -m torch.distributed.run "
                          "--nproc-per-node=2 --master_addr=$MASTER_ADDR --master_port=$MASTER_PORT "
                          + LCM.format(stage="multi_gpu").removeprefix("python ")},
        launcher="python",  # the data (setup) must exist before the ranks start: torchrun is in the line
    ),
    "facebookresearch--sapiens": Extra(
        # the toy dataset's images/masks/normals zips (depths.zip is not used) -> a one-sample data root
        assets=[(z, "dataset", hf_file("datasets/facebook/sapiens_toy_dataset", z), f"sapiens_toy_dataset/{z}")
                for z in ("images.zip", "masks.zip", "normals.zip")]
               + [(SAPIENS_CKPT, "model", hf_file("facebook/sapiens-pretrain-0.3b", SAPIENS_CKPT))],
        cmd={"cpu": f"{SAPIENS_DATA} && python seg/tools/train.py {SAPIENS_CFG} --work-dir {{O}}/sapiens/cpu "
                    f"{SAPIENS_OPTIONS}",
             "single_gpu": f"{SAPIENS_DATA} && python seg/tools/train.py {SAPIENS_CFG} "
                           f"--work-dir {{O}}/sapiens/single_gpu {SAPIENS_OPTIONS}",
             "multi_gpu": f"{SAPIENS_DATA} && python -m torch.distributed.run --nproc_per_node=2 "
                          f"--master_addr=$MASTER_ADDR --master_port=$MASTER_PORT seg/tools/train.py {SAPIENS_CFG} "
                          f"--launcher pytorch --work-dir {{O}}/sapiens/multi_gpu {SAPIENS_OPTIONS}"},
        launcher="python",  # the data root is unpacked before the ranks start: torchrun is in the line
    ),
    "feifeibear--long-context-attention": Extra(
        subs={"<t>": "basic"},
        # 'small seq/heads' as the paper's harness ran it: 2 heads of 32, 32 tokens, forward only, with
        # PyTorch attention (--attn_type torch, which helpers/sitecustomize.py maps to yunchang's
        # torch_efficient: the pinned AttnType has no plain "torch")
        cmd={"single_gpu": f"PYTHONPATH={{H}}:$PWD python -m torch.distributed.run --nproc_per_node=1 {LONGCTX}",
             "multi_gpu": f"PYTHONPATH={{H}}:$PWD python {LONGCTX}"},
    ),
    "flagos-ai--flaggems": Extra(
        # the test's AutoTokenizer.from_pretrained("google-bert/bert-base-uncased")
        # only the tokenizer is used: its files, not the ~2.5 GB of weights in five formats
        assets=[hf_cached("google-bert/bert-base-uncased", include=["*.json", "*.txt"])],
        cmd={"single_gpu": "python -m pytest "
                           "'examples/model_bert_test.py::test_accuracy_bert[How are you today?-torch.float16]'"},
    ),
    "hpcaitech--open-sora": Extra(
        # The configs read ./ckpts/{Open_Sora_v2,hunyuan_vae}.safetensors, ./ckpts/google/t5-v1_1-xxl and
        # ./ckpts/openai/clip-vit-large-patch14; the overrides point them at the assets instead (HFEmbedder
        # takes a path holding "openai" for CLIP, hence the openai/ and google/ asset paths). The 256px config's
        # text dataset has no data_path: the prompts are the repo's assets/texts/example.csv, cut to one by
        # --num_samples 1. dtype as the paper's harness ran it: fp32 on the CPU, fp16 on GPUs.
        flags={"cpu": "--save-dir {O}/open-sora --dataset.data-path assets/texts/example.csv --num_workers 0 "
                      "--dtype fp32 " + OPEN_SORA_CKPTS,
               "single_gpu": "--dtype fp16",
               "multi_gpu": "--save-dir {O}/open-sora --dataset.data-path assets/texts/example.csv --num_samples 1 "
                            "--num_steps 1 --num_frames 1 --batch_size 1 --num_workers 0 --dtype fp16 "
                            + OPEN_SORA_CKPTS},
        assets=[("Open-Sora-v2", "model", hf("hpcai-tech/Open-Sora-v2")),
                ("t5-v1_1-xxl", "model", hf("google/t5-v1_1-xxl"), "google/t5-v1_1-xxl"),
                ("clip-vit-large-patch14", "model", hf("openai/clip-vit-large-patch14"),
                 "openai/clip-vit-large-patch14")],
    ),
    "huggingface--finetrainers": Extra(
        # Arguments as the paper's harness ran train.py: Wan2.1-T2V-1.3B (model_name wan) from the asset, a
        # generated --dataset_config over the crush-smol snapshot, LoRA on Wan's attention projections
        # (the default target_modules regex names no Wan module), 1 step on 1 sample, no checkpoint. train.py
        # logs "An error occurred during training:" for an exception in its loop; fail_on_log.py turns such a
        # run into a failure, as the paper's --fail-regex did.
        env={"single_gpu": {"WORLD_SIZE": "1", "RANK": "0", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
                            "MASTER_ADDR": "127.0.0.1", "NCCL_P2P_DISABLE": "1", "TORCH_NCCL_ENABLE_MONITORING": "0"},
             "multi_gpu": {"NCCL_P2P_DISABLE": "1", "TORCH_NCCL_ENABLE_MONITORING": "0"}},
        cmd={"single_gpu": f"export MASTER_PORT={FREE_PORT} && {FINETRAINERS_CONFIG} && "
                           f"python {{H}}/fail_on_log.py {FINETRAINERS_FAIL} -- "
                           f"python train.py --parallel_backend accelerate {FINETRAINERS_ARGS}",
             # torchrun starts this per rank (--no_python)
             "multi_gpu": f"--no_python sh -c '{FINETRAINERS_CONFIG} && exec python {{H}}/fail_on_log.py "
                          f"{FINETRAINERS_FAIL} -- python train.py --parallel_backend ptd --pp_degree 1 --dp_degree 2 "
                          f"--dp_shards 1 --cp_degree 1 --tp_degree 1 --init_timeout 600 --nccl_timeout 600 "
                          f"{FINETRAINERS_ARGS}'"},
        assets=[("Wan2.1-T2V-1.3B-Diffusers", "model", hf("Wan-AI/Wan2.1-T2V-1.3B-Diffusers")),
                ("crush-smol", "dataset", hf_dataset("finetrainers/crush-smol"))],
    ),
    "hustvl--vim": Extra(
        assets=[("R-50.pkl", "model", "https://dl.fbaipublicfiles.com/detectron2/ImageNetPretrained/MSRA/R-50.pkl"),
                ("val2017_100.tgz", "dataset", "https://dl.fbaipublicfiles.com/detectron2/annotations/coco/val2017_100.tgz"),
                ("instances_val2017_100.json", "dataset",
                 "https://dl.fbaipublicfiles.com/detectron2/annotations/coco/instances_val2017_100.json")],
        # As the paper's harness: DETECTRON2_DATASETS laid out as det/datasets/prepare_for_tests.sh does
        # (coco/val2017 + coco/annotations/instances_val2017_100.json) and PYTHONPATH=det; 1 iteration on
        # coco_2017_val_100, no evaluation, the MSRA R-50 weights from the asset cache. Multi-GPU:
        # IMS_PER_BATCH 2 (one image per GPU; detectron2 needs the total batch divisible by the world size).
        setup=("mkdir -p {O}/detectron2/coco/annotations && tar -xzf {A}/val2017_100.tgz -C {O}/detectron2/coco && "
               "ln -sf {A}/instances_val2017_100.json {O}/detectron2/coco/annotations/ && "
               "export DETECTRON2_DATASETS={O}/detectron2 PYTHONPATH=$PWD/det${PYTHONPATH:+:$PYTHONPATH}"),
        cmd={stage: ("python det/tools/plain_train_net.py --num-gpus {gpus} "
                     "--config-file det/configs/COCO-Detection/faster_rcnn_R_50_FPN_1x.yaml "
                     "SOLVER.IMS_PER_BATCH {batch} SOLVER.MAX_ITER 1 DATALOADER.NUM_WORKERS 0 TEST.EVAL_PERIOD 0 "
                     "DATASETS.TRAIN \"('coco_2017_val_100',)\" DATASETS.TEST \"()\" MODEL.WEIGHTS {A}/R-50.pkl "
                     "MODEL.DEVICE {device} OUTPUT_DIR {O}/vim-det-{stage}").replace("{gpus}", gpus)
                    .replace("{batch}", batch).replace("{device}", device).replace("{stage}", stage)
             for stage, gpus, batch, device in (("cpu", "0", "1", "cpu"), ("single_gpu", "1", "1", "cuda"),
                                                 ("multi_gpu", "2", "2", "cuda"))},
    ),
    "kotaro-kinoshita--yomitoku": Extra(
        subs={"<demo/sample image>": "demo/sample_text.jpg", "<demo image>": "demo/sample_text.jpg"},
        # the hf_hub_repo of src/yomitoku/configs DEFAULT_CONFIGS: the models the CLI's DocumentAnalyzer
        # loads by default (dbnetv2, parseqv2, rtdetrv2v2 layout, rtdetrv2 table)
        assets=[hf_cached(f"KotaroKinoshita/yomitoku-{name}") for name in (
            "text-detector-dbnet-v2", "text-recognizer-parseq-middle-v2", "layout-parser-rtdtrv2-v2",
            "table-structure-recognizer-rtdtrv2-open-beta")],
        flags={"cpu": "--outdir {O}/yomitoku", "single_gpu": "--outdir {O}/yomitoku"},
    ),
    "kyegomez--multimodalmamba": Extra(
        # helpers/run_on_device.py: our equivalent of the paper's benchmark_scripts/entrypoint_wrapper.py (pins
        # a GPU, makes it torch's default device, runs example.py as __main__; per-rank, no DDP).
        # No assets: example.py feeds random tensors; the paper's prepare step fetched lena.jpg and
        # hf-internal-testing/tiny-random-vit, which no stage reads.
        cmd={"cpu": "python example.py",
             "single_gpu": "python {H}/run_on_device.py --entrypoint example.py --device cuda --local-rank 0",
             "multi_gpu": "python {H}/run_on_device.py --entrypoint example.py --device cuda"},
    ),
    "kyegomez--visionmamba": Extra(
        cmd={"cpu": VISIONMAMBA.format(device="cpu"), "single_gpu": VISIONMAMBA.format(device="cuda"),
             "multi_gpu": VISIONMAMBA.format(device="cuda")},
    ),
    "lightly-ai--lightly-train": Extra(
        assets=[("coco128_unlabeled.zip", "dataset",
                 "https://github.com/lightly-ai/coco128_unlabeled/releases/download/v0.0.1/coco128_unlabeled.zip"),
                # dinov3/vitt16's default_weights (src/lightly_train/_models/dinov3/dinov3_package.py), found as
                # $LIGHTLY_TRAIN_MODEL_CACHE_DIR/<local_path> without a download
                ("dinov3_vitt16_distillationv2.pth", "model",
                 "https://lightly-train-checkpoints.s3.us-east-1.amazonaws.com/dinov3/dinov3_vitt16_distillationv2.pth",
                 "models/dinov3_vitt16_distillationv2.pth")],
        # as the release: src/ on PYTHONPATH, and the interpreter's own `lightly-train` script when it has one,
        # else the CLI's Python entry (lightly_train._cli._cli_entrypoint)
        setup=("export LIGHTLY_TRAIN_MODEL_CACHE_DIR={A}/models LIGHTLY_TRAIN_EVENTS_DISABLED=1 "
               f"{PYPATH_SRC} && mkdir -p {{O}} && "
               "python -m zipfile -e {A}/coco128_unlabeled.zip {O}/lightly-data && "
               "lightly_train() { lt=\"$(dirname \"$(python -c 'import sys; print(sys.executable)')\")/lightly-train\"; "
               "if [ -x \"$lt\" ]; then \"$lt\" \"$@\"; "
               "else python -c 'from lightly_train._cli import _cli_entrypoint; _cli_entrypoint()' \"$@\"; fi; }"),
        # as the paper's harness: method=simclr (the default, distillation, would download a DINOv2 teacher),
        # 1 epoch / 1 step / 1 batch, no loader workers
        cmd={"cpu": "lightly_train pretrain out={O}/lightly-train overwrite=true data={O}/lightly-data/coco128_unlabeled "
                    "model=dinov3/vitt16 method=simclr epochs=1 batch_size=1 num_workers=0 accelerator=cpu devices=1 "
                    "trainer_args.max_steps=1 trainer_args.limit_train_batches=1"},
        flags={"multi_gpu": "batch_size=2 loader_args.batch_size=1 strategy=ddp"},  # global batch 2: 1 per GPU
    ),
    "meta-pytorch--torchft": Extra(
        assets=[("cifar-10-python.tar.gz", "dataset", "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"),
                ("squeezenet1_0-b66bff10.pth", "model", "https://download.pytorch.org/models/squeezenet1_0-b66bff10.pth",
                 "torch/hub/checkpoints/squeezenet1_0-b66bff10.pth")],
        cmd={"cpu": torchft_single(29501, cpu=True), "single_gpu": torchft_single(29502), "multi_gpu": TORCHFT_MULTI},
        launcher="python",  # two replica groups, each its own 1-rank torchrun, against one lighthouse
        side_logs={stage: [TORCHFT_LIGHTHOUSE_LOG] for stage in STAGES},
    ),
    "metavoiceio--metavoice-src": Extra(
        subs={"<ref>": "assets/bria.mp3"},
        assets=[hf_cached("metavoiceio/metavoice-1B-v0.1"),  # inference.py: snapshot_download(repo_id=...)
                # fam/llm/decoders.py: audiocraft's MultiBandDiffusion.get_mbd_24khz loads both by id
                hf_cached("facebook/encodec_24khz"), hf_cached("facebook/multiband-diffusion"),
                # the default enhancer "df": DeepFilterNet's init_df() fetches this zip into its cache dir
                ("DeepFilterNet3.zip", "model", "https://github.com/Rikorose/DeepFilterNet/raw/main/models/DeepFilterNet3.zip")],
        # unpack the enhancer's model where df.enhance.maybe_download_model looks first
        # (appdirs.user_cache_dir("DeepFilterNet")), so it downloads nothing
        setup=('dfc="${XDG_CACHE_HOME:-$HOME/.cache}/DeepFilterNet"; mkdir -p "$dfc" && '
               'python -m zipfile -e {A}/DeepFilterNet3.zip "$dfc"'),
        # the paper's CPU run: --dtype float32 (the default is float16 without a GPU); outputs to scratch
        flags={"cpu": "--dtype float32 --output_dir {O}/metavoice"},
        cmd={"single_gpu": "python fam/llm/inference.py --spk_cond_path <ref> --text Hello "
                           "--huggingface_repo_id metavoiceio/metavoice-1B-v0.1 --num_samples 1 --max_new_tokens 1 "
                           "--device cuda --output_dir {O}/metavoice"},
    ),
    "microsoft--renderformer": Extra(
        # The scene HDF5 is made at run time by the repo's own scene_processor/convert_scene.py from its
        # examples/cbox.json (the paper's harness did the same for cbox and shader-ball). ATTN_IMPL=sdpa as the
        # paper ran it (renderformer/layers/attention.py otherwise asks for flash_attn).
        subs={"<scene.h5>": "{O}/renderformer/cbox.h5", "<model>": "{A}/renderformer-v1-base"},
        assets=[("renderformer-v1-base", "model", hf("microsoft/renderformer-v1-base"))],
        setup=RENDERFORMER_SCENE.format(scene="cbox", dir="{O}/renderformer"),
        env={stage: {"ATTN_IMPL": "sdpa"} for stage in STAGES},
        # one independent inference per rank, each on its own GPU and scene (rank 0 cbox, rank 1 shader-ball)
        cmd={"multi_gpu": "--no_python bash -c 'if [ \"$LOCAL_RANK\" = 0 ]; then s=cbox; else s=shader-ball; fi; "
                          "d={O}/renderformer-$LOCAL_RANK; "
                          + RENDERFORMER_SCENE.format(scene="$s", dir="$d") +
                          " && CUDA_VISIBLE_DEVICES=$LOCAL_RANK python infer.py --h5_file $d/$s.h5 "
                          "--model_id <model> --precision fp16 --resolution 64 --output_dir $d'"},
    ),
    "modelscope--clearervoice-studio": Extra(
        subs={"<cfg>": "config/train/FRCRN_SE_16K.yaml"},  # the repo's config; the flags below override it
        workdir={"cpu": "train/speech_enhancement", "single_gpu": "train/speech_enhancement",
                 "multi_gpu": "train/speech_enhancement"},
        assets=[("FRCRN_SE_16K", "model", hf("alibabasglab/FRCRN_SE_16K"))],
        # one batch of the repo's sample audio (max-epoch 0 = one epoch, train.py counts 0..max_epoch),
        # initialised from the released checkpoint
        flags={"cpu": "--tr-list {H}/one_sample.scp --cv-list {H}/one_sample.scp --checkpoint_dir {O}/clearervoice-cpu "
                      "--init_checkpoint_path {A}/FRCRN_SE_16K/last_best_checkpoint.pt --accu_grad 0 "
                      "--effec_batch_size 1 --num_workers 0 --max-epoch 0 --print_freq 1 --checkpoint_save_freq 1000000",
               "single_gpu": "--checkpoint_dir {O}/clearervoice-gpu"},
        # the paper's torchrun_train_wrapper.py, inline: train.py takes its rank from --local-rank (default 0),
        # not from torchrun's LOCAL_RANK, and every rank saves checkpoints, so each gets its own dir
        cmd={"multi_gpu": "--no_python sh -c 'mkdir -p {O}/clearervoice-ddp/rank${LOCAL_RANK:-0} && "
                          "exec python train.py --local-rank ${LOCAL_RANK:-0} --config config/train/FRCRN_SE_16K.yaml "
                          "--network FRCRN_SE_16K --use-cuda 1 --batch_size 1 "
                          "--tr-list {H}/two_samples.scp --cv-list {H}/two_samples.scp "
                          "--checkpoint_dir {O}/clearervoice-ddp/rank${LOCAL_RANK:-0} "
                          "--init_checkpoint_path {A}/FRCRN_SE_16K/last_best_checkpoint.pt --accu_grad 0 "
                          "--effec_batch_size 1 --num_workers 0 --max-epoch 0 --print_freq 1 "
                          "--checkpoint_save_freq 1000000'"},
    ),
    "ogkalu2--comic-translate": Extra(
        # RTDetrV2ONNXDetection.initialize() calls hf_hub_download("ogkalu/comic-text-and-bubble-detector", ...)
        assets=[hf_cached("ogkalu/comic-text-and-bubble-detector"),
                ("hopper.jpg", "dataset",
                 "https://raw.githubusercontent.com/python-pillow/Pillow/main/Tests/images/hopper.jpg")],
        cmd={"cpu": "python {H}/detect_one.py --image {A}/hopper.jpg --device cpu",
             "single_gpu": "python {H}/detect_one.py --image {A}/hopper.jpg --device cuda"},
    ),
    "remsky--kokoro-fastapi": Extra(
        assets=[("kokoro-v1_0.pth", "model",
                 "https://github.com/remsky/Kokoro-FastAPI/releases/download/v0.1.4/kokoro-v1_0.pth",
                 "models/v1_0/kokoro-v1_0.pth"),
                ("config.json", "file", "https://github.com/remsky/Kokoro-FastAPI/releases/download/v0.1.4/config.json",
                 "models/v1_0/config.json")],
        # the environment of the repo's start-cpu.sh / start-gpu.sh, with the model dir in the asset cache
        cmd={"cpu": "mkdir -p /tmp/reb-ray-out/kokoro/temp_files\n" + http_smoke(
                 f"USE_GPU=false DEVICE_TYPE=cpu {KOKORO_ENV} python -m uvicorn api.src.main:app "
                 "--host 127.0.0.1 --port 8880 --log-level info", 8880, KOKORO_POST),
             "single_gpu": "mkdir -p /tmp/reb-ray-out/kokoro/temp_files\n" + http_smoke(
                 f"USE_GPU=true DEVICE_TYPE=cuda {KOKORO_ENV} python -m uvicorn api.src.main:app "
                 "--host 127.0.0.1 --port 8880 --log-level info", 8880, KOKORO_POST)},
    ),
    "rllm-team--rllm": Extra(
        # RelF1Dataset's own download list (RelBenchDataset.raw_zip_files), kept as zips in the asset cache
        assets=[(f"{zip_name.rsplit('/', 1)[-1]}", "dataset", f"https://relbench.stanford.edu/download/rel-f1/{zip_name}",
                 f"rel-f1/{zip_name}")
                for zip_name in ("db.zip", *(f"tasks/{t}.zip" for t in RELF1_TASKS))]
               # GloveTextEmbedding: SentenceTransformer("sentence-transformers/average_word_embeddings_glove.6B.300d")
               + [hf_cached("sentence-transformers/average_word_embeddings_glove.6B.300d")],
        # unzipped as RelBenchDataset.download() does (db.zip -> raw/, tasks/*.zip -> raw/tasks/) into a
        # fresh writable cache dir: processing writes rel-f1/processed next to raw/
        setup=("rm -rf {O}/rllm-data && mkdir -p {O}/rllm-data/rel-f1/raw/tasks && "
               "python -m zipfile -e {A}/rel-f1/db.zip {O}/rllm-data/rel-f1/raw && "
               + " && ".join(f"python -m zipfile -e {{A}}/rel-f1/tasks/{t}.zip {{O}}/rllm-data/rel-f1/raw/tasks"
                             for t in RELF1_TASKS)),
        # as the paper's run_*_entrypoint.sh: one optimizer step, a small model, the unzipped cache
        flags={"cpu": "--cache_dir {O}/rllm-data --max_steps_per_epoch 1 --hidden_dim 16"},
    ),
    "sgl-project--specforge": Extra(
        # helpers: the EAGLE3 draft config for Qwen2.5-0.5B-Instruct and a 4-conversation train file in
        # scripts/prepare_data.py's output schema; the notes' batch 1 / max-num-steps 1 / backend hf and
        # the rest of the paper harness's arguments as flags
        subs={"<Qwen2.5-0.5B-Instruct>": "{A}/Qwen2.5-0.5B-Instruct", "<cfg>": "{H}/qwen2.5-0.5b-eagle3.json",
              "<sharegpt sample>": "{H}/sharegpt_sample.jsonl"},
        assets=[("Qwen2.5-0.5B-Instruct", "model", hf("Qwen/Qwen2.5-0.5B-Instruct"))],
        flags={"single_gpu": "--batch-size 1 --max-num-steps 1 --num-epochs 1 --target-model-backend hf "
                             "--attention-backend sdpa --chat-template qwen --max-length 256 "
                             "--build-dataset-num-proc 1 --dataloader-num-workers 0 --log-interval 1 "
                             "--eval-interval 1000000000 --save-interval 1000000000 "
                             "--cache-dir {O}/specforge-cache --output-dir {O}/specforge-single-gpu",
               "multi_gpu": "--output-dir {O}/specforge-multi-gpu"},
    ),
    "thu-pacman--chitu": Extra(
        # 1 iteration, 1 request of 8 prompt + 8 output tokens, prompts from tinyshakespeare turned into
        # ShareGPT JSON by helpers/make_sharegpt_prompts.py; reference attention, no CUDA graph (the paper
        # harness's overrides)
        subs={"<path>": "{A}/Qwen2.5-0.5B"},
        assets=[("Qwen2.5-0.5B", "model", hf("Qwen/Qwen2.5-0.5B")),
                ("tinyshakespeare.txt", "dataset",
                 "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt")],
        setup=f"python {{H}}/make_sharegpt_prompts.py {CHITU_PROMPTS}",
        flags={"single_gpu": CHITU_OVERRIDES.format(tp=1)},
        # torchrun starts the ranks: each writes the prompt file (atomically, same content), then runs
        cmd={"multi_gpu": f"--no_python bash -c 'python \"$REB_RAY_HELPERS/make_sharegpt_prompts.py\" "
                          f"{CHITU_PROMPTS} && exec python -m benchmarks.benchmark_offline models=Qwen2.5-0.5B "
                          f"models.ckpt_dir=<path> {CHITU_OVERRIDES.format(tp=2)}'"},
    ),
    "vllm-project--vllm-omni": Extra(
        subs={"<Z-Image-Turbo>": "{A}/Z-Image-Turbo", "<p>": "'a photo of a cat'"},
        assets=[("Z-Image-Turbo", "model", hf("Tongyi-MAI/Z-Image-Turbo"))],
    ),
    "yuanze-lin--olympus": Extra(
        # The paper's 1-sample subset of Olympus.json (first record, text-only, one turn pair) is written
        # by the helper at run time; the rest of the flags are those of the paper's harness runs:
        # projector-only tuning (backbone and vision tower frozen), 128 tokens, no wandb, no checkpoint.
        subs={"<Mipha-3B>": "{A}/Mipha-3B"},
        assets=[("Mipha-3B", "model", hf("zhumj34/Mipha-3B")),
                ("Olympus.json", "dataset", "https://huggingface.co/datasets/Yuanze/Olympus/resolve/main/Olympus.json")],
        setup=OLYMPUS_SAMPLE,
        cmd={"cpu": f"python mipha/train/train.py {OLYMPUS_ARGS} --bf16 True --fp16 False "
                    "--run_name scimlopsbench_cpu --no_cuda True",
             "single_gpu": f"python mipha/train/train.py {OLYMPUS_ARGS} --bf16 False --fp16 True "
                           "--run_name scimlopsbench_single_gpu",
             # deepspeed starts this per rank (--no_python); its --local_rank=N argument lands in $0
             # (TrainingArguments reads LOCAL_RANK from the environment); scripts/zero3.json as in the
             # repo's scripts/mipha/finetune.sh
             "multi_gpu": f"--no_python sh -c '{OLYMPUS_SAMPLE} && exec python mipha/train/train.py "
                          f"--deepspeed scripts/zero3.json {OLYMPUS_ARGS} --bf16 False --fp16 True "
                          "--run_name scimlopsbench_multi_gpu'"},
    ),
}


# ------------------------------------------------------------------- fidelity to the release's scripts
#
# What each stage changes or keeps relative to the release's run_{cpu,single_gpu,multi_gpu}_entrypoint.sh
# (scripts/compare_release.py reads both and lists every difference; a difference counts as documented only
# when the stage's deviation names the element). ALL = every applicable stage.

ALL = ("cpu", "single_gpu", "multi_gpu")
HELPER_NOT_PREPARE = "{helper} writes {what} at run time from the asset cache (the release's prepare step wrote it)"
DIFFUSION_PLANNER_SAMPLE = ("make_sample.py writes the 1-sample synthetic training set (sample_0.npz, train_list.json) at "
                            "run time from no input (the release's prepare step wrote it), with the release's sizes "
                            "but seeded random values and every has-speed-limit flag true, where the release wrote all "
                            "zeros and false flags")
FUNMUSIC_PREPARE = ("prepare_inspiremusic.py writes the one-row data list (the first row of the repository's sample "
                    "parquet) and the 1-epoch config (the repository's examples/music_generation/conf/inspiremusic.yaml "
                    "with the model paths in the asset cache) at run time (the release's prepare step wrote them): "
                    "max_epoch 1, accum_grad 1, log_interval 1, save_per_step 0 and min_acoustic_length 1 as in the "
                    "release; the release's min_length: 1 is not written because the pinned config already says "
                    "min_length: 1")

FIDELITY: dict[str, dict] = {
    "apple--ml-aim": {"env": {"single_gpu": {"OMP_NUM_THREADS": "1"}, "multi_gpu": {"OMP_NUM_THREADS": "1"}}},
    "depthanything--depth-anything-v2": {"flags": {"cpu": "--input-size 224 --pred-only --grayscale",
                                                   "single_gpu": "--input-size 224 --pred-only --grayscale"}},
    "emidan19--deep-tempest": {
        "env": {"cpu": {"PYTHONPATH": "end-to-end", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
                "single_gpu": {"PYTHONPATH": "end-to-end", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
                "multi_gpu": {"PYTHONPATH": "end-to-end", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
                              "PYTHONWARNINGS": "ignore"}}},
    "feifeibear--long-context-attention": {
        "env": {"single_gpu": {"MASTER_ADDR": "127.0.0.1", "NCCL_SHM_DISABLE": "1", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
                               "OMP_NUM_THREADS": "1"},
                "multi_gpu": {"NCCL_SHM_DISABLE": "1", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1", "OMP_NUM_THREADS": "1"}}},
    "flagos-ai--flaggems": {"prefix": {"single_gpu": PYPATH_SRC}},
    "hpcaitech--open-sora": {"prefix": {stage: PYPATH_ROOT for stage in ALL}},
    "kotaro-kinoshita--yomitoku": {"prefix": {"cpu": PYPATH_SRC, "single_gpu": PYPATH_SRC},
                                   "flags": {"cpu": "--outdir {O}/yomitoku --format json",
                                             "single_gpu": "--outdir {O}/yomitoku --format json"}},
    "krlabsorg--lettucedetect": {"log": {"single_gpu": "Starting training on cuda"}},
    "microsoft--renderformer": {"flags": {"single_gpu": "--precision fp16"}},
    "modelscope--clearervoice-studio": {"env": {"cpu": {"OMP_NUM_THREADS": "1"}, "multi_gpu": {"OMP_NUM_THREADS": "1"}}},
    "moonshotai--moba": {"prefix": {"single_gpu": PYPATH_ROOT, "multi_gpu": PYPATH_ROOT}},
    "nvidia--kvpress": {"prefix": {stage: PYPATH_ROOT for stage in ALL}},
    "nvlabs--sana": {"prefix": {"single_gpu": PYPATH_ROOT, "multi_gpu": PYPATH_ROOT}},
    "sgl-project--specforge": {"flags": {"single_gpu": "--tp-size 1 --learning-rate 1e-4 "
                                                       "--embedding-key model.embed_tokens.weight"}},
    "thu-pacman--chitu": {"prefix": {"single_gpu": PYPATH_ROOT, "multi_gpu": PYPATH_ROOT}},
    "vllm-project--vllm-omni": {"flags": {
        "single_gpu": "--seed 42 --cfg_scale 4.0 --num_images_per_prompt 1 --output {O}/vllm-omni/single_gpu.png",
        "multi_gpu": "--output {O}/vllm-omni/multi_gpu.png"}},
}

COMIC_DETECT = ("helper detect_one.py stands for the release's inline script with the same calls (font engine stubbed, "
                "initialize with confidence_threshold=0.3, detect on the RGB image); the release replaced "
                "rtdetr_v2_onnx.hf_hub_download to read detector.onnx and config.json from its prepared model "
                "directory and set the detector's model_dir to it, where detect_one.py lets hf_hub_download read them "
                "from the Hugging Face cache (the asset cache) and the repository keep its default model_dir")

KVPRESS_FRACTION = ("helper one_sample_fraction.py prints the --fraction that keeps one sample, (1 + 1e-6) / the length "
                    "of the dataset's test split, computed at run time where the release's prepare step computed the "
                    "same value and its stage script read it from the prepared manifest")

RENDERFORMER_SCENE = ("{scene} is made at run time by the repository's convert_scene.py (--mesh_path, --output_h5_path) "
                      "from {scenes} (the release's prepare step made it with the same call)")

TEXO_SUBSET = (HELPER_NOT_PREPARE.format(helper="make_unimer_subset.py", what="the one-sample UniMER-Train subset")
               + ": the first row (image as binary bytes, text) of the dataset's first parquet shard, read with pyarrow "
                 "and saved with save_to_disk, where the release saved the first row that "
                 "load_dataset(split='train[:1]') gave, twice (UniMER-Train, UniMER-Eval); that one directory is "
                 "data.train_dataset_path and data.eval_dataset_path; trainer.limit_val_batches=0 for the release's "
                 "0.0 (no validation batch either way)")

SOCIALED_SMOKE = ("helper sbert_smoke.py stands for the release's socialed_sbert_smoketest.py with the same steps (SBERT "
                  "loaded from SocialED/detector/sbert.py, the first --max-samples rows, preprocess, detection, "
                  "evaluate): --data is the whole Event2012.npy and --model the model, both from the asset cache, where "
                  "the release read both paths via --prepare-results, its dataset being the 12-row head of Event2012 "
                  "that its prepare step saved; it writes no --artifact-dir")

SANA_HELPERS = ("helper patch_sana_config.py stands for the release's patch_train_config.py: it copies "
                "configs/sana_config/1024ms/Sana_600M_img1024.yaml with an empty resume_from: (no value, no nested "
                "keys) set to resume_from: latest, as the release's did; helper ensure_null_embed.py stands for the "
                "release's file of that name and writes the same zero null embedding (uncond_prompt_embeds zeros "
                "[1, 300, 2304], its mask ones) unless it exists, to the file named from --root, --text-encoder, "
                "--max-length and --hidden-size (null_embed_diffusers_gemma-2-2b-it_300token_2304.pth), where the "
                "release's took that file's path as --path")

INTERNEVO_PREPARE = ("prepare_internevo.py writes at run time, from the asset cache, the tokenized Alpaca sample (the "
                     "first 64 records of alpaca_data.json through the repository's tools/alpaca_tokenizer.py with "
                     "--split_ratio 0.1, as the release's prepare step made it) and minimal_config.py, which the "
                     "release's stage script wrote inline: the release's values (2-layer InternLM2, hidden 256, SEQ_LEN "
                     "32, micro_bsz 1, 1 step, no checkpoints, flash-attention off) under JOB_NAME "
                     "reb_ray_internevo_smoke, with tensorboard_folder set in the config where the release exported it "
                     "as an environment variable")

FINETRAINERS_HELPERS = ("fail_on_log.py applies the release's runner --fail-regex patterns (a matching output line "
                        "fails a run that exits 0); make_dataset_config.py writes the dataset config over crush-smol at "
                        "run time, the release's keys and values with data_root the asset cache's snapshot (the "
                        "release's prepare step wrote it); LD_LIBRARY_PATH is set by neither: the release prepended an "
                        "FFmpeg library directory recorded in its manifest, and its prepare step recorded none (it does "
                        "not provision FFmpeg)")

VISIONMAMBA_FIX = ("helper run_example.py stands for the release's inline script and runs example.py with the same two "
                   "fixes made in the process: VisionEncoderMambaBlock's __init__ drops the heads keyword it rejects "
                   "(the helper drops every keyword the signature does not name, the release's replacement every one "
                   "but dim, dt_rank, dim_inner and d_state) and process_direction's tensor dumps are discarded (the "
                   "helper throws its printed output away, the release replaced the method with a copy without the "
                   "prints)")

OLYMPUS_SAMPLE = (HELPER_NOT_PREPARE.format(helper="make_olympus_sample.py", what="the 1-sample subset of Olympus.json")
                  + ": its first record without the image key and cut to the first two turns, as in the release, and "
                    "also with the <image> placeholders removed from the turns' text (the release left them in); "
                    "batch_size=1 is --per_device_train_batch_size 1")

TORCHFT_SITE = ("helpers/site/sitecustomize.py (REB_TORCHFT_* variables) stands for the release's sitecustomize.py "
                "(SCIMLOPSBENCH_* variables) with its step, batch size, loader worker, embedding cap and force-CPU "
                "patches; train_ddp.py runs from the repository root with CIFAR-10 unpacked to ./cifar from the asset "
                "cache, where the release ran it from build_output/{stage}/workdir and its sitecustomize.py pointed "
                "torchvision's CIFAR10 root at the prepared dataset directory")

DEVIATIONS: dict[str, dict[str, str]] = {
    "alephpi--texo": {
        **{stage: TEXO_SUBSET for stage in ALL},
        "multi_gpu": TEXO_SUBSET
        + "; the release first required at least 2 GPUs, counted by the CUDA stage's recorded gpu_count, else by "
          "nvidia-smi -L | grep -c '^GPU': reb-ray assigns the GPUs itself"},
    "auto1111sdk--auto1111sdk": {stage: "MNIST comes from the asset cache, its four .gz files unpacked by gunzip into "
                                        ".data/MNIST/raw of the repository, which the run starts from; the release "
                                        "started in its prepared dataset directory, whose .data/MNIST/raw held the same "
                                        "four files still gzipped (torchvision unpacked them), and gave --base its "
                                        "prepare step's unchanged copy of the repository's "
                                        "configs/example_training/toy/mnist.yaml" for stage in ALL},
    "emidan19--deep-tempest": {stage: "make_drunet_options.py writes the options JSON (gpu_ids, dataloader batch size, "
                                      "one iteration), which the release's script wrote inline, and copies the "
                                      "screenshot pairs from the repository's examples/ (the release's two pairs; the "
                                      "release's prepare step copied them), at run time; the pretrained drunet weights "
                                      "come from the asset cache" for stage in ALL},
    "facebookresearch--large_concept_model": {stage: "make_sonar_parquet.py writes the synthetic SONAR-embedding parquet "
                                                     "set at run time from no input (the release's prepare step wrote "
                                                     "it): 8 train and 4 validation documents of 4 sentences, 1024-dim "
                                                     "vectors N(0, 0.006^2), partitioned on split, as in the release, "
                                                     "drawn by numpy with seed 0 (the release: torch.randn, unseeded) "
                                                     "and with other placeholder sentence text"
        + "; its path goes to trainer.training_data.0.parquet_path and trainer.validation_data.0.parquet_path, the "
          "list index as Hydra's override grammar writes it (the release wrote training_data[0])" for stage in ALL},
    "facebookresearch--sapiens": {stage: HELPER_NOT_PREPARE.format(
        helper="make_toy_subset.py", what="the one-sample data root from the toy dataset's zips")
        + ": the first name (sorted) present in all three of images.zip (.png), masks.zip (.png) and normals.zip "
          "(.npy), extracted alone, where the release unpacked the zips and kept the first image by name with the "
          "mask and normal of its stem; train_dataloader.dataset.datasets.0.data_root is set besides the release's "
          "dataset_train.data_root, which never reaches the loader (train_dataloader holds its own copy of "
          "dataset_train, made when the config file was read, before --cfg-options applied)" for stage in ALL},
    "feifeibear--long-context-attention": {stage: "helpers/sitecustomize.py stands for the release's sitecustomize.py, "
                                                  "loaded the same way from PYTHONPATH ahead of the repository: it maps "
                                                  "--attn_type torch, which yunchang's AttnType at the pin does not "
                                                  "know, to TORCH_EFFICIENT as the release's did; PYTHONPATH is those "
                                                  "two directories only, where the release kept the inherited "
                                                  "PYTHONPATH after them"
                                           for stage in ALL},
    "flagos-ai--flaggems": {"single_gpu": "runs the test id test_accuracy_bert[How are you today?-torch.float16] "
                                          "directly, where the release's _single_gpu_impl.py ran (with pytest -q) the "
                                          "first test_accuracy_bert id of examples/model_bert_test.py that pytest "
                                          "--collect-only -q listed, the id its script's header names as the command; "
                                          "the release installed pytest when missing "
                                          "(classifying a failed download by 'Temporary failure|Name or service not "
                                          "known|Connection|timed out|CERTIFICATE|No matching distribution'): the "
                                          "evaluator never installs into the agent's environment"},
    "funaudiollm--funmusic": {
        "single_gpu": FUNMUSIC_PREPARE,
        "multi_gpu": FUNMUSIC_PREPARE + "; each rank writes its own copy and keeps its own --model_dir and "
                     "--tensorboard_dir under /tmp/reb-ray-out/funmusic-rank<LOCAL_RANK> (the release prepared one copy "
                     "before the launch, which both ranks read, and shared one model_dir)"},
    "funaudiollm--sensevoice": {"multi_gpu": "funasr.bin.train_ds is funasr's installed train_ds.py run as a module "
                                             "(the release ran the file); " + HELPER_NOT_PREPARE.format(
                                                 helper="make_sensevoice_jsonl.py", what="the 2-row train/val jsonl")
                                         + "; each rank writes its own copy (the release's two ranks read one)"},
    "geeeekexplorer--nano-vllm": {stage: "the prompt is 'Hello' where the release's was 'introduce yourself', the one "
                                         "prompt of the prompts.json its prepare step wrote, which the release's inline "
                                         "script read" for stage in ALL},
    "haozheliu-st--t-gate": {"single_gpu": "--model is pixart_alpha, fixed here, where the release's prepare step chose "
                                           "the first of its candidates (pixart_alpha first) that downloaded "
                                           "anonymously; --image is the release's branch for its image-conditioned "
                                           "candidate svd, and pixart_alpha takes --prompt, given literally with the text "
                                           "the release's prepare step wrote to prompts.txt"},
    "huggingface--finetrainers": {
        "single_gpu": FINETRAINERS_HELPERS,
        "multi_gpu": FINETRAINERS_HELPERS + "; each rank runs both helpers, so each rank's output is matched against "
                     "the patterns (the release matched the launch's merged output) and each rank writes the config "
                     "(under a temporary name, then renamed)"},
    "hustvl--vim": {"multi_gpu": "SOLVER.IMS_PER_BATCH 2, one image per GPU: detectron2 requires the total batch to "
                                 "divide by the world size, so the release's 1 with --num-gpus 2 fails whatever the "
                                 "environment (a release bug fixed)"},
    "internlm--internevo": {
        "single_gpu": INTERNEVO_PREPARE,
        "multi_gpu": INTERNEVO_PREPARE + "; each rank runs it before train.py (built in a temporary directory and "
                     "renamed, an existing one reused), where the release prepared once before the launch"},
    "krlabsorg--lettucedetect": {stage: HELPER_NOT_PREPARE.format(
        helper="make_ragbench_min.py", what="the RAGBench-format json of 1 train + 1 dev sample (RAGTruth's first two "
                                            "train responses) and the empty RAGTruth json")
        + ": it converts the two responses itself, the way the repository's "
          "lettucedetect/preprocess/preprocess_ragtruth.py does, where the release ran that script over all of RAGTruth "
          "and took the first two train samples of its output" for stage in ALL},
    "kyegomez--multimodalmamba": {
        "cpu": "model_example.py is the release's fallback when example.py is missing; example.py exists at the pin",
        **{stage: "model_example.py is the release's fallback when example.py is missing; example.py exists at the pin; "
                  "helper run_on_device.py stands for the release's entrypoint_wrapper.py with the same steps (pin "
                  "the GPU of --local-rank, else of LOCAL_RANK, make it torch's default device, run the script with "
                  "runpy), without the release's fallbacks to RANK for the rank and to torch.set_default_tensor_type "
                  "on a torch without set_default_device" for stage in ("single_gpu", "multi_gpu")}},
    "kyegomez--visionmamba": {
        "cpu": VISIONMAMBA_FIX,
        "single_gpu": VISIONMAMBA_FIX + "; with --device cuda it stops at once when torch sees no CUDA device, where the "
                      "release's script went on",
        "multi_gpu": VISIONMAMBA_FIX + ", per rank on the GPU of LOCAL_RANK; it stands for the release's generated "
                     "multi_gpu_impl.py (GPU-count check, then torchrun) and torchrun_worker.py"},
    "lightly-ai--lightly-train": {"multi_gpu": "batch_size=2 where the release passed batch_size=1: the global batch "
                                               "of tasks.csv's entry, 1 per GPU, the per-device size that "
                                               "loader_args.batch_size=1 sets in both"},
    "lmcache--lmcache": {stage: "helper lmcache.yaml is the standalone starter's config (the release's prepare step "
                                "wrote it)" for stage in ALL},
    "meta-pytorch--torchft": {
        "cpu": TORCHFT_SITE.format(stage="cpu"),
        "single_gpu": TORCHFT_SITE.format(stage="single_gpu")
        + "; the release's sitecustomize.py also raised when torch saw no CUDA device (SCIMLOPSBENCH_REQUIRE_CUDA=1), "
          "but inside its own try/except, which swallowed the error, so neither checks it",
        "multi_gpu": "helpers/site/sitecustomize.py (REB_TORCHFT_* variables) stands for the release's "
                     "sitecustomize.py; train_ddp.py runs from the repository root with CIFAR-10 unpacked to ./cifar "
                     "from the asset cache (the release ran it from build_output/multi_gpu/workdir); launcher: two "
                     "replica groups, each its own 1-process torchrun as in the release (without its --standalone), "
                     "each pinned to a GPU of its own (CUDA_VISIBLE_DEVICES=0 for group 0, 1 for group 1) where the "
                     "release exported CUDA_VISIBLE_DEVICES=0,1 to both groups, so ranks = 2 counts the GPUs they "
                     "hold; the release's check for >= 2 visible GPUs is reb-ray's GPU assignment"},
    "microsoft--renderformer": {
        "cpu": RENDERFORMER_SCENE.format(scene="the scene HDF5", scenes="examples/cbox.json, the release's first scene"),
        "single_gpu": RENDERFORMER_SCENE.format(scene="the scene HDF5", scenes="examples/cbox.json, the release's first "
                                                                               "scene")
        + "; the release first required torch.cuda.is_available() and at least 1 CUDA device, which is not checked here",
        "multi_gpu": RENDERFORMER_SCENE.format(scene="each rank's scene HDF5",
                                               scenes="examples/cbox.json for rank 0 and examples/shader-ball.json for "
                                                      "rank 1, the release's two scenes in its order")
        + "; the release first required torch.cuda.is_available() and at least 2 CUDA devices, which is reb-ray's GPU "
          "assignment here"},
    "modelscope--clearervoice-studio": {
        **{stage: "helper one_sample.scp, the --tr-list and the --cv-list, has one line naming the repository's "
                  "clearvoice/samples/input.wav in both columns by a path relative to the workdir, where the "
                  "release's prepare step wrote train.scp and cv.scp with that line naming its copy of the file"
           for stage in ("cpu", "single_gpu")},
        "multi_gpu": "helper two_samples.scp, the --tr-list and the --cv-list, has that line once per rank, naming the "
                     "repository's clearvoice/samples/input.wav by a path relative to the workdir, where the release "
                     "wrote the first line of its prepared train.scp and cv.scp (naming its copy of the file) once per "
                     "rank; the work of the release's torchrun_train_wrapper.py, which dropped any --local_rank or "
                     "--local-rank from the arguments (its --flag value / --flag=value parsing) and put --local-rank "
                     "from LOCAL_RANK first, is done inline: train.py gets --local-rank from LOCAL_RANK and runs in "
                     "train/speech_enhancement as in the release, and each "
                     "rank writes to a --checkpoint_dir of its own, rank<LOCAL_RANK>/ (the release's rank 0 wrote to "
                     "the directory itself, rank 1 to its rank1/)"},
    "nvidia--kvpress": {
        **{stage: KVPRESS_FRACTION for stage in ("cpu", "single_gpu")},
        "multi_gpu": KVPRESS_FRACTION + "; device_map='auto' comes from evaluate.py's --device auto, as in the release"},
    "nvlabs--sana": {
        "single_gpu": SANA_HELPERS,
        "multi_gpu": SANA_HELPERS + "; each rank runs both helpers before train.py (each writes under a temporary name "
                     "and renames), where the release ran them once before the launch, and the release's check that "
                     "torch sees at least 2 CUDA devices is reb-ray's GPU assignment here"},
    "ogkalu2--comic-translate": {
        "cpu": COMIC_DETECT,
        "single_gpu": COMIC_DETECT + "; the release checked onnxruntime's available providers first and failed with "
                      "'CUDAExecutionProvider not available in onnxruntime' when CUDA's was missing, where "
                      "detect_one.py fails unless the session really uses CUDA (or TensorRT)"},
    "openbmb--voxcpm": {stage: "make_voxcpm_config.py writes the 1-step fine-tune config (the release's keys and "
                               "values, sample_rate 16000 for VoxCPM-0.5B, the model from the asset cache) and its "
                               "one-row manifest at run time (the release's prepare step wrote the manifest); the row "
                               "is the first of the repository's examples/train_data_example.jsonl, "
                               "{\"audio\": examples/example.wav made absolute, \"text\": \"This is an example audio "
                               "transcript for training.\"}, where the release wrote {\"audio\": a copy of "
                               "examples/example.wav, \"text\": \"This is a minimal benchmark sample for VoxCPM "
                               "fine-tuning.\", \"dataset_id\": 0}" for stage in ALL},
    "ringbdstack--socialed": {
        **{stage: SOCIALED_SMOKE for stage in ("cpu", "single_gpu")},
        "multi_gpu": SOCIALED_SMOKE + "; with --distributed each rank takes every second row of the whole dataset and "
                     "then its first 12 (rows 0, 2, ..., 22 and 1, 3, ..., 23), where the release's two ranks split "
                     "its 12-row subset, 6 rows each"},
    "sgl-project--specforge": {stage: "helper qwen2.5-0.5b-eagle3.json is the draft config the release's prepare step "
                                      "derived from configs/qwen2.5-7b-eagle3.json for Qwen2.5-0.5B-Instruct; helper "
                                      "sharegpt_sample.jsonl, the training file, is 4 short hand-written conversations "
                                      "in the schema scripts/prepare_data.py writes, where the release trained on the "
                                      "8-row sample prepare_data.py --dataset sharegpt --sample-size 8 drew from "
                                      "Aeala/ShareGPT_Vicuna_unfiltered; the model comes from the asset cache, so no "
                                      "--model-download-dir" for stage in ALL},
    "swivid--f5-tts": {"multi_gpu": "make_f5_dataset.py writes the 2-row dataset at run time (the release's prepare "
                                    "step wrote it): both rows are the repository's own clip "
                                    "src/f5_tts/infer/examples/basic/basic_ref_en.wav with the release's transcript, as "
                                    "in the release (which pointed at a copy of that clip), its duration read with the "
                                    "wave module (the release used torchaudio); each rank writes and trains on a "
                                    "dataset of its own (data/reb_ray_smoke_rank<LOCAL_RANK>_pinyin, "
                                    "datasets.name=reb_ray_smoke_rank<LOCAL_RANK>) with its own hydra.run.dir, where "
                                    "the release's two ranks read one dataset (../benchmark_assets/dataset/f5tts_minimal) "
                                    "prepared before the launch; checkpoints go to ckpts/reb_ray_smoke"},
    "thu-pacman--chitu": {stage: HELPER_NOT_PREPARE.format(helper="make_sharegpt_prompts.py",
                                                           what="the ShareGPT-form prompts from tinyshakespeare")
                          + ": 8 prompts of at least 400 characters, built from the text as the release built them, "
                            "where the release wrote 64 (SCIMLOPSBENCH_DATASET_NUM_SAMPLES)"
                          for stage in ALL},
    "vllm-project--vllm-omni": {stage: "the prompt is 'a photo of a cat' where the release's was 'a cup of coffee on "
                                       "the table', the one line of the prompts.txt its prepare step wrote; the release "
                                       "first checked that vllm imports and, when it did not and the run was not "
                                       "offline, pip-installed vllm==0.12.0 (or SCIMLOPSBENCH_VLLM_SPEC) into the "
                                       "environment, failing with a message naming vllm_omni/config/model.py if it "
                                       "still did not: the evaluator never installs into the agent's environment, so "
                                       "here a missing vllm fails inside the run"
                                for stage in ALL},
    "yuanze-lin--olympus": {
        "cpu": OLYMPUS_SAMPLE,
        "single_gpu": OLYMPUS_SAMPLE + "; the release first required torch.cuda.device_count() >= 1, which is not "
                      "checked here",
        "multi_gpu": OLYMPUS_SAMPLE + "; each rank writes the subset (under a temporary name, then renamed) where the "
                     "release wrote it once before the launch; the release first required "
                     "torch.cuda.device_count() >= 2, which is reb-ray's GPU assignment here, and an importable "
                     "deepspeed, whose absence fails the launch here"},
    "zhengyinan-air--diffusion-planner": {
        **{stage: DIFFUSION_PLANNER_SAMPLE for stage in ("cpu", "single_gpu")},
        "multi_gpu": DIFFUSION_PLANNER_SAMPLE + "; each rank writes its own copy"
        + "; --port passes torchrun's MASTER_PORT on (ddp_setup_universal overwrites MASTER_PORT with --port)"},
}


def _apply_fidelity() -> None:
    """Merge FIDELITY and DEVIATIONS into EXTRA (stage by stage; env tables key by key)."""
    for task_id, changes in FIDELITY.items():
        extra = EXTRA.setdefault(task_id, Extra())
        for field_name, per_stage in changes.items():
            table = getattr(extra, field_name)
            for stage, value in per_stage.items():
                if field_name == "env":
                    table[stage] = {**table.get(stage, {}), **value}
                elif field_name == "flags":  # merged after the stage's own flags (a later key replaces)
                    table[stage] = f"{table[stage]} {value}" if stage in table else value
                else:
                    table[stage] = value
    for task_id, per_stage in DEVIATIONS.items():
        EXTRA.setdefault(task_id, Extra()).deviation.update(per_stage)


_apply_fidelity()

# ------------------------------------------------------------------------ command transcription


class TranscriptionError(Exception):
    pass


_FLAG_KV = re.compile(r"^\+{0,2}[a-z_][\w.\-]*=")
_NOTES = re.compile(r"\s*\([^()]*\)")
_GPU_WORDS = re.compile(r"\s+(?:on|with)\s+(?:CUDA_VISIBLE_DEVICES=\S+|GPU\d(?:/GPU\d)*)")
_CD = re.compile(r"^cd\s+(\S+);\s*")


def is_flag(tok: str) -> bool:
    return (tok.startswith("-") and tok not in ("-", "...")) or bool(_FLAG_KV.match(tok))


def key_of(tok: str) -> str:
    return tok.split("=", 1)[0].lstrip("-+").replace("-", "_")


def items(tokens: list[str]) -> list[list[str]]:
    """Group tokens into items: [--flag, value], [--flag=value], [key=value], [positional]."""
    out: list[list[str]] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.startswith("-") and "=" not in tok and i + 1 < len(tokens) and not is_flag(tokens[i + 1]) \
                and tok not in ("-m", "-u", "-c"):
            out.append([tok, tokens[i + 1]])
            i += 2
        else:
            out.append([tok])
            i += 1
    return out


def merge(base: list[str], overrides: list[str]) -> list[str]:
    """`base` with each flag item of `overrides` replacing the item with the same key (or a dotted
    key ending in it), else appended."""
    merged = items(base)
    for item in items(overrides):
        if not is_flag(item[0]):
            raise TranscriptionError(f"not a flag in a 'same' entry: {item[0]!r}")
        key = key_of(item[0])
        for i, old in enumerate(merged):
            if is_flag(old[0]) and (key_of(old[0]) == key or key_of(old[0]).endswith("." + key)):
                # keep the base's spelling of a dotted key: lightning.trainer.max_steps=1
                if "=" in item[0] and "=" in old[0] and not item[0].startswith("-"):
                    item = [f"{old[0].split('=', 1)[0]}={item[0].split('=', 1)[1]}"]
                merged[i] = item
                break
        else:
            merged.append(item)
    return [tok for item in merged for tok in item]


def gpuify(tokens: list[str]) -> list[str]:
    """Switch a CPU command's explicit device choice to the GPU (rule 3)."""
    out = []
    for i, tok in enumerate(tokens):
        prev = tokens[i - 1] if i else ""
        if re.fullmatch(r"(?:[\w.]+\.)?accelerator=cpu", tok):
            tok = tok[:-3] + "gpu"
        elif tok == "cpu" and prev == "--accelerator":
            tok = "gpu"
        elif tok == "cpu" and prev == "--device":
            tok = "cuda"
        out.append(tok)
    return out


def substitute(text: str, task_id: str, extra: Extra, strict: bool = True) -> str:
    """Rule 4: placeholders, then {A} and {O}. `strict`: fail on a placeholder left over (off for
    hand-written lines, whose shell and Python have their own < and >)."""
    for placeholder, value in sorted(extra.subs.items(), key=lambda kv: -len(kv[0])):
        text = text.replace(placeholder, value)
    left = re.findall(r"<[^<>\s][^<>]*>", text)
    if strict and left:
        raise TranscriptionError(f"no substitution for {left}")
    for flag in OUTPUT_FLAGS:
        text = text.replace(f"{flag} ...", f"{flag} {{O}}/{task_id}")
    return text.replace("{A}", f"{ASSETS_VAR}/{task_id}").replace("{O}", OUT).replace("{H}", HELPERS_VAR)


def quote(tok: str) -> str:
    if re.fullmatch(r"[\w@%+=:,./$\-\[\]]+", tok) and "$(" not in tok:
        return tok
    if ASSETS_VAR in tok and not re.search(r'["\\`]', tok):
        return f'"{tok}"'
    return shlex.quote(tok)


def split(text: str) -> list[str]:
    return shlex.split(text, posix=True)


def strip_launcher(tokens: list[str]) -> tuple[str, list[str]]:
    """Rule 5: (launcher, per-rank command) of a multi-GPU command line."""
    head3, launcher = tokens[:3], None
    if head3 == ["python", "-m", "torch.distributed.run"] or tokens[:1] == ["torchrun"]:
        launcher = "torchrun"
    elif head3 == ["python", "-m", "accelerate.commands.launch"] or tokens[:2] == ["accelerate", "launch"]:
        launcher = "accelerate"
    elif head3 == ["python", "-m", "deepspeed"] or tokens[:1] == ["deepspeed"]:
        launcher = "deepspeed"
    if launcher is None:
        return "python", tokens
    rest = tokens[1:] if tokens[0] in ("torchrun", "deepspeed") else tokens[3:]
    if rest[:1] == ["launch"] and launcher == "accelerate":
        rest = rest[1:]
    while rest and rest[0].startswith("-") and rest[0] not in ("-m", "--no_python", "--no-python"):
        takes_value = "=" not in rest[0] and rest[0] not in ("--standalone",)
        rest = rest[2:] if takes_value else rest[1:]
    if rest[:1] in (["--no_python"], ["--no-python"]):
        return launcher, rest
    return launcher, ["python", *rest]


@dataclass
class Stage:
    applicable: bool
    entry: str
    skip_reason: str | None = None
    tokens: list[str] | None = None  # CSV-derived command (rules 2-4), launcher still included
    shell: str | None = None  # hand-written command
    base: list[str] | None = None  # the command as a base for a later `same` entry
    launcher: str | None = None
    workdir: str = "."


def transcribe(stage: str, entry: str, base: list[str] | None, task_id: str, extra: Extra) -> tuple[list[str], str]:
    """Rules 2-4 for one applicable stage: (tokens, workdir)."""
    text, workdir = entry.strip(), "."
    match = _CD.match(text)
    if match:
        workdir, text = match.group(1), text[match.end():]
    text = _GPU_WORDS.sub("", _NOTES.sub("", text)).strip()
    text = substitute(text, task_id, extra)
    if text.startswith("same "):
        if base is None:
            raise TranscriptionError("'same' with no base command")
        words = split(text[len("same "):].replace(";", " "))
        while words and not is_flag(words[0]):
            words = words[1:]
        tokens = merge(base, words)
    else:
        tokens = split(text)
        if "..." in tokens:  # `script ... flags`: the base command's arguments after the same script
            at = tokens.index("...")
            script = tokens[at - 1]
            if base is None or script not in base:
                raise TranscriptionError(f"elided arguments after {script!r} and no base command holds it")
            tokens = tokens[:at] + merge(base[base.index(script) + 1:], tokens[at + 1:])
    if stage != "cpu":
        tokens = gpuify(tokens)
    if stage in extra.flags:
        tokens = merge(tokens, split(substitute(extra.flags[stage], task_id, extra)))
    prose = PROSE.intersection(tokens)
    if prose:
        raise TranscriptionError(f"prose left in the command: {sorted(prose)}")
    return tokens, workdir


def skip_reason(entry: str) -> str:
    text = entry.strip()
    text = text[len("skipped "):] if text.startswith("skipped ") else text
    return text or "not_applicable"


def build_stages(row: dict[str, str], task_id: str, extra: Extra) -> dict[str, Stage]:
    stages: dict[str, Stage] = {}
    cpu_tokens: list[str] | None = None
    for stage in STAGES:
        entry = row[f"{stage}_entry"]
        supported = row[f"supports_{stage}"].strip()
        if supported not in ("yes", "no"):
            raise TranscriptionError(f"supports_{stage} = {supported!r}: expected yes/no")
        if (supported == "no") != (entry.strip().startswith("skipped") or not entry.strip()):
            raise TranscriptionError(f"supports_{stage} = {supported} but the entry is {entry!r}")
        if supported == "no":
            stages[stage] = Stage(False, entry, skip_reason=skip_reason(entry))
            continue
        base = cpu_tokens
        if stage == "multi_gpu" and stages["single_gpu"].base is not None:
            base = stages["single_gpu"].base
        result = Stage(True, entry)
        if stage in extra.cmd:
            result.shell = substitute(extra.cmd[stage], task_id, extra, strict=False)
            if not re.search(r"[;&|\n<>]|\$\(", result.shell):  # a plain command: a base for `same`
                result.base = split(result.shell)
        else:
            try:
                result.tokens, result.workdir = transcribe(stage, entry, base, task_id, extra)
            except TranscriptionError as exc:
                raise TranscriptionError(f"{task_id} {stage}: {exc} (entry: {entry!r})") from None
        result.workdir = extra.workdir.get(stage, result.workdir)
        if result.tokens is not None:
            result.base = result.tokens
        if stage == "cpu":
            cpu_tokens = result.base
        stages[stage] = result
    multi = stages["multi_gpu"]
    if multi.applicable:
        if multi.tokens is not None:
            multi.launcher, multi.tokens = strip_launcher(multi.tokens)
        else:  # a hand-written line: the launcher as the CSV entry names it
            words = _NOTES.sub("", multi.entry)
            if words.startswith("same "):  # the launcher of the command it repeats
                single = stages["single_gpu"]
                words += " " + (single.shell or " ".join(single.tokens or []))
            multi.launcher = ("torchrun" if re.search(r"torch\.distributed\.run|torchrun", words)
                              else "accelerate" if "accelerate" in words
                              else "deepspeed" if "deepspeed" in words else "python")
        if extra.launcher is not None:
            multi.launcher = extra.launcher
    return stages


def command_line(stage_name: str, stage: Stage, task_id: str, extra: Extra) -> str:
    line = stage.shell if stage.shell is not None else " ".join(quote(t) for t in stage.tokens or [])
    launched = stage_name == "multi_gpu" and stage.launcher != "python"
    if extra.setup and not launched:
        line = f"{substitute(extra.setup, task_id, extra)} && {line}"
    if stage_name in extra.prefix:
        prefix = substitute(extra.prefix[stage_name], task_id, extra, strict=False)
        line = f"{prefix} {line}" if launched else f"export {prefix} && {line}"
    return line


# -------------------------------------------------------------------------------- TOML output


def toml_str(value: str) -> str:
    if "\n" in value and "'''" not in value:
        return "'''\n" + value + ("" if value.endswith("\n") else "\n") + "'''"
    return json.dumps(value, ensure_ascii=False)


def comment(text: str, prefix: str = "# ") -> list[str]:
    return [f"{prefix}{line}".rstrip() for line in text.splitlines() or [""]]


def render(row: dict[str, str], task_id: str, stages: dict[str, Stage], extra: Extra) -> tuple[str, dict]:
    """(file text, the data it must parse back to)."""
    data: dict = {"id": task_id, "suite": SUITE, "category": row["category"],
                  "c0_baseline_total": int(row["c0_baseline_total"]),
                  "source": {"git": row["git_url"], "commit": row["commit"]}, "stages": {}}
    lines = [f"# ResearchEnvBench task {row['repo_slug']} (paper: arXiv 2603.06739).",
             "# Generated by scripts/make_researchenvbench_suite.py from tasks.csv: edit the generator, not this file.",
             *comment(f"notes: {row['notes'].strip() or '(none)'}"),
             *comment(f"assets (tasks.csv): {row['assets'].strip() or '(none)'}")]
    lines += [f"# TODO(helper): {todo}" for todo in extra.todo]
    lines += ["", f"id = {toml_str(task_id)}", f"suite = {toml_str(SUITE)}", f"category = {toml_str(row['category'])}",
              f"c0_baseline_total = {int(row['c0_baseline_total'])}",
              f"source = {{ git = {toml_str(row['git_url'])}, commit = {toml_str(row['commit'])} }}"]
    for name in STAGES:
        stage = stages[name]
        table: dict = {}
        lines += ["", *comment(f"tasks.csv {name}_entry: {stage.entry.strip()}"), f"[stages.{name}]"]
        if not stage.applicable:
            table = {"applicable": False, "skip_reason": stage.skip_reason}
            lines += ["applicable = false", f"skip_reason = {toml_str(stage.skip_reason)}"]
        else:
            table["command"] = command_line(name, stage, task_id, extra)
            lines.append(f"command = {toml_str(table['command'])}")
            if name in extra.deviation:
                table["deviation"] = extra.deviation[name]
                lines.append(f"deviation = {toml_str(extra.deviation[name])}")
            if extra.side_logs.get(name):
                table["side_logs"] = list(extra.side_logs[name])
                lines.append("side_logs = [" + ", ".join(toml_str(p) for p in table["side_logs"]) + "]")
            if stage.workdir != ".":
                table["workdir"] = stage.workdir
                lines.append(f"workdir = {toml_str(stage.workdir)}")
            if extra.env.get(name):
                table["env"] = dict(extra.env[name])
                lines.append("env = { " + ", ".join(f"{k} = {toml_str(v)}" for k, v in table["env"].items()) + " }")
            if name == "multi_gpu":
                table.update(launcher=stage.launcher, ranks=RANKS)
                lines += [f"launcher = {toml_str(stage.launcher)}", f"ranks = {RANKS}"]
            table["timeout_s"] = TIMEOUT_S[name]
            lines.append(f"timeout_s = {TIMEOUT_S[name]}")
            table["success"] = {"exit_code": 0}
            if name in extra.log:
                table["success"]["log_pattern"] = extra.log[name]
                lines.append(f"success = {{ exit_code = 0, log_pattern = {toml_str(extra.log[name])} }}")
            else:
                lines.append("success = { exit_code = 0 }")
        data["stages"][name] = table
    lines += ["", "# C2 (CUDA alignment) applies to every task of the paper.", "[stages.cuda]", "applicable = true"]
    data["stages"]["cuda"] = {"applicable": True}
    assets = []
    for entry in extra.assets:
        if isinstance(entry, dict):  # hf_cached(...)
            asset = dict(entry)
        else:
            name, kind, source, *path = entry
            asset = {"name": name, "kind": kind, "path": f"{task_id}/{path[0] if path else name}"}
            if source is not None:
                asset["source"] = source
        if asset["name"] in extra.asset_stages:
            asset["stages"] = list(extra.asset_stages[asset["name"]])
        assets.append(asset)
        lines += ["", "[[assets]]", *(f"{k} = {toml_str(v)}" for k, v in asset.items())]
    if assets:
        data["assets"] = assets
    unknown = set(extra.asset_stages) - {a["name"] for a in assets}
    if unknown:
        raise TranscriptionError(f"{task_id}: asset_stages names undeclared assets {sorted(unknown)}")
    return "\n".join(lines) + "\n", data


def check_helpers(task_id: str, text: str, suite_dir: Path) -> None:
    """Every `$REB_RAY_HELPERS/<x>` a command uses exists in the project's tasks/<suite>/<task-id>/helpers/
    (helpers are written by hand next to the generated spec, so this checks the project, not --out)."""
    for used in re.findall(r"\$REB_RAY_HELPERS/([\w.\-/]+)", text):
        if not (suite_dir / task_id / "helpers" / used).exists():
            raise TranscriptionError(f"{task_id}: command uses $REB_RAY_HELPERS/{used} but helpers/{used} does not exist")


def check_assets(task_id: str, text: str, extra: Extra) -> None:
    """Every `$REB_RAY_ASSETS/<task-id>/<x>` a command uses lies under a declared asset."""
    declared = [f"{task_id}/{path[0] if path else name}"
                for name, _kind, _source, *path in (e for e in extra.assets if not isinstance(e, dict))]
    for used in re.findall(r"\$REB_RAY_ASSETS/([\w.\-]+/[\w.\-]+)", text):
        if not any(d == used or d.startswith(used + "/") for d in declared):
            raise TranscriptionError(f"{task_id}: command uses $REB_RAY_ASSETS/{used} but no asset declares it")


# ---------------------------------------------------------------------------------------- main


def task_id_of(slug: str) -> str:
    task_id = slug.lower().replace("@", "--")
    if not re.fullmatch(r"[a-z0-9][a-z0-9._-]*", task_id):
        raise TranscriptionError(f"{slug!r} does not give a valid directory name ({task_id!r})")
    return task_id


def owner_repo(git_url: str) -> str:
    return "/".join(git_url.rstrip("/").removesuffix(".git").split("/")[-2:])


def check_c0(rows: list[dict[str, str]], canonical: dict) -> None:
    repos = canonical["repos"]
    problems = []
    for row in rows:
        name, total = owner_repo(row["git_url"]), int(row["c0_baseline_total"])
        if repos.get(name) != total:
            problems.append(f"{name}: tasks.csv {total} != c0_baseline_totals.json {repos.get(name)}")
    if set(repos) != {owner_repo(r["git_url"]) for r in rows}:
        problems.append(f"repositories differ: {sorted(set(repos) ^ {owner_repo(r['git_url']) for r in rows})}")
    if len(rows) != canonical["expected_repo_count"]:
        problems.append(f"{len(rows)} rows, expected {canonical['expected_repo_count']}")
    if sum(int(r["c0_baseline_total"]) for r in rows) != canonical["expected_total_sum"]:
        problems.append(f"C0 totals sum to {sum(int(r['c0_baseline_total']) for r in rows)}, "
                        f"expected {canonical['expected_total_sum']}")
    if problems:
        raise SystemExit("C0 baseline mismatch:\n  " + "\n  ".join(problems))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA, help="directory with tasks.csv and c0_baseline_totals.json")
    parser.add_argument("--out", type=Path, default=ROOT / "tasks" / SUITE, help="suite directory to write")
    args = parser.parse_args(argv)

    with open(args.data / "tasks.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    check_c0(rows, json.loads((args.data / "c0_baseline_totals.json").read_text(encoding="utf-8")))
    ids = [task_id_of(row["repo_slug"]) for row in rows]
    unknown = set(EXTRA) - set(ids)
    if len(set(ids)) != len(ids) or unknown:
        raise SystemExit(f"duplicate task ids or EXTRA entries for unknown tasks: {sorted(unknown)}")

    for row, task_id in zip(rows, ids):
        extra = EXTRA.get(task_id, Extra())
        try:
            stages = build_stages(row, task_id, extra)
            text, data = render(row, task_id, stages, extra)
            check_assets(task_id, text, extra)
            check_helpers(task_id, text, ROOT / "tasks" / SUITE)
        except TranscriptionError as exc:
            raise SystemExit(f"cannot transcribe {row['repo_slug']}: {exc}") from None
        if tomllib.loads(text) != data:
            raise SystemExit(f"{task_id}: the written TOML does not parse back to what was meant")
        path = args.out / task_id / "task.toml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    print(f"wrote {len(rows)} tasks to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
