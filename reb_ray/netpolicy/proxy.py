"""The allow-listing egress proxy of one `registries` sandbox.

An HTTP/1.1 forward proxy: `CONNECT host:port` opens a TCP tunnel (TLS stays end to end
between the sandbox and the registry: nothing is decrypted), and an absolute-form plain-HTTP
request (`GET http://deb.debian.org/... HTTP/1.1`, what apt sends) is relayed with aiohttp,
keep-alive and pipelining included. Each request's `host:port` is checked against the trial's
HostPolicy before anything is connected; a refused one is answered `403` with a one-line
reason and recorded (time, client, method, host, port, reason), never dropped silently. A name
that resolves to a loopback, link-local (169.254.x: cloud metadata), multicast or unspecified
address is refused too, unless it is an exact `host:port` the trial added (its LLM proxy).

Only the trial's own sandbox is served: a connection from another address (another trial's
sandbox on the same network) is closed at once and recorded as `foreign`, not counted as this
trial's. Requests are parsed with h11 (sans-IO HTTP/1.1: request heads are bounded to
HEAD_LIMIT bytes); sockets are asyncio streams served from a background thread, so the trial's
synchronous code calls `start()`, `records()` and `stop()`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import datetime as dt
import ipaddress
import socket
import threading
from http import HTTPStatus
from urllib.parse import urlsplit

import aiohttp
import h11

from reb_ray.errors import RebRayError
from reb_ray.background import start_thread
from reb_ray.netpolicy.allowlist import HostPolicy, normal_host
from reb_ray.netpolicy.ports import bind_in

HEAD_LIMIT = 64 * 1024  # bytes of one request head (request line + headers)
RECORDS_KEPT = 10_000  # records kept per trial; beyond it only the counts go on
READ_CHUNK = 64 * 1024
# RFC 9110 section 7.6.1: connection-specific headers are never forwarded (nor the proxy's own).
_HOP_BY_HOP = frozenset({b"connection", b"keep-alive", b"proxy-authenticate", b"proxy-authorization", b"te",
                         b"trailer", b"transfer-encoding", b"upgrade", b"proxy-connection"})


def _local_address(ip: str) -> bool:
    try:
        address = ipaddress.ip_address(ip.split("%")[0])
    except ValueError:
        return False
    return address.is_loopback or address.is_link_local or address.is_multicast or address.is_unspecified


def _authority(target: str) -> tuple[str, int] | None:
    """(host, port) of a CONNECT target `host:port` / `[v6]:port`, or None when malformed."""
    host, sep, port = target.rpartition(":")
    if not sep or not port.isdigit() or not host or not 0 < int(port) < 65536:
        return None
    return normal_host(host), int(port)


class EgressProxy:
    """The egress proxy of one trial (see module docstring), listening on `host:port` (port 0:
    a free one), or at a free port of `ports` when given (the node's range the host guard
    opens: ports.py). `client_ip`: the only address served (None: any, until `serve_only` sets it).
    `connect_timeout_s` bounds connecting to a registry; `idle_timeout_s` the wait for a
    request head. Raises RebRayError from `start()` when the address cannot be bound."""

    def __init__(self, policy: HostPolicy, host: str = "127.0.0.1", port: int = 0, *,
                 ports: range | None = None, connect_timeout_s: float = 30.0, idle_timeout_s: float = 300.0,
                 records_kept: int = RECORDS_KEPT) -> None:
        self.policy, self.host, self._port, self._ports = policy, host, port, ports
        self.connect_timeout_s, self.idle_timeout_s, self.records_kept = connect_timeout_s, idle_timeout_s, records_kept
        self.client_ip: str | None = None
        self.port: int | None = None
        self.denied = self.allowed = self.foreign = self.dropped_records = 0
        self._records: list[dict] = []
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._tasks: set[asyncio.Task] = set()
        self._session: aiohttp.ClientSession | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """`http://HOST:PORT`, the value of the sandbox's HTTP(S)_PROXY; only valid once started."""
        if self.port is None:
            raise RebRayError("the egress proxy is not running; call start() first")
        return f"http://{self.host}:{self.port}"

    def serve_only(self, ip: str) -> None:
        """Serve connections from `ip` (the trial's sandbox) only."""
        self.client_ip = ip

    def start(self, timeout_s: float = 30.0) -> EgressProxy:
        if self._thread is not None:
            return self
        self._thread, self.port = start_thread(lambda ready: asyncio.run(self._main(ready)), "egress proxy",
                                               f"{self.host}:{self._port}", timeout_s)
        return self

    def stop(self, timeout_s: float = 30.0) -> None:
        """Closes the listener and every open connection; idempotent."""
        if self._thread is None or self._loop is None or self._stop is None:
            return
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout_s)
        self._thread = None

    def __enter__(self) -> EgressProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _main(self, ready: concurrent.futures.Future) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        try:
            if self._ports is not None:
                server = await asyncio.start_server(self._serve, sock=bind_in(self.host, self._ports), limit=HEAD_LIMIT)
            else:
                server = await asyncio.start_server(self._serve, self.host, self._port, limit=HEAD_LIMIT)
        except (OSError, RebRayError) as exc:
            ready.set_exception(exc)
            return
        self._session = session = aiohttp.ClientSession(
            auto_decompress=False, trust_env=False, connector=aiohttp.TCPConnector(limit=0),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=self.connect_timeout_s))
        ready.set_result(server.sockets[0].getsockname()[1])
        await self._stop.wait()
        server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await session.close()

    # -- records -----------------------------------------------------------------------------

    def records(self) -> list[dict]:
        """A copy of the records so far (first `records_kept`), each {time (ISO UTC), client,
        method, host, port, decision: allowed | denied | foreign, reason (null when allowed),
        error (an allowed request the registry did not answer)}."""
        with self._lock:
            return [dict(r) for r in self._records]

    def _record(self, client: str, method: str, host: str | None, port: int | None, decision: str,
                reason: str | None = None) -> dict:
        entry = {"time": dt.datetime.now(dt.timezone.utc).isoformat(), "client": client, "method": method,
                 "host": host, "port": port, "decision": decision, "reason": reason, "error": None}
        with self._lock:
            setattr(self, decision, getattr(self, decision) + 1)
            if len(self._records) < self.records_kept:
                self._records.append(entry)
            else:
                self.dropped_records += 1
        return entry

    # -- connections -------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        peer = str((writer.get_extra_info("peername") or ("?",))[0])
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=HEAD_LIMIT)
        try:
            if self.client_ip is not None and peer != self.client_ip:
                self._record(peer, "-", None, None, "foreign", "not this trial's sandbox")
                return
            while True:
                event = await self._next(conn, reader)
                if not isinstance(event, h11.Request):
                    return
                if event.method == b"CONNECT":
                    await self._tunnel(conn, event, reader, writer, peer)
                    return
                if not await self._forward(conn, event, reader, writer, peer):
                    return
                if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                    return
                conn.start_next_cycle()
        except h11.RemoteProtocolError as exc:
            self._record(peer, "-", None, None, "denied", f"not an HTTP/1.1 proxy request ({exc})"[:300])
            await self._answer(conn, writer, exc.error_status_hint, "reb-ray egress proxy: malformed request")
        except (ConnectionError, asyncio.TimeoutError, asyncio.IncompleteReadError, OSError, h11.LocalProtocolError):
            pass
        finally:
            writer.close()
            if task is not None:
                self._tasks.discard(task)

    async def _next(self, conn: h11.Connection, reader: asyncio.StreamReader):
        while True:
            event = conn.next_event()
            if event is not h11.NEED_DATA:
                return event
            conn.receive_data(await asyncio.wait_for(reader.read(READ_CHUNK), self.idle_timeout_s))

    async def _answer(self, conn: h11.Connection, writer: asyncio.StreamWriter, status: int, text: str) -> None:
        """A short error answer that closes the connection (safe to call in any state)."""
        body = (text + "\n").encode()
        try:
            writer.write(conn.send(h11.Response(status_code=status, reason=HTTPStatus(status).phrase.encode(), headers=[
                (b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode()),
                (b"connection", b"close")])) or b"")
            writer.write(conn.send(h11.Data(data=body)) or b"")
            writer.write(conn.send(h11.EndOfMessage()) or b"")
            await writer.drain()
        except (h11.LocalProtocolError, ConnectionError, OSError):
            pass

    async def _check(self, peer: str, method: str, host: str, port: int) -> tuple[dict, list[str] | None]:
        """The record of one request and the addresses to connect to (None: refused)."""
        reason = self.policy.decide(host, port)
        addresses: list[str] = []
        if reason is None:
            try:
                infos = await asyncio.wait_for(asyncio.get_running_loop().getaddrinfo(
                    host, port, type=socket.SOCK_STREAM), self.connect_timeout_s)
                addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
            except (OSError, asyncio.TimeoutError) as exc:
                entry = self._record(peer, method, host, port, "allowed")
                entry["error"] = f"cannot resolve {host}: {exc}"[:300]
                return entry, []
            if not self.policy.is_exact(host, port) and any(_local_address(a) for a in addresses):
                reason = f"{host} resolves to a local address ({addresses[0]})"
        if reason is not None:
            return self._record(peer, method, host, port, "denied", reason), None
        return self._record(peer, method, host, port, "allowed"), addresses

    async def _tunnel(self, conn: h11.Connection, request: h11.Request, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter, peer: str) -> None:
        target = _authority(request.target.decode("ascii", "replace"))
        if target is None:
            self._record(peer, "CONNECT", None, None, "denied", "malformed CONNECT target")
            await self._answer(conn, writer, 400, "reb-ray egress proxy: CONNECT needs host:port")
            return
        entry, addresses = await self._check(peer, "CONNECT", *target)
        if addresses is None:
            await self._answer(conn, writer, 403, f"reb-ray network policy (registries): {entry['reason']}")
            return
        upstream = None
        for address in addresses:
            try:
                upstream = await asyncio.wait_for(asyncio.open_connection(address, target[1]), self.connect_timeout_s)
                break
            except (OSError, asyncio.TimeoutError) as exc:
                entry["error"] = f"cannot connect to {address}:{target[1]}: {exc or type(exc).__name__}"[:300]
        if upstream is None:
            await self._answer(conn, writer, 502, f"reb-ray egress proxy: {entry['error'] or 'no address'}")
            return
        entry["error"] = None
        up_reader, up_writer = upstream
        writer.write(conn.send(h11.Response(status_code=200, headers=[], reason=b"Connection established")) or b"")
        early, _closed = conn.trailing_data
        if early:
            up_writer.write(early)
        try:
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            up_writer.close()

    async def _forward(self, conn: h11.Connection, request: h11.Request, reader: asyncio.StreamReader,
                       writer: asyncio.StreamWriter, peer: str) -> bool:
        """Relays one plain-HTTP request; False when the connection must close."""
        method = request.method.decode("ascii", "replace")
        url = urlsplit(request.target.decode("ascii", "replace"))
        if url.scheme != "http" or not url.hostname:
            self._record(peer, method, None, None, "denied", "not a proxy request (absolute http:// URL or CONNECT)")
            await self._answer(conn, writer, 400, "reb-ray egress proxy: send absolute http:// URLs or CONNECT")
            return False
        try:
            port = url.port or 80
        except ValueError:
            port = 0
        entry, addresses = await self._check(peer, method, normal_host(url.hostname), port)
        if addresses is None:
            await self._answer(conn, writer, 403, f"reb-ray network policy (registries): {entry['reason']}")
            return False
        if not addresses:
            await self._answer(conn, writer, 502, f"reb-ray egress proxy: {entry['error']}")
            return False
        # Headers the client's Connection header names are hop-by-hop too; Host is the checked
        # URL's (RFC 9112 section 3.2.2: a proxy replaces it), never a different name for a CDN.
        dropped = {token.strip().lower() for name, value in request.headers if name == b"connection"
                   for token in value.split(b",")} | {b"host"}
        headers = [(k.decode(), v.decode("latin-1")) for k, v in request.headers
                   if k not in _HOP_BY_HOP and k not in dropped]
        has_body = any(k in (b"content-length", b"transfer-encoding") for k, _ in request.headers)
        if not has_body:
            await self._next(conn, reader)  # the request's EndOfMessage (h11 gives it at once)
        assert self._session is not None
        try:
            async with self._session.request(method, request.target.decode("ascii"), headers=headers,
                                             data=_body(conn, reader, self) if has_body else None,
                                             allow_redirects=False, skip_auto_headers=("Accept-Encoding", "User-Agent",
                                                                                       "Content-Type")) as answer:
                out = [(k, v) for k, v in answer.raw_headers if k.lower() not in _HOP_BY_HOP]
                writer.write(conn.send(h11.Response(status_code=answer.status, headers=out,
                                                    reason=(answer.reason or "").encode("latin-1", "replace"))) or b"")
                async for chunk in answer.content.iter_any():
                    writer.write(conn.send(h11.Data(data=chunk)) or b"")
                    await writer.drain()
                writer.write(conn.send(h11.EndOfMessage()) or b"")
                await writer.drain()
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            entry["error"] = f"{type(exc).__name__}: {exc}"[:300]
            if conn.our_state is h11.SEND_RESPONSE:
                await self._answer(conn, writer, 502, f"reb-ray egress proxy: {entry['error']}")
            return False
        if conn.their_state is h11.SEND_BODY:  # the body was not read (an upstream answered early)
            return False
        return True


async def _body(conn: h11.Connection, reader: asyncio.StreamReader, proxy: EgressProxy):
    """The request body's bytes, from h11's Data events until EndOfMessage."""
    while True:
        event = await proxy._next(conn, reader)
        if isinstance(event, h11.Data):
            yield bytes(event.data)
        else:
            return


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    try:
        while data := await source.read(READ_CHUNK):
            sink.write(data)
            await sink.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        try:
            if sink.can_write_eof():
                sink.write_eof()
        except (OSError, RuntimeError):
            pass
