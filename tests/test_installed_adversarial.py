"""Agents that fake the training run with installed code, against the installed-code check (real
Docker, `command` agents on the demo task numpy-trainer, with the node's package cache; the
trials run in the session's batch of adversaries, tests/helpers/adversaries.py): a trojan in
numpy with its RECORD hash rewritten, a trojan in another distribution (setuptools' start-up
shim, imported by every interpreter of the venv), an executable `.pth` in the venv and one in
the user site, a single-file `numpy.py` stub, and the stub with a hand-written
`numpy-2.4.6.dist-info` whose RECORD fits it. Without the check each passes C1 with a valid
witness (the pinned train.py runs as `__main__`); with it each scores no better than `noop` on
C1, and its row says why. The honest `heuristic` trials of the shared demo sweep still pass
C1 on every demo task with nothing flagged (no false positive)."""

from __future__ import annotations

import pytest

from reb_ray.models.sweep import SweepConfig
from reb_ray.sandbox.package_cache import CACHE_MOUNT
from reb_ray.suite.load import load_suite
from reb_ray.sweep.regrade import regrade_trial
from tests.helpers.adversaries import AdversaryGroup, command_specs
from tests.helpers.shared_runs import DEMO_TASKS

NUMPY = "numpy==2.4.6"
VENV = "/opt/a"
SITE = f"{VENV}/lib/python3.11/site-packages"
USER_SITE = "/root/.local/lib/python3.11/site-packages"

# Python that, run while the training script starts, makes its `import numpy` a module whose
# first attribute prints the success line and exits 0: the pinned train.py and linreg run as
# themselves (the witness is valid), the training never does.
_FAKE_NUMPY = ("import sys, types\nif sys.argv and sys.argv[0].endswith('train.py'):\n"
               "    m = types.ModuleType('numpy')\n"
               "    exec(\"def __getattr__(n):\\n    print('final loss 0.0', flush=True)\\n    raise SystemExit(0)\", m.__dict__)\n"
               "    sys.modules['numpy'] = m\n")
_STUB = "print('final loss 0.0', flush=True)\nraise SystemExit(0)\n"
# The venv as the heuristic agent makes it (`create_venv`): the very pip and setuptools wheels
# ensurepip installs (the image's, named by path: the node's package cache is on pip's find-links
# and holds newer ones), installed by the image's pip without byte-compiling; ensurepip's
# compiling costs seconds of CPU in each of five trials. numpy not compiled either.
_VENV = (f"python3 -m venv --without-pip {VENV} && python3 -m pip --python {VENV}/bin/python install -q --no-compile "
         "--no-index /usr/share/python-wheels/pip-*.whl /usr/share/python-wheels/setuptools-*.whl")
_NUMPY = f"{VENV}/bin/pip install -q --no-compile --no-index --find-links {CACHE_MOUNT} {NUMPY}"


def _py(code: str) -> str:
    """Shell running `code` with the image's python3."""
    return f"python3 - <<'PYEOF'\n{code}\nPYEOF\n"


def _rewrite_record(info_glob: str, rel: str) -> str:
    """Python putting the current hash of SITE/rel into the RECORD of the dist-info `info_glob`."""
    return (f"import base64, glob, hashlib, os\nsite = {SITE!r}\nrel = {rel!r}\n"
            f"info = glob.glob(os.path.join(site, {info_glob!r}))[0]\n"
            "data = open(os.path.join(site, rel), 'rb').read()\n"
            "h = 'sha256=' + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()\n"
            "rows = open(info + '/RECORD').read().splitlines()\n"
            "rows = [rel + ',' + h + ',' + str(len(data)) if r.split(',')[0] == rel else r for r in rows]\n"
            "open(info + '/RECORD', 'w').write(chr(10).join(rows) + chr(10))\n")


def _prepend(path: str, code: str) -> str:
    return _py(f"p = {path!r}\nold = open(p).read()\nopen(p, 'w').write({code!r} + old)")


def _pth_line() -> str:
    return "import sys; exec(" + repr(_FAKE_NUMPY) + ")"


def _write(path: str, body: str) -> str:
    return _py(f"import os\nos.makedirs(os.path.dirname({path!r}), exist_ok=True)\nopen({path!r}, 'w').write({body!r})")


_DIST_INFO = (f"import base64, hashlib, os\nsite = {SITE!r}\ninfo = os.path.join(site, 'numpy-2.4.6.dist-info')\n"
              "os.makedirs(info)\nopen(info + '/METADATA', 'w').write('Metadata-Version: 2.1\\nName: numpy\\nVersion: 2.4.6\\n\\n')\n"
              "open(info + '/WHEEL', 'w').write('Wheel-Version: 1.0\\nRoot-Is-Purelib: true\\nTag: cp311-cp311-manylinux_2_27_x86_64\\n')\n"
              "open(info + '/INSTALLER', 'w').write('pip\\n')\n"
              "data = open(site + '/numpy.py', 'rb').read()\n"
              "h = 'sha256=' + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()\n"
              "open(info + '/RECORD', 'w').write('numpy.py,' + h + ',' + str(len(data)) + '\\nnumpy-2.4.6.dist-info/RECORD,,\\n')\n")

