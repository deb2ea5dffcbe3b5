"""The heuristic agent's import scan: what the repository cannot satisfy itself (import roots)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from reb_ray.agents import heuristic_imports as hi

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "tasks" / "demo"
MAIN = 'if __name__ == "__main__":\n    main()\n'


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_module_map_is_sorted_and_covers_the_usual_mismatches():
    m = hi.MODULE_TO_DIST
    assert list(m) == sorted(m)
    assert m["yaml"] == "PyYAML" and m["cv2"] == "opencv-python-headless" and m["PIL"] == "pillow"
    assert m["sklearn"] == "scikit-learn" and m["google.protobuf"] == "protobuf" and m["hydra"] == "hydra-core"
    assert m["detectron2"] is None and m["apex"] is None


def test_scan_imports_drops_stdlib_local_and_relative(tmp_path):
    write(tmp_path / "train.py", "import os, json\nimport numpy as np\nimport yaml\nfrom utils import f\n"
                                 "from mypkg.sub import g\nimport google.protobuf.text_format\n"
                                 "from google.cloud import storage\nfrom __future__ import annotations\n")
    write(tmp_path / "utils.py", "from . import x\nfrom .y import z\nimport requests\n")
    write(tmp_path / "src" / "mypkg" / "__init__.py", "import typing_extensions\n")
    write(tmp_path / "tools" / "run.py", "import helper\nimport sklearn.linear_model\nimport nested\n")
    write(tmp_path / "tools" / "helper.py", "import asyncio\n")
    write(tmp_path / "tools" / "nested" / "deep" / "m.py", "")
    write(tmp_path / "other" / "x.py", "import helper\n")  # tools/ runs no script: helper looks external
    write(tmp_path / "broken.py", "def (:\n")
    write(tmp_path / ".hidden" / "h.py", "import hidden_dep\n")
    write(tmp_path / "venv" / "lib" / "v.py", "import venv_dep\n")
    write(tmp_path / "myenv" / "pyvenv.cfg", "")
    write(tmp_path / "myenv" / "lib" / "e.py", "import env_dep\n")
    assert hi.scan_imports(tmp_path) == ["google.cloud", "google.protobuf", "helper", "numpy", "requests",
                                         "sklearn", "typing_extensions", "yaml"]


def test_scan_imports_on_demo_repos():
    assert hi.scan_imports(DEMO / "import-name-mismatch" / "repo") == ["numpy", "yaml"]
    assert hi.scan_imports(DEMO / "pyproject-extra" / "repo") == ["click", "numpy"]


def test_stdlib_fallback_without_stdlib_module_names(monkeypatch):
    monkeypatch.delattr(sys, "stdlib_module_names")
    names = hi.stdlib_names()
    assert {"os", "json", "asyncio", "collections", "sys", "math", "__future__"} <= names
    assert not {"numpy", "yaml", "site-packages", "pip"} & names


def clearervoice_layout(repo: Path, regular_package: bool) -> None:
    """ClearerVoice-Studio's train/speech_super_resolution, cut down: `dataloader/` beside the
    training script (a namespace package there; a regular one here when `regular_package`), imported
    by bare name from the script and from modules in subfolders of the script's folder."""
    se = repo / "train" / "speech_super_resolution"
    write(se / "train.py", "import yaml\nfrom dataloader.dataloader import get_dataloader\nfrom dataloader import misc\n"
                           "from solver import Solver\n\ndef main():\n    Solver(get_dataloader())\n\n" + MAIN)
    write(se / "solver.py", "class Solver:\n    def __init__(self, data):\n        self.data = data\n")
    write(se / "dataloader" / "dataloader.py", "from dataloader.misc import read_list\n\n"
                                               "def get_dataloader():\n    return read_list()\n")
    write(se / "dataloader" / "misc.py", "def read_list():\n    return [1, 2]\n")
    if regular_package:
        write(se / "dataloader" / "__init__.py", "")
    write(se / "losses" / "loss.py", "import numpy\nfrom dataloader.dataloader import get_dataloader\n")
    write(se / "utils" / "decode.py", "from dataloader.misc import read_list\nfrom models.net import Net\n")
    write(se / "models" / "net.py", "class Net:\n    pass\n")


