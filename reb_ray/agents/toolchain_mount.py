"""The toolchain in the sandbox for the agent phase only.

Docker cannot remove a mount from a running container, so the container gets a per-trial host
directory (the *slot*) mounted read-only at AGENT_MOUNT with bind propagation `rslave`, and the
harness (root on the node) binds the toolchain read-only onto `<slot>/toolchain` on the host.
The bind propagates into the container, so the agent sees TOOLCHAIN_SANDBOX_PATH; after the
agent phase `detach()` unmounts it (`umount -l`), the unmount propagates too, and the probes
find an empty directory: nothing of the toolchain on their PATH, in pyright's search paths, or
under the environment's prefix. Docker accepts `rslave` only on a shared or slave mount, so the
slot is first bound onto itself and made shared.

Slots live under `<toolchains_root>/.slots/<pid>-<start ticks>-<place>-<id>`, named by their
owner process and where its pid means something (`reb_ray.sandbox.scratch.place`: host name and
PID namespace), so `reap_slots()` can unmount and remove those of dead owners (a killed driver)
and leaves alone those made in another PID namespace sharing the directory, whose pids say
nothing here.
Needs root (mount(8)) and a Docker daemon in the harness's mount namespace; otherwise the trial
is an infra error naming the cause.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

from reb_ray.agents.toolchain import AGENT_MOUNT, TOOLCHAIN_SANDBOX_PATH, Toolchain
from reb_ray.errors import InfraError
from reb_ray.sandbox import capabilities_of
from reb_ray.sandbox.ownership import process_start_ticks
from reb_ray.sandbox.scratch import place

MOUNT_TIMEOUT_S = 30.0


def _mount(*args: str) -> None:
    try:
        proc = subprocess.run(list(args), capture_output=True, text=True, timeout=MOUNT_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InfraError("infra_toolchain", f"{' '.join(args)}: {exc}") from None
    if proc.returncode != 0:
        why = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-1:] or ["failed"]
        hint = " (the agent toolchain mount needs root on the node)" if os.geteuid() != 0 else ""
        raise InfraError("infra_toolchain", f"{' '.join(args)}: {why[0][:300]}{hint}")


def _is_mountpoint(path: Path) -> bool:
    target = str(path.resolve())
    try:
        with open("/proc/self/mountinfo") as f:
            return any(line.split()[4] == target for line in f)
    except OSError:
        return False


class ToolchainSlot:
    """One trial's mount slot. `open()` before the sandbox starts, `detach()` after the agent
    phase, `close()` always (idempotent). `mounts` is what the sandbox config adds
    (SandboxConfig.propagated_mounts); `sandbox_path` is where the agent finds the toolchain."""

    sandbox_path = TOOLCHAIN_SANDBOX_PATH

    def __init__(self, toolchain: Toolchain) -> None:
        self.toolchain = toolchain
        pid = os.getpid()
        name = f"{pid}-{process_start_ticks(pid)}-{place()}-{uuid.uuid4().hex[:8]}"
        self.slot = toolchain.path.parent / ".slots" / name
        self.mounts: dict[str, str] = {}
        self._attached = False

    def open(self) -> "ToolchainSlot":
        """Create the slot and bind the toolchain into it. Raises InfraError(infra_toolchain)."""
        root = self.toolchain.ensure_root()
        reap_slots(self.toolchain.path.parent)  # those of killed drivers on this node
        (self.slot / "toolchain").mkdir(parents=True)
        try:
            _mount("mount", "--bind", str(self.slot), str(self.slot))
            _mount("mount", "--make-private", str(self.slot))
            _mount("mount", "--make-shared", str(self.slot))
            _mount("mount", "--bind", "-o", "ro", str(root), str(self.slot / "toolchain"))
            _mount("mount", "-o", "remount,bind,ro", str(self.slot / "toolchain"))
        except InfraError:
            self.close()
            raise
        self._attached = True
        self.mounts = {str(self.slot): AGENT_MOUNT}
        return self

    def detach(self) -> None:
        """Unmount the toolchain from the slot (and so from the sandbox). Raises InfraError: the
        probes must not run with the toolchain visible."""
        if not self._attached:
            return
        _mount("umount", "-l", str(self.slot / "toolchain"))
        self._attached = False

    def close(self) -> None:
        """Unmount everything of the slot and remove it. Never raises."""
        _release(self.slot)
        self._attached = False


class NoSlot:
    """For agents that need no toolchain: nothing mounted, nothing on PATH."""

    mounts: dict[str, str] = {}
    sandbox_path: str | None = None

    def open(self) -> "NoSlot":
        return self

    def detach(self) -> None:
        pass

    def close(self) -> None:
        pass


class HostToolchain(NoSlot):
    """The local sandbox (no container): the agent uses the host's toolchain directory as is."""

    def __init__(self, toolchain: Toolchain) -> None:
        self.toolchain = toolchain

    def open(self) -> "HostToolchain":
        self.sandbox_path = str(self.toolchain.ensure_root())
        return self


def toolchain_slot(uses_toolchain: bool, provider: str, toolchains_dir: Path | None) -> NoSlot | ToolchainSlot:
    """What a trial mounts for its agent: a ToolchainSlot where sandboxes of `provider` take
    mounts (docker), the host toolchain where they do not (local), or nothing (an agent without
    `uses_toolchain`). Call `.open()` on it."""
    if not uses_toolchain:
        return NoSlot()
    toolchain = Toolchain.current(toolchains_dir)
    return ToolchainSlot(toolchain) if capabilities_of(provider).mounts else HostToolchain(toolchain)


def _release(slot: Path) -> None:
    for path in (slot / "toolchain", slot):
        while _is_mountpoint(path):  # the slot's self-bind can be stacked on a failed open
            if subprocess.run(["umount", "-l", str(path)], capture_output=True).returncode != 0:
                break
    for path in (slot / "toolchain", slot):  # rmdir, never a recursive delete: nothing can go through a mount
        try:
            path.rmdir()
        except OSError:
            pass


def reap_slots(toolchains_root: Path) -> list[Path]:
    """Release the slots under `toolchains_root/.slots` whose owner process is gone; return them.

    Only slots made here are judged; a name without a place (`<pid>-<ticks>-<id>`, made before
    names carried one) is judged as made here, as it always was."""
    released, here = [], place()
    slots = toolchains_root / ".slots"
    for slot in slots.glob("*-*-*") if slots.is_dir() else []:
        parts = slot.name.split("-")
        if len(parts) == 4 and parts[2] != here:
            continue
        pid, ticks = parts[0], parts[1]
        try:
            now = process_start_ticks(int(pid))
            alive = now is not None and (ticks == "None" or now == int(ticks))
        except ValueError:
            continue
        if not alive:
            _release(slot)
            released.append(slot)
    return released
