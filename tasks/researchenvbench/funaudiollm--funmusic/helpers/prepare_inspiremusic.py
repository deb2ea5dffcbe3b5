"""One-sample InspireMusic inputs for the benchmark's inference and training runs.

Stands for the paper harness's prepare step (benchmark_scripts/prepare_assets.sh): a benchmark
config derived from the repo's examples/music_generation/conf/inspiremusic.yaml and a data list
with a single row of the repo's sample parquet.

    python prepare_inspiremusic.py --model-dir DIR --out OUT [--repo .]

Writes, under OUT:
  inspiremusic.yaml      the repo config with basemodel_path/generator_path pointing at DIR (the
                         InspireMusic-Base snapshot) and train_conf cut to one epoch, no
                         gradient accumulation, log every step, no mid-epoch saving;
                         min_acoustic_length 1 so the sample passes the flow filter
  samples_1row.parquet   the first row of examples/music_generation/data/samples/parquet/
                         parquet_000000000.tar (a parquet file despite its name)
  data_1row.list         one line: the absolute path of samples_1row.parquet (--prompt_data,
                         --train_data and --cv_data all take such a list)

Needs pyarrow (in the repo's requirements.txt); everything else is stdlib.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

CONFIG = "examples/music_generation/conf/inspiremusic.yaml"
SAMPLES = "examples/music_generation/data/samples/parquet/parquet_000000000.tar"

# key -> value, for `key: value` lines anywhere in the config (train_conf and the filter)
OVERRIDES = {
    "max_epoch": "1",
    "accum_grad": "1",
    "log_interval": "1",
    "save_per_step": "0",
    "min_acoustic_length": "1",
}


def patch_config(text: str, model_dir: Path) -> str:
    base = str(model_dir).rstrip("/") + "/"
    for key, value in {"basemodel_path": base, "generator_path": str(model_dir / "music_tokenizer")}.items():
        text, n = re.subn(rf"^{key}:.*$", f"{key}: '{value}'", text, count=1, flags=re.M)
        if n != 1:
            raise SystemExit(f"{CONFIG}: no top-level '{key}:' line")
    for key, value in OVERRIDES.items():
        text, n = re.subn(rf"^(\s+{key}:)\s*[^\s#]+", rf"\g<1> {value}", text, flags=re.M)
        if n == 0:
            raise SystemExit(f"{CONFIG}: no '{key}:' line")
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", required=True, type=Path, help="InspireMusic-Base snapshot directory")
    parser.add_argument("--out", required=True, type=Path, help="directory to write into")
    parser.add_argument("--repo", default=".", type=Path, help="repository root (default: cwd)")
    parser.add_argument("--rows", default=1, type=int, help="rows of the sample parquet to keep")
    args = parser.parse_args()

    import pyarrow.parquet as pq

    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    config = patch_config((args.repo / CONFIG).read_text(encoding="utf-8"), args.model_dir.resolve())
    (out / "inspiremusic.yaml").write_text(config, encoding="utf-8")

    table = pq.read_table(args.repo / SAMPLES)
    if table.num_rows < args.rows:
        raise SystemExit(f"{SAMPLES} has {table.num_rows} rows, fewer than {args.rows}")
    parquet = out / f"samples_{args.rows}row.parquet"
    pq.write_table(table.slice(0, args.rows), parquet)
    (out / f"data_{args.rows}row.list").write_text(f"{parquet}\n", encoding="utf-8")
    print(f"wrote {out}/inspiremusic.yaml, {parquet.name} ({args.rows} of {table.num_rows} rows), "
          f"data_{args.rows}row.list")


if __name__ == "__main__":
    main()
