"""One conformance suite, run against every sandbox provider (docker, rootless podman and local)."""

from __future__ import annotations

import os
import time

import pytest

from reb_ray.sandbox.base import KILL_GRACE_S

#: The sleeps these tests start carry this process's number: a local sandbox sees every process
#: of the host (a container's too), so a test running beside this one never matches them.
P = os.getpid() % 9000 + 1000


def _pids_with(sandbox, argv: str) -> list[str]:
    """Pids of processes whose command line is exactly `argv` (space-joined), via a fresh exec."""
    script = 'for d in /proc/[0-9]*; do [ "$( { tr "\\0" " " < $d/cmdline; } 2>/dev/null)" = "$1 " ] && echo ${d#/proc/}; done; true'
    return sandbox.exec(["sh", "-c", script, "list", argv]).output.split()


def test_exit_codes_and_output(make_sandbox):
    sb = make_sandbox()
    ok = sb.exec("echo hello; echo err >&2")
    assert ok.exit_code == 0 and ok.ok and not ok.timed_out
    assert "hello" in ok.output and "err" in ok.output
    bad = sb.exec(["sh", "-c", "exit 3"])
    assert bad.exit_code == 3 and not bad.ok
    missing = sb.exec(["definitely-not-a-command-xyz"])
    assert missing.exit_code not in (0, None)


def test_env_and_workdir(make_sandbox):
    sb = make_sandbox()
    sb.exec("mkdir -p sub")
    res = sb.exec('echo "$FOO" && pwd', env={"FOO": "bar baz"}, workdir=f"{sb.workdir}/sub")
    assert res.output.split("\n")[0] == "bar baz"
    assert res.output.split("\n")[1].endswith("/sub")


def test_timeout_kills_command_and_children(make_sandbox):
    sb = make_sandbox()
    # A child that ignores SIGTERM, and a grandchild that escaped the process group with setsid.
    cmd = f"trap '' TERM; (sleep {P}01 &) ; setsid sleep {P}02 & sleep {P}03"
    start = time.monotonic()
    res = sb.exec(cmd, timeout=1.0)
    elapsed = time.monotonic() - start
    assert res.timed_out and not res.ok
    assert elapsed < 1.0 + KILL_GRACE_S + 5
    for needle in (f"sleep {P}01", f"sleep {P}02", f"sleep {P}03"):
        assert _pids_with(sb, needle) == [], needle


def test_background_process_returns_promptly(make_sandbox):
    sb = make_sandbox()
    start = time.monotonic()
    res = sb.exec(f"sleep {P}04 & echo started")
    assert time.monotonic() - start < 3.0
    assert res.exit_code == 0 and "started" in res.output and not res.timed_out


def test_large_output_is_bounded(make_sandbox):
    sb = make_sandbox(head_bytes=1000, tail_bytes=1000)
    res = sb.exec("head -c 5000000 /dev/zero | tr '\\0' 'a'; echo; echo THE-END")
    assert res.exit_code == 0
    assert res.truncated and res.dropped_bytes > 4_000_000
    assert res.total_bytes == 5_000_000 + 1 + len("THE-END\n")
    assert len(res.output) < 3000
    assert res.output.rstrip().endswith("THE-END")


def test_invalid_utf8_and_split_multibyte(make_sandbox):
    sb = make_sandbox(head_bytes=5, tail_bytes=64)
    # 0xff is invalid UTF-8; "é" is 2 bytes and straddles the 5-byte head boundary.
    res = sb.exec(["sh", "-c", r"printf 'abcd\303\251\377tail-\342\202\254-end'"])
    assert res.exit_code == 0
    assert res.output.startswith("abcd")
    assert "\ufffd" in res.output and res.output.endswith("tail-€-end")


def test_put_get_roundtrip(make_sandbox, tmp_path):
    sb = make_sandbox()
    src = tmp_path / "src"
    (src / "nested").mkdir(parents=True)
    (src / "a.txt").write_text("alpha")
    (src / "nested" / "b.bin").write_bytes(bytes(range(256)) * 100)
    dest = f"{sb.workdir}/deep/copy"
    sb.put(src, dest)
    assert sb.exec(f"cat {dest}/a.txt").output == "alpha"
    back = tmp_path / "back"
    sb.get(dest, back)
    assert (back / "a.txt").read_text() == "alpha"
    assert (back / "nested" / "b.bin").read_bytes() == bytes(range(256)) * 100
    sb.write_bytes(f"{sb.workdir}/one.json", b'{"x": 1}')
    assert sb.read_bytes(f"{sb.workdir}/one.json") == b'{"x": 1}'
    with pytest.raises(FileNotFoundError):
        sb.get(f"{sb.workdir}/nope", tmp_path / "nope")


def test_size_grows_with_writes(make_sandbox):
    sb = make_sandbox()
    before = sb.size().bytes
    sb.exec(f"head -c 3000000 /dev/urandom > {sb.workdir}/blob")
    after = sb.size()
    assert after.bytes is not None and after.bytes - (before or 0) >= 3_000_000
    assert after.method


def test_close_after_exception_removes_everything(provider, make_sandbox):
    with pytest.raises(RuntimeError):
        with make_sandbox() as sb:
            sb.exec(f"sleep {P}05 &")
            raise RuntimeError("boom")
    if sb.capabilities.image:  # a container: its engine no longer knows it
        import docker

        with pytest.raises(docker.errors.NotFound):
            sb.client.containers.get(sb.id)
    else:
        assert not sb.root.exists()
        import subprocess

        assert f"sleep {P}05" not in subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    sb.close()  # idempotent


