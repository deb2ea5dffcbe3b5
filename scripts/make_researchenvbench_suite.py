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
above each stage in the generated file). Where the paper's harness generated a config or a tiny
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
TIMEOUT_S = {"cpu": 900, "single_gpu": 900, "multi_gpu": 1200}
RANKS = 2
OUT = "/tmp/reb-ray-out"  # scratch directory for outputs the CSV writes as `--outdir ...`
ASSETS_VAR = "$REB_RAY_ASSETS"
HELPERS_VAR = "$REB_RAY_HELPERS"  # the task's helpers/ directory, in the sandbox during probes only
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
    cmd: stage -> hand-written shell line (for prose entries); may use {A} and {O}.
    flags: stage -> extra flags merged like a `same` entry's (values the notes state).
    env / workdir: stage -> stage env table / workdir.
    setup: shell line run before the command of every stage not started by a launcher.
    log: stage -> success log pattern.
    launcher: the multi-GPU launcher when the entry's words would mislead (e.g. "no torchrun").
    todo: lines written as `# TODO(helper): ...` at the top of the spec.
    """

    subs: dict[str, str] = field(default_factory=dict)
    assets: list[tuple] = field(default_factory=list)
    cmd: dict[str, str] = field(default_factory=dict)
    flags: dict[str, str] = field(default_factory=dict)
    env: dict[str, dict[str, str]] = field(default_factory=dict)
    workdir: dict[str, str] = field(default_factory=dict)
    setup: str | None = None
    log: dict[str, str] = field(default_factory=dict)
    launcher: str | None = None
    todo: list[str] = field(default_factory=list)


def hf(repo: str) -> str:
    return f"hf://{repo}"


def hf_dataset(repo: str) -> str:
    return f"hf://datasets/{repo}"


def hf_cached(repo: str, kind: str = "model") -> dict:
    """An asset in the Hugging Face hub cache layout (HF_HOME=$REB_RAY_ASSETS/huggingface), for
    code that calls from_pretrained("org/name") / load_dataset("org/name") by id."""
    source = hf_dataset(repo) if kind == "dataset" else hf(repo)
    return {"name": repo, "kind": kind, "source": source, "layout": "hf_cache"}


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
    print(r.status, r.read()[:500])
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
sys.exit(0 if audio else "empty audio")
"""

KOKORO_ENV = ("USE_ONNX=false PYTHONPATH=.:api MODEL_DIR=$REB_RAY_ASSETS/remsky--kokoro-fastapi/models "
              "VOICES_DIR=src/voices/v1_0")
SENSEVOICE_ENV = "MODELSCOPE_CACHE=$REB_RAY_ASSETS/funaudiollm--sensevoice/modelscope"

NANOVLLM = ("python -c \"from nanovllm import LLM, SamplingParams; "
            "llm = LLM('$REB_RAY_ASSETS/geeeekexplorer--nano-vllm/Qwen3-0.6B', tensor_parallel_size={tp}); "
            "print(llm.generate(['Hello'], SamplingParams(max_tokens=1)))\"")

VISIONMAMBA = ("python -c \"import runpy, torch; torch.set_default_device('{device}'); "
               "runpy.run_path('example.py', run_name='__main__')\"")

COMIC = ("python -c \"import numpy as np; from PIL import Image; "
         "from modules.detection.rtdetr_v2_onnx import RTDetrV2ONNXDetection; "
         "d = RTDetrV2ONNXDetection(); d.initialize(device='{device}'); "
         "img = np.array(Image.open('$REB_RAY_ASSETS/ogkalu2--comic-translate/hopper.jpg').convert('RGB')); "
         "print(len(d.detect(img)), 'text blocks')\"")

TORCHFT_LIGHTHOUSE = (
    "RUST_BACKTRACE=1 torchft_lighthouse --min_replicas 1 --quorum_tick_ms 100 --join_timeout_ms 10000 "
    "> /tmp/reb-ray-lighthouse.log 2>&1 & lh=$!; "
    "for i in $(seq 120); do python -c \"import socket; socket.create_connection(('127.0.0.1', 29510), 1)\" "
    "2>/dev/null && break; sleep 1; done; "
    "export TORCHFT_LIGHTHOUSE=http://localhost:29510 TORCH_HOME={A}/torch; ")
TORCHFT_CIFAR = "mkdir -p cifar && tar -xzf {A}/cifar-10-python.tar.gz -C cifar"


