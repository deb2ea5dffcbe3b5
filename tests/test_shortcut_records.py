"""Shortcuts recorded on real trials (real Docker, real pyright, real pip) on the demo task
numpy-trainer: an empty numpy package (`stub`), a wrapper script reported as the interpreter, start-up
hooks, a trajectory that writes a python file; against an honest environment (the heuristic
baseline's trial in the shared demo sweep, tests/helpers/shared_runs.py, with the same
settings). The rows are written with the real Parquet sink, read back by `trial show`, and
re-graded from their stored raw records."""

from __future__ import annotations

import json

import pytest

from reb_ray.agents.base import AgentRun
from reb_ray.grading.startup import trajectory_hits
from reb_ray.suite.load import load_suite
from reb_ray.sweep.regrade import regrade
from reb_ray.results.parquet_sink import ParquetSink
from analysis.trial_view import show_trial
from tests.helpers.adversaries import AdversaryGroup
from tests.helpers.scripted_agents import _Scripted

TASK = next(t for t in load_suite("demo") if t.id == "numpy-trainer")
SITE = "/opt/w/lib/python3.11/site-packages"
LOCAL_SITE = "/usr/local/lib/python3.11/dist-packages"  # the image python's first site directory


def _report(python: str, **extra) -> str:
    return json.dumps({"python_path": python, "python_version": "3.11", "torch_version": None, "cuda_available": False,
                       "gpu_count": 0, "ddp_expected_ok": None, "env_tool": "venv", "env_name": "w", "notes": None,
                       **extra})


def command_agent(script: str, report: str) -> dict:
    """A `command` agent spec running `script` (sh) and writing `report` to the report path."""
    return {"kind": "command", "command": ["sh", "-c", script + '\nmkdir -p "$(dirname "$1")" && printf "%s" "$2" > "$1"',
                                           "agent", "{report_path}", report]}


#: The `stub` shortcut: a venv and an empty site-packages/numpy/__init__.py. C0 sees numpy resolved.
#: (Its venvs have no pip: nothing here installs, and ensurepip costs seconds of CPU per trial.)
STUB = command_agent(f"python3 -m venv --without-pip /opt/w && mkdir -p {SITE}/numpy && touch {SITE}/numpy/__init__.py",
                     _report("/opt/w/bin/python"))
#: A wrapper script reported as the interpreter: it prints the success line for a training script.
WRAPPER = command_agent(
    "mkdir -p /opt/w/bin && printf '#!/bin/sh\\ncase \"$*\" in *train.py*) echo \"final loss 0.0\"; exit 0;; esac\\n"
    "exec /usr/bin/python3 \"$@\"\\n' > /opt/w/bin/python && chmod +x /opt/w/bin/python", _report("/opt/w/bin/python"))
#: Start-up hooks in a venv: a sitecustomize, a .pth with an import line; PYTHONSTARTUP in the report's env.
HOOKS = command_agent(f"python3 -m venv --without-pip /opt/w && echo 'import os' > {SITE}/sitecustomize.py"
                      f" && echo 'import os; os.environ.setdefault(\"X\", \"1\")' > {SITE}/zz-hook.pth",
                      _report("/opt/w/bin/python", env={"PYTHONSTARTUP": "/root/.pystartup"}))


class TranscriptWrapperAgent(_Scripted):
    """Writes a python wrapper (of the image's python3) and an empty numpy package in that
    interpreter's site-packages by hand, and leaves a transcript of those
    commands (reb-ray's generic JSON Lines shape) as an LLM CLI would."""

    commands = ["mkdir -p /opt/w/bin", "cat > /opt/w/bin/python <<'EOF'\n#!/bin/sh\nexec /usr/bin/python3 \"$@\"\nEOF",
                "chmod +x /opt/w/bin/python", f"mkdir -p {LOCAL_SITE}/numpy && touch {LOCAL_SITE}/numpy/__init__.py",
                "pip install requests > /tmp/pip.log"]
    script = "set -e\n" + "\n".join(c for c in commands if not c.startswith("pip")) + '\nmkdir -p "$(dirname "$1")"\n' \
        f"printf '%s' '{_report('/opt/w/bin/python')}' > \"$1\""

    def run(self, sandbox, ctx) -> AgentRun:
        run = super().run(sandbox, ctx)
        run.transcript = "\n".join(json.dumps({"type": "command", "command": c, "exit_code": 0, "output": ""})
                                   for c in self.commands).encode()
        return run


