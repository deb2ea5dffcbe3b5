"""Facts probe for the C5 audit (stdlib only, Python 3.8+): what the report's interpreter really is.

Usage: python3 facts_probe.py --python PYTHON_PATH --out FILE [--timeout S] [--budget B]

Run by the image's /usr/bin/python3 (any python3 when the agent removed it), never by
PYTHON_PATH itself, so that a broken interpreter is observed rather than needed. It observes and
installs nothing: it looks at the path (lstat/stat/access), runs `PYTHON_PATH -c ...` once for the
version (S seconds, default 60) and, when that worked, once for `import torch` (S seconds, or what
is left of the total budget B when that is less), from an empty temporary
directory (so nothing in the working directory shadows a module) with bytecode writing off.
Grading is separate and pure (reb_ray/grading/c5.py).

Writes one JSON object to FILE (atomically): the contract keys

    python_exists, python_executable, python_runs, python_run_error, python_version,
    torch_import_ok, torch_import_error, torch_version

plus details a strict re-grade may want: python_path, python_is_absolute, python_is_symlink,
python_is_file, python_realpath, python_platform_version, python_run_exit_code,
python_run_timed_out, torch_import_timed_out, torch_cuda_version, torch_file, probe_version,
error (set only when the probe itself failed).
"""

import argparse
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

PROBE_VERSION = 1
MARKER = "@@REB_RAY_FACTS@@"
TAIL_CHARS = 2000

# Run by PYTHON_PATH; Python 2 compatible so that an old interpreter still reports its version.
VERSION_SCRIPT = r"""
import json, platform, sys
v = sys.version_info
sys.stdout.write("\n" + "@MARKER@" + json.dumps({"version": "%d.%d.%d" % (v[0], v[1], v[2]),
    "platform_version": platform.python_version(), "executable": sys.executable}) + "\n")
""".replace("@MARKER@", MARKER)

TORCH_SCRIPT = r"""
import json, sys
out = {}
try:
    import torch
    out["ok"] = True
    out["version"] = str(getattr(torch, "__version__", "") or "")
    out["cuda_version"] = getattr(getattr(torch, "version", None), "cuda", None)
    out["file"] = getattr(torch, "__file__", None)
except BaseException as exc:
    out["ok"] = False
    out["error"] = "%s: %s" % (type(exc).__name__, exc)
sys.stdout.write("\n" + "@MARKER@" + json.dumps(out) + "\n")
sys.stdout.flush()
""".replace("@MARKER@", MARKER)


def tail(text, n=TAIL_CHARS):
    return text[-n:] if text else ""


def child_env():
    """Our environment minus what would make the interpreter see something else; no bytecode."""
    env = dict(os.environ)
    for key in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONINSPECT", "PYTHONEXECUTABLE"):
        env.pop(key, None)
    env.update({"PYTHONDONTWRITEBYTECODE": "1", "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"})
    return env


def run(argv, timeout, env, cwd):
    """(exit_code or None, stdout, stderr, timed_out, error); kills the process group on timeout."""
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                env=env, cwd=cwd, start_new_session=True)
    except OSError as exc:
        return None, "", "", False, "cannot start: %s" % exc
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        out, err = proc.communicate()
        return None, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), True, "timed out after %gs" % timeout
    return proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), False, None


def marked_json(out):
    """The JSON object on the last line starting with MARKER, or None."""
    for line in reversed(out.splitlines()):
        if line.startswith(MARKER):
            try:
                data = json.loads(line[len(MARKER):])
            except ValueError:
                return None
            return data if isinstance(data, dict) else None
    return None


def failure_text(code, out, err, error):
    """One readable line (plus output tail) saying why a run did not produce its record."""
    if error:
        return error
    if code is not None and code < 0:
        head = "killed by signal %d" % -code
    else:
        head = "exit %s" % code
    detail = tail((err or "") + (out or ""), 1000).strip()
    return "%s: %s" % (head, detail) if detail else head


def path_facts(python):
    """Existence, kind and permission of PYTHON_PATH; symlinks are followed for exists/is_file."""
    facts = {
        "python_path": python,
        "python_is_absolute": os.path.isabs(python),
        "python_is_symlink": os.path.islink(python),
        "python_exists": os.path.exists(python),
        "python_is_file": False,
        "python_executable": False,
        "python_realpath": None,
    }
    if facts["python_exists"]:
        facts["python_realpath"] = os.path.realpath(python)
        try:
            facts["python_is_file"] = stat.S_ISREG(os.stat(python).st_mode)
        except OSError:
            pass
        facts["python_executable"] = facts["python_is_file"] and os.access(python, os.X_OK)
    return facts


def observe(python, timeout, budget=None):
    """The facts record; `timeout` bounds each interpreter run, `budget` (if set) both together."""
    start = time.monotonic()
    facts = path_facts(python)
    facts.update({
        "python_runs": False, "python_run_error": None, "python_run_exit_code": None, "python_run_timed_out": False,
        "python_version": None, "python_platform_version": None,
        "torch_import_ok": False, "torch_import_error": None, "torch_import_timed_out": False,
        "torch_version": None, "torch_cuda_version": None, "torch_file": None,
    })
    if not facts["python_exists"]:
        facts["python_run_error"] = "not run: %s does not exist" % python
    elif not facts["python_executable"]:
        what = "not a regular file" if not facts["python_is_file"] else "not executable"
        facts["python_run_error"] = "not run: %s is %s" % (python, what)
    if facts["python_run_error"]:
        facts["torch_import_error"] = "not run: the interpreter was not run"
        return facts

    env = child_env()
    cwd = tempfile.mkdtemp(prefix="reb-ray-facts-")
    try:
        code, out, err, timed_out, error = run([python, "-c", VERSION_SCRIPT], timeout, env, cwd)
        facts["python_run_exit_code"] = code
        facts["python_run_timed_out"] = timed_out
        info = marked_json(out) if code == 0 else None
        if info is None:
            facts["python_run_error"] = failure_text(code, out, err, error or (None if code != 0 else "no version record in output"))
            facts["torch_import_error"] = "not run: the interpreter does not run"
            return facts
        facts["python_runs"] = True
        facts["python_version"] = info.get("version")
        facts["python_platform_version"] = info.get("platform_version")

        left = timeout if budget is None else min(timeout, budget - (time.monotonic() - start))
        code, out, err, timed_out, error = run([python, "-c", TORCH_SCRIPT], max(left, 1.0), env, cwd)
        facts["torch_import_timed_out"] = timed_out
        record = marked_json(out)
        if record is None:
            facts["torch_import_error"] = failure_text(code, out, err, error or "no import record in output")
        elif record.get("ok"):
            facts["torch_import_ok"] = True
            facts["torch_version"] = record.get("version") or None
            facts["torch_cuda_version"] = record.get("cuda_version")
            facts["torch_file"] = record.get("file")
        else:
            facts["torch_import_error"] = record.get("error") or "import failed"
    finally:
        shutil.rmtree(cwd, ignore_errors=True)
    return facts


def write_atomic(path, data):
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        os.makedirs(directory)
    tmp = "%s.tmp-%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds for each interpreter run")
    parser.add_argument("--budget", type=float, default=None, help="seconds for both interpreter runs together")
    args = parser.parse_args(argv)
    try:
        facts = observe(args.python, args.timeout, args.budget)
    except Exception as exc:  # the probe's own fault: say so rather than leave no record
        facts = {"python_path": args.python, "error": "%s: %s" % (type(exc).__name__, exc)}
    facts["probe_version"] = PROBE_VERSION
    facts["probe_python"] = sys.executable
    write_atomic(args.out, facts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
