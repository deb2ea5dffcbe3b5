"""Serving an aiohttp application from a background thread, for synchronous harness code.

The proxy and the scripted endpoint are asyncio servers; trials, tests and the CLI are not.
`BackgroundServer` owns a thread with its own event loop: `start()` returns once the socket
is bound (port 0 picks a free one; `ports` a free one in that range), `url` is where it
listens, `stop()` closes it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import errno
import random
import socket
import threading
from typing import TYPE_CHECKING, Any, Callable, Coroutine

from reb_ray.errors import RebRayError

#: The node's port range for the servers sandboxes may reach (`LO-HI`, inclusive; netpolicy.ports).
PORTS_ENV = "REB_RAY_SANDBOX_PORTS"
DEFAULT_PORTS = range(29000, 30000)

if TYPE_CHECKING:  # aiohttp is loaded by the server that uses it: a slot worker that serves nothing never pays for it
    from aiohttp import web


def start_thread(serve: Callable[[concurrent.futures.Future], None], name: str, where: str,
                 timeout_s: float = 30.0) -> tuple[threading.Thread, int]:
    """Start `serve(ready)` in a daemon thread named `name` and wait until it binds: `serve`
    sets `ready` to the bound port, or to the exception that stopped it. Returns (thread, port).

    Raises RebRayError naming `name` and `where` ("HOST:PORT") when binding failed (OSError)
    or `serve` raised RebRayError; the thread is joined first."""
    ready: concurrent.futures.Future = concurrent.futures.Future()
    thread = threading.Thread(target=serve, args=(ready,), name=name, daemon=True)
    thread.start()
    try:
        return thread, ready.result(timeout=timeout_s)
    except OSError as exc:
        thread.join(timeout_s)
        raise RebRayError(f"{name}: cannot listen on {where}: {exc.strerror or exc}") from None
    except RebRayError as exc:
        thread.join(timeout_s)
        raise RebRayError(f"{name}: {exc}") from None


class BackgroundServer:
    """An aiohttp app built by `make_app()` (called inside the server's loop), on `host:port`."""

    def __init__(self, make_app: Callable[[], web.Application], host: str = "127.0.0.1", port: int = 0,
                 name: str = "reb-ray-http", ports: range | None = None) -> None:
        self._make_app, self.host, self._port, self._name, self._ports = make_app, host, port, name, ports
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self.port: int | None = None

    @property
    def url(self) -> str:
        """`http://HOST:PORT` (no trailing slash); only valid once started."""
        if self.port is None:
            raise RebRayError(f"{self._name} is not running; call start() first")
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self, timeout_s: float = 30.0) -> BackgroundServer:
        """Binds and serves; raises RebRayError when the address cannot be bound."""
        if self._thread is not None:
            return self
        self._thread, self.port = start_thread(self._serve, self._name, f"{self.host}:{self._port}", timeout_s)
        return self

    def _serve(self, ready: concurrent.futures.Future) -> None:
        from aiohttp import web

        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._loop = loop
        try:
            # handler_cancellation: a client that hangs up cancels its handler (frees a slot).
            # shutdown_timeout: stop() must not wait a minute for a scripted hang to end.
            runner = web.AppRunner(self._make_app(), handler_cancellation=True, access_log=None,
                                   shutdown_timeout=2.0)
            loop.run_until_complete(runner.setup())
            if self._ports is not None:  # a range a firewall opens (reb_ray.netpolicy.ports)
                site: web.BaseSite = web.SockSite(runner, bind_in(self.host, self._ports))
            else:
                site = web.TCPSite(runner, self.host, self._port)
            loop.run_until_complete(site.start())
            self._runner = runner
            ready.set_result(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
        except BaseException as exc:  # noqa: BLE001 - handed to start()'s caller
            ready.set_exception(exc)
            loop.close()
            return
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(runner.cleanup())
            loop.close()

    def call(self, coro: Coroutine[Any, Any, Any], timeout_s: float = 30.0) -> Any:
        """Runs `coro` on the server's loop from another thread and returns its result."""
        if self._loop is None:
            raise RebRayError(f"{self._name} is not running")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout_s)

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stops serving and joins the thread; idempotent."""
        if self._thread is None or self._loop is None:
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout_s)
        self._thread, self._loop, self.port = None, None, None

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def bind_in(host: str, ports: range) -> socket.socket:
    """A TCP socket listening on `host` at the first free port of `ports`, tried from a random
    start (concurrent trials on a node rarely contend for the same port). Raises RebRayError
    when every port is taken, or the address cannot be bound at all."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    start = random.randrange(len(ports))
    for i in range(len(ports)):
        port = ports[(start + i) % len(ports)]
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as asyncio's servers do
        try:
            sock.bind((host, port))
            sock.listen(128)
        except OSError as exc:
            sock.close()
            if exc.errno == errno.EADDRINUSE:
                continue
            raise RebRayError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
        sock.setblocking(False)
        return sock
    raise RebRayError(f"no free port on {host} in {ports.start}-{ports.stop - 1} ({PORTS_ENV}): "
                      f"every one is in use")
