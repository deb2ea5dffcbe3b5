"""Write a one-iteration options JSON (and its paired mini dataset) for end-to-end/main_train_drunet.py.

    python make_drunet_options.py --out DIR --gpu-ids "" --pairs 1 --batch 1 [--pretrained FILE]

Stands for the options JSON the paper's harness generated per stage (gpu_ids [] / [0] / [0,1],
batch 1 per device, one epoch of one iteration) and for its prepare step that copied the repo's
examples/ screenshot pairs into mini_1 (one pair) / mini_2 (two pairs) H/L folders.

Run from the repository root. Writes under --out:
  data/H/sample<i>.png, data/L/sample<i>.png  (reference screenshot and its gr-tempest capture;
                                               DatasetFFDNet needs equal H/L file names)
  options.json                                 (the repo's options/train_drunet.json with the
                                               fields below replaced; its path is printed)
--pretrained: the drunet weights of the authors' ownCloud share. A zip archive (a folder share) is
extracted under --out and its *_G.pth (else first *.pth/*.pt) is used; a plain checkpoint is used
as it is. Without it the network starts from its initialisation (pretrained_netG null).
"""

import argparse
import json
import shutil
import sys
import zipfile
from pathlib import Path

# (reference screenshot, its gr-tempest capture) pairs shipped in the repository's examples/
PAIRS = [
    ("Screenshot from 2023-08-29 18-08-19.png",
     "Screenshot from 2023-08-29 18-08-19-gr-tempest_screenshot_05-09-2023_21_07_37.png"),
    ("Screenshot from 2023-08-29 18-08-27.png",
     "Screenshot from 2023-08-29 18-08-27-gr-tempest_screenshot_05-09-2023_21_10_14.png"),
]


def load_repo_options(path: Path) -> dict:
    """The repo's own options file; like utils_option.parse, drop `//` comments first."""
    text = "".join(line.split("//")[0] + "\n" for line in path.read_text(encoding="utf-8").splitlines())
    return json.loads(text)


def resolve_weights(src: Path, out: Path) -> str:
    if zipfile.is_zipfile(src):
        with zipfile.ZipFile(src) as zf:
            names = zf.namelist()
            if not any(n.endswith("data.pkl") for n in names):  # an archive, not a torch zip checkpoint
                target = out / "pretrained"
                zf.extractall(target)
                found = sorted(p for p in target.rglob("*") if p.suffix in (".pth", ".pt"))
                found.sort(key=lambda p: not p.name.endswith("_G.pth"))
                if not found:
                    raise SystemExit(f"no .pth/.pt checkpoint inside {src}")
                return str(found[0].resolve())
    return str(src.resolve())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--gpu-ids", default="", help="comma-separated, empty for CPU")
    parser.add_argument("--pairs", type=int, choices=(1, 2), default=1)
    parser.add_argument("--batch", type=int, default=1, help="dataloader_batch_size (global; dist divides it)")
    parser.add_argument("--pretrained", type=Path)
    parser.add_argument("--repo", type=Path, default=Path("."))
    args = parser.parse_args()

    out = args.out.resolve()
    for side in ("H", "L"):
        shutil.rmtree(out / "data" / side, ignore_errors=True)
        (out / "data" / side).mkdir(parents=True)
    for i, (ref, capture) in enumerate(PAIRS[:args.pairs]):
        shutil.copyfile(args.repo / "examples" / ref, out / "data" / "H" / f"sample{i}.png")
        shutil.copyfile(args.repo / "examples" / capture, out / "data" / "L" / f"sample{i}.png")

    opt = load_repo_options(args.repo / "end-to-end" / "options" / "train_drunet.json")
    opt["gpu_ids"] = [int(g) for g in args.gpu_ids.split(",") if g.strip()]
    opt["path"] = {"root": str(out / "run"),
                   "pretrained_netG": resolve_weights(args.pretrained, out) if args.pretrained else None}
    loader = {"dataset_type": "drunet", "dataroot_H": str(out / "data" / "H"),
              "dataroot_L": str(out / "data" / "L"), "use_all_patches": False, "skip_natural_patches": False,
              "num_patches_per_image": 1, "H_size": 128, "dataloader_shuffle": False,
              "dataloader_num_workers": 0, "dataloader_batch_size": args.batch}
    opt["datasets"]["train"].update(loader, name="mini_train", sigma=[0, 0])
    opt["datasets"]["test"].update(loader, name="mini_test", sigma_test=0)
    opt["train"].update(epochs=1, G_lossfn_type="l2", G_scheduler_milestones=[], G_scheduler_iter_step=None,
                        checkpoint_test=10**6, checkpoint_test_save=10**6, checkpoint_save=10**6,
                        checkpoint_print=10**6, manual_seed=123, E_decay=0, G_optimizer_betas=[0.9, 0.999],
                        G_optimizer_wd=0, G_optimizer_reuse=False, G_param_strict=True)
    path = out / "options.json"
    path.write_text(json.dumps(opt, indent=2) + "\n", encoding="utf-8")
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
