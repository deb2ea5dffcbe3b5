"""The `reb-ray` command line run inside the test's own process.

The rule: a CLI test that is about what a command prints and its exit status (not about the
process: a console script on PATH, a signal, what a child inherits) calls `reb_ray.cli.main`
here, with the same argv, environment changes and working directory a subprocess would get, and
reads the same stdout, stderr and exit code. Starting a Python process costs a second or two of
CPU (importing reb_ray, typer and the libraries); in process it costs milliseconds, which is what
keeps the unit tier under a minute. `main`'s own error handling (one line on stderr, exit 2) is
what runs, so a traceback still fails the test.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import types
from pathlib import Path


def run_cli(*args: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`reb-ray ARGS` in this process: a CompletedProcess with its exit code, stdout and stderr."""
    from reb_ray.cli import main

    out, err = io.StringIO(), io.StringIO()
    saved_env, saved_argv, saved_cwd, saved_main = dict(os.environ), sys.argv, os.getcwd(), sys.modules["__main__"]
    code = 0
    try:
        os.environ.update(env or {})
        sys.argv = ["reb-ray", *args]
        # click names the program from __main__ (here `python -m pytest`); a console script's is argv[0]
        sys.modules["__main__"] = types.ModuleType("__main__")
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main()
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
                if not isinstance(exc.code, (int, type(None))):
                    print(exc.code, file=sys.stderr)
    finally:
        os.chdir(saved_cwd)
        sys.argv, sys.modules["__main__"] = saved_argv, saved_main
        os.environ.clear()
        os.environ.update(saved_env)
    return subprocess.CompletedProcess(["reb-ray", *args], code, out.getvalue(), err.getvalue())
