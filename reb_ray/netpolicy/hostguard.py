"""The host guard: what a docker sandbox may reach on its own node.

Docker's iptables rules filter forwarded packets only: a packet from a sandbox to any address
of the node itself (its gateway, or the node's other addresses through the default route
Docker gives the container) is local delivery, decided by the host's INPUT chain, which
Docker leaves alone. So without this guard every host service listening on all addresses
(Ray's GCS on 6379 and its dashboard on 8265, which take work without authentication; the
raylet's and workers' ports; sshd) is open to an agent, whatever its network policy:
`--internal` (registries) stops forwarding only, and an open network forwards everything.

The guard is one chain per reb-ray network (network.py: `REB-RAY-SANDBOX-IN` for
`rebray-reg0`, `REB-RAY-OPEN-IN` for `rebray-open0`), in the filter table, jumped to from the
top of INPUT for packets that enter on that network's bridge (a fixed interface name):

    -A INPUT -i rebray-reg0 -j REB-RAY-SANDBOX-IN                     (inserted first)
    -A REB-RAY-SANDBOX-IN -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
    -A REB-RAY-SANDBOX-IN -d GATEWAY/32 -p tcp -m tcp --dport LO:HI -j ACCEPT
    -A REB-RAY-SANDBOX-IN -p tcp -j REJECT --reject-with tcp-reset
    -A REB-RAY-SANDBOX-IN -j REJECT --reject-with icmp-port-unreachable

LO:HI is the node's proxy port range (ports.py): the proxies bind inside it, so the rules are
static (nothing per trial to add, remove, or leave behind after a crash). REJECT, not DROP: the
agent's connect fails at once ("connection refused") instead of hanging until its timeout.
The REJECT rules' packet counters count refusals node-wide (`rejected_packets`). Forwarded
packets (an open sandbox's traffic to the internet, Docker's NAT) never pass INPUT and are
untouched. IPv6: the networks are made without it and Docker disables IPv6 inside their
containers, but the host's end of a bridge has a link-local address, reachable with raw
packets (CAP_NET_RAW): where the kernel has IPv6, ip6tables gets the same chain without the
ACCEPT of the proxies.

`ensure_guard` runs at every docker trial start on a reb-ray network: under a node-wide file
lock it reads the filter table (`iptables -S`, a few ms) and rewrites the chain and its jump
only when they differ from the above, in one atomic `iptables-restore --noflush` transaction
(the chain is never seen half made, the jump never doubled). It touches no other chain than
its own and its one jump in INPUT. It fails the attempt (InfraError, CATEGORY) when iptables
is missing or refuses (not root): a sandbox is never silently open to the node. While a trial
holds the network, guard_watch.py re-runs it on a timer, so a firewall manager that flushes
INPUT or the chain (firewalld's reload, `iptables -F`) opens the host for at most that interval,
not until the next trial start. Limit: a rule someone inserts above the jump that accepts the
bridge's packets wins over it.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import tempfile
from pathlib import Path

from reb_ray.errors import InfraError

#: The registries network's chain (network.REGISTRIES.chain), the default of every function here.
CHAIN = "REB-RAY-SANDBOX-IN"
CATEGORY = "infra_network_guard"
#: The binaries, by name on PATH (a test points them at a missing file).
IPTABLES, IP6TABLES = "iptables", "ip6tables"
TIMEOUT_S = 30.0
_WAIT = ("-w", "5")  # wait up to 5 s for the xtables lock another process holds


def chain_rules(gateway: str, ports: range, chain: str = CHAIN) -> list[str]:
    """The IPv4 chain's rules, in `iptables -S` form: the established, the proxies' ports on
    `gateway`, the rest refused."""
    dport = str(ports.start) if len(ports) == 1 else f"{ports.start}:{ports.stop - 1}"
    return [f"-A {chain} -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
            f"-A {chain} -d {gateway}/32 -p tcp -m tcp --dport {dport} -j ACCEPT",
            f"-A {chain} -p tcp -j REJECT --reject-with tcp-reset",
            f"-A {chain} -j REJECT --reject-with icmp-port-unreachable"]


def chain_rules6(chain: str = CHAIN) -> list[str]:
    """The IPv6 chain's rules (`ip6tables -S` form): no proxy listens on IPv6, all is refused."""
    return [f"-A {chain} -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
            f"-A {chain} -p tcp -j REJECT --reject-with tcp-reset",
            f"-A {chain} -j REJECT --reject-with icmp6-port-unreachable"]


