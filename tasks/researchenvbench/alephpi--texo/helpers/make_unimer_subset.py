"""Write a tiny UniMER-Train subset that src/train.py can read (MERDatasetHF -> load_from_disk).

    python make_unimer_subset.py --snapshot DIR --out DIR [--samples 1]

Stands for the paper harness's prepare_assets.sh step that took the first sample(s) of the Hugging
Face dataset alephpi/UniMER-Train and saved them with `Dataset.save_to_disk` (features
image: binary PNG bytes, text: string, as the repo's data/dataset/make_hf_dataset.py builds them).

--snapshot is a local snapshot of alephpi/UniMER-Train (its parquet shards, as push_to_hub wrote
them). Only the first rows of the first shard are read (pyarrow), so nothing else is converted.
Writes a `datasets` directory (dataset_info.json, state.json, data-*.arrow) at --out.
"""

import argparse
import sys
from pathlib import Path

import pyarrow.parquet as pq
from datasets import Dataset, Features, Value


def image_bytes(value):
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if isinstance(value, dict) and value.get("bytes"):  # an Image() feature: {"bytes", "path"}
        return bytes(value["bytes"])
    raise SystemExit(f"unsupported image value: {type(value).__name__}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--snapshot", type=Path, required=True, help="local snapshot of alephpi/UniMER-Train")
    parser.add_argument("--out", type=Path, required=True, help="directory to write (save_to_disk)")
    parser.add_argument("--samples", type=int, default=1)
    args = parser.parse_args()

    shards = sorted(p for p in args.snapshot.rglob("*.parquet") if "train" in p.name or "train" in p.parent.name)
    shards = shards or sorted(args.snapshot.rglob("*.parquet"))
    if not shards:
        raise SystemExit(f"no parquet shard under {args.snapshot}")
    batch = next(pq.ParquetFile(shards[0]).iter_batches(batch_size=args.samples, columns=["image", "text"]))
    rows = [{"image": image_bytes(r["image"]), "text": str(r["text"])} for r in batch.to_pylist()]
    if not rows or not all(r["text"] for r in rows):
        raise SystemExit(f"no usable sample in {shards[0]}")

    features = Features({"image": Value("binary"), "text": Value("string")})
    Dataset.from_list(rows, features=features).save_to_disk(str(args.out))
    print(f"wrote {len(rows)} sample(s) from {shards[0].name} to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
