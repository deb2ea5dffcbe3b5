"""Observer of one command stage (stdlib only, Python 3.6+): runs the stage's command under
strace and keeps the kernel's account of what it executed and opened out of its reach.

Usage: python3 -I -S trace_run.py --strace DIR --key FILE --out FILE -- COMMAND...

Run by the image's python3, as the first process of the stage's exec, before any code of the
stage exists. It makes itself non-dumpable first (prctl PR_SET_DUMPABLE 0: a process without
CAP_SYS_PTRACE, which a sandbox never has, can then neither ptrace it nor read its memory,
environment or file descriptors through /proc), reads the per-stage key the harness wrote to
KEY and removes that file, and starts the toolbox's strace (DIR: strace, its libraries and the
node's dynamic loader, so nothing of the image is used) on COMMAND with `-f --seccomp-bpf`,
writing its trace into a FIFO only this process reads. When the command's first process
exited (strace's `+++ exited` line of the root pid) the trace is complete: strace is stopped
(its tracees, background children of the command, go on untraced as before) and this process
exits with the command's status. It writes OUT once: a line with the MAC, a JSON header line, then
the trace's bytes; the MAC is HMAC-SHA256 under the key over the header line, a newline and
the trace, which the harness checks on the host, so a file the stage's code rewrote (it runs as
root in the same container) does not verify. Any syscall of the stage that reaches for this
process or strace (their /proc entries, ptrace, pidfd, a signal) is itself in the trace.
"""

import argparse
import hashlib
import hmac
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time

#: Syscalls traced: what was executed and opened, and every way to reach the tracer.
TRACED = ("execve,execveat,open,openat,openat2,ptrace,process_vm_readv,process_vm_writev,"
          "pidfd_open,pidfd_getfd,kill,tkill,tgkill")
#: Trace bytes kept at most (a stage opening more files is recorded as truncated).
MAX_TRACE = 256 << 20
STRING_LIMIT = "4096"


def nondumpable():
    """Make this process non-dumpable; True when it is."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
        return libc.prctl(3, 0, 0, 0, 0) == 0  # PR_GET_DUMPABLE
    except Exception:
        return False


def strace_argv(directory, fifo, command):
    loader = os.path.join(directory, "lib", "ld.so")
    return [loader, "--library-path", os.path.join(directory, "lib"), os.path.join(directory, "strace"),
            "-f", "--seccomp-bpf", "-I", "1", "-q", "-y", "-s", STRING_LIMIT, "-e", "signal=none", "-e", "trace=" + TRACED,
            "-o", fifo, "--"] + list(command)


def root_exit(line, root):
    """The exit status in `line` when it is `root`'s exit line, else None."""
    head, _, rest = line.partition(" ")
    rest = rest.lstrip(" ")
    if head != str(root) or not rest.startswith("+++ "):
        return None
    if rest.startswith("+++ exited with "):
        return int(rest[len("+++ exited with "):].split()[0])
    if rest.startswith("+++ killed by SIG"):
        name = rest[len("+++ killed by "):].split()[0]
        return 128 + int(getattr(signal, name, 9))
    return None


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--strace", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("command", nargs="+")
    args = parser.parse_args(argv)
    header = {"v": 1, "reader_pid": os.getpid(), "nondumpable": nondumpable(), "tracer_pid": None, "root_pid": None,
              "root_status": None, "complete": False, "truncated": False, "error": None}
    try:
        with open(args.key, "rb") as f:
            key = f.read()
        os.unlink(args.key)
    except OSError as exc:
        key = b""
        header["error"] = "key: %s" % exc
    tmp = tempfile.mkdtemp(prefix=".reb-ray-trace-", dir=os.path.dirname(args.out))
    fifo = os.path.join(tmp, "t")
    os.mkfifo(fifo, 0o600)
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    chunks, size, buffer, status = [], 0, b"", None
    try:
        proc = subprocess.Popen(strace_argv(args.strace, fifo, args.command), close_fds=True)
    except OSError as exc:
        header["error"] = "strace: %s" % exc
        proc = None
    if proc is not None:
        header["tracer_pid"] = proc.pid
        opened = False
        while True:
            ready, _, _ = select.select([fd], [], [], 0.2)
            data = os.read(fd, 1 << 16) if ready else b""
            if data:
                if not opened:
                    opened = True
                    os.unlink(fifo)
                if size < MAX_TRACE:
                    chunks.append(data)
                    size += len(data)
                else:
                    header["truncated"] = True
                buffer += data
                lines = buffer.split(b"\n")
                buffer = lines.pop()
                for raw in lines:
                    text = raw.decode("utf-8", "replace")
                    if header["root_pid"] is None and text[:1].isdigit():
                        header["root_pid"] = int(text.split(" ", 1)[0])
                    if header["root_pid"] is not None and status is None:
                        status = root_exit(text, header["root_pid"])
                if status is not None:
                    header["complete"] = True
                    break
                continue
            if proc.poll() is not None:
                if not ready or not data:
                    break
            elif ready and not data:
                time.sleep(0.02)  # no writer yet (strace starting) or between writers
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)  # strace detaches: background children go on untraced
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        header["strace_status"] = proc.returncode
    header["root_status"] = status
    os.close(fd)
    for name in os.listdir(tmp):
        os.unlink(os.path.join(tmp, name))
    os.rmdir(tmp)
    trace = b"".join(chunks)
    body = json.dumps(header, sort_keys=True).encode()
    mac = hmac.new(key, body + b"\n" + trace, hashlib.sha256).hexdigest() if key else None
    with open(args.out + ".tmp", "wb") as f:
        f.write((mac or "-").encode() + b"\n" + body + b"\n" + trace)
    os.replace(args.out + ".tmp", args.out)
    if status is None:
        return proc.returncode if proc is not None and proc.returncode is not None and proc.returncode >= 0 else 125
    return status


if __name__ == "__main__":
    sys.exit(main())
