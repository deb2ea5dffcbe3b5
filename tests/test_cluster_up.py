"""`ray up` with the top-level cluster.yaml, for real.

A node on this machine (tests/helpers/ssh_node.py: sshd on 127.0.0.1, a fresh key, its own PID and host
namespace, this machine's pip settings) is the head. The test renders cluster.yaml with the values
this machine needs (head IP, key, proxy command, free ports; every command unchanged), runs
`ray up -y` on the bare node (cold: `scripts/setup.sh --node` installs reb-ray into the node's
home, without the tests' harbor venv), runs a sweep of one demo task on the head with `--address
auto` (docker sandbox, heuristic and noop agents), reads the rows back and checks `reb-ray
cluster status` there. Then it edits one file of the checkout and runs `ray up -y` once more on
the node already set up (warm: Ray copies the edit and runs setup.sh, which finds every step
done and installs nothing; Ray is restarted), the node's status line again, `ray down -y`, and
checks that no Ray process and no container of the node is left. It measures `ray up` to the
first trial's sandbox running and the warm `ray up`, and prints the seconds.

The file mount is a copy of what `ray up` sends of this checkout (`stage_checkout`): Ray hashes
every file under a mount's source before it copies the filtered part, and this checkout's
virtual environments would cost each `ray up` about 18 s of hashing alone.

The sweep on the head is one demo task (heuristic and noop), keeping no environment: what is
under test is that `ray up` leaves a node on which the README's `ray exec ... reb-ray sweep
--address auto` scores trials; the whole demo suite's verdicts are tests/test_sweep.py's
subject, and its torch task alone would double this test's time. The warm `ray up` is followed
by the status check, not by a second sweep: the cold sweep already proved that a node `ray up`
started scores trials, and the status line proves the restarted node is ready (its slots, its
image, its Docker, nothing running).
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml

from reb_ray.results.read import latest_attempts, read_trials
from reb_ray.sandbox.ownership import OWNER_HOST, TRIAL
from tests.helpers.ssh_node import SshNode, free_port, missing_tools, start_node

ROOT = Path(__file__).resolve().parents[1]
RAY = str(Path(sys.executable).parent / "ray")
#: the demo task the sweeps on the head run
TASK = "numpy-trainer"

pytestmark = [
    pytest.mark.docker,
    pytest.mark.cluster_up,
    pytest.mark.timeout(600),
    pytest.mark.skipif(bool(missing_tools()), reason=f"needs {', '.join(missing_tools())} (.ci/run installs them)"),
]


def render_cluster_config(node: SshNode, name: str, checkout: Path) -> dict:
    """cluster.yaml with this machine's values: the node's IP, user, key and SSH proxy (Ray's
    config has no SSH port), `checkout` (stage_checkout) as the file mount, and free ports for
    what Ray would otherwise bind at fixed ones (6379, 8265, 10001, 52365: other Rays here hold
    some of them)."""
    config = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    config["cluster_name"] = name
    config["provider"].update(head_ip=node.ip, worker_ips=[])
    config["auth"] = {"ssh_user": node.user, "ssh_private_key": str(node.key), "ssh_proxy_command": node.proxy_command}
    assert list(config["file_mounts"].values()) == ["."]
    config["file_mounts"] = {target: str(checkout) for target in config["file_mounts"]}
    gcs = free_port()
    ports = (f" --dashboard-port={free_port()} --ray-client-server-port={free_port()}"
             f" --dashboard-agent-listen-port={free_port()}")
    for key in ("head_start_ray_commands", "worker_start_ray_commands"):
        commands = [c.replace(":6379", f":{gcs}").replace("--port=6379", f"--port={gcs}") for c in config[key]]
        config[key] = [c + ports if c.startswith("ray start") else c for c in commands]
    assert f"--port={gcs}" in " ".join(config["head_start_ray_commands"])
    return config


def stage_checkout(target: Path) -> Path:
    """What `ray up` sends of this checkout (cluster.yaml's own `rsync_filter` and
    `rsync_exclude`, as Ray passes them to rsync), copied to `target`; returns `target`.

    `ray up` copies only that to the node, but before it does, it hashes every file under the
    mount's source directory, the filter ignored (Ray's `hash_runtime_conf`): this checkout's
    `.venv` and `.venv-harbor` (2.2 GB here) cost each `ray up` about 18 s of that alone, and
    an edit anywhere in the tree between the two `ray up`s (a shared working tree) would make
    the warm one copy and set up again. The node receives the same files either way."""
    config = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    args = [a for f in config.get("rsync_filter", []) for a in ("--filter", f"dir-merge,- {f}")]
    args += [a for e in config.get("rsync_exclude", []) for a in ("--exclude", e)]
    subprocess.run(["rsync", "-a", *args, f"{ROOT}/", f"{target}/"], check=True, timeout=120)
    assert (target / "scripts" / "setup.sh").is_file() and not (target / ".venv").exists()
    return target


@pytest.fixture
def node(tmp_path):
    node = start_node(tmp_path / "node", hostname=f"reb-ct-{uuid.uuid4().hex[:8]}")
    yield node
    node.stop()  # kills whatever a failed test left in the namespace
    _remove_containers_of(node)


def test_ray_up_runs_a_sweep_and_ray_down_leaves_nothing(node, tmp_path, docker_client):
    name = f"reb-ray-test-{uuid.uuid4().hex[:8]}"
    config_path = tmp_path / "cluster.yaml"
    checkout = stage_checkout(tmp_path / "checkout")
    config_path.write_text(yaml.safe_dump(render_cluster_config(node, name, checkout)))
    # `ray up`'s own lock and state files go here, not to this machine's shared /tmp/ray.
    env = {**_env(), "RAY_TMPDIR": str(tmp_path / "client-ray")}
    logs = tmp_path / "logs"
    logs.mkdir()

    up_s = _up(node, config_path, env, logs / "up.log")
    assert "setup: installing reb-ray[" in (logs / "up.log").read_text()
    assert not (node.home / "reb-ray" / ".venv-harbor").exists(), "a cluster node got the tests' harbor venv"
    first_trial_s, sweep_s = _sweep(node, config_path, env, docker_client, f"--tasks {TASK} --keep-environments none",
                                    "reb-runs", logs / "sweep.log")
    first_trial_s += up_s
    trials = latest_attempts(read_trials(node.home / "reb-runs"))
    rows = trials.select(["agent", "task_id", "status", "c1_status"]).to_pylist()
    assert sorted((r["agent"], r["task_id"], r["status"], r["c1_status"]) for r in rows) == [
        ("heuristic", TASK, "scored", "success"), ("noop", TASK, "scored", "failure")], rows
    _status(node, config_path, env, logs / "status.log")

    # A user's second `ray up` follows an edit: Ray copies the changed checkout and runs setup.sh
    # again, which finds every step done (an unchanged checkout would skip setup altogether).
    edit = f"\n<!-- edited before the warm ray up {uuid.uuid4().hex} -->\n"
    with open(checkout / "README.md", "a") as readme:
        readme.write(edit)
    warm_up_s = _up(node, config_path, env, logs / "up-warm.log")  # the node set up already, its Ray running
    assert (node.home / "reb-ray" / "README.md").read_text().endswith(edit), "the warm ray up did not copy the edit"
    warm_log = (logs / "up-warm.log").read_text()
    assert "setup: reb-ray already installed in .venv" in warm_log and "setup: installing" not in warm_log, warm_log[-3000:]
    _status(node, config_path, env, logs / "status-warm.log")

    down = time.monotonic()
    _run([RAY, "down", "-y", str(config_path)], env, logs / "down.log", timeout=300)
    down_s = time.monotonic() - down
    left = {pid: cmd for pid, cmd in node.processes().items() if not cmd.startswith("sshd")}
    assert not left, f"ray down left processes on the node: {left}"
    assert not _containers_of(node, docker_client), "containers of the node left after ray down"
    print(f"\nray up to first trial running: cold {first_trial_s:.1f} s (ray up {up_s:.1f} s); warm ray up "
          f"{warm_up_s:.1f} s; sweep {sweep_s:.1f} s; ray down {down_s:.1f} s")


def _up(node: SshNode, config_path: Path, env: dict, log: Path) -> float:
    """`ray up`; a raylet runs on the node after it. Returns its seconds."""
    start = time.monotonic()
    _run([RAY, "up", "-y", "--no-config-cache", str(config_path)], env, log, timeout=420)
    assert any("raylet" in c for c in node.processes().values()), "ray up finished but no raylet runs on the node"
    return time.monotonic() - start


def _sweep(node: SshNode, config_path: Path, env: dict, docker_client, sweep_args: str, output: str,
           log: Path) -> tuple[float, float]:
    """A sweep on the head through `ray exec`: (seconds to its first trial's sandbox running,
    seconds it took)."""
    start = time.monotonic()
    with open(log, "wb") as sweep_log:
        sweep = subprocess.Popen(
            [RAY, "exec", "--no-config-cache", str(config_path),
             f"reb-ray sweep --address auto --output ~/{output} {sweep_args}"],
            env=env, stdout=sweep_log, stderr=subprocess.STDOUT)
        try:
            first_trial_s = None
            while sweep.poll() is None and first_trial_s is None:
                if _containers_of(node, docker_client, TRIAL):
                    first_trial_s = time.monotonic() - start
                time.sleep(0.2)
            rc = sweep.wait(timeout=600)
        finally:
            if sweep.poll() is None:
                sweep.kill()
    assert rc == 0, log.read_text()[-3000:]
    assert first_trial_s is not None, "the sweep ended before any trial's sandbox was seen running"
    return first_trial_s, time.monotonic() - start


def _status(node: SshNode, config_path: Path, env: dict, log: Path) -> None:
    """reb-ray cluster status on the head: the node's line (slots from cluster.yaml's start command)."""
    status = subprocess.run([RAY, "exec", "--no-config-cache", str(config_path), "reb-ray cluster status"], env=env,
                            capture_output=True, text=True, timeout=300)
    log.write_text(status.stdout + status.stderr)
    lines = [line for line in status.stdout.splitlines() if f"  {node.hostname}  " in line]
    assert status.returncode == 0 and len(lines) == 1, status.stdout[-3000:] + status.stderr[-2000:]
    for part in ("  ok  ", "slots 16", "image ok", "docker ok", "trials running 0"):
        assert part in lines[0], lines[0]


def _run(argv: list[str], env: dict, log: Path, timeout: float) -> None:
    with open(log, "wb") as out:
        rc = subprocess.run(argv, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=timeout).returncode
    assert rc == 0, f"{' '.join(argv[:2])} exited {rc}: " + log.read_text()[-3000:]


def _containers_of(node: SshNode, docker_client, label: str | None = None) -> list:
    """Our containers whose owner ran on the node (other sweeps on this machine have their own)."""
    labels = [f"{OWNER_HOST}={node.hostname}", "reb-ray.managed=true"] + ([label] if label else [])
    return docker_client.containers.list(all=True, ignore_removed=True, filters={"label": labels})


def _remove_containers_of(node: SshNode) -> None:
    from reb_ray.sandbox.docker.docker_client import connect

    client = connect()
    for container in _containers_of(node, client):
        container.remove(force=True)


def _env() -> dict:
    import os

    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.pop("RAY_ADDRESS", None)
    return env
