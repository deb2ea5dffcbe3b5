"""Failing fast on a wrong `--address`, in seconds instead of minutes.

`ray.init(address="HOST:PORT")` keeps retrying an address where no Ray cluster listens: about
40 s for a closed port here (its GCS client waits for the server), minutes elsewhere. Before
it, `probe` opens a TCP connection to the GCS port (a few seconds at most) and, when that
connects, asks it for one key with a timeout (something other than a Ray GCS on that port
fails here at once). "auto", "local" and `ray://` addresses are left to Ray, which fails fast
for them.
"""

from __future__ import annotations

import socket
import threading

from reb_ray.errors import RebRayError

DEFAULT_GCS_PORT = 6379


def _host_port(address: str) -> tuple[str, int] | None:
    """(host, port) of a HOST[:PORT] address; None for the forms Ray resolves itself."""
    if address in ("auto", "local") or "://" in address:
        return None
    host, sep, port = address.rpartition(":")
    if not sep:
        return address, DEFAULT_GCS_PORT
    try:
        return host.strip("[]"), int(port)
    except ValueError:
        raise RebRayError(f"--address {address}: not HOST:PORT, auto or ray://HOST:PORT") from None


def probe(address: str, timeout_s: float = 5.0) -> None:
    """Raise RebRayError in one line naming `address` unless a Ray GCS answers there within
    about `timeout_s` seconds (twice that at most: the connect, then the GCS request)."""
    target = _host_port(address)
    if target is None:
        return
    host, port = target
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as exc:
        raise RebRayError(f"no Ray cluster at --address {address}: cannot connect to {host}:{port} "
                          f"({exc.strerror or type(exc).__name__}); start one with `ray start --head` or "
                          "`ray up cluster.yaml`, or leave --address out for a local Ray") from None
    problem = _gcs_problem(f"{host}:{port}", timeout_s)
    if problem is not None:
        raise RebRayError(f"no Ray cluster at --address {address}: {host}:{port} answers, but not as Ray's GCS "
                          f"({problem})")


def _gcs_problem(address: str, timeout_s: float) -> str | None:
    """None when a Ray GCS at `address` answers a key lookup; else why not, in a few words.
    Runs in a thread: Ray's GCS client can block well past its own timeouts on a silent peer."""
    result: list[str | None] = []

    def ask() -> None:
        try:
            from ray._raylet import GcsClient

            GcsClient(address=address).internal_kv_get(b"reb-ray-probe", None, timeout=timeout_s)
            result.append(None)
        except Exception as exc:  # noqa: BLE001 - any failure means no usable GCS there
            result.append((str(exc).strip().splitlines() or [type(exc).__name__])[0][:160])

    thread = threading.Thread(target=ask, daemon=True)
    thread.start()
    thread.join(timeout_s)
    return result[0] if result else f"no answer within {timeout_s:.0f} s"
