"""Write a one-sample Olympus fine-tuning file for a 1-step mipha/train/train.py run.

    python make_olympus_sample.py --src Olympus.json --out DIR/olympus-sample.json

Reads only the first record of Olympus.json (a JSON list of LLaVA-style records: id, optional
image, conversations), without loading the whole multi-GB file. The record is made text-only
(its `image` key and `<image>` placeholders are dropped: the images are not in the asset cache)
and cut to its first human/gpt turn pair; it is written as a one-element list. This stands for
the paper harness's prepare step (benchmark_scripts/prepare_assets.sh: "1-sample subset derived
from downloaded Olympus.json with image removed"). Safe to run from several ranks at once: the
file is written to a temporary name and renamed. Stdlib only.
"""

import argparse
import json
import os
import tempfile


def first_record(path: str, chunk: int = 1 << 16, limit: int = 1 << 26) -> dict:
    """The first element of the JSON list in `path`, decoded from a growing prefix of the file."""
    decoder = json.JSONDecoder()
    text = ""
    with open(path, encoding="utf-8") as f:
        while len(text) < limit:
            more = f.read(chunk)
            text += more
            start = text.find("[")
            if start >= 0:
                body = text[start + 1:].lstrip()
                try:
                    record, _ = decoder.raw_decode(body)
                    return record
                except json.JSONDecodeError:
                    pass
            if not more:
                break
    raise SystemExit(f"{path}: no JSON list with a first record found")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", required=True, help="Olympus.json from the Yuanze/Olympus dataset")
    parser.add_argument("--out", required=True, help="the one-sample json to write")
    args = parser.parse_args()

    record = first_record(args.src)
    if not isinstance(record, dict) or not isinstance(record.get("conversations"), list):
        raise SystemExit(f"{args.src}: the first record has no conversations list")
    record = dict(record)
    record.pop("image", None)
    turns = []
    for turn in record["conversations"][:2]:
        value = str(turn["value"]).replace("<image>\n", "").replace("\n<image>", "").replace("<image>", "")
        turns.append({**turn, "value": value.strip()})
    record["conversations"] = turns

    out_dir = os.path.dirname(os.path.abspath(args.out))
    os.makedirs(out_dir, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out_dir, suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump([record], f, ensure_ascii=False, indent=1)
    os.replace(tmp, args.out)
    print(f"wrote 1 sample ({record.get('id', '?')}, {len(turns)} turns) to {args.out}")


if __name__ == "__main__":
    main()
