"""Env-size probe (stdlib only): bytes of the environment behind an interpreter.

Usage: python3 env_size.py PYTHON_PATH
Prints one JSON object: prefix (the interpreter's sys.prefix), unique_bytes (regular files,
each inode once, symlinks not followed: the disk the environment takes), apparent_bytes (every
regular-file path counted with its size, a hard-linked file once per path, symlinks not
followed: the ResearchEnvBench release's measure, which the paper's env_size_avg_gb averages),
files. Both come from one walk. Caches outside sys.prefix (~/.cache/pip) are not part of the
environment.
"""

import json
import os
import subprocess
import sys


def tree_sizes(root):
    seen, unique, apparent, files = set(), 0, 0, 0
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            if (st.st_mode & 0o170000) != 0o100000:
                continue
            files += 1
            apparent += st.st_size
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                unique += st.st_size
    return unique, apparent, files


def main():
    python = sys.argv[1]
    prefix = subprocess.run([python, "-c", "import sys; print(sys.prefix)"], capture_output=True, text=True, timeout=120)
    if prefix.returncode != 0:
        print(json.dumps({"error": "interpreter failed: " + prefix.stderr.strip()[-300:]}))
        return 1
    root = prefix.stdout.strip()
    unique, apparent, files = tree_sizes(root)
    print(json.dumps({"prefix": root, "unique_bytes": unique, "apparent_bytes": apparent, "files": files}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
