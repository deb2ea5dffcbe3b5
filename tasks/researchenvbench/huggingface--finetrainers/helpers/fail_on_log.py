"""Run a command, pass its output through, and fail when the output shows a swallowed error.

    python fail_on_log.py [--fail-regex RE ...] -- COMMAND [ARG ...]

finetrainers' train.py logs "An error occurred during training: ..." for an exception in its
training loop; the paper's harness (runner.py --fail-regex) counted such a run as failed whatever
its exit status. This wrapper runs COMMAND with the same environment, copies its stdout and stderr
(merged) to stdout line by line, and exits with COMMAND's status, or 1 if that status is 0 but a
line matched one of the --fail-regex patterns. Stdlib only.
"""

import argparse
import re
import subprocess
import sys


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fail-regex", action="append", default=[], help="a pattern that marks failure")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command to run")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given")
    patterns = [re.compile(p) for p in args.fail_regex]
    matched = []
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    for raw in proc.stdout:
        sys.stdout.buffer.write(raw)
        sys.stdout.flush()
        line = raw.decode("utf-8", "replace")
        matched += [p.pattern for p in patterns if p.search(line) and p.pattern not in matched]
    rc = proc.wait()
    if rc == 0 and matched:
        print(f"[fail_on_log] exit 0 but the output matched {matched}: counted as a failure", flush=True)
        return 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
