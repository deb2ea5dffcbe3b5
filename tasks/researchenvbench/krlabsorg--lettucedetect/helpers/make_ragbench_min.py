"""Write the two data files that scripts/train.py reads in the paper's 1-step training run.

    python make_ragbench_min.py --ragtruth DIR --out DIR

Reads RAGTruth's raw `response.jsonl` and `source_info.jsonl` (github.com/ParticleMedia/RAGTruth,
dataset/) from --ragtruth and writes into --out:

- ragbench_min.json: the first two RAGTruth responses of the train split, turned into samples the
  way lettucedetect/preprocess/preprocess_ragtruth.py does (prompt from the source, answer, labels
  as {start, end, label}); the first keeps split "train", the second becomes split "dev", and both
  are marked dataset "ragbench" so that train.py takes their splits as they are (1 train + 1 dev
  sample: one optimizer step with --batch-size 1 --epochs 1);
- ragtruth_empty.json: `[]`, for --ragtruth-path (no RAGTruth samples besides those two).

Stands for the paper harness's prepare step (benchmark_scripts/prepare_assets.sh: preprocess
RAGTruth, keep 2 train samples as a RAGBench-format json, write an empty RAGTruth json).
Stdlib only; stops reading response.jsonl once two train responses are found.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def first_train_responses(path: Path, count: int) -> list[dict]:
    found = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                response = json.loads(line)
                if response.get("split") == "train":
                    found.append(response)
                    if len(found) == count:
                        break
    if len(found) < count:
        raise SystemExit(f"{path}: fewer than {count} train responses")
    return found


def sources_for(path: Path, ids: set) -> dict:
    sources = {}
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                source = json.loads(line)
                if source["source_id"] in ids:
                    sources[source["source_id"]] = source
    missing = ids - set(sources)
    if missing:
        raise SystemExit(f"{path}: no source for {sorted(missing)}")
    return sources


def sample(response: dict, source: dict, split: str) -> dict:
    return {
        "prompt": source["prompt"],
        "answer": response["response"],
        "labels": [{"start": lab["start"], "end": lab["end"], "label": lab["label_type"]}
                   for lab in response["labels"]],
        "split": split,
        "task_type": source["task_type"],
        "dataset": "ragbench",
        "language": "en",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ragtruth", type=Path, required=True, help="directory with response.jsonl, source_info.jsonl")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    responses = first_train_responses(args.ragtruth / "response.jsonl", 2)
    sources = sources_for(args.ragtruth / "source_info.jsonl", {r["source_id"] for r in responses})
    samples = [sample(r, sources[r["source_id"]], split) for r, split in zip(responses, ("train", "dev"))]

    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "ragbench_min.json").write_text(json.dumps(samples, ensure_ascii=False, indent=2) + "\n",
                                                encoding="utf-8")
    (args.out / "ragtruth_empty.json").write_text("[]\n", encoding="utf-8")
    print(f"wrote {args.out}/ragbench_min.json (1 train + 1 dev sample) and {args.out}/ragtruth_empty.json")


if __name__ == "__main__":
    main()