def torchft_single(port: int) -> str:
    return (f"{TORCHFT_CIFAR} && {{ {TORCHFT_LIGHTHOUSE}"
            f"python -m torch.distributed.run --standalone --nproc_per_node 1 --master_port {port} train_ddp.py; "
            "rc=$?; kill $lh; exit $rc; }")


TORCHFT_MULTI = (
    f"{TORCHFT_CIFAR} && {{ {TORCHFT_LIGHTHOUSE}export NUM_REPLICA_GROUPS=2; "
    "REPLICA_GROUP_ID=0 CUDA_VISIBLE_DEVICES=0 python -m torch.distributed.run --nnodes=1 --nproc_per_node=1 "
    "--master_port=29600 train_ddp.py & g0=$!; "
    "REPLICA_GROUP_ID=1 CUDA_VISIBLE_DEVICES=1 python -m torch.distributed.run --nnodes=1 --nproc_per_node=1 "
    "--master_port=29601 train_ddp.py & g1=$!; "
    "wait $g0; r0=$?; wait $g1; r1=$?; kill $lh; [ $r0 -eq 0 ] && [ $r1 -eq 0 ]; }")

OPEN_SORA_CKPTS = ("--model.from_pretrained {A}/Open-Sora-v2/Open_Sora_v2.safetensors "
                   "--ae.from_pretrained {A}/Open-Sora-v2/hunyuan_vae.safetensors "
                   "--t5.from_pretrained {A}/google/t5-v1_1-xxl --clip.from_pretrained {A}/openai/clip-vit-large-patch14")

OLYMPUS_SAMPLE = "python {H}/make_olympus_sample.py --src {A}/Olympus.json --out {O}/olympus/olympus-sample.json"
OLYMPUS_ARGS = ("--model_name_or_path <Mipha-3B> --version v0 --data_path {O}/olympus/olympus-sample.json "
                "--image_folder {O}/olympus --tune_mm_mlp_adapter True --freeze_vision_tower True "
                "--freeze_backbone True --mm_use_im_start_end False --mm_use_im_patch_token False "
                "--max_steps 1 --per_device_train_batch_size 1 --gradient_accumulation_steps 1 --save_strategy no "
                "--logging_steps 1 --model_max_length 128 --dataloader_num_workers 0 --report_to none "
                "--output_dir {O}/olympus/out")

SANA_PREP = ("python {H}/patch_sana_config.py configs/sana_config/1024ms/Sana_600M_img1024.yaml "
             "<patched Sana_600M_img1024.yaml> && python {H}/ensure_null_embed.py --root {O}/sana/null_embed "
             "--text-encoder gemma-2-2b-it --max-length 300 --hidden-size 2304")
SANA_ARGS = ("--config_path=<patched Sana_600M_img1024.yaml> --work_dir={O}/sana/work --report_to=tensorboard "
             "--name=reb-ray \"--data.data_dir=[{A}/toy_data]\" --data.type=SanaWebDatasetMS --data.load_vae_feat=true "
             "--load_from={A}/Sana_600M_1024px/checkpoints/Sana_600M_1024px_MultiLing.pth "
             "--train.train_batch_size=1 --train.num_workers=0 --train.early_stop_hours=0 --train.visualize=false "
             "--train.local_save_vis=false --train.null_embed_root={O}/sana/null_embed "
             "--train.valid_prompt_embed_root={O}/sana/valid_prompt_embed")

RENDERFORMER_SCENE = ("python scene_processor/convert_scene.py examples/{scene}.json "
                      "--mesh_path {dir}/{scene}.obj --output_h5_path {dir}/{scene}.h5")

FINETRAINERS_CONFIG = ("python {H}/make_dataset_config.py --data-root {A}/crush-smol "
                       "--out {O}/finetrainers/dataset_config.json")
FINETRAINERS_FAIL = "--fail-regex \"An error occurred during training:\""
FINETRAINERS_ARGS = ("--model_name wan --pretrained_model_name_or_path {A}/Wan2.1-T2V-1.3B-Diffusers "
                     "--dataset_config {O}/finetrainers/dataset_config.json --training_type lora "
                     "--target_modules \"blocks.*(to_q|to_k|to_v|to_out.0)\" --batch_size 1 --train_steps 1 "
                     "--max_data_samples 1 --checkpointing_steps 0 --report_to none "
                     "--output_dir {O}/finetrainers/out --logging_dir {O}/finetrainers/logs")

