"""Print the `--fraction` that makes evaluation/evaluate.py evaluate exactly one sample.

Stands for the paper harness's prepare step, which loaded the dataset once and set
fraction = (1 + 1e-6) / len(test split). evaluate.py draws df.sample(frac=fraction), and pandas
takes round(fraction * n) rows, so this gives 1 row whatever the split's size.

    python one_sample_fraction.py simonjegou/loogle shortdep_qa   # -> e.g. 0.000512...

Loads the split exactly as evaluate.py does (datasets.load_dataset(id, data_dir=..., split="test"),
offline from the Hugging Face cache during probes). Writes nothing but datasets' own cache.
"""

import sys

from datasets import load_dataset


def main() -> None:
    if len(sys.argv) not in (2, 3):
        sys.exit(f"usage: {sys.argv[0]} DATASET_ID [DATA_DIR]")
    data_dir = sys.argv[2] if len(sys.argv) == 3 else None
    n = len(load_dataset(sys.argv[1], data_dir=data_dir, split="test"))
    if n == 0:
        sys.exit("the test split is empty")
    print(min(1.0, (1.0 + 1e-6) / n))


if __name__ == "__main__":
    main()