def ensure_guard(bridge: str, gateway: str, ports: range, chain: str = CHAIN) -> bool:
    """Makes `chain` and its jump from INPUT exactly as in the module docstring, for packets
    entering on interface `bridge`, the proxies on `gateway` at `ports`; does nothing when
    they already are. True when something was rewritten. Raises InfraError (CATEGORY, one
    line) when iptables is missing or fails."""
    lock_path = Path(tempfile.gettempdir()) / "reb-ray-host-guard.lock"
    try:  # read-only is enough for flock: any user's process can wait on root's lock file
        lock = os.open(lock_path, os.O_RDONLY | os.O_CREAT, 0o644)
    except OSError as exc:
        raise InfraError(CATEGORY, f"cannot open the host guard's lock {lock_path}: {exc.strerror or exc}") from None
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        changed = _ensure(IPTABLES, bridge, chain, chain_rules(gateway, ports, chain))
        if _kernel_has_ipv6():
            changed = _ensure(IP6TABLES, bridge, chain, chain_rules6(chain)) or changed
        return changed
    finally:
        os.close(lock)  # releases the lock


def remove_guard(bridge: str, chain: str = CHAIN) -> None:
    """Removes the jump(s) for `bridge` and `chain` (IPv4 and IPv6), leaving every other rule;
    for tests and a node being taken out of service. Raises InfraError when iptables fails."""
    for binary in (IPTABLES, IP6TABLES) if _kernel_has_ipv6() else (IPTABLES,):
        jump = _jump(bridge, chain)
        table = _table(binary)
        lines = [f"-D{jump[2:]}"] * table.count(jump)
        if _chain_of(table, chain) is not None:
            lines += [f"-F {chain}", f"-X {chain}"]
        if lines:
            _restore(binary, lines)


def rejected_packets(binary: str = IPTABLES, chain: str = CHAIN) -> int | None:
    """The packets `chain`'s REJECT rules have refused on this node since it was made (every
    sandbox of its network together: a refused TCP connect is one), or None when the chain
    does not exist."""
    if _chain_of(_table(binary), chain) is None:
        return None
    out = _iptables(binary, "-L", chain, "-n", "-v", "-x")
    # `-L -v -x`: two header lines, then `pkts bytes target prot ...` per rule
    return sum(int(fields[0]) for fields in (line.split() for line in out.splitlines()[2:])
               if len(fields) > 2 and fields[2] == "REJECT")


def _jump(bridge: str, chain: str) -> str:
    return f"-A INPUT -i {bridge} -j {chain}"


def _ensure(binary: str, bridge: str, chain: str, rules: list[str]) -> bool:
    jump = _jump(bridge, chain)
    table = _table(binary)
    jumps = table.count(jump)
    if _chain_of(table, chain) == rules and jumps == 1:
        return False
    lines = [f":{chain} - [0:0]", *rules]  # with --noflush, declaring the chain empties it
    if jumps == 0:
        lines.append(f"-I INPUT 1 -i {bridge} -j {chain}")
    lines += [f"-D{jump[2:]}"] * max(0, jumps - 1)
    _restore(binary, lines)
    return True


def _table(binary: str) -> list[str]:
    """The filter table in `-S` form (one call: iptables-nft 1.8.9 answers `-S CHAIN` for a
    missing chain with a misleading "incompatible" error, so the chain is read from this)."""
    return _iptables(binary, "-S").splitlines()


def _chain_of(table: list[str], chain: str) -> list[str] | None:
    """`chain`'s rules in `table`, None when it does not exist."""
    if f"-N {chain}" not in table:
        return None
    return [line for line in table if line.startswith(f"-A {chain} ")]


def check_usable() -> None:
    """Raise InfraError (category infra_network_guard, one line) unless this process can read
    the node's filter table with iptables (present, and run as root): what ensure_guard needs."""
    _iptables("iptables", "-S", "INPUT")


def _restore(binary: str, lines: list[str]) -> None:
    script = "\n".join(["*filter", *lines, "COMMIT", ""])
    _iptables(f"{binary}-restore", "--noflush", input=script, wait=True)


def _iptables(binary: str, *args: str, input: str | None = None, wait: bool = True) -> str:
    command = [binary, *_WAIT, *args] if wait else [binary, *args]
    try:
        done = subprocess.run(command, input=input, capture_output=True, text=True, timeout=TIMEOUT_S)
    except FileNotFoundError:
        raise InfraError(CATEGORY, f"{binary} not found: docker sandboxes need iptables on the node, run as root, "
                                   "to keep them off the host's services") from None
    except subprocess.TimeoutExpired:
        raise InfraError(CATEGORY, f"{' '.join(command[:4])} did not finish in {TIMEOUT_S:g} s") from None
    if done.returncode != 0:
        why = (done.stderr.strip() or done.stdout.strip() or f"exit {done.returncode}").splitlines()[0][:300]
        raise InfraError(CATEGORY, f"{binary} {' '.join(args[:3])}: {why} (the host guard needs root on the "
                                   "node to keep sandboxes off its services)")
    return done.stdout


def _kernel_has_ipv6() -> bool:
    return os.path.exists("/proc/net/if_inet6")
