"""Copy a Sana training YAML with an empty `resume_from:` set to `resume_from: latest`.

    python patch_sana_config.py SRC.yaml DST.yaml

The repository's configs/sana_config/1024ms/Sana_600M_img1024.yaml leaves `model.resume_from`
empty (None), which train.py cannot use; `latest` is what train_scripts/train.sh passes on the
command line (with no checkpoint in the work dir yet, training starts from --load_from). Only a
`resume_from:` line with no value and no nested keys is changed; everything else is copied
byte for byte. Stands for the paper harness's benchmark_scripts/patch_train_config.py. Writes
DST atomically (temporary name, then rename), so several ranks may run it at once. Stdlib only.
"""

import os
import re
import sys
import tempfile

KEY = re.compile(r"^(?P<indent>[ \t]*)resume_from:[ \t]*(?:(?:null|~|None)[ \t]*)?(?P<comment>#.*)?$")


def patch(lines: list[str]) -> tuple[list[str], int]:
    out, changed = list(lines), 0
    for i, line in enumerate(lines):
        m = KEY.match(line.rstrip("\r\n"))
        if not m:
            continue
        indent = m.group("indent")
        nested = False
        for nxt in lines[i + 1:]:
            if not nxt.strip() or nxt.lstrip().startswith("#"):
                continue
            nested = len(nxt) - len(nxt.lstrip()) > len(indent)
            break
        if nested:
            continue
        ending = line[len(line.rstrip("\r\n")):]
        comment = f" {m.group('comment')}" if m.group("comment") else ""
        out[i] = f"{indent}resume_from: latest{comment}{ending}"
        changed += 1
    return out, changed


def main() -> int:
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[2].strip())
    src, dst = sys.argv[1], sys.argv[2]
    with open(src, encoding="utf-8", newline="") as f:
        lines = f.readlines()
    lines, changed = patch(lines)
    os.makedirs(os.path.dirname(os.path.abspath(dst)), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(dst)), suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
        f.writelines(lines)
    os.replace(tmp, dst)
    print(f"{dst}: {changed} empty resume_from set to latest")
    return 0


if __name__ == "__main__":
    sys.exit(main())
