"""The observer's reader and its output on this machine: the node's strace bundle
(reb_ray.probing.toolbox_strace) runs a command under probes/observer/trace_run.py, the output
verifies on the host under its key and no other, and the reader is out of the command's reach."""

from __future__ import annotations

import hashlib
import hmac
import json
import subprocess
import sys
from pathlib import Path

import pytest

from reb_ray.grading.observed import parse_trace
from reb_ray.paths import bundled_dir
from reb_ray.probing.observer import verify
from reb_ray.probing.toolbox_strace import add_strace, strace_version

READER = bundled_dir("probes") / "observer" / "trace_run.py"
sys.path.insert(0, str(READER.parent))
import trace_run  # noqa: E402  (the reader's pure parts)

sys.path.remove(str(READER.parent))


def _signed(key: bytes, header: dict, trace: bytes) -> bytes:
    body = json.dumps(header).encode()
    return hmac.new(key, body + b"\n" + trace, hashlib.sha256).hexdigest().encode() + b"\n" + body + b"\n" + trace


def test_the_output_verifies_under_its_key_only():
    key, trace = b"k" * 64, b'7 execve("/usr/bin/python3", ["python3", "t.py"], 0x1 /* 1 vars */) = 0\n'
    data = _signed(key, {"complete": True}, trace)
    assert verify(data, key) == ({"complete": True}, trace, None)
    for forged in (data.replace(b"t.py", b"x.py"), _signed(b"other", {"complete": True}, trace), data + b"7 +++\n"):
        header, _, why = verify(forged, key)
        assert header is None and "does not verify" in why
    assert verify(b"", key)[2] == "the observer's output is empty or cut"


def test_the_reader_finds_the_commands_exit():
    assert trace_run.root_exit("35    +++ exited with 3 +++", 35) == 3
    assert trace_run.root_exit("35 +++ killed by SIGKILL +++", 35) == 137
    assert trace_run.root_exit("36    +++ exited with 0 +++", 35) is None
    assert trace_run.root_exit('35 execve("/bin/sh") = 0', 35) is None


@pytest.mark.usefixtures("slow_process")
@pytest.mark.skipif(strace_version() is None, reason="this machine has no strace")
def test_a_traced_command_and_its_reach(tmp_path):
    add_strace(tmp_path / "tb")
    (tmp_path / "t.py").write_text("print('ran')\n")
    key = tmp_path / "key"
    key.write_text("ab" * 32)
    out = tmp_path / "trace"
    # the command looks for its reader (its grandparent) and tries to read what it holds (whether
    # the kernel refuses depends on the command's capabilities: a sandbox's never include
    # CAP_SYS_PTRACE; this test's may): the attempt is in the trace either way
    probe = "r=$(awk '{print $4}' /proc/$PPID/stat); cat /proc/$r/environ >/dev/null 2>&1 || echo denied; " \
            f"{sys.executable} -I -S t.py"
    proc = subprocess.run([sys.executable, "-I", "-S", str(READER), "--strace", str(tmp_path / "tb" / "strace"),
                           "--key", str(key), "--out", str(out), "--", "sh", "-c", probe],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "ran" in proc.stdout, proc.stderr
    assert not key.exists()  # taken by the reader before the command started
    header, trace, why = verify(out.read_bytes(), b"ab" * 32)
    assert why is None and header["complete"] and header["nondumpable"] and header["root_status"] == 0
    parsed = parse_trace(trace.decode(), (header["reader_pid"], header["tracer_pid"]))
    python = [p for programs in parsed.programs.values() for p in programs if p.argv and p.argv[-1] == "t.py"]
    assert python and str(tmp_path / "t.py") in python[0].opened
    assert any(f"/proc/{header['reader_pid']}/environ" in line for line in parsed.reached), parsed.reached
    assert Path(out).stat().st_size == len(out.read_bytes())
