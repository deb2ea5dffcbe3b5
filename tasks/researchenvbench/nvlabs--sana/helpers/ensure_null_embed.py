"""Write the null (unconditional) caption embedding that Sana's train.py loads with --load_from.

    python ensure_null_embed.py --root DIR [--text-encoder gemma-2-2b-it --max-length 300 --hidden-size 2304]

train.py reads <train.null_embed_root>/null_embed_diffusers_<text encoder>_<max length>token_<hidden
size>.pth when it loads a checkpoint; it computes that file itself only when visualization is on,
which the 1-step run turns off. This writes it as zeros (a dict with `uncond_prompt_embeds`
[1, L, H] and `uncond_prompt_embeds_mask` [1, L]) unless it exists. Stands for the paper
harness's benchmark_scripts/ensure_null_embed.py. Uses torch (a requirement of the repository);
the file is written under a temporary name and renamed, so several ranks may run it at once.
"""

import argparse
import os
import tempfile


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, help="the run's --train.null_embed_root")
    parser.add_argument("--text-encoder", default="gemma-2-2b-it", help="text_encoder.text_encoder_name")
    parser.add_argument("--max-length", type=int, default=300, help="text_encoder.model_max_length")
    parser.add_argument("--hidden-size", type=int, default=2304, help="the text encoder's hidden size")
    args = parser.parse_args()

    name = f"null_embed_diffusers_{args.text_encoder}_{args.max_length}token_{args.hidden_size}.pth"
    path = os.path.join(args.root, name)
    if os.path.exists(path):
        print(f"{path} exists")
        return
    import torch

    os.makedirs(args.root, exist_ok=True)
    payload = {"uncond_prompt_embeds": torch.zeros(1, args.max_length, args.hidden_size),
               "uncond_prompt_embeds_mask": torch.ones(1, args.max_length, dtype=torch.long)}
    fd, tmp = tempfile.mkstemp(dir=args.root, suffix=".tmp")
    os.close(fd)
    torch.save(payload, tmp)
    os.replace(tmp, path)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
