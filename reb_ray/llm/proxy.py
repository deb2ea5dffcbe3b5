"""The metering proxy: one per node, between every agent and its LLM endpoint.

A trial is registered with its upstream (the vendor's base URL, or any compatible server) and
the name of the environment variable that holds the real key; it gets a per-trial stand-in key,
the only credential its sandbox ever sees. The agent's CLI is pointed at the proxy's URL with
that key. Each request is matched to its trial by the stand-in key (`x-api-key` or
`Authorization: Bearer`), which is swapped for the real key on the way out; the real key is
read from the proxy's key table per request (`keys`: in memory, handed over by the driver; see
reb_ray.llm.keys) and is never logged, written or relayed back.

Requests and responses pass through unchanged: a streamed (SSE) answer is relayed as its bytes
arrive, usage parsed from a copy on the side; a whole JSON answer is read, metered, then sent
(so a client holding the answer finds it in the meter). Two deliberate changes, both needed to
meter:
`Accept-Encoding: identity` is asked of the upstream (usage must be readable), and a streaming
Chat Completions request that does not ask for usage gets `stream_options.include_usage`
(without it the API reports no tokens; clients skip the extra, choice-less last chunk).

The proxy counts per trial (see TrialMeter), enforces the trial's cost limit and the upstream's
concurrency, and classifies failures (reb_ray.llm.failures). It retries nothing: the
orchestrator owns retry policy. Run it with `ProxyServer(...).start()` from synchronous code.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Mapping

import aiohttp
from aiohttp import web
from multidict import CIMultiDict
from yarl import URL

from reb_ray.llm.apis import CHAT, error_body, api_of
from reb_ray.background import BackgroundServer
from reb_ray.llm.failures import AUTH, UNAVAILABLE, classify, parse_retry_after
from reb_ray.llm.meter import LOG_SIZE, RequestRecord, TrialLimits
from reb_ray.llm.prices import PriceTable, price_table
from reb_ray.llm.registry import Trial, TrialRegistry
from reb_ray.llm.usage import ResponseUsageReader
from reb_ray.redact import Redactor

# RFC 9110 section 7.6.1: connection-specific headers are never forwarded.
_HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
                         "trailer", "transfer-encoding", "upgrade", "proxy-connection"})
_NOT_FORWARDED = _HOP_BY_HOP | {"host", "content-length", "accept-encoding", "x-api-key", "authorization"}
_NOT_RETURNED = _HOP_BY_HOP | {"content-length"}
MAX_REQUEST_BYTES = 128 * 1024 * 1024  # long agent histories with images; aiohttp's default is 1 MiB
ERROR_BODY_BYTES = 1024 * 1024


class ProxyServer:
    """The node's metering proxy, served from a background thread (see module docstring).

    `connect_timeout_s` bounds connecting to an upstream; `read_timeout_s` bounds the silence
    between two reads of its answer (a hung endpoint is cut off after it, recorded as
    `infra_llm_unavailable`, answered 504). `prices` prices the meters (the shipped table by
    default). Bind `host` to an address the sandboxes reach (the Docker bridge gateway, or
    0.0.0.0); the default is loopback only. `ports`: listen at a free port of that range
    instead of `port` (the internal network's, which its host guard opens: reb_ray/netpolicy/).
    `keys`: the real keys by variable name, a mapping the caller may fill later (the node's
    proxy actor fills it with what the driver sealed to it); None reads this process's
    environment (a proxy inside the harness process, e.g. `reb-ray trial`).
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, prices: PriceTable | None = None,
                 connect_timeout_s: float = 10.0, read_timeout_s: float = 600.0, log_size: int = LOG_SIZE,
                 inject_stream_usage: bool = True, ports: range | None = None,
                 keys: Mapping[str, str] | None = None) -> None:
        self.prices = prices or price_table()
        self.connect_timeout_s, self.read_timeout_s = connect_timeout_s, read_timeout_s
        self.log_size, self.inject_stream_usage = log_size, inject_stream_usage
        self.trials = TrialRegistry(self.prices, log_size, keys)
        self._semaphores: dict[str, asyncio.Semaphore] = {}
        self._session: aiohttp.ClientSession | None = None
        self.unknown_key_requests = 0
        self._server = BackgroundServer(self._make_app, host, port, name="reb-ray-llm-proxy", ports=ports)

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """`http://HOST:PORT`: the base URL agents use (Anthropic style; OpenAI clients add `/v1`)."""
        return self._server.url

    def start(self) -> ProxyServer:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop()

    def __enter__(self) -> ProxyServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _make_app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_REQUEST_BYTES)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        app.on_startup.append(self._open_session)
        app.on_cleanup.append(self._close_session)
        return app

    async def _open_session(self, _app: web.Application) -> None:
        self._semaphores = {}  # asyncio primitives belong to one loop: a restart makes new ones
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self.connect_timeout_s, sock_read=self.read_timeout_s)
        # limit=0: concurrency is ours to set per upstream, not the connector's default of 100.
        # trust_env: a node behind an HTTP(S)_PROXY still reaches the vendor.
        self._session = aiohttp.ClientSession(timeout=timeout, auto_decompress=False, trust_env=True,
                                              connector=aiohttp.TCPConnector(limit=0))

    async def _close_session(self, _app: web.Application) -> None:
        if self._session is not None:
            await self._session.close()

    # -- trials ------------------------------------------------------------------------------

    def register_trial(self, trial_id: str, upstream: str, real_key_env: str | None = None,
                       limits: TrialLimits | None = None, *, model: str | None = None) -> str:
        """Registers a trial; returns its stand-in key (see TrialRegistry.register)."""
        return self.trials.register(trial_id, upstream, real_key_env, limits, model=model)

    def unregister_trial(self, trial_id: str) -> tuple[dict, list[dict]]:
        """Forgets the trial (its key stops working); returns its final (meter, request log)."""
        return self.trials.unregister(trial_id)

    def meter(self, trial_id: str) -> dict:
        """The trial's meter (requests, token fields, cost_usd, failures, ...; see TrialMeter)."""
        return self.trials.get(trial_id).meter.snapshot()

    def request_log(self, trial_id: str) -> list[dict]:
        """The trial's bounded request log: method, path, status, durations, usage; no keys."""
        return self.trials.get(trial_id).meter.log()

    def _semaphore(self, upstream: str) -> asyncio.Semaphore | None:
        size = self.trials.concurrency(upstream)
        if not size:
            return None
        if upstream not in self._semaphores:  # created on the loop that uses it
            self._semaphores[upstream] = asyncio.Semaphore(size)
        return self._semaphores[upstream]

    # -- relay -------------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        api = api_of(request.path)
        trial = self.trials.by_headers(request.headers)
        if trial is None:
            self.unknown_key_requests += 1
            return _local(api, 401, "reb-ray proxy: missing or unknown stand-in key")
        data = await request.read()
        model, stream, data, injected = self._inspect(api, data)
        rec = RequestRecord(started_at=time.time(), method=request.method, path=request.path_qs, api=api,
                            model=model, stream=stream, injected_stream_usage=injected)
        start = time.monotonic()
        refused_key = trial.meter.auth_failure if api is not None else None
        if refused_key is not None:
            # The key was refused once: not sent again, answered at once. As a 400, which CLIs
            # do not retry (they retry a 401 with backoff for minutes); recorded as auth.
            rec.refused, rec.status, rec.category = True, 400, AUTH
            rec.error = f"reb-ray proxy: not sent; the trial's key was refused earlier ({refused_key})"[:300]
            trial.meter.refuse(rec)
            return _local(api, 400, rec.error)
        if not trial.meter.begin():
            rec.refused, rec.status = True, 402
            rec.error = f"reb-ray proxy: trial budget exceeded (max_cost_usd={trial.meter.limits.max_cost_usd})"
            trial.meter.record(rec)
            return _local(api, 402, rec.error)
        real_key = self.trials.keys.get(trial.real_key_env) if trial.real_key_env else None
        redact = Redactor([k for k in (real_key, trial.key) if k])
        recorded = False

        def finish() -> None:
            """Records the request once; called before a streamed answer's last byte goes out,
            so that whoever has read the whole answer also finds it in the meter."""
            nonlocal recorded
            if not recorded:
                recorded = True
                rec.duration_s = time.monotonic() - start
                rec.error = redact.text(rec.error) if rec.error else rec.error
                rec.path = redact.text(rec.path)
                trial.meter.record(rec)

        try:
            if trial.real_key_env and not real_key:
                rec.category, rec.error = AUTH, f"reb-ray proxy: it holds no key for {trial.real_key_env}"
                return _local(api, 401, rec.error)
            semaphore = self._semaphore(trial.upstream)
            async with semaphore if semaphore is not None else contextlib.nullcontext():
                rec.wait_s = time.monotonic() - start
                return await self._relay(request, trial, rec, data, real_key, redact, start, finish)
        except asyncio.CancelledError:
            rec.client_disconnected, rec.error = True, "client disconnected"
            raise
        finally:
            finish()

    def _inspect(self, api: str | None, data: bytes) -> tuple[str | None, bool, bytes, bool]:
        """(model, stream, body to forward, whether include_usage was added) of a request body."""
        try:
            body = json.loads(data) if data and api else None
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return None, False, data, False
        model = body.get("model") if isinstance(body.get("model"), str) else None
        stream = body.get("stream") is True
        options = body.get("stream_options")
        if (api == CHAT and stream and self.inject_stream_usage
                and not (isinstance(options, dict) and options.get("include_usage"))):
            body["stream_options"] = {**(options if isinstance(options, dict) else {}), "include_usage": True}
            return model, stream, json.dumps(body).encode(), True
        return model, stream, data, False

    def _outgoing(self, headers, real_key: str | None, trial: Trial) -> CIMultiDict:
        out = CIMultiDict((k, v) for k, v in headers.items() if k.lower() not in _NOT_FORWARDED)
        out["Accept-Encoding"] = "identity"
        if real_key is None:
            # No real key to swap in: the request's own credentials (the stand-in, no secret)
            # pass through, so an upstream that tells clients apart by key still can.
            for name in ("x-api-key", "authorization"):
                if name in headers:
                    out[name] = headers[name]
        else:
            # The real key goes where the stand-in came: Anthropic's header or a bearer token.
            if headers.get("x-api-key") == trial.key:
                out["x-api-key"] = real_key
            else:
                out["Authorization"] = f"Bearer {real_key}"
        return out

    async def _relay(self, request: web.Request, trial: Trial, rec: RequestRecord, data: bytes,
                     real_key: str | None, redact: Redactor, start: float, finish) -> web.StreamResponse:
        assert self._session is not None
        url = URL(trial.upstream + request.path_qs, encoded=True)
        try:
            upstream = await self._session.request(request.method, url, data=data, allow_redirects=False,
                                                   headers=self._outgoing(request.headers, real_key, trial))
        except asyncio.TimeoutError:
            rec.category = UNAVAILABLE
            rec.error = f"upstream sent no answer within {self.read_timeout_s:g} s (or no connection within {self.connect_timeout_s:g} s)"
            return _local(rec.api, 504, f"reb-ray proxy: {rec.error}")
        except aiohttp.ClientError as exc:
            rec.category, rec.error = UNAVAILABLE, f"cannot reach upstream: {type(exc).__name__}: {exc}"
            return _local(rec.api, 502, f"reb-ray proxy: {redact.text(rec.error)}")
        async with upstream:
            rec.ttfb_s, rec.status = time.monotonic() - start, upstream.status
            headers = CIMultiDict((k, v) for k, v in upstream.headers.items() if k.lower() not in _NOT_RETURNED)
            if upstream.status >= 400:
                return await self._relay_error(upstream, rec, headers, redact)
            return await self._relay_body(request, upstream, rec, headers, finish)

    async def _relay_error(self, upstream: aiohttp.ClientResponse, rec: RequestRecord, headers: CIMultiDict,
                           redact: Redactor) -> web.Response:
        body = b""
        try:  # read(n) returns what has arrived so far: loop to the end, or to the cap
            while len(body) < ERROR_BODY_BYTES and (chunk := await upstream.content.read(ERROR_BODY_BYTES - len(body))):
                body += chunk
        except (aiohttp.ClientError, asyncio.TimeoutError):
            pass
        text = body.decode("utf-8", errors="replace")
        rec.category = classify(upstream.status, text[:4096])
        rec.retry_after_s = parse_retry_after(upstream.headers.get("retry-after"))
        rec.error = _error_message(text) or f"HTTP {upstream.status}"
        rec.response_bytes = len(body)
        # An upstream may echo the key in an error; it must not reach the sandbox.
        safe = redact.text(text)
        return web.Response(status=upstream.status, body=body if safe == text else safe.encode(), headers=headers)

    async def _relay_body(self, request: web.Request, upstream: aiohttp.ClientResponse, rec: RequestRecord,
                          headers: CIMultiDict, finish) -> web.StreamResponse:
        """Relays a 2xx/3xx answer. An answer that ends before it is whole is `infra_llm_unavailable`
        and reaches the client cut off (or as a 502 when it was read whole first), never as a
        complete one: a body shorter than its Content-Length or a chunked body without its last
        chunk (aiohttp raises), and, whatever the framing (a body delimited by the connection's
        close ends the same way whether the upstream finished or was cut), a JSON body that does
        not parse or an event stream without its API's final event (ResponseUsageReader.complete)."""
        reader = None
        if rec.api is not None:
            reader = ResponseUsageReader(rec.api, upstream.headers.get("content-type", ""),
                                         upstream.headers.get("content-encoding", ""))
        if reader is not None and not reader.streaming:
            # A whole JSON answer: read it all, meter it, then send it, so that a client that
            # has the answer also finds it in the meter (it comes in one piece anyway).
            try:
                body = await upstream.read()
            except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
                rec.category = UNAVAILABLE
                rec.error = f"upstream body broke: {type(exc).__name__}"
                return _local(rec.api, 502, f"reb-ray proxy: {rec.error}")
            rec.response_bytes = len(body)
            reader.feed(body)
            if "json" in upstream.headers.get("content-type", "").lower() and not reader.complete:
                rec.category = UNAVAILABLE
                rec.error = f"upstream body ended after {len(body)} bytes, before its JSON was whole"
                return _local(rec.api, 502, f"reb-ray proxy: {rec.error}")
            rec.usage, model = reader.finish()
            rec.model = model or rec.model
            finish()
            return web.Response(status=upstream.status, reason=upstream.reason, body=body, headers=headers)
        response = web.StreamResponse(status=upstream.status, reason=upstream.reason, headers=headers)
        if upstream.content_length is not None and reader is None:
            response.content_length = upstream.content_length
        await response.prepare(request)
        chunks = upstream.content.iter_any().__aiter__()
        while True:
            try:
                chunk = await chunks.__anext__()
            except StopAsyncIteration:
                break
            except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:  # reading the upstream
                if request.transport is None or request.transport.is_closing():
                    rec.client_disconnected, rec.error = True, "client disconnected"
                else:
                    rec.category = UNAVAILABLE
                    rec.error = f"upstream stream broke after {rec.response_bytes} bytes: {type(exc).__name__}"
                return self._cut(request, response, reader, rec, finish)
            rec.response_bytes += len(chunk)
            if reader is not None:
                reader.feed(chunk)
            try:
                await response.write(chunk)
            except (ConnectionError, aiohttp.ClientError, OSError):  # writing to the client
                rec.client_disconnected, rec.error = True, "client disconnected"
                return self._cut(request, response, reader, rec, finish)
        if reader is not None and reader.streaming and not reader.complete:
            rec.category = UNAVAILABLE
            rec.error = f"upstream stream ended after {rec.response_bytes} bytes without its final event"
            return self._cut(request, response, reader, rec, finish)
        if reader is not None:
            rec.usage, model = reader.finish()
            rec.model = model or rec.model
        finish()
        await response.write_eof()
        return response

    @staticmethod
    def _cut(request: web.Request, response: web.StreamResponse, reader: ResponseUsageReader | None,
             rec: RequestRecord, finish) -> web.StreamResponse:
        """Records a relay that ended early, then cuts the client's connection: the client must
        see a cut-off answer, not a complete-looking one."""
        if reader is not None:
            rec.usage, model = reader.finish()
            rec.model = model or rec.model
        finish()
        if request.transport is not None:
            request.transport.abort()
        return response


def _local(api: str | None, status: int, message: str) -> web.Response:
    """An answer the proxy gives itself, in the API's own error shape."""
    return web.Response(status=status, body=error_body(api, status, message), content_type="application/json")


def _error_message(text: str) -> str | None:
    """The `error.message` of an Anthropic/OpenAI error body (or its first 300 characters)."""
    try:
        body = json.loads(text)
    except ValueError:
        return " ".join(text.split())[:300] or None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return error["message"][:300]
    if isinstance(error, str):
        return error[:300]
    return " ".join(text.split())[:300] or None