def test_kill_leftovers_stops_background_processes_and_keeps_the_sandbox(make_sandbox):
    sb = make_sandbox()
    sb.exec(f"sleep {P}06 & setsid sleep {P}07 &")
    assert _pids_with(sb, f"sleep {P}06") and _pids_with(sb, f"sleep {P}07")
    stopped = sb.kill_leftovers()
    assert _pids_with(sb, f"sleep {P}06") == [] and _pids_with(sb, f"sleep {P}07") == []
    assert sb.exec("echo still-here").output.strip() == "still-here"
    # It says what it stopped (issue 9 item 10), and nothing of the sandbox's own machinery.
    assert sorted(stopped) == [f"sleep {P}06", f"sleep {P}07"]
    assert sb.kill_leftovers() == []  # nothing left the second time


def test_kill_leftovers_lists_each_process_once_with_its_arguments(make_sandbox):
    sb = make_sandbox()
    sb.exec(f"for i in 1 2 3; do sleep {P}0$i & done; sh -c 'sleep {P}04; echo \"two  words\"' &")
    deadline = time.monotonic() + 10
    while not _pids_with(sb, f"sleep {P}04"):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    stopped = sb.kill_leftovers()
    assert sorted(stopped) == [f"sh -c sleep {P}04; echo \"two  words\"", f"sleep {P}01", f"sleep {P}02", f"sleep {P}03",
                               f"sleep {P}04"]


def test_put_tar_unpacks_into_a_directory(make_sandbox, tmp_path):
    import tarfile

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "x.txt").write_text("inside")
    archive = tmp_path / "a.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(tmp_path / "pkg", arcname="pkg")
    sb = make_sandbox()
    sb.put_tar(archive, f"{sb.workdir}/unpacked")
    assert sb.exec(f"cat {sb.workdir}/unpacked/pkg/x.txt").output == "inside"


class _HashSink:
    """A real OutputSink: hashes and counts what it gets (no copy kept in memory)."""

    def __init__(self) -> None:
        import hashlib

        self.digest, self.bytes = hashlib.sha256(), 0

    def write(self, data: bytes) -> None:
        self.digest.update(data)
        self.bytes += len(data)


def test_watched_pattern_is_matched_on_the_whole_output_as_it_streams(make_sandbox):
    sb = make_sandbox()
    # 200 KiB of noise before the line, which is also printed in two parts (two chunks).
    cmd = ("head -c 204800 /dev/zero | tr '\\0' 'n'; echo; printf 'Starting train'; sleep 0.3; "
           "printf 'ing on cpu\\n'; head -c 204800 /dev/zero | tr '\\0' 't'; echo")
    res = sb.exec(cmd, watch=["^Starting training on cpu$", "never printed"])
    assert res.exit_code == 0 and res.truncated
    assert "Starting training" not in res.output  # neither in the kept head nor in the tail
    assert res.pattern_matches == {"^Starting training on cpu$": True, "never printed": False}
    assert sb.exec("true").pattern_matches == {}


def test_sink_gets_every_byte_of_a_50_mib_output_and_memory_stays_bounded(make_sandbox):
    import hashlib
    import tracemalloc

    sb = make_sandbox()
    sink = _HashSink()
    tracemalloc.start()
    try:
        res = sb.exec("head -c 52428800 /dev/urandom | base64; echo THE-END", sink=sink, watch=["THE-END"])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert res.exit_code == 0 and res.pattern_matches == {"THE-END": True}
    # base64 of 50 MiB: 69905068 characters in 76-character lines; nothing in flight is lost at exit
    assert sink.bytes == res.total_bytes == 69905068 + 919804 + len("THE-END\n") and res.truncated
    assert res.dropped_bytes == res.total_bytes - 2 * 64 * 1024
    assert peak < 16 * 2**20, peak  # head + tail + watch window, not the output
    again = sb.exec("echo abc", sink=(small := _HashSink()))
    assert small.digest.digest() == hashlib.sha256(b"abc\n").digest()


def test_read_bytes_reads_only_regular_files_within_the_limit(make_sandbox):
    """Issue 11, item 5: agent-shaped paths (links out of the sandbox, FIFOs, directories, huge
    files) end as UnreadableFile; the read never follows, blocks or copies the whole thing."""
    from reb_ray.sandbox import UnreadableFile

    sb = make_sandbox()
    w = sb.workdir
    setup = (f"cd {w} && printf abc > plain && ln -s /etc/passwd link && ln -s plain rel && mkfifo fifo && "
             f"mkdir dir && head -c 3000000 /dev/zero > big && echo ok")
    assert sb.exec(["sh", "-c", setup]).output.strip() == "ok"
    assert sb.read_bytes(f"{w}/plain") == b"abc"
    assert sb.read_bytes(f"{w}/plain", limit=3) == b"abc"
    for name, why in [("link", "symlink"), ("rel", "symlink"), ("fifo", "regular"), ("dir", "regular"), ("big", "limit")]:
        started = time.monotonic()
        with pytest.raises(UnreadableFile, match=why):
            sb.read_bytes(f"{w}/{name}", limit=1_000_000)
        assert time.monotonic() - started < 10, name  # a FIFO with no writer must not block the read
    with pytest.raises(FileNotFoundError):
        sb.read_bytes(f"{w}/absent")
    # The sandbox (and its client) still answers after every refusal.
    for _ in range(12):
        assert sb.read_bytes(f"{w}/plain") == b"abc"
    assert sb.exec("echo still").output.strip() == "still"
