"""Write finetrainers' --dataset_config JSON for the local crush-smol snapshot.

    python make_dataset_config.py --data-root DIR --out FILE

One video dataset (finetrainers' {"datasets": [...]} layout) rooted at DIR, the snapshot of the
Hugging Face dataset finetrainers/crush-smol, with the settings the paper's harness used: id token
PIKA_CRUSH, one 49x480x832 bucket, bicubic reshape, common LLM caption prefixes removed. Stands
for the dataset_config.json the paper harness's prepare_assets.sh wrote. Written under a temporary name and renamed (ranks may race). Stdlib only.
"""

import argparse
import json
import os
import tempfile


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root", required=True, help="local snapshot of finetrainers/crush-smol")
    parser.add_argument("--out", required=True, help="the JSON file to write")
    args = parser.parse_args()

    config = {"datasets": [{
        "data_root": os.path.abspath(args.data_root),
        "dataset_type": "video",
        "id_token": "PIKA_CRUSH",
        "video_resolution_buckets": [[49, 480, 832]],
        "reshape_mode": "bicubic",
        "remove_common_llm_caption_prefixes": True,
    }]}
    out_dir = os.path.dirname(os.path.abspath(args.out))
    os.makedirs(out_dir, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out_dir, suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)
    os.replace(tmp, args.out)
    print(f"wrote {args.out} (data_root {config['datasets'][0]['data_root']})")


if __name__ == "__main__":
    main()
