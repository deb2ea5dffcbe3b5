"""The toolbox's strace: the node's own strace, carried into the sandbox with its libraries.

A command stage runs under strace (`reb_ray.probing.observer`), and the sandbox image is the
agent's to change, so nothing of it is used: `strace/` in the toolbox holds the node's strace
binary, every shared library `ldd` lists for it, and the node's dynamic loader as `lib/ld.so`,
which starts strace with `--library-path lib` (an argument, not LD_LIBRARY_PATH, so the traced
command inherits nothing of it). The node's strace comes from its distribution (Debian's
`strace` package, `scripts/setup.sh`); a node without one builds a toolbox without it, and
stages there run unobserved (recorded as such, never failed for it).
"""

from __future__ import annotations

import shutil
import subprocess
from functools import lru_cache
from pathlib import Path

#: The bundle's directory in the toolbox, and its loader inside it.
STRACE_DIR = "strace"
LOADER = "lib/ld.so"


@lru_cache(maxsize=1)
def strace_version() -> str | None:
    """The node's strace version ("6.1"), or None when it has none that runs."""
    path = shutil.which("strace")
    if path is None:
        return None
    try:
        out = subprocess.run([path, "-V"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    words = out.split("\n", 1)[0].split()
    return words[-1] if words and words[0] == "strace" else None


def _libraries(binary: str) -> tuple[list[Path], Path | None]:
    """(shared libraries, dynamic loader) `ldd` lists for `binary`."""
    out = subprocess.run(["ldd", binary], capture_output=True, text=True, timeout=30).stdout
    libs, loader = [], None
    for line in out.splitlines():
        parts = line.split()
        if "=>" in parts and len(parts) > parts.index("=>") + 1 and parts[parts.index("=>") + 1].startswith("/"):
            libs.append(Path(parts[parts.index("=>") + 1]))
        elif parts and parts[0].startswith("/") and "ld-" in parts[0]:
            loader = Path(parts[0])
    return libs, loader


def add_strace(dest: Path) -> str | None:
    """Copy the node's strace bundle into `dest/strace`; its version, or None (nothing copied)."""
    version = strace_version()
    binary = shutil.which("strace")
    if version is None or binary is None:
        return None
    try:
        libs, loader = _libraries(binary)
    except (OSError, subprocess.SubprocessError):
        return None
    if loader is None:
        return None
    target = dest / STRACE_DIR
    (target / "lib").mkdir(parents=True)
    shutil.copy2(Path(binary).resolve(), target / "strace")
    for lib in libs:
        shutil.copy2(lib.resolve(), target / "lib" / lib.name)
    shutil.copy2(loader.resolve(), target / LOADER)
    return version
