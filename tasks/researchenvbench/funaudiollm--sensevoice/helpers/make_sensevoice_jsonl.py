"""A tiny SenseVoice fine-tuning set over one wav, in the repo's data/train_example.jsonl format.

Stands for the paper harness's dataset step (benchmark_scripts/prepare_assets.sh), which wrote
train/val jsonl files over asr_example_en.wav for funasr's train_ds.py.

    python make_sensevoice_jsonl.py --wav WAV --out OUT [--text TRANSCRIPT] [--train-rows 2]

Writes OUT/train.jsonl (--train-rows identical rows, default 2: one per rank of a 2-rank run)
and OUT/val.jsonl (one row). Each row has the keys of data/train_example.jsonl: key,
text_language, emo_target, event_target, with_or_wo_itn, target, source (absolute path of WAV),
target_len (words in the transcript) and source_len (10 ms frames of WAV). Stdlib only; WAV
must be a PCM .wav file.
"""

from __future__ import annotations

import argparse
import json
import wave
from pathlib import Path

# the transcript of FunASR's asr_example_en.wav
DEFAULT_TEXT = "he tried to think how it could be"


def row(key: str, wav: Path, text: str, frames_10ms: int) -> dict:
    return {
        "key": key,
        "text_language": "<|en|>",
        "emo_target": "<|NEUTRAL|>",
        "event_target": "<|Speech|>",
        "with_or_wo_itn": "<|woitn|>",
        "target": text,
        "source": str(wav),
        "target_len": len(text.split()),
        "source_len": frames_10ms,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wav", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--text", default=DEFAULT_TEXT, help="transcript of --wav")
    parser.add_argument("--train-rows", default=2, type=int)
    args = parser.parse_args()

    wav = args.wav.resolve()
    with wave.open(str(wav), "rb") as f:
        frames_10ms = f.getnframes() * 100 // f.getframerate()
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "train.jsonl", "w", encoding="utf-8") as f:
        for i in range(args.train_rows):
            f.write(json.dumps(row(f"{wav.stem}_train{i}", wav, args.text, frames_10ms)) + "\n")
    with open(args.out / "val.jsonl", "w", encoding="utf-8") as f:
        f.write(json.dumps(row(f"{wav.stem}_val", wav, args.text, frames_10ms)) + "\n")
    print(f"wrote {args.out}/train.jsonl ({args.train_rows} rows) and val.jsonl (1 row), "
          f"source_len={frames_10ms}")


if __name__ == "__main__":
    main()