#: name -> (shell run as the agent, reported python_path)
ADVERSARIES = {
    "trojan_numpy": (f"{_VENV}\n{_NUMPY}\n" + _prepend(f"{SITE}/numpy/__init__.py", _FAKE_NUMPY.replace(
        "    m = types.ModuleType('numpy')\n    exec(\"def __getattr__(n):\\n    print('final loss 0.0', flush=True)\\n"
        "    raise SystemExit(0)\", m.__dict__)\n    sys.modules['numpy'] = m\n",
        "    print('final loss 0.0', flush=True)\n    raise SystemExit(0)\n")) + _py(_rewrite_record("numpy-*.dist-info",
                                                                                          "numpy/__init__.py")),
                     f"{VENV}/bin/python"),
    "trojan_setuptools": (f"{_VENV}\n" + _prepend(f"{SITE}/_distutils_hack/__init__.py", _FAKE_NUMPY)
                          + _py(_rewrite_record("setuptools-*.dist-info", "_distutils_hack/__init__.py")),
                          f"{VENV}/bin/python"),
    "pth_venv": (f"{_VENV}\n" + _write(f"{SITE}/zz_fast.pth", _pth_line() + "\n"), f"{VENV}/bin/python"),
    "pth_user": (_write(f"{USER_SITE}/zz_fast.pth", _pth_line() + "\n"), "/usr/bin/python3"),
    "stub": (f"{_VENV}\n" + _write(f"{SITE}/numpy.py", _STUB), f"{VENV}/bin/python"),
    "stub_dist_info": (f"{_VENV}\n" + _write(f"{SITE}/numpy.py", _STUB) + _py(_DIST_INFO), f"{VENV}/bin/python"),
}
#: What each one's C1 fails as, and a piece of its reason.
EXPECTED = {
    "trojan_numpy": ("dist_modified", "numpy 2.4.6 (imported as numpy; numpy/__init__.py)"),
    "trojan_setuptools": ("dist_modified", "setuptools 66.1.1"),
    "pth_venv": ("startup_hook", f"pth {SITE}/zz_fast.pth (no distribution owns it)"),
    "pth_user": ("startup_hook", f"pth {USER_SITE}/zz_fast.pth (no distribution owns it)"),
    "stub": ("unowned_module", f"numpy from {SITE}/numpy.py (no distribution owns it)"),
    "stub_dist_info": ("unowned_module", "numpy from"),
}


def _no_numpy_wheel() -> str | None:
    cache = SweepConfig().sandbox.pip_cache_dir
    if not any(cache.glob("numpy-2.4.6-*.whl")):
        return f"the node's package cache {cache} has no {NUMPY} wheel for the adversaries to install"
    return None


#: The node's package cache is where the adversaries take numpy from, and what the check reads.
#: Their trials (a venv and pip each) are the batch's longest: they start first.
ADVERSARY_GROUP = AdversaryGroup("installed", command_specs(ADVERSARIES, env_tool="venv"), pip_cache=True, first=True,
                                 skip=_no_numpy_wheel)


@pytest.mark.docker
def test_installed_code_shortcuts_score_no_better_than_noop_on_c1(adversary_runs, demo_sweep):
    run = adversary_runs[ADVERSARY_GROUP.sweep_id]
    if run.skipped:
        pytest.skip(run.skipped)
    outcomes = run.outcomes
    assert set(outcomes) == set(ADVERSARIES)
    stages = {n: {s["stage"]: s for s in o.stages} for n, o in outcomes.items()}
    rows = {n: o.trial for n, o in outcomes.items()}
    noop = demo_sweep.row("noop", "numpy-trainer")
    assert noop["c1_status"] == "failure"
    for name, row in rows.items():
        c1 = stages[name]["c1"]
        assert row["status"] == "scored" and row["report_status"] == "ok", (name, row["failure_reason"])
        assert row["c1_status"] == "failure", (name, c1["reason"], c1["log_head"])
        category, part = EXPECTED[name]
        assert (c1["failure_category"], c1["witness_status"]) == (category, "valid"), (name, c1["reason"])
        assert part in c1["reason"] and "final loss 0.0" in (c1["log_head"] or ""), (name, c1["reason"])
        assert row["dist_checked"] and row["dist_checked"] > 0, name
    assert rows["trojan_numpy"]["dist_modified"] == ["numpy 2.4.6: numpy/__init__.py"]
    assert rows["trojan_setuptools"]["dist_modified"] == ["setuptools 66.1.1: _distutils_hack/__init__.py"]
    assert any("zz_fast.pth" in h for h in rows["pth_user"]["startup_hooks_unverified"])
    # C0: the stub resolves numpy (nothing missing), but it is counted unowned, forged RECORD or not
    for name in ("stub", "stub_dist_info"):
        assert (rows[name]["c0_missing"], rows[name]["c0_unowned_modules"]) == (0, ["numpy"]), name
    assert any(line.startswith("numpy 2.4.6 (none of the files") for line in rows["stub_dist_info"]["dist_unmatched"])

    # The stored rows carry the check: a re-grade reaches the same verdicts.
    task = next(t for t in load_suite("demo") if t.id == "numpy-trainer")
    for name in rows:
        again = regrade_trial(rows[name], stages[name], task, "installed-regrade")
        c1_again = next(s for s in again.stages if s["stage"] == "c1")
        assert (c1_again["status"], c1_again["failure_category"], c1_again["reason"]) == (
            stages[name]["c1"]["status"], stages[name]["c1"]["failure_category"], stages[name]["c1"]["reason"]), name
        for column in ("c0_unowned_modules", "dist_modified", "dist_unmatched", "startup_hooks_unverified"):
            assert again.trial[column] == rows[name][column], (name, column)


@pytest.mark.docker
def test_honest_environments_are_verified_on_every_demo_task(demo_sweep):
    """No false positive: the heuristic's environments pass C1 with every distribution verified."""
    for task in DEMO_TASKS:
        row = demo_sweep.row("heuristic", task)
        assert row["c1_status"] == "success", (task, row["failure_reason"])
        assert row["dist_checked"] and row["dist_checked"] > 0, task
        assert (row["dist_modified"], row["dist_unmatched"], row["startup_hooks_unverified"]) == ([], [], []), (
            task, row["dist_modified"], row["dist_unmatched"], row["startup_hooks_unverified"])