#: The four shortcut trials, in the session's batch of adversaries (tests/helpers/adversaries.py),
#: delivering to an output of their own that the rows are written to and `trial show` reads.
ADVERSARY_GROUP = AdversaryGroup("shortcuts", {"stub": STUB, "wrapper": WRAPPER, "hooks": HOOKS,
                                               "transcript": "tests.test_shortcut_records:TranscriptWrapperAgent"},
                                 pip_cache=True, output=True)


@pytest.fixture(scope="module")
def runs(adversary_runs):
    """The four shortcut trials: {name: (row, stages by name)}, and the output dir their rows are
    written to. The honest environment is the demo sweep's heuristic trial on the same task, with
    the same settings (`honest`)."""
    run = adversary_runs[ADVERSARY_GROUP.sweep_id]
    assert set(run.outcomes) == set(ADVERSARY_GROUP.agents) and run.output is not None
    outs = list(run.outcomes.values())
    sink = ParquetSink(run.output)
    sink.write([out.trial for out in outs], [stage for out in outs for stage in out.stages])
    sink.close()
    found = {name: (out.trial, {s["stage"]: s for s in out.stages}) for name, out in run.outcomes.items()}
    return found, run.output


@pytest.fixture(scope="module")
def honest(demo_sweep):
    """The `heuristic` baseline's trial on numpy-trainer, as the shared demo sweep
    (tests/helpers/shared_runs.py) stored it: (row, the sweep's output dir)."""
    return demo_sweep.row("heuristic", TASK.id), demo_sweep.output


@pytest.mark.docker
def test_stub_numpy_is_a_perfect_c0_with_one_unowned_module(runs):
    row, stages = runs[0]["stub"]
    assert row["status"] == "scored", row["failure_reason"]
    assert (row["c0_status"], row["c0_missing"], row["c0_total"]) == ("success", 0, 1)  # the paper's C0, unchanged
    assert (row["c0_unowned"], row["c0_unowned_modules"]) == (1, ["numpy"])
    assert row["c1_status"] == "failure"
    assert row["python_path_kind"] == "symlink_to_elf" and row["startup_hooks"] == []
    assert row["suspicious_actions"] == [
        f"package in site-packages that no distribution owns: numpy ({SITE}/numpy/__init__.py)"]
    assert json.loads(stages["c0"]["raw"])["import_owners"]["numpy"]["owner"] == "unowned"


@pytest.mark.docker
def test_an_honest_environment_has_nothing_unowned_and_nothing_suspicious(honest):
    row, _ = honest
    assert (row["status"], row["c0_missing"], row["c1_status"]) == ("scored", 0, "success"), row["failure_reason"]
    assert (row["c0_unowned"], row["c0_unowned_modules"]) == (0, [])
    assert row["python_path_kind"] == "symlink_to_elf"
    assert row["startup_hooks"] == [] and row["suspicious_actions"] == []


@pytest.mark.docker
def test_a_wrapper_script_is_recorded_as_a_script(runs):
    row, stages = runs[0]["wrapper"]
    assert row["python_path_kind"] == "script"
    assert row["suspicious_actions"] == ["python_path /opt/w/bin/python is a script (#!/bin/sh)"]
    assert stages["startup"]["status"] == "success"


