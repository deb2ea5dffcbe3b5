"""A real sweep with real-looking provider keys exported: where do the keys end up?

`reb-ray sweep` runs as a user would start it (a subprocess with the keys in its environment,
its own local Ray, real Docker, an LLM agent against the scripted endpoint). While its trial
runs, the test reads every process's environment and command line on this machine and the
memory of every process the sweep started; afterwards it searches every file under the output
directory, the sweep's Ray session directory and whatever else was written under /tmp and
/dev/shm during the run. The used key may be only in the driver (where the user put it) and in
the memory of the node's LLM proxy; a provider key no agent of the sweep uses, only in the driver.
"""

from __future__ import annotations

import gzip
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from reb_ray.llm.scripted import ScriptedEndpoint, script_from

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[1]
USED_ENV, UNUSED_ENV = "ANTHROPIC_API_KEY", "OPENAI_API_KEY"
MAX_FILE_BYTES = 256 * 1024 * 1024  # a file written under /tmp during the run larger than this is not read
MAX_REGION_BYTES = 512 * 1024 * 1024  # a memory mapping larger than this (the object store's arena) is not read
SLEEP_S = 20  # the agent's tool call: the processes are read meanwhile
TURNS = [{"kind": "tool", "command": f"sleep {SLEEP_S}", "usage": {"input_tokens": 100, "output_tokens": 10}},
         {"kind": "message", "text": "Done: the environment is /usr/bin/python3.",
          "usage": {"input_tokens": 200, "output_tokens": 20}}]


def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    return children


