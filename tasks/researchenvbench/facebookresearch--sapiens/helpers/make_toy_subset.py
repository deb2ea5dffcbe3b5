"""Write a one-sample NormalGeneralDataset root from the sapiens toy dataset's zip archives.

    python make_toy_subset.py --zips DIR --out DIR

Stands for the paper harness's prepare_assets.sh step that unpacked facebook/sapiens_toy_dataset
and pruned it to its first sample. --zips holds the dataset's images.zip, masks.zip and
normals.zip. The first sample (sorted by name) present in all three is extracted, and nothing else:
  OUT/images/<name>.png, OUT/masks/<name>.png, OUT/normals/<name>.npy
which is what seg/mmseg/datasets/normal_general.py (NormalGeneralDataset) lists under data_root.
"""

import argparse
import shutil
import sys
import zipfile
from pathlib import Path, PurePosixPath

PARTS = {"images": ".png", "masks": ".png", "normals": ".npy"}


def members(archive: zipfile.ZipFile, suffix: str) -> dict:
    """stem -> member name of the archive's files with `suffix` (folders inside are ignored)."""
    out = {}
    for name in archive.namelist():
        path = PurePosixPath(name)
        if path.suffix == suffix and not name.endswith("/") and not path.name.startswith("."):
            out.setdefault(path.stem, name)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zips", type=Path, required=True, help="directory with images.zip, masks.zip, normals.zip")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    archives = {part: zipfile.ZipFile(args.zips / f"{part}.zip") for part in PARTS}
    found = {part: members(archives[part], suffix) for part, suffix in PARTS.items()}
    common = sorted(set.intersection(*(set(f) for f in found.values())))
    if not common:
        raise SystemExit(f"no sample present in all of {', '.join(f'{p}.zip' for p in PARTS)} under {args.zips}")
    stem = common[0]
    for part, suffix in PARTS.items():
        target = args.out / part
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        with archives[part].open(found[part][stem]) as src, open(target / f"{stem}{suffix}", "wb") as dst:
            shutil.copyfileobj(src, dst)
    print(f"wrote sample {stem!r} to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