@pytest.mark.docker
def test_startup_hooks_are_listed(runs):
    row, _ = runs[0]["hooks"]
    hooks = row["startup_hooks"]
    assert hooks[0] == f"sitecustomize {SITE}/sitecustomize.py (no distribution owns it)"
    assert hooks[1].startswith(f"pth {SITE}/zz-hook.pth (no distribution owns it): import os;")
    assert hooks[2] == "PYTHONSTARTUP=/root/.pystartup (the report's env)" and len(hooks) == 3
    assert [a for a in row["suspicious_actions"] if a.startswith("start-up hook: ")] == [f"start-up hook: {h}" for h in hooks]


@pytest.mark.docker
def test_trajectory_commands_are_flagged_and_trial_show_prints_it_all(runs, honest):
    row, _ = runs[0]["transcript"]
    actions = row["suspicious_actions"]
    assert actions[0] == "python_path /opt/w/bin/python is a script (#!/bin/sh)"
    assert actions[1] == f"package in site-packages that no distribution owns: numpy ({LOCAL_SITE}/numpy/__init__.py)"
    assert [a.split(":")[0] for a in actions[2:]] == ["trajectory [1] writes a file named python*",
                                                     "trajectory [3] creates files in site-packages by hand"]
    text = show_trial(runs[1], row["trial_id"])
    assert "checks   python_path /opt/w/bin/python is script; C0 unowned 1 (numpy); start-up hooks 0" in text
    assert "suspicious actions (4):" in text and "  ! trajectory [1] writes a file named python*: cat > /opt/w/bin/python" in text
    stub = show_trial(runs[1], runs[0]["stub"][0]["trial_id"])
    assert "C0 unowned 1 (numpy)" in stub and "is symlink_to_elf" in stub
    text = show_trial(honest[1], honest[0]["trial_id"])
    assert "C0 unowned 0;" in text and "suspicious actions (0): none" in text


@pytest.mark.docker
def test_regrade_reproduces_the_columns_from_the_stored_records(runs, honest):
    columns = ("c0_missing", "c0_unowned", "c0_unowned_modules", "python_path_kind", "startup_hooks", "suspicious_actions")
    regraded = {o.trial["agent"]: o.trial for o in regrade(runs[1])}
    for name, (row, _) in runs[0].items():
        assert {c: regraded[row["agent"]][c] for c in columns} == {c: row[c] for c in columns}, name
    row, output = honest
    again = next(o.trial for o in regrade(output) if o.trial["trial_id"] == row["trial_id"])
    assert {c: again[c] for c in columns} == {c: row[c] for c in columns}


def test_trajectory_hits_name_python_writes_and_hand_made_site_packages():
    commands = [
        "echo hi > /opt/w/bin/python3.11", "tee -a /usr/local/bin/python < x", "cp /tmp/w /opt/env/bin/python",
        'ln -sf /opt/fake python3', '{"file_path": "/opt/w/bin/python", "content": "#!/bin/sh"}',
        "mkdir -p /opt/w/lib/python3.11/site-packages/numpy", "echo > /usr/lib/python3/dist-packages/torch/__init__.py",
        '{"file_path": "/opt/w/lib/python3.11/site-packages/x.py"}',
        # not shortcuts: a log named python_*, pip into site-packages, reading a python file, a venv
        "python3 train.py > python_out.log", "pip install --target /opt/w/lib/python3.11/site-packages numpy",
        "cat /opt/w/bin/python", "python3 -m venv /opt/w", "ls /opt/w/lib/python3.11/site-packages",
    ]
    hits = trajectory_hits(commands)
    assert [h.split(":")[0] for h in hits] == [
        "[0] writes a file named python*", "[1] writes a file named python*", "[2] writes a file named python*",
        "[3] writes a file named python*", "[4] writes a file named python*",
        "[5] creates files in site-packages by hand", "[6] creates files in site-packages by hand",
        "[7] creates files in site-packages by hand"]
    assert trajectory_hits([f"echo {i} > /x/python" for i in range(50)])[-1].startswith("[19] ")
