"""Which imports of a repository the repository itself cannot satisfy: the heuristic agent's scan.

Stdlib-only, Python 3.8 syntax: copied into the sandbox beside heuristic_script.py, which
imports it. The heuristic installs a distribution only for a name this scan returns, so it never
installs one whose import name is a module or folder of the repository itself.

A name is the repository's own when it is a top-level module (`name.py`) or package (a folder
`name/` holding Python files at any depth, with an `__init__.py` or without one, as a namespace
package) in an *import root*, a directory that Python may put on sys.path when the
repository's code runs:

- the repository root and `src/` (the working directory; an editable install);
- every *script directory*: the folder of a file that is run as a program (an
  `if __name__ == "__main__":` block or a `#!` first line). `python dir/script.py` puts `dir`
  first on sys.path, so every module imported from the script, however deep, sees `dir`'s
  modules by their bare names: ClearerVoice-Studio's train/speech_super_resolution/losses/loss.py
  imports `dataloader`, a folder beside train.py. This holds inside packages too
  (speechscore/demo.py makes `from basis import ...` in speechscore/scores/ work);
- every directory a runtime sys.path edit names, when its argument reads statically: string
  literals, `__file__`, `sys.path[0]`, `os.path.dirname/abspath/realpath/normpath/join`,
  `Path(...)`, `.parent`, `.resolve()`, `/` and `+`. A relative string is tried against the
  editing file's folder (a script's usual working directory) and the repository root (e.g.
  tools/train.py inserts third_party/stylegan and imports `dnnlib`);
- for each file, its own folder (a module beside it).

The rule errs towards "own" on purpose: a distribution installed under a local name breaks the
run (a local namespace folder loses to any regular package of that name on sys.path, so PyPI's
`dataloader` hides ClearerVoice's `dataloader/`), while a dependency left uninstalled costs
at most that import. A folder that is only data (no .py file below it) is not a package.
"""

from __future__ import annotations

import ast
import os
import re
import sys
import sysconfig
from pathlib import Path

#: Import name -> PyPI distribution; None means "not installable from PyPI, skip".
MODULE_TO_DIST = {
    "Bio": "biopython", "Crypto": "pycryptodome", "Levenshtein": "python-Levenshtein",
    "MySQLdb": "mysqlclient", "OpenSSL": "pyOpenSSL", "PIL": "pillow", "apex": None,
    "attr": "attrs", "bs4": "beautifulsoup4", "cv2": "opencv-python-headless",
    "dateutil": "python-dateutil", "detectron2": None, "docx": "python-docx", "dotenv": "python-dotenv",
    "einops": "einops", "faiss": "faiss-cpu", "fitz": "PyMuPDF", "git": "GitPython",
    "google.protobuf": "protobuf", "hydra": "hydra-core", "jwt": "PyJWT", "lightning": "lightning",
    "magic": "python-magic", "mmcv": "mmcv", "omegaconf": "omegaconf", "pkg_resources": "setuptools",
    "pptx": "python-pptx", "psycopg2": "psycopg2-binary", "pytorch_lightning": "pytorch-lightning",
    "serial": "pyserial", "skimage": "scikit-image", "sklearn": "scikit-learn",
    "tensorboardX": "tensorboardX", "timm": "timm", "transformers": "transformers", "usb": "pyusb",
    "wandb": "wandb", "yaml": "PyYAML", "zmq": "pyzmq",
}
SKIP_DIRS = {"site-packages", "dist-packages", "node_modules", "__pycache__", "venv", "env", "build", "dist"}
_MAIN_GUARD = re.compile(r"^if\s+(?:__name__\s*==\s*['\"]__main__['\"]|['\"]__main__['\"]\s*==\s*__name__)", re.M)
_PATH_CALLS = {"insert", "append", "extend", "addsitedir"}


def stdlib_names() -> set:
    """Standard-library top-level module names (sys.stdlib_module_names, else the stdlib dir)."""
    names = set(sys.builtin_module_names) | {"__future__"}
    if hasattr(sys, "stdlib_module_names"):
        return names | set(sys.stdlib_module_names)
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for path in list(stdlib.iterdir()) + list((stdlib / "lib-dynload").glob("*")):
        if path.name not in ("site-packages", "dist-packages"):
            names.add(path.name.split(".")[0])
    return names


