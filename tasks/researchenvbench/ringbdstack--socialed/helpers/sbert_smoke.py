"""Run SocialED's SBERT detector once on a few Event2012 tweets (the repository has no CLI).

    python sbert_smoke.py --data Event2012.npy --model DIR [--max-samples 12]
                          [--distributed] [--require-gpu-count N]

Stands for the paper harness's benchmark_scripts/socialed_sbert_smoketest.py: SocialED.detector.SBERT
on the first --max-samples rows of Event2012.npy (github.com/ChenBeici/SocialED_datasets,
npy_data/) with the sentence-transformers model at --model: preprocess, detection (SBERT
embeddings of a train/test split, nearest-neighbour labels), evaluate (prints NMI/AMI/ARI).
Writes nothing. Run from the repository root.

The SBERT class is loaded from SocialED/detector/sbert.py by file, as the paper did: the package
`SocialED.detector` imports every detector, and some need optional heavy extras (e.g. spaCy
models) that SBERT does not use. --distributed (under torchrun): each rank pins its GPU
(LOCAL_RANK) and takes every WORLD_SIZE-th row from its rank on, an independent run per rank.
--require-gpu-count N: fail unless at least N CUDA devices are visible.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path

# Event2012.npy holds rows of these fields (SocialED/dataset/dataloader.py: required_columns)
COLUMNS = ["tweet_id", "text", "event_id", "words", "filtered_words", "entities", "user_id",
           "created_at", "urls", "hashtags", "user_mentions"]


class Rows:
    """The dataset object SBERT expects: load_data() returns the DataFrame."""

    def __init__(self, df):
        self.df = df

    def load_data(self):
        return self.df

    def get_dataset_language(self):
        return "English"

    def get_dataset_name(self):
        return "Event2012"


def load_sbert_class():
    root = Path.cwd() / "SocialED"
    path = root / "detector" / "sbert.py"
    if not path.is_file():
        sys.exit(f"{path} not found: run from the SocialED repository root")
    sys.path.insert(0, str(root))  # sbert.py imports `dataset.dataloader` from SocialED/
    spec = importlib.util.spec_from_file_location("socialed_sbert", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.SBERT


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="Event2012.npy")
    parser.add_argument("--model", type=Path, required=True, help="paraphrase-MiniLM-L6-v2 directory")
    parser.add_argument("--max-samples", type=int, default=12)
    parser.add_argument("--distributed", action="store_true")
    parser.add_argument("--require-gpu-count", type=int, default=0)
    args = parser.parse_args()

    import numpy as np
    import pandas as pd
    import torch

    if args.require_gpu_count and torch.cuda.device_count() < args.require_gpu_count:
        sys.exit(f"need {args.require_gpu_count} CUDA devices, see {torch.cuda.device_count()}")
    rank, world = 0, 1
    if args.distributed:
        rank, world = int(os.environ.get("LOCAL_RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
        if torch.cuda.is_available():
            torch.cuda.set_device(rank)
    if not args.model.is_dir():  # SBERT would silently fall back to downloading by id
        sys.exit(f"model directory {args.model} not found")

    n = max(2, args.max_samples)  # detection() splits train/test: at least 2 rows
    df = pd.DataFrame(np.load(args.data, allow_pickle=True), columns=COLUMNS)
    df = df.iloc[rank::world].head(n).reset_index(drop=True)
    print(f"rank {rank}/{world}: {len(df)} Event2012 rows, model {args.model}", flush=True)

    detector = load_sbert_class()(Rows(df), model_name=str(args.model))
    detector.df = detector.preprocess().head(n).copy()
    ground_truths, predictions = detector.detection()
    detector.evaluate(ground_truths, predictions)
    print(f"rank {rank}: SBERT detection done on {len(predictions)} test rows", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