MNIST_FILES = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
               "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")

EXTRA: dict[str, Extra] = {
    "auto1111sdk--auto1111sdk": Extra(
        subs={"<mnist.yaml>": "auto1111sdk/modules/generative/configs/example_training/toy/mnist.yaml"},
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
        subs={"<bench cfg>": "{A}/inspiremusic.yaml", "<1-row list>": "{A}/prompt.list",
              "<model>": "{A}/InspireMusic-Base"},
        assets=[("InspireMusic-Base", "model", hf("FunAudioLLM/InspireMusic-Base")),
                ("inspiremusic.yaml", "file", None), ("prompt.list", "file", None)],
        cmd={"single_gpu": "python inspiremusic/bin/inference.py --task text-to-music --gpu 0 --config <bench cfg> "
                           "--prompt_data <1-row list> --llm_model <model>/llm.pt"},
        todo=["single_gpu: the CSV elides the rest of the inference.py arguments ('... fast mode'); "
              "inspiremusic.yaml (benchmark config) and prompt.list (one prompt row) are generated",
              "multi_gpu: train.py runs with a config patched to max_epoch=1 on the repo's "
              "examples/music_generation/data/samples/parquet; its --config/--train_data arguments are not in the CSV"],
    ),
    "funaudiollm--sensevoice": Extra(
        assets=[("asr_example_en.wav", "file",
                 "https://isv-data.oss-cn-hangzhou.aliyuncs.com/ics/MaaS/ASR/test_audio/asr_example_en.wav"),
                ("modelscope", "model", None)],
        cmd={"cpu": http_smoke(f"{SENSEVOICE_ENV} SENSEVOICE_DEVICE=cpu python api.py", 50000, SENSEVOICE_POST),
             "single_gpu": http_smoke(f"{SENSEVOICE_ENV} SENSEVOICE_DEVICE=cuda:0 python api.py", 50000,
                                      SENSEVOICE_POST),
             # <funasr>/bin/train_ds.py is funasr's installed trainer: the same file as `-m funasr.bin.train_ds`;
             # data and epochs as the repo's finetune.sh, cut to 1 epoch.
             "multi_gpu": "python -m funasr.bin.train_ds ++model=iic/SenseVoiceSmall ++trust_remote_code=true "
                          "++train_data_set_list=data/train_example.jsonl ++valid_data_set_list=data/val_example.jsonl "
                          "++train_conf.max_epoch=1 ++train_conf.use_deepspeed=false "
                          "++train_conf.deepspeed_config=deepspeed_conf/ds_stage1.json ++output_dir={O}/sensevoice"},
        todo=["model iic/SenseVoiceSmall comes from ModelScope (not Hugging Face): place a ModelScope cache "
              "holding it at $REB_RAY_ASSETS/funaudiollm--sensevoice/modelscope (used as MODELSCOPE_CACHE)"],
    ),
    "geeeekexplorer--nano-vllm": Extra(
        assets=[("Qwen3-0.6B", "model", hf("Qwen/Qwen3-0.6B"))],
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
        subs={"<generated minimal_config.py>": "{A}/minimal_config.py", "<minimal_config.py>": "{A}/minimal_config.py"},
        assets=[("minimal_config.py", "file", None),
                ("alpaca_data.json", "dataset",
                 "https://raw.githubusercontent.com/tatsu-lab/stanford_alpaca/main/alpaca_data.json"),
                ("tokenizer.model", "model", hf_file("internlm/internlm2-7b", "tokenizer.model"))],
        todo=["minimal_config.py: a tiny-model InternEvo config (1 step) generated by the paper's harness, "
              "reading alpaca_data.json tokenized to bin/meta with tokenizer.model"],
    ),
    "krlabsorg--lettucedetect": Extra(
        subs={"<empty>": "{A}/ragtruth-empty", "<2-sample json>": "{A}/ragbench-2.json",
              "<ettin-17m>": "{A}/ettin-encoder-17m"},
        assets=[("ettin-encoder-17m", "model", hf("jhu-clsp/ettin-encoder-17m")),
                ("ragtruth-empty", "dataset", None), ("ragbench-2.json", "dataset", None)],
        log={"cpu": "Starting training on cpu"},
        todo=["ragbench-2.json: 2 samples in RAGBench format built from the RAGTruth raw files "
              "(raw.githubusercontent.com ParticleMedia/RAGTruth); ragtruth-empty: an empty RAGTruth directory"],
    ),
    "lmcache--lmcache": Extra(
        subs={"<cfg>": "{A}/lmcache.yaml", "<model>": "{A}/tiny-gpt2"},
        assets=[("tiny-gpt2", "model", hf("sshleifer/tiny-gpt2")), ("lmcache.yaml", "file", None),
                ("musique_s.json", "dataset",
                 "https://raw.githubusercontent.com/YaoJiayi/CacheBlend/main/inputs/musique_s.json")],
        # Time-boxed (8 s) then SIGINT: a run still alive at 8 s passes (timeout's 124 -> 0).
        cmd={"cpu": "timeout -s INT 8s python -m lmcache.v1.standalone --config <cfg> --model-name <model> "
                    "--worker-id 0 --world-size 1; rc=$?; [ $rc -eq 124 ] && rc=0; exit $rc",
             "single_gpu": "timeout -s INT 8s python -m lmcache.v1.standalone --config <cfg> --model-name <model> "
                           "--worker-id 0 --world-size 1; rc=$?; [ $rc -eq 124 ] && rc=0; exit $rc",
             "multi_gpu": "--no_python bash -c 'timeout -s INT 8s python -m lmcache.v1.standalone --config <cfg> "
                          "--model-name <model> --worker-id $LOCAL_RANK --world-size 2; rc=$?; "
                          "[ $rc -eq 124 ] && rc=0; exit $rc'"},
        todo=["lmcache.yaml: the standalone starter's config generated by the paper's harness "
              "(CacheBlend musique_s.json as prompts)"],
    ),
    "liheyoung--depth-anything": Extra(
        subs={"<examples>": "assets/examples"},
        assets=[("depth_anything_vits14", "model", hf("LiheYoung/depth_anything_vits14"))],
        todo=[HF_CACHE_TODO.format(what="LiheYoung/depth_anything_vits14")],
    ),
    "moonshotai--moba": Extra(
        subs={"<tiny llama>": "{A}/tiny-random-LlamaForCausalLM"},
        assets=[("tiny-random-LlamaForCausalLM", "model", hf("hf-internal-testing/tiny-random-LlamaForCausalLM"))],
    ),
    "nvidia--kvpress": Extra(
        subs={"<tiny llama>": "{A}/tiny-random-LlamaForCausalLM", "<1 sample>": "0.001"},
        assets=[("tiny-random-LlamaForCausalLM", "model", hf("hf-internal-testing/tiny-random-LlamaForCausalLM")),
                ("loogle", "dataset", hf_dataset("simonjegou/loogle"))],
        todo=["--fraction: the CSV says '1 sample'; 0.001 is a stand-in, set it to 1/len(shortdep_qa)",
              "max_new_tokens=1 (tasks.csv assets) has no flag in the entry",
              HF_CACHE_TODO.format(what="the dataset simonjegou/loogle")],
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
                           f"train_scripts/train.py {SANA_ARGS}",
             # torchrun starts this per rank (--no_python); both ranks write the same files atomically
             "multi_gpu": f"--no_python sh -c '{SANA_PREP} && exec python train_scripts/train.py {SANA_ARGS}'"},
    ),
    "openbmb--voxcpm": Extra(
        assets=[("VoxCPM-0.5B", "model", hf("openbmb/VoxCPM-0.5B")), ("config.yaml", "file", None)],
        cmd={"single_gpu": "python scripts/train_voxcpm_finetune.py --config_path {A}/config.yaml"},
        todo=["config.yaml: the 1-step LoRA config the paper wrote to build_output/single_gpu/config.yaml "
              "(VoxCPM-0.5B, manifest of the repo's examples/example.wav)"],
    ),
    "ringbdstack--socialed": Extra(
        subs={},
        assets=[("socialed_sbert_smoketest.py", "file", None),
                ("Event2012", "dataset", None),
                ("paraphrase-MiniLM-L6-v2", "model", hf("sentence-transformers/paraphrase-MiniLM-L6-v2"))],
        cmd={"cpu": "python -u {A}/socialed_sbert_smoketest.py --max-samples 12",
             "single_gpu": "python -u {A}/socialed_sbert_smoketest.py --max-samples 12",
             "multi_gpu": "python {A}/socialed_sbert_smoketest.py --distributed --require-gpu-count 2"},
        todo=[BENCH_SCRIPT_TODO.format(name="socialed_sbert_smoketest.py") + " (SocialED.detector.SBERT)",
              "Event2012: a subset from github.com/ChenBeici/SocialED_datasets (no single-file URL in tasks.csv)"],
    ),
    "swivid--f5-tts": Extra(
        assets=[("F5-TTS", "model", hf("SWivid/F5-TTS")), ("vocos-mel-24khz", "model", hf("charactr/vocos-mel-24khz"))],
        cmd={"cpu": "python -m f5_tts.infer.infer_cli --model F5TTS_v1_Base "
                    "--ckpt_file {A}/F5-TTS/F5TTS_v1_Base/model_1250000.safetensors "
                    "--ref_audio src/f5_tts/infer/examples/basic/basic_ref_en.wav "
                    "--ref_text 'Some call me nature, others call me mother nature.' --gen_text 'Hello.' "
                    "--nfe_step 1 --output_dir {O}/f5-tts",
             "single_gpu": "python -m f5_tts.infer.infer_cli --model F5TTS_v1_Base "
                           "--ckpt_file {A}/F5-TTS/F5TTS_v1_Base/model_1250000.safetensors "
                           "--ref_audio src/f5_tts/infer/examples/basic/basic_ref_en.wav "
                           "--ref_text 'Some call me nature, others call me mother nature.' --gen_text 'Hello.' "
                           "--nfe_step 1 --output_dir {O}/f5-tts"},
        todo=["cpu/single_gpu: the CSV elides infer_cli's arguments ('...'); ref/gen text written here",
              HF_CACHE_TODO.format(what="the vocoder charactr/vocos-mel-24khz"),
              "multi_gpu: the CSV's '--mixed_precision no' is accelerate's default without a config; "
              "1 step needs a patched F5TTS_Small.yaml"],
    ),
    "zhengyinan-air--diffusion-planner": Extra(
        assets=[("Diffusion-Planner", "model", hf("ZhengYinan2001/Diffusion-Planner")),
                ("synthetic-nuplan", "dataset", None)],
        todo=["a 1-sample synthetic nuPlan-style dataset (generated by the paper's harness) and the "
              "train_predictor.py arguments that point at it"],
    ),
    "alephpi--texo": Extra(
        assets=[("UniMER-Train", "dataset", hf_dataset("alephpi/UniMER-Train")),
                ("FormulaNet", "model", hf("alephpi/FormulaNet"))],
        todo=["the CSV turns the logger and checkpointing off and overrides tokenizer_path "
              "(Hydra overrides not spelled out) and uses a tiny subset of UniMER-Train"],
    ),
    "apple--ml-aim": Extra(
        assets=[("AIM", "model", hf("apple/AIM")),
                ("dog.jpg", "dataset", "https://raw.githubusercontent.com/pytorch/hub/master/images/dog.jpg")],
        todo=["a 1-image ImageFolder around dog.jpg and main_attnprobe.py's data/checkpoint arguments "
              "(aim_600m_2bimgs_attnprobe_backbone.pth + head_best_layers/last_layers.pth from apple/AIM)"],
    ),
    "apple--ml-mdm": Extra(
        # "cd ml-mdm-matryoshka" is the repository root in the paper's container.
        workdir={"cpu": "."},
        assets=[("flan-t5-small", "model", hf("google/flan-t5-small"))],
        todo=[HF_CACHE_TODO.format(what="google/flan-t5-small") +
              "; the training file list points at the repo's sample images_00000.tar"],
    ),
    "emidan19--deep-tempest": Extra(
        subs={"<generated options json: gpu_ids=[] batch 1 1 iter>": "{A}/train_drunet_cpu.json",
              "<json>": "{A}/train_drunet_dist.json"},
        assets=[("train_drunet_cpu.json", "file", None), ("train_drunet_gpu.json", "file", None),
                ("train_drunet_dist.json", "file", None), ("drunet", "model", None)],
        cmd={"single_gpu": "python end-to-end/main_train_drunet.py --opt {A}/train_drunet_gpu.json"},
        todo=["train_drunet_*.json: options generated by the paper's harness (gpu_ids [] / [0] / [0,1], "
              "batch 1, 1 iter, dataset = repo examples/ mini_1/mini_2 pairs)",
              "drunet: pretrained weights from a www.fing.edu.uy owncloud share (IaZugHCrw5K1AcB); no direct URL"],
    ),
    "facebookresearch--large_concept_model": Extra(
        cmd={"cpu": "python -m lcm.train launcher=standalone +pretrain=mse trainer.model_arch=toy_base_lcm "
                    "trainer.max_steps=1 use_fsdp=false"},
        todo=["batch 1 and a synthetic parquet of SONAR-like embeddings (with the repo's "
              "lcm/cards/mock_data/dummy_normalizer.pt) as the training data"],
    ),
    "facebookresearch--sapiens": Extra(
        subs={"<cfg>": "seg/configs/sapiens_normal/normal_general/sapiens_0.3b_normal_general-1024x768.py"},
        assets=[("sapiens-pretrain-0.3b", "model", hf("facebook/sapiens-pretrain-0.3b")),
                ("sapiens_toy_dataset", "dataset", hf_dataset("facebook/sapiens_toy_dataset"))],
        cmd={"cpu": "python seg/tools/train.py "
                    "seg/configs/sapiens_normal/normal_general/sapiens_0.3b_normal_general-1024x768.py "
                    "--cfg-options train_cfg.max_epochs=1"},
        todo=["the CSV's --cfg-options (1 sample; max_epochs 1) are not spelled out: point the config at "
              "sapiens_toy_dataset and the pretrain checkpoint"],
    ),
    "feifeibear--long-context-attention": Extra(
        subs={"<t>": "basic"},
        cmd={"single_gpu": "python -m torch.distributed.run --nproc_per_node=1 benchmark/benchmark_longctx.py "
                           "--ring_impl_type <t> --batch_size 1 --no_causal"},
        todo=["'small seq/heads': the sequence-length and head-count flags are not spelled out"],
    ),
    "flagos-ai--flaggems": Extra(
        assets=[("bert-base-uncased", "model", hf("google-bert/bert-base-uncased"))],
        cmd={"single_gpu": "python -m pytest "
                           "'examples/model_bert_test.py::test_accuracy_bert[How are you today?-torch.float16]'"},
        todo=[HF_CACHE_TODO.format(what="google-bert/bert-base-uncased")],
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
        env={"single_gpu": {"WORLD_SIZE": "1"}},
        cmd={"single_gpu": f"{FINETRAINERS_CONFIG} && python {{H}}/fail_on_log.py {FINETRAINERS_FAIL} -- "
                           f"python train.py --parallel_backend accelerate {FINETRAINERS_ARGS}",
             # torchrun starts this per rank (--no_python)
             "multi_gpu": f"--no_python sh -c '{FINETRAINERS_CONFIG} && exec python {{H}}/fail_on_log.py "
                          f"{FINETRAINERS_FAIL} -- python train.py --parallel_backend ptd --pp_degree 1 --dp_degree 2 "
                          f"--dp_shards 1 --cp_degree 1 --tp_degree 1 {FINETRAINERS_ARGS}'"},
        assets=[("Wan2.1-T2V-1.3B-Diffusers", "model", hf("Wan-AI/Wan2.1-T2V-1.3B-Diffusers")),
                ("crush-smol", "dataset", hf_dataset("finetrainers/crush-smol"))],
    ),
    "hustvl--vim": Extra(
        assets=[("R-50.pkl", "model", "https://dl.fbaipublicfiles.com/detectron2/ImageNetPretrained/MSRA/R-50.pkl"),
                ("val2017_100.tgz", "dataset", "https://dl.fbaipublicfiles.com/detectron2/annotations/coco/val2017_100.tgz"),
                ("instances_val2017_100.json", "dataset",
                 "https://dl.fbaipublicfiles.com/detectron2/annotations/coco/instances_val2017_100.json")],
        todo=["1 iteration on COCO val2017_100: DETECTRON2_DATASETS with coco/val2017 + annotations built from the "
              "assets, and config overrides (SOLVER.MAX_ITER 1, MODEL.WEIGHTS R-50.pkl, DATASETS.TRAIN "
              "coco_2017_val_100; MODEL.DEVICE cpu for the cpu stage)"],
    ),
    "kotaro-kinoshita--yomitoku": Extra(
        subs={"<demo/sample image>": "demo/sample_text.jpg", "<demo image>": "demo/sample_text.jpg"},
        todo=[HF_CACHE_TODO.format(what="the KotaroKinoshita/yomitoku-* models listed as hf_hub_repo in "
                                        "src/yomitoku/configs")],
    ),
    "kyegomez--multimodalmamba": Extra(
        assets=[("entrypoint_wrapper.py", "file", None),
                ("tiny-random-vit", "model", hf("hf-internal-testing/tiny-random-vit")),
                ("lena.jpg", "dataset", "https://raw.githubusercontent.com/opencv/opencv/master/samples/data/lena.jpg")],
        cmd={"cpu": "python example.py",
             "single_gpu": "python {A}/entrypoint_wrapper.py --entrypoint example.py --device cuda --local-rank 0",
             "multi_gpu": "python {A}/entrypoint_wrapper.py --entrypoint example.py --device cuda"},
        todo=[BENCH_SCRIPT_TODO.format(name="entrypoint_wrapper.py")],
    ),
    "kyegomez--visionmamba": Extra(
        cmd={"cpu": VISIONMAMBA.format(device="cpu"),
             "single_gpu": VISIONMAMBA.format(device="cuda"),
             # torchrun starts `python -c ...` per rank (--no_python: the command is not a script)
             "multi_gpu": "--no_python python -c \"import os, runpy, torch; "
                          "torch.cuda.set_device(int(os.environ['LOCAL_RANK'])); torch.set_default_device('cuda'); "
                          "runpy.run_path('example.py', run_name='__main__')\""},
    ),
    "lightly-ai--lightly-train": Extra(
        assets=[("coco128_unlabeled.zip", "dataset",
                 "https://github.com/lightly-ai/coco128_unlabeled/releases/download/v0.0.1/coco128_unlabeled.zip"),
                ("dinov3_vitt16_distillationv2.pth", "model", None)],
        setup="mkdir -p {O} && python -m zipfile -e {A}/coco128_unlabeled.zip {O}/lightly-data",
        cmd={"cpu": "lightly-train pretrain out={O}/lightly-train data={O}/lightly-data/coco128_unlabeled "
                    "model=dinov3/vitt16 accelerator=cpu trainer_args.max_steps=1 batch_size=1 overwrite=true"},
        flags={"multi_gpu": "batch_size=2"},
        todo=["dinov3_vitt16_distillationv2.pth comes from the lightly-train-checkpoints S3 bucket "
              "(no URL in tasks.csv); lightly-train must find it offline"],
    ),
    "meta-pytorch--torchft": Extra(
        assets=[("cifar-10-python.tar.gz", "dataset", "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"),
                ("squeezenet1_0-b66bff10.pth", "model", "https://download.pytorch.org/models/squeezenet1_0-b66bff10.pth",
                 "torch/hub/checkpoints/squeezenet1_0-b66bff10.pth")],
        cmd={"cpu": torchft_single(29501), "single_gpu": torchft_single(29502), "multi_gpu": TORCHFT_MULTI},
        launcher="python",  # two replica groups, each its own 1-rank torchrun, against one lighthouse
        todo=["the paper's sitecustomize.py forces batch 1 and max_steps 1 in train_ddp.py"],
    ),
    "metavoiceio--metavoice-src": Extra(
        subs={"<ref>": "assets/bria.mp3"},
        assets=[("metavoice-1B-v0.1", "model", hf("metavoiceio/metavoice-1B-v0.1"))],
        todo=[HF_CACHE_TODO.format(what="metavoiceio/metavoice-1B-v0.1")],
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
                          "--model_id <model> --precision fp32 --resolution 64 --output_dir $d'"},
    ),
    "modelscope--clearervoice-studio": Extra(
        subs={"<cfg>": "{A}/FRCRN_SE_16K.yaml"},
        workdir={"cpu": "train/speech_enhancement", "single_gpu": "train/speech_enhancement"},
        assets=[("FRCRN_SE_16K", "model", hf("alibabasglab/FRCRN_SE_16K")), ("FRCRN_SE_16K.yaml", "file", None),
                ("torchrun_train_wrapper.py", "file", None)],
        cmd={"multi_gpu": "python {A}/torchrun_train_wrapper.py --network FRCRN_SE_16K --use-cuda 1"},
        todo=["FRCRN_SE_16K.yaml: a 1-batch training config over the repo's clearvoice/samples/input.wav",
              BENCH_SCRIPT_TODO.format(name="torchrun_train_wrapper.py")],
    ),
    "ogkalu2--comic-translate": Extra(
        assets=[("comic-text-and-bubble-detector", "model", hf("ogkalu/comic-text-and-bubble-detector")),
                ("hopper.jpg", "dataset",
                 "https://raw.githubusercontent.com/python-pillow/Pillow/main/Tests/images/hopper.jpg")],
        cmd={"cpu": COMIC.format(device="cpu"), "single_gpu": COMIC.format(device="cuda")},
        todo=["the detector's detector.onnx must be where modules.utils.download.ModelDownloader looks "
              "(models/detection); the class API is that of the current repository, check it at the pin"],
    ),
    "remsky--kokoro-fastapi": Extra(
        assets=[("kokoro-v1_0.pth", "model",
                 "https://github.com/remsky/Kokoro-FastAPI/releases/download/v0.1.4/kokoro-v1_0.pth",
                 "models/v1_0/kokoro-v1_0.pth"),
                ("config.json", "file", "https://github.com/remsky/Kokoro-FastAPI/releases/download/v0.1.4/config.json",
                 "models/v1_0/config.json")],
        # the environment of the repo's start-cpu.sh / start-gpu.sh, with the model dir in the asset cache
        cmd={"cpu": http_smoke(f"USE_GPU=false {KOKORO_ENV} python -m uvicorn api.src.main:app "
                               "--host 127.0.0.1 --port 8880", 8880, KOKORO_POST),
             "single_gpu": http_smoke(f"USE_GPU=true DEVICE_TYPE=cuda {KOKORO_ENV} python -m uvicorn "
                                      "api.src.main:app --host 127.0.0.1 --port 8880", 8880, KOKORO_POST)},
    ),
    "rllm-team--rllm": Extra(
        assets=[("rel-f1", "dataset", None),
                ("average_word_embeddings_glove.6B.300d", "model",
                 hf("sentence-transformers/average_word_embeddings_glove.6B.300d"))],
        todo=["RelBench rel-f1 (relbench.stanford.edu/download/rel-f1; no file URL in tasks.csv) where "
              "examples/rdl.py expects it; " + HF_CACHE_TODO.format(what="the GloVe sentence-transformer")],
    ),
    "sgl-project--specforge": Extra(
        subs={"<Qwen2.5-0.5B-Instruct>": "{A}/Qwen2.5-0.5B-Instruct", "<cfg>": "{A}/draft-config.json",
              "<sharegpt sample>": "{A}/sharegpt-sample.jsonl"},
        assets=[("Qwen2.5-0.5B-Instruct", "model", hf("Qwen/Qwen2.5-0.5B-Instruct")),
                ("draft-config.json", "file", None),
                ("ShareGPT_Vicuna_unfiltered", "dataset", hf_dataset("Aeala/ShareGPT_Vicuna_unfiltered")),
                ("sharegpt-sample.jsonl", "dataset", None)],
        todo=["draft-config.json (EAGLE3 draft for Qwen2.5-0.5B) and sharegpt-sample.jsonl (a few rows of "
              "ShareGPT_Vicuna_unfiltered) are generated; the notes' batch 1 / max-num-steps 1 / backend hf "
              "flags are not spelled out"],
    ),
    "thu-pacman--chitu": Extra(
        subs={"<path>": "{A}/Qwen2.5-0.5B"},
        assets=[("Qwen2.5-0.5B", "model", hf("Qwen/Qwen2.5-0.5B")),
                ("tinyshakespeare.txt", "dataset",
                 "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt")],
        todo=["1 iteration with 1 request whose prompt comes from tinyshakespeare.txt: the overrides are not "
              "spelled out in the CSV"],
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
        cmd={"cpu": f"python mipha/train/train.py {OLYMPUS_ARGS} --bf16 True",
             # deepspeed starts this per rank (--no_python); its --local_rank=N argument lands in $0
             # (TrainingArguments reads LOCAL_RANK from the environment); scripts/zero3.json as in the
             # repo's scripts/mipha/finetune.sh
             "multi_gpu": f"--no_python sh -c '{OLYMPUS_SAMPLE} && exec python mipha/train/train.py "
                          f"--deepspeed scripts/zero3.json {OLYMPUS_ARGS} --fp16 True'"},
        flags={"single_gpu": "--bf16 False --fp16 True"},
    ),
}

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
        assets.append(asset)
        lines += ["", "[[assets]]", *(f"{k} = {toml_str(v)}" for k, v in asset.items())]
    if assets:
        data["assets"] = assets
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