def _descendants(pid: int) -> list[int]:
    children, found, todo = _children(), [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def _name(cmd: str) -> str:
    """A process's short name: its Ray title (`ray::ProxyActor`), else its program or script."""
    words = cmd.split()
    if not words:
        return "?"
    if words[0].startswith("ray::"):
        return words[0]
    script = next((w for w in words[1:3] if w.endswith(".py")), words[0])
    return script.rsplit("/", 1)[-1]


def _environ_hits(keys: list[bytes]) -> dict[int, str]:
    """{pid: command line} of every process on this machine whose environment or command line holds a key."""
    hits = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            data = Path(f"/proc/{entry}/environ").read_bytes() + Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if any(key in data for key in keys):
            hits[int(entry)] = _cmdline(int(entry))
    return hits


def _memory_holds(pid: int, key: bytes) -> bool:
    """Whether any readable mapping of the process (up to MAX_REGION_BYTES each) holds `key`."""
    try:
        maps = Path(f"/proc/{pid}/maps").read_text().splitlines()
        mem = open(f"/proc/{pid}/mem", "rb", buffering=0)
    except OSError:
        return False
    with mem:
        for line in maps:
            fields = line.split()
            start, end = (int(x, 16) for x in fields[0].split("-"))
            path = fields[5] if len(fields) > 5 else ""
            if "r" not in fields[1] or end - start > MAX_REGION_BYTES or path.startswith(("/usr/", "/lib", "[vvar", "[vsys")):
                continue
            if path.endswith((".so", ".pyc")) or ".so." in path or "site-packages" in path:
                continue
            tail = b""
            for offset in range(start, end, 16 * 1024 * 1024):
                try:
                    mem.seek(offset)
                    chunk = mem.read(min(16 * 1024 * 1024, end - offset))
                except (OSError, ValueError, OverflowError):
                    break
                if key in tail + chunk:
                    return True
                tail = chunk[-len(key):]
    return False


def _file_hits(root: Path, keys: list[bytes], since: float | None = None) -> list[str]:
    """Files under `root` (not following links) holding a key; .gz files decompressed, Parquet
    files read as rows. With `since`, only files modified after it (epoch seconds)."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))]
        for name in filenames:
            path = os.path.join(dirpath, name)
            try:
                info = os.lstat(path)
                if not os.path.isfile(path) or os.path.islink(path) or info.st_size > MAX_FILE_BYTES:
                    continue
                if since is not None and info.st_mtime < since:
                    continue
                data = Path(path).read_bytes()
            except OSError:
                continue
            texts = [data]
            if name.endswith(".gz"):
                try:
                    texts.append(gzip.decompress(data))
                except (OSError, EOFError):
                    pass
            if name.endswith(".parquet"):
                import pyarrow.parquet as pq

                try:
                    texts.append(repr(pq.read_table(path).to_pylist()).encode())
                except Exception:  # noqa: BLE001 - a file being rewritten by someone else's run
                    pass
            if any(key in text for key in keys for text in texts):
                found.append(path)
    return found


def test_the_real_key_is_only_in_the_drivers_environment_and_the_proxys_memory(tmp_path, sandbox_image):
    used = f"sk-REALKEY-{uuid.uuid4().hex}"
    unused = f"sk-REALKEY-{uuid.uuid4().hex}"
    keys = [used.encode(), unused.encode()]
    endpoint = ScriptedEndpoint(script_from({"model": "claude-sonnet-4-5", "turns": TURNS})).start()
    out = tmp_path / "runs"
    config = tmp_path / "sweep.toml"
    # keep_environments none: no kept environment is looked at here (and a kept image would outlive the test)
    config.write_text(f'tasks = "numpy-trainer"\nmax_concurrent = 1\nmax_attempts = 1\nagent_timeout_s = 300\n'
                      f'keep_environments = "none"\n'
                      f'wheelhouses = {[str(p) for p in [Path("/opt/wheels")] if p.is_dir()]!r}\n'
                      f'sweep_id = "secrets-{uuid.uuid4().hex[:8]}"\n\n[agents.llm]\n'
                      f'kind = "tests.helpers.scripted_agents:LlmSpyAgent"\nmodel = "claude-sonnet-4-5"\n'
                      f'base_url = "{endpoint.url}"\nkey_env = "{USED_ENV}"\n')
    env = {**os.environ, USED_ENV: used, UNUSED_ENV: unused,
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    started = time.time() - 1
    driver = subprocess.Popen([sys.executable, "-c", "from reb_ray.cli import main; main()", "sweep", "--config",
                               str(config), "--output", str(out), "--quiet"], env=env, cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    environ_hits: dict[int, str] = {}
    seen: dict[int, str] = {}  # every process the sweep started: pid -> command line
    memory: dict[str, list[str]] = {}
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            environ_hits.update(_environ_hits(keys))
            for pid in _descendants(driver.pid):
                seen.setdefault(pid, _cmdline(pid))
            stop.wait(0.5)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        # Mid-trial (the agent sleeps in its tool call): read the memory of every process the sweep started.
        deadline = time.monotonic() + 600
        while (endpoint.session(used) or {}).get("position", 0) < 1:
            assert driver.poll() is None, driver.stdout.read().decode(errors="replace")
            assert time.monotonic() < deadline, "the agent never made its first request"
            time.sleep(0.2)
        read_at = time.monotonic()
        readable = _descendants(driver.pid)
        for pid in readable:
            for name, key in (("used", keys[0]), ("unused", keys[1])):
                if _memory_holds(pid, key):
                    memory.setdefault(name, []).append(f"{pid} {_cmdline(pid)[:120]}")
        memory_s = time.monotonic() - read_at
        output, _ = driver.communicate(timeout=900)
    finally:
        stop.set()
        watcher.join(10)
        if driver.poll() is None:
            driver.kill()
        endpoint.stop()
    text = output.decode(errors="replace")
    assert driver.returncode == 0, text
    assert memory_s < SLEEP_S, f"reading the processes took {memory_s:.0f} s, longer than the agent's sleep"

    # The agent ran against the endpoint, through the proxy, with the real key swapped in.
    assert endpoint.session(used)["position"] == 2, text

    # Where each key was found, beyond the driver (the user's process, where the keys were exported).
    sessions = {m.group(1) for cmd in seen.values() for m in re.finditer(r"session[_-]dir[= ](\S+)", cmd)}
    assert sessions and all(Path(s, "logs").is_dir() for s in sessions), f"no Ray session among {list(seen.values())[:5]}"
    proxies = [p for p in memory.get("used", []) if "ProxyActor" in p]
    found = {
        "environ or command line": sorted(_name(cmd) for pid, cmd in environ_hits.items() if pid != driver.pid),
        "memory (used key), not the proxy": [p for p in memory.get("used", []) if p not in proxies],
        "memory (unused key)": memory.get("unused", []),
        "Ray session files": [f for s in sessions for f in _file_hits(Path(s), keys)],
        "output files": _file_hits(out, keys),
        "files written under /tmp or /dev/shm": _file_hits(Path("/tmp"), keys, since=started)
                                                + _file_hits(Path("/dev/shm"), keys, since=started),
    }
    print(f"read the memory of {len(readable)} processes in {memory_s:.1f} s; proxy: {proxies}; "
          f"Ray sessions {sorted(sessions)}")
    assert found == {where: [] for where in found}, f"a real key in: {found}"
    # The memory search finds what is there: the proxy holds the key it swaps in.
    assert proxies, f"the used key was not found in the proxy's memory (found in {memory})"
    # The sandbox saw neither key: the spy searched its files and every process's environment.
    from reb_ray.results.read import read_stages, read_trials

    [row] = read_trials(out).to_pylist()
    assert row["status"] == "scored" and row["report_status"] == "ok", row["failure_reason"]
    assert row["agent_log_path"], ([s["log_path"] for s in read_stages(out).to_pylist() if s["stage"] == "agent"],
                                   row["agent_output_tail"])
    log = gzip.decompress((out / row["agent_log_path"]).read_bytes()).decode()
    assert "--- spy done" in log and "spy: FOUND" not in log
