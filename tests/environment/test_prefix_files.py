"""The rebuilt prefix against the kept one, file by file, on a real wheel's files: a `sed`-patched
file in site-packages and a hand-written stub make the rebuild differ; byte-compiled caches and
the installer's bookkeeping do not. The archives are what the engine's archive of a directory
is (a tar whose top entry is the directory), made here with tarfile."""

from __future__ import annotations

import io
import tarfile
import zipfile
from pathlib import Path

import pytest

from reb_ray.environment.prefix_files import compare_prefixes, comparable_prefix, digests_of_archive
from reb_ray.sweep.env_verify import files_differ, verdict_line

SIX = "six-1.17.0-py2.py3-none-any.whl"
WHEEL_DIRS = [Path.home() / ".cache" / "reb-ray" / "wheels", Path("/opt/pypi/files")]


def _prefix(tmp: Path, name: str) -> Path:
    wheel = next((d / SIX for d in WHEEL_DIRS if (d / SIX).is_file()), None)
    if wheel is None:
        pytest.skip(f"{SIX} is in none of {[str(d) for d in WHEEL_DIRS]}")
    prefix = tmp / name / "a"
    site = prefix / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    (prefix / "pyvenv.cfg").write_text(f"home = /usr/bin\ncommand = /usr/bin/python3 -m venv {name}\n")
    (prefix / "bin").mkdir()
    (prefix / "bin" / "python").symlink_to("/usr/bin/python3")
    return prefix


def _archive(prefix: Path) -> list[bytes]:
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as archive:
        archive.add(prefix, arcname=prefix.name)
    raw = data.getvalue()
    return [raw[i:i + 7000] for i in range(0, len(raw), 7000)]  # the engine streams it in chunks


def test_a_rebuild_of_the_same_files_is_the_environment(tmp_path):
    kept, rebuilt = _prefix(tmp_path, "kept"), _prefix(tmp_path, "rebuilt")
    site = rebuilt / "lib" / "python3.11" / "site-packages"
    (site / "__pycache__").mkdir()
    (site / "__pycache__" / "six.cpython-311.pyc").write_bytes(b"\x00compiled")
    (site / "six-1.17.0.dist-info" / "REQUESTED").write_text("")
    digests = digests_of_archive(_archive(kept))
    assert digests["bin/python"] == "link:/usr/bin/python3"
    assert digests["lib/python3.11/site-packages/six.py"].startswith("sha256:")
    got = compare_prefixes(digests, digests_of_archive(_archive(rebuilt)))
    assert (got["modified"], got["uncaptured"], got["extra"]) == ([], [], [])
    # pyvenv.cfg, the RECORD, the .pyc, REQUESTED and the bin/python link (a link on both sides)
    assert got["ignored"] == 5 and got["compared"] == len(digests) - 3
    assert files_differ({"status": "compared", **got}) == []


def test_a_sed_patched_file_and_a_stub_make_it_differ(tmp_path):
    kept, rebuilt = _prefix(tmp_path, "kept"), _prefix(tmp_path, "rebuilt")
    site = kept / "lib" / "python3.11" / "site-packages"
    (site / "six.py").write_text((site / "six.py").read_text().replace("__version__ = ", "__version__ = 'patched' or "))
    (site / "numpy.py").write_text("print('final loss 0.0')\n")
    got = compare_prefixes(digests_of_archive(_archive(kept)), digests_of_archive(_archive(rebuilt)))
    assert got["modified"] == ["lib/python3.11/site-packages/six.py"]
    assert got["uncaptured"] == ["lib/python3.11/site-packages/numpy.py"]
    lines = files_differ({"status": "compared", **got})
    assert lines == ["files differ: lib/python3.11/site-packages/six.py",
                     "files the rebuild lacks: lib/python3.11/site-packages/numpy.py"]
    record = {"built": True, "reproducible": False, "differs": lines}
    assert verdict_line(record).startswith("reproducible: no (files differ: lib/python3.11/site-packages/six.py")


def test_the_system_interpreter_is_not_compared():
    assert not comparable_prefix("/usr") and not comparable_prefix(None) and comparable_prefix("/opt/envs/a")


def test_a_venvs_interpreter_links_may_name_the_base_by_another_name_but_not_become_files():
    """`python -m venv` names the base interpreter as it was called (python3 or python3.11): two
    links are not a difference; a link the agent replaced by a file (a wrapper) is."""
    from reb_ray.environment.prefix_files import compare_prefixes

    kept = {"bin/python": "link:python3", "bin/python3": "link:/usr/bin/python3", "bin/python3.11": "link:python3",
            "bin/tool": "link:x"}
    rebuilt = {"bin/python": "link:python3", "bin/python3": "link:/usr/bin/python3.11", "bin/python3.11": "link:python3",
               "bin/tool": "link:y"}
    got = compare_prefixes(kept, rebuilt)
    assert got["modified"] == ["bin/tool"] and got["ignored"] == 3
    wrapped = compare_prefixes({**kept, "bin/python3": "sha256:" + "0" * 64}, rebuilt)
    assert "bin/python3" in wrapped["modified"]
