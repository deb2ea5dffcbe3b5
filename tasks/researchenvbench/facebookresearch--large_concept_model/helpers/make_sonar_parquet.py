"""Write a tiny parquet dataset of random SONAR-like sentence embeddings for `python -m lcm.train`.

    python make_sonar_parquet.py --out DIR [--train-rows 8] [--valid-rows 4] [--sentences 4]

Stands for the paper harness's prepare_assets.sh step that generated a synthetic dataset in the
layout of the repo's `pretraining_data` datacard (lcm/datacards/datacards.yaml): a parquet dataset
partitioned on `split` (train / validation) with columns
  text_sentences            list<string>                          (one document = a few sentences)
  text_sentences_sonar_emb  list<fixed_size_list<float32>[1024]>  (one SONAR vector per sentence,
                                                                   N(0, 0.006^2) like real SONAR)
Writes DIR/split=train/*.parquet and DIR/split=validation/*.parquet (one row per row group).
"""

import argparse
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

SONAR_DIM = 1024
SONAR_STD = 0.006


def documents(split: str, rows: int, sentences: int, rng: np.random.Generator) -> pa.Table:
    texts = [[f"Sentence {j} of {split} document {i}." for j in range(sentences)] for i in range(rows)]
    flat = (rng.standard_normal((rows * sentences, SONAR_DIM)) * SONAR_STD).astype(np.float32)
    vectors = pa.FixedSizeListArray.from_arrays(pa.array(flat.reshape(-1)), SONAR_DIM)
    offsets = pa.array(np.arange(rows + 1, dtype=np.int32) * sentences)
    return pa.table({"split": [split] * rows, "text_sentences": texts,
                     "text_sentences_sonar_emb": pa.ListArray.from_arrays(offsets, vectors)})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--train-rows", type=int, default=8)
    parser.add_argument("--valid-rows", type=int, default=4)
    parser.add_argument("--sentences", type=int, default=4, help="sentences per document")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    table = pa.concat_tables([documents("train", args.train_rows, args.sentences, rng),
                              documents("validation", args.valid_rows, args.sentences, rng)])
    pq.write_to_dataset(table, args.out, partition_cols=["split"], row_group_size=1,
                        existing_data_behavior="delete_matching")
    print(f"wrote {table.num_rows} documents to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
