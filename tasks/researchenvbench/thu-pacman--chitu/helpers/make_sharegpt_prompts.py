"""Write a ShareGPT-style prompt file for benchmarks/benchmark_offline.py (benchmark.dataset=sharegpt).

Stands for the paper harness's prepare step, which turned karpathy's tinyshakespeare input.txt into
`tinyshakespeare_sharegpt.json`: consecutive non-empty lines are joined into prompts of at least
~400 characters (long enough for benchmark.input_len tokens), each stored as
`{"conversations": [{"from": "human", "value": PROMPT}, {"from": "gpt", "value": ""}]}`
(benchmark_offline keeps entries with >= 2 turns and prompts with the first turn).

    python make_sharegpt_prompts.py --src tinyshakespeare.txt --out /tmp/x/prompts.json [--samples 8]

The file is written to a temporary name and renamed, so several ranks may run this at once.
"""

import argparse
import json
import os
import tempfile


def prompts(text: str, count: int, min_chars: int = 400) -> list[str]:
    out, buf, size = [], [], 0
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        buf.append(line)
        size += len(line) + 1
        if size >= min_chars:
            out.append(" ".join(buf))
            buf, size = [], 0
            if len(out) == count:
                break
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", required=True, help="plain-text corpus (tinyshakespeare input.txt)")
    parser.add_argument("--out", required=True, help="JSON file to write")
    parser.add_argument("--samples", type=int, default=8)
    args = parser.parse_args()

    with open(args.src, encoding="utf-8", errors="replace") as f:
        chunks = prompts(f.read(), args.samples)
    if not chunks:
        raise SystemExit(f"{args.src}: no prompt could be built")
    rows = [{"conversations": [{"from": "human", "value": c}, {"from": "gpt", "value": ""}]} for c in chunks]
    out_dir = os.path.dirname(os.path.abspath(args.out))
    os.makedirs(out_dir, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out_dir, suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(rows, f, ensure_ascii=False, indent=1)
    os.replace(tmp, args.out)
    print(f"wrote {len(rows)} prompts to {args.out}")


if __name__ == "__main__":
    main()
