"""A tiny F5-TTS training set (raw.arrow, duration.json, vocab.txt) over one reference clip.

Stands for the paper harness's minimal training set (benchmark_scripts/prepare_assets.sh, which
built it "ffprobe-free" rather than with the repo's prepare_csv_wavs.py: that script needs the
ffprobe binary). Writes what prepare_csv_wavs.py writes for a fine-tuning set, in the same way:

    python make_f5_dataset.py --wav WAV --text TEXT --out DIR [--rows 2] [--repo .]

DIR/raw.arrow      --rows identical rows {audio_path: absolute WAV, text: TEXT converted by the
                   repo's f5_tts.model.utils.convert_char_to_pinyin, duration: seconds}, written
                   with datasets' ArrowWriter (default 2 rows: one sample per rank of a 2-rank run)
DIR/duration.json  {"duration": [...]} for those rows
DIR/vocab.txt      a copy of the repo's data/Emilia_ZH_EN_pinyin/vocab.txt (the pretrained vocab)

train.py finds the set by `datasets.name=<name>` when DIR is data/<name>_pinyin in the repo.
Imports datasets and f5_tts (the repository's own package, with its requirements); the clip's
duration is read with the stdlib wave module (WAV must be PCM .wav).
"""

from __future__ import annotations

import argparse
import json
import shutil
import wave
from pathlib import Path

PRETRAINED_VOCAB = "data/Emilia_ZH_EN_pinyin/vocab.txt"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wav", required=True, type=Path)
    parser.add_argument("--text", required=True, help="transcript of --wav")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--rows", default=2, type=int)
    parser.add_argument("--repo", default=".", type=Path, help="repository root (default: cwd)")
    args = parser.parse_args()

    from datasets.arrow_writer import ArrowWriter
    from f5_tts.model.utils import convert_char_to_pinyin

    wav = args.wav.resolve()
    with wave.open(str(wav), "rb") as f:
        duration = f.getnframes() / f.getframerate()
    text = convert_char_to_pinyin([args.text], polyphone=True)[0]
    args.out.mkdir(parents=True, exist_ok=True)
    with ArrowWriter(path=str(args.out / "raw.arrow")) as writer:
        for _ in range(args.rows):
            writer.write({"audio_path": str(wav), "text": text, "duration": duration})
        writer.finalize()
    (args.out / "duration.json").write_text(json.dumps({"duration": [duration] * args.rows}), encoding="utf-8")
    shutil.copyfile(args.repo / PRETRAINED_VOCAB, args.out / "vocab.txt")
    print(f"wrote {args.out}/raw.arrow ({args.rows} rows, {duration:.2f} s each), duration.json, vocab.txt")


if __name__ == "__main__":
    main()
