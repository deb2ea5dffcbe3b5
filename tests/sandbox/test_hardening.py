"""Issue 11: what an untrusted agent can do in its Docker sandbox (real Docker, real kernel).

Each escape is tried from inside a sandbox created exactly as trials create theirs; package
managers are proved to keep working with the reduced capabilities (network: PyPI, Debian).
"""

from __future__ import annotations

import pytest

from reb_ray.models.sweep import SweepConfig
from reb_ray.sandbox import SandboxConfig
from reb_ray.sandbox.docker.docker_sandbox import DockerSandbox, container_create_kwargs
from reb_ray.sandbox.docker.hardening import CAPABILITIES

# Bit numbers of linux/capability.h.
_CAP_BITS = {"CHOWN": 0, "DAC_OVERRIDE": 1, "FOWNER": 3, "FSETID": 4, "KILL": 5, "SETGID": 6, "SETUID": 7,
             "NET_BIND_SERVICE": 10, "SETFCAP": 31}


@pytest.fixture
def box(sandbox_image, tmp_path):
    made = []

    def make(**overrides) -> DockerSandbox:
        config = SandboxConfig(image=sandbox_image, sweep_id="test", trial_id="hardening", ca_bundle=SweepConfig().sandbox.ca_bundle, **overrides)
        sandbox = DockerSandbox(config)
        made.append(sandbox)
        return sandbox

    yield make
    for sandbox in made:
        sandbox.close()


def test_container_options_drop_privileges_and_limit_pids():
    kwargs = container_create_kwargs(SandboxConfig(image="x", memory_bytes=2**30), "n")
    assert kwargs["security_opt"] == ["no-new-privileges"] and kwargs["cap_drop"] == ["ALL"]
    assert set(kwargs["cap_add"]) == set(CAPABILITIES) and "SYS_ADMIN" not in kwargs["cap_add"]
    assert kwargs["pids_limit"] == 4096 and kwargs["mem_limit"] == kwargs["memswap_limit"] == 2**30
    assert kwargs["privileged"] is False


def test_inside_no_new_privileges_and_only_the_listed_capabilities(box):
    status = box().exec("grep -E '^(NoNewPrivs|CapEff|CapBnd):' /proc/self/status").output
    fields = dict(line.split(":\t") for line in status.strip().splitlines())
    expected = sum(1 << bit for bit in _CAP_BITS.values())
    assert set(_CAP_BITS) == set(CAPABILITIES)
    assert fields["NoNewPrivs"].strip() == "1"
    assert int(fields["CapEff"], 16) == expected and int(fields["CapBnd"], 16) == expected


ESCAPES = {
    "mount": "mount -t tmpfs none /mnt",
    "bind mount": "mkdir -p /tmp/a /tmp/b && mount --bind /tmp/a /tmp/b",
    "nsenter into init's namespaces": "nsenter -t 1 -m -u -i -n -p true",
    "unshare a user namespace": "unshare -U -r true",
    "raw socket": "python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)'",
    "packet socket": "python3 -c 'import socket; socket.socket(socket.AF_PACKET, socket.SOCK_RAW)'",
    "device node": "mknod /tmp/sda b 8 0",
    "chroot": "chroot / true",
    "docker socket": "test -S /var/run/docker.sock || test -S /run/docker.sock || ls /var/run/docker* /run/docker*",
    "write the wheelhouse": "touch /opt/reb-ray/wheelhouse/0/evil.whl",
    "write the package cache": "touch /opt/reb-ray/pip-cache/numpy-9.9.9-py3-none-any.whl",
    "write the asset cache": "touch /opt/reb-ray/assets/evil",
    "remount a read-only mount writable": "mount -o remount,rw /opt/reb-ray/assets",
}


@pytest.mark.parametrize("name", list(ESCAPES))
def test_escape_fails(name, box, tmp_path):
    """Each usual escape fails (non-zero exit) in a sandbox with the trial's mounts."""
    for sub in ("wheels", "cache", "assets"):
        (tmp_path / sub).mkdir()
    sandbox = box(mounts={str(tmp_path / "wheels"): "/opt/reb-ray/wheelhouse/0", str(tmp_path / "cache"): "/opt/reb-ray/pip-cache",
                          str(tmp_path / "assets"): "/opt/reb-ray/assets"})
    result = sandbox.exec(ESCAPES[name], timeout=60)
    assert result.exit_code != 0, f"{name} succeeded: {result.output}"
    assert list(tmp_path.rglob("evil*")) == []


def test_only_the_documented_mounts_are_visible(box, tmp_path):
    """No host path but the given mounts (and Docker's own /etc files) is mounted inside."""
    (tmp_path / "assets").mkdir()
    mounts = box(mounts={str(tmp_path / "assets"): "/opt/reb-ray/assets"}).exec("cut -d' ' -f5 /proc/self/mountinfo").output.split()
    docker_own = {"/", "/proc", "/dev", "/dev/pts", "/sys", "/sys/fs/cgroup", "/dev/mqueue", "/dev/shm", "/etc/resolv.conf",
                  "/etc/hostname", "/etc/hosts", "/dev/console"}
    extra = {m for m in mounts if m not in docker_own and not m.startswith(("/proc/", "/sys/"))}
    assert extra == {"/opt/reb-ray/assets", "/etc/ssl/certs/ca-certificates.crt"}


def test_one_sandbox_cannot_read_another_trials_files(box):
    first, second = box(), box()
    assert first.exec("echo secret-of-trial-one > /work/marker && mkdir -p /tmp/x && cp /work/marker /tmp/x/").ok
    found = second.exec("grep -rl secret-of-trial-one / --exclude-dir=proc --exclude-dir=sys 2>/dev/null; true", timeout=120)
    assert "secret-of-trial-one" not in found.output and found.output.strip() == ""
    assert second.exec(f"ls /proc/*/root/work/marker 2>/dev/null; test ! -e /proc/1/root/work/marker").ok


# -- package managers keep working (network: PyPI and the Debian mirrors)

def test_pip_install_and_a_c_extension_build_work(box):
    sandbox = box()
    assert sandbox.exec("python3 -m pip install --break-system-packages -q six && python3 -c 'import six'", timeout=300).ok
    setup = ("from setuptools import setup, Extension\n"
             "setup(name='hello_ext', version='0.1', ext_modules=[Extension('hello_ext', ['hello.c'])])\n")
    source = ('#include <Python.h>\nstatic PyModuleDef m = {PyModuleDef_HEAD_INIT, "hello_ext", 0, -1, 0};\n'
              'PyMODINIT_FUNC PyInit_hello_ext(void) { return PyModule_Create(&m); }\n')
    sandbox.write_bytes("/tmp/ext/setup.py", setup.encode())
    sandbox.write_bytes("/tmp/ext/hello.c", source.encode())
    built = sandbox.exec("cd /tmp/ext && python3 -m pip install --break-system-packages -q . && cd / && "
                         "python3 -c 'import hello_ext; print(hello_ext.__file__)'", timeout=600)
    assert built.ok and ".so" in built.output, built.output[-2000:]


def test_apt_get_install_works(box):
    result = box().exec("apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends tree "
                        "&& tree --version", timeout=600)
    assert result.ok and "tree v" in result.output, result.output[-2000:]