def python_files(repo: Path, skip: set | frozenset = frozenset()):
    """The repo's .py files, skipping hidden dirs, venvs, site-packages and paths in `skip`."""
    for root, dirs, files in os.walk(str(repo)):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIP_DIRS
                         and not (Path(root) / d / "pyvenv.cfg").exists() and str(Path(root) / d) not in skip)
        for name in sorted(files):
            if name.endswith(".py"):
                yield Path(root) / name


def module_children(repo: Path, files: list) -> dict:
    """directory -> names importable from it: its .py stems and subdirs holding .py files."""
    kids = {}
    for f in files:
        kids.setdefault(f.parent, set()).add(f.stem)
        for folder in [f.parent] + list(f.parent.parents):
            if folder == repo or repo not in folder.parents:
                break
            kids.setdefault(folder.parent, set()).add(folder.name)
    return kids


def _static_path(node, path: Path):
    """The path string an expression builds, or None when it is not static (module docstring)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name) and node.id == "__file__":
        return str(path)
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "path" \
            and getattr(node.value.value, "id", None) == "sys":
        return str(path.parent)  # sys.path[0]: the running script's folder
    if isinstance(node, ast.Attribute) and node.attr == "parent":
        inner = _static_path(node.value, path)
        return None if inner is None else os.path.dirname(inner)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Div, ast.Add)):
        left, right = _static_path(node.left, path), _static_path(node.right, path)
        if left is None or right is None:
            return None
        return os.path.join(left, right) if isinstance(node.op, ast.Div) else left + right
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if name in ("resolve", "absolute") and isinstance(func, ast.Attribute) and not node.args:
        return _static_path(func.value, path)
    args = [_static_path(a, path) for a in node.args]
    if not args or None in args:
        return None
    if name == "join":
        return os.path.join(*args)
    if name == "dirname" and len(args) == 1:
        return os.path.dirname(args[0])
    if name in ("abspath", "realpath", "normpath", "Path", "PurePath", "str", "fspath") and len(args) == 1:
        return args[0]
    return None


def path_edit_dirs(tree, path: Path, repo: Path) -> set:
    """Folders inside `repo` that sys.path.insert/append/extend or site.addsitedir calls in `tree`
    (the module at `path`) name statically; relative ones against `path`'s folder and the repo."""
    found = set()
    for node in ast.walk(tree):
        func = getattr(node, "func", None)
        if not isinstance(node, ast.Call) or not isinstance(func, ast.Attribute) or func.attr not in _PATH_CALLS:
            continue
        owner = func.value
        if not (func.attr == "addsitedir" or (isinstance(owner, ast.Attribute) and owner.attr == "path")):
            continue
        args = node.args[1:] if func.attr == "insert" else node.args
        if func.attr == "extend" and args and isinstance(args[0], (ast.List, ast.Tuple)):
            args = args[0].elts
        for arg in args:
            value = _static_path(arg, path)
            if value is None:
                continue
            bases = [Path("/")] if os.path.isabs(value) else [path.parent, repo]
            for base in bases:
                folder = Path(os.path.normpath(str(base / value)))
                if folder == repo or repo in folder.parents:
                    found.add(folder)
    return found


def scan_imports(repo: Path, skip: set | frozenset = frozenset()) -> list:
    """Sorted absolute imports that are neither stdlib nor the repo's own (module docstring).
    Top-level names, except two levels under namespaces that MODULE_TO_DIST names dotted
    (google.protobuf). Files that do not parse are skipped."""
    files = list(python_files(repo, skip))
    kids, stdlib = module_children(repo, files), stdlib_names()
    roots, imports = {repo, repo / "src"}, {}
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        try:
            tree = ast.parse(text, str(path))
        except (SyntaxError, ValueError):
            continue
        if _MAIN_GUARD.search(text) or text.startswith("#!"):
            roots.add(path.parent)
        roots |= path_edit_dirs(tree, path, repo)
        found = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module)
        imports[path] = found
    own = set().union(*(kids.get(root, set()) for root in roots))
    namespaces = {k.split(".")[0] for k in MODULE_TO_DIST if "." in k}
    out = set()
    for path, found in imports.items():
        drop = stdlib | own | kids.get(path.parent, set())
        for name in found:
            top = name.split(".")[0]
            if top not in drop:
                out.add(".".join(name.split(".")[:2]) if top in namespaces and "." in name else top)
    return sorted(out)