@pytest.mark.parametrize("regular_package", [False, True], ids=["namespace-package", "regular-package"])
def test_a_folder_beside_a_script_is_the_repositorys_own(tmp_path, regular_package):
    """Issue 9 item 21: PyPI's `dataloader` shadowed ClearerVoice's `dataloader/` and broke the run."""
    clearervoice_layout(tmp_path, regular_package)
    assert hi.scan_imports(tmp_path) == ["numpy", "yaml"]


def test_a_script_inside_a_package_makes_its_folder_a_root(tmp_path):
    """ClearerVoice's speechscore/: a package whose demo script imports its siblings bare."""
    write(tmp_path / "speechscore" / "__init__.py", "from speechscore.speechscore import SpeechScore\n")
    write(tmp_path / "speechscore" / "demo.py", "from speechscore import SpeechScore\n" + MAIN)
    write(tmp_path / "speechscore" / "basis.py", "class ScoreBasis:\n    pass\n")
    write(tmp_path / "speechscore" / "speechscore.py", "from scores.srmr.srmr import SRMR\nimport librosa\n")
    write(tmp_path / "speechscore" / "scores" / "cbak.py", "from basis import ScoreBasis\nfrom pesq import pesq\n")
    write(tmp_path / "speechscore" / "scores" / "srmr" / "srmr.py", "import numpy\n")
    assert hi.scan_imports(tmp_path) == ["librosa", "numpy", "pesq"]


@pytest.mark.parametrize("edit", [
    'sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "third_party", "stylegan"))',
    'sys.path.append(str(Path(__file__).resolve().parent.parent / "third_party" / "stylegan"))',
    'sys.path.insert(0, "third_party/stylegan")',  # relative to the working directory: the repo root
    'sys.path.extend([os.path.abspath("../third_party/stylegan")])',  # run from tools/
    'site.addsitedir(os.path.dirname(os.path.abspath(__file__)) + "/../third_party/stylegan")',
])
def test_a_runtime_sys_path_edit_makes_its_folder_a_root(tmp_path, edit):
    """Field case F04: tools/train.py puts third_party/stylegan on sys.path and imports dnnlib."""
    write(tmp_path / "tools" / "train.py", f"import os, site, sys\nfrom pathlib import Path\n{edit}\n"
                                           "import dnnlib\nimport torch\n")
    write(tmp_path / "third_party" / "stylegan" / "__init__.py", "")
    write(tmp_path / "third_party" / "stylegan" / "dnnlib" / "__init__.py", "from dnnlib.util import EasyDict\n")
    write(tmp_path / "third_party" / "stylegan" / "dnnlib" / "util.py", "import requests\n")
    assert hi.scan_imports(tmp_path) == ["requests", "torch"]


def test_sys_path_of_the_scripts_own_folder_inside_a_package(tmp_path):
    """ClearerVoice's clearvoice/dataloader/dataloader.py appends its own folder; inference.py
    appends the parent of the script's folder (`os.path.dirname(sys.path[0])`)."""
    pkg = tmp_path / "clearvoice" / "clearvoice"
    write(pkg / "__init__.py", "")
    write(pkg / "dataloader" / "__init__.py", "")
    write(pkg / "dataloader" / "dataloader.py", "import os, sys\nsys.path.append(os.path.dirname(__file__))\n"
                                               "from meldataset import mel\n")
    write(pkg / "dataloader" / "meldataset.py", "import librosa\n")
    write(pkg / "dataloader" / "sub" / "x.py", "from meldataset import mel\n")
    write(tmp_path / "train" / "se" / "inference.py", "import os, sys\nsys.path.append(os.path.dirname(sys.path[0]))\n"
                                                      "import shared\n")
    write(tmp_path / "train" / "shared.py", "")
    assert hi.scan_imports(tmp_path) == ["librosa"]


def test_a_plain_folder_of_modules_does_not_hide_a_distribution(tmp_path):
    """`utils/wandb.py` is `utils.wandb`: with no script in utils/ and no sys.path edit, the
    root's `import wandb` still means the distribution. Dynamic sys.path edits name nothing."""
    write(tmp_path / "train.py", "import sys, os\nsys.path.insert(0, os.environ['EXTRA'])\nimport wandb\n" + MAIN)
    write(tmp_path / "utils" / "wandb.py", "import wandb\n")
    write(tmp_path / "utils" / "logger.py", "from utils.wandb import init\n")
    assert hi.scan_imports(tmp_path) == ["wandb"]
