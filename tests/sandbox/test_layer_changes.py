"""The container's changes read from its overlay layers equal what the real daemon's `docker diff`
lists, path by path and kind by kind: on the image's own layers, and on a committed image whose top
layer holds whiteouts and an opaque directory."""

from __future__ import annotations

import os

import pytest

from reb_ray.sandbox import SandboxConfig
from reb_ray.sandbox.docker.docker_sandbox import DockerSandbox
from reb_ray.sandbox.docker.layer_changes import ADDED, CHANGED, DELETED, overlay_changes, overlay_layers

#: Every kind of change an agent makes: new files and directory trees, appends, touches, chmod,
#: chown, file capabilities, deletions of the image's files and directories, a directory removed
#: and made again (opaque), a symlink, a fifo, a directory made and removed, a file opened for
#: writing and left unchanged (copied up, not changed), a virtual environment.
AGENT_WORK = r"""set -e
echo new > /root/newfile
mkdir -p /opt/a/b/c && echo x > /opt/a/b/c/f
rm -f /etc/issue.net
rm -rf /usr/share/doc/bash
rm -rf /usr/share/man && mkdir /usr/share/man && echo m > /usr/share/man/page
touch /etc/debian_version
echo more >> /etc/motd
chmod 600 /etc/shells
chown 1000:1000 /etc/host.conf
python3 -c "import os; os.setxattr('/usr/bin/ls', 'security.capability', bytes.fromhex('0100000200200000000000000000000000000000'))"
python3 -c "open('/etc/passwd', 'r+').close()"
ln -s /tmp /opt/link
mkfifo /opt/fifo
mkdir /tmp/d && rmdir /tmp/d
python3 -m venv --without-pip /opt/venv
"""

#: On an image whose top layer already deleted and replaced things: bring back what it deleted,
#: delete what it added, replace a directory it made.
ON_A_COMMITTED_LAYER = r"""set -e
echo back > /etc/issue.net
mkdir -p /usr/share/doc/bash && echo again > /usr/share/doc/bash/README
rm /usr/share/man/page
rm -rf /opt/a/b
echo c >> /root/newfile
rm -rf /opt/l1 && mkdir /opt/l1 && echo z > /opt/l1/new
rm -rf /var/lib/apt
"""


def _kinds(entries) -> set[tuple[str, int]]:
    return {(e["Path"], e["Kind"]) for e in entries or []}


def _run(sandbox, script: str) -> None:
    result = sandbox.exec(["bash", "-c", script], user="root")
    assert result.ok, result.output


@pytest.mark.skipif(os.geteuid() != 0, reason="the overlay layers are root's to read")
def test_changes_read_from_the_layers_equal_the_daemons_diff(docker_client, sandbox_image):
    with DockerSandbox(SandboxConfig(image=sandbox_image), docker_client) as sb:
        assert sb.filesystem_changes() == [] and docker_client.api.diff(sb.id) is None  # nothing written yet
        _run(sb, AGENT_WORK + "mkdir -p /opt/l1/sub && echo a > /opt/l1/sub/f\n")
        layers = overlay_layers(docker_client.api.inspect_container(sb.id))
        assert layers is not None, "this daemon's overlay2 layers are readable here"
        mine, daemons = sb.filesystem_changes(), docker_client.api.diff(sb.id)
        assert _kinds(mine) == _kinds(daemons) and len(mine) == len(daemons)
        got = _kinds(mine)
        for expected in [("/root/newfile", ADDED), ("/opt/a/b/c/f", ADDED), ("/etc/issue.net", DELETED),
                         ("/usr/share/doc/bash", DELETED), ("/usr/share/man/page", ADDED), ("/etc/motd", CHANGED),
                         ("/etc/shells", CHANGED), ("/etc/host.conf", CHANGED), ("/usr/bin/ls", CHANGED),
                         ("/usr/share/man", CHANGED), ("/opt/venv/bin/python3", ADDED)]:
            assert expected in got, expected
        # Under the deleted directory nothing more is listed; the unchanged copy-up is not listed.
        assert not any(p.startswith("/usr/share/doc/bash/") for p, _ in got)
        assert os.path.exists(layers[0] + "/etc/passwd") and ("/etc/passwd", CHANGED) not in got
        image = docker_client.api.commit(sb.id, repository="reb-ray-test-layers", tag=f"p{os.getpid()}")["Id"]
    try:
        with DockerSandbox(SandboxConfig(image=image), docker_client) as sb:
            _run(sb, ON_A_COMMITTED_LAYER)
            mine, daemons = sb.filesystem_changes(), docker_client.api.diff(sb.id)
            assert _kinds(mine) == _kinds(daemons) and len(mine) == len(daemons)
            got = _kinds(mine)
            for expected in [("/etc/issue.net", ADDED), ("/usr/share/doc/bash/README", ADDED),
                             ("/usr/share/man/page", DELETED), ("/opt/a/b", DELETED), ("/opt/l1/sub", DELETED),
                             ("/opt/l1/new", ADDED), ("/var/lib/apt", DELETED), ("/root/newfile", CHANGED)]:
                assert expected in got, expected
    finally:
        docker_client.images.remove(image, force=True)


def test_other_drivers_and_unreadable_layers_go_to_the_engine(tmp_path):
    upper, lower = tmp_path / "upper", tmp_path / "lower"
    upper.mkdir(), lower.mkdir()
    data = {"UpperDir": str(upper), "LowerDir": str(lower)}
    assert overlay_layers({"GraphDriver": {"Name": "vfs", "Data": data}}) is None
    assert overlay_layers({"GraphDriver": {"Name": "overlay2", "Data": {**data, "LowerDir": str(tmp_path / "gone")}}}) is None
    assert overlay_layers({}) is None
    readable = overlay_layers({"GraphDriver": {"Name": "overlay2", "Data": data}})
    assert readable == ((str(upper), [str(lower)]) if os.geteuid() == 0 else None)


def test_a_plain_directory_pair_is_compared_by_the_same_rules(tmp_path):
    """Without whiteouts (which need root to make): added trees, a changed file, a changed
    directory's parents listed before what changed under them, an unchanged copy left out."""
    upper, lower = tmp_path / "upper", tmp_path / "lower"
    for d in (lower / "etc" / "deep", lower / "usr", upper / "etc" / "deep", upper / "new" / "tree"):
        d.mkdir(parents=True)
    (lower / "etc" / "deep" / "conf").write_text("old")
    (upper / "etc" / "deep" / "conf").write_text("newer")
    (lower / "etc" / "same").write_text("s")
    (upper / "etc" / "same").write_text("s")
    os.utime(upper / "etc" / "same", ns=(0, os.stat(lower / "etc" / "same").st_mtime_ns))
    (upper / "new" / "tree" / "leaf").write_text("l")
    changes = overlay_changes(str(upper), [str(lower)])
    assert _kinds(changes) == {("/etc", CHANGED), ("/etc/deep", CHANGED), ("/etc/deep/conf", CHANGED),
                               ("/new", ADDED), ("/new/tree", ADDED), ("/new/tree/leaf", ADDED)}
    index = {(c["Path"]): i for i, c in enumerate(changes)}
    assert index["/etc"] < index["/etc/deep"] < index["/etc/deep/conf"]
