"""One trial of an LLM agent and the node's metering proxy: registration, meter, verdict, trajectory.

`TrialLlm` is what `run_trial` uses; it knows no Ray. The proxy comes in as a
`ProxyClient` (the orchestrator injects one that talks to the node's proxy actor,
`RayProxyClient`); without one (run_trial called directly) the trial starts
a private in-process `LocalProxy`.

- `open()`, before the agent phase: registers the attempt with upstream = the spec's base_url
  or its kind's vendor default (a trailing `/v1` dropped: clients send `/v1/...` paths), real
  key variable = spec.key_env, limits = spec.max_cost_usd / spec.max_concurrent, model =
  spec.model; `access` is then the agent's `ctx.llm` (the stand-in key and the proxy's URL as
  the sandbox sees it). `sandbox_credentials()` is what of the spec's credentials may enter the
  sandbox: for an LLM agent never its LLM key (the real key lives only in the proxy's process).
- `finish(run)`, after it: reads the meter and the request log, unregisters, stores the
  trajectory (the CLI's transcript and the request log, gzip, as the attempt's artifacts) and
  returns the trials row's LLM columns. A per-trial cost limit that stopped the agent is the
  agent's own limit: `run.limit` becomes `max_cost_usd=<limit>`.
- `judge(report)`: raises InfraError when the agent failed because of its endpoint, so a rate
  limit or an outage is retried instead of scored against the agent.

The rule of `judge` (`llm_verdict`): an attempt is an LLM infrastructure failure only when the
agent produced no usable report AND the trial's last LLM request (the latest started) failed
with an `infra_llm_*` category; the category is that request's. So a CLI that was rate-limited
once, retried and went on is judged on what it built (the probes score it), and an agent that
gave up on a 429 storm is infra (retried with backoff by the orchestrator) and never scored. A
request the agent's own end cut off (its time limit fired while it waited: `client
disconnected`) and the proxy's refusal past the trial's cost limit carry no category: those are
the agent's limits.

Tokens: the proxy's sums; when no response reported usage, 0 if every request was answered with
an HTTP error (a 429 or 5xx bills nothing), else null with cost null (a request never answered
or cut off may have been billed).

Cost (`cost_usd`, `cost_source`): the proxy's tokens priced by the price table
(`price_table`); when that is unknown (a response without usage) but the table prices the
model, the CLI's own dollar figure (`agent_reported`); otherwise null (`unknown`): a model the
table lacks has no cost, never 0, and a CLI's figure for such a model (claude's guess for an
unknown model) stays only in `agent_reported_cost_usd`, so every agent's `cost_usd` is priced
by one table and comparable.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from typing import TYPE_CHECKING, Callable, Protocol

from reb_ray.agents.base import LlmAccess
from reb_ray.errors import InfraError, RebRayError
from reb_ray.llm.failures import AUTH, BUDGET, CATEGORIES, PROXY, RATE_LIMIT, UNAVAILABLE
from reb_ray.llm.meter import TrialLimits
from reb_ray.llm.usage import FIELDS
from reb_ray.models.agent import KIND_DEFAULTS, AgentSpec
from reb_ray.sandbox import capabilities_of

if TYPE_CHECKING:
    from reb_ray.agents.base import Agent, AgentRun
    from reb_ray.trial.artifacts import TrialArtifacts
    from reb_ray.llm.prices import PriceTable
    from reb_ray.llm.proxy import ProxyServer
    from reb_ray.models.report import Report
    from reb_ray.models.sweep import TrialSpec

TRANSCRIPT_MAX_BYTES = 32 * 1024 * 1024  # of a CLI's transcript kept per attempt (then cut, marked)
DRAIN_S = 3.0  # how long finish waits for requests still in flight to be recorded
TRAJECTORY, REQUEST_LOG = "trajectory", "llm_requests"  # artifact names (.jsonl.gz)



class ProxyClient(Protocol):
    """The node's metering proxy as a trial sees it (implemented over Ray by the orchestrator,
    in-process by LocalProxy). Both methods raise InfraError (category from
    reb_ray.llm.failures) when the proxy cannot do it."""

    def register(self, trial_key: str, upstream: str, real_key_env: str | None, limits: TrialLimits,
                 model: str | None) -> tuple[str, str]:
        """(stand-in key, the proxy's base URL as the sandbox sees it, `http://HOST:PORT`)."""
        ...

    def finish(self, trial_key: str) -> tuple[dict, list[dict]]:
        """Unregisters the trial; returns its final (meter, request log)."""
        ...

    def meter(self, trial_key: str) -> dict:
        """The registered trial's meter now (TrialMeter.snapshot)."""
        ...


def register_on(server: ProxyServer, trial_key: str, upstream: str, real_key_env: str | None,
                limits: TrialLimits, model: str | None) -> tuple[str, str]:
    """Registers on `server` (in this process): (stand-in key, server.url). A real key variable
    the server's key table lacks is `infra_llm_auth` (never retried), any other refusal
    `infra_llm_proxy`. Raises InfraError."""
    if real_key_env and not server.trials.keys.get(real_key_env):
        raise InfraError(AUTH, f"the node's LLM proxy holds no key for {real_key_env}")
    try:
        return server.register_trial(trial_key, upstream, real_key_env, limits, model=model), server.url
    except RebRayError as exc:
        raise InfraError(PROXY, str(exc)) from None


def unregister_on(server: ProxyServer, trial_key: str, drain_s: float = DRAIN_S) -> tuple[dict, list[dict]]:
    """Waits up to `drain_s` seconds for the trial's requests in flight to end (a client the
    agent's end cut off is recorded a moment later), then unregisters: (meter, request log).
    Raises InfraError (`infra_llm_proxy`) for a trial the server does not know."""
    deadline = time.monotonic() + drain_s
    try:
        while server.meter(trial_key)["in_flight"] > 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        return server.unregister_trial(trial_key)
    except RebRayError as exc:
        raise InfraError(PROXY, str(exc)) from None


class LocalProxy:
    """A ProxyServer in this process for one trial, bound on `host` (the sandbox's way to the
    node), inside `ports` when given; it reads the real key from this process's environment
    (the harness process the user started with the key: no Ray process in between).
    `close()` stops it."""

    def __init__(self, host: str, ports: range | None = None) -> None:
        from reb_ray.llm.proxy import ProxyServer

        self.server = ProxyServer(host=host, ports=ports)
        self._started = False

    def register(self, trial_key: str, upstream: str, real_key_env: str | None, limits: TrialLimits,
                 model: str | None) -> tuple[str, str]:
        if not self._started:
            try:
                self.server.start()
            except RebRayError as exc:
                raise InfraError(PROXY, str(exc)) from None
            self._started = True
        return register_on(self.server, trial_key, upstream, real_key_env, limits, model)

    def finish(self, trial_key: str) -> tuple[dict, list[dict]]:
        return unregister_on(self.server, trial_key)

    def meter(self, trial_key: str) -> dict:
        try:
            return self.server.meter(trial_key)
        except RebRayError as exc:
            raise InfraError(PROXY, str(exc)) from None

    def close(self) -> None:
        self.server.stop()


AUTH_POLL_S = 1.0  # how often the agent phase asks the proxy whether the trial's key was refused


class AuthWatch:
    """Ends the agent phase once the trial's key is refused (HTTP 401/403 on a model request,
    `infra_llm_auth`): every `interval_s` seconds it asks `poll()` (the meter's `auth_failure`,
    None while the key works) and on the first answer calls `stop()` (which ends the agent's
    processes) and keeps the answer in `fired`. A CLI retries a refused key with its own backoff
    for minutes; the key cannot start working within the attempt, so the attempt ends within
    seconds of the first refusal. Use as a context manager around the agent phase; `poll=None`
    watches nothing. Never raises from its thread."""

    def __init__(self, poll: Callable[[], str | None] | None, stop: Callable[[], object],
                 interval_s: float = AUTH_POLL_S) -> None:
        import threading

        self._poll, self._stop_agent, self.interval_s = poll, stop, interval_s
        self.fired: str | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="reb-ray-auth-watch")

    def __enter__(self) -> AuthWatch:
        if self._poll is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        assert self._poll is not None
        while not self._done.wait(self.interval_s):
            try:
                reason = self._poll()
            except Exception:  # noqa: BLE001 - a failed poll must not end the trial
                continue
            if reason:
                self.fired = reason
                try:
                    self._stop_agent()
                except Exception:  # noqa: BLE001
                    pass
                return


def proxy_host(provider: str, network: str) -> str:
    """The address the node's proxy binds so that sandboxes of `provider` reach it: loopback for
    one that shares the node's network (local), the Docker network's gateway for one with its
    own (docker; reb-ray-open's under the open policy). Raises RebRayError for `--network none`
    (no way to any endpoint) or no Docker daemon."""
    if not capabilities_of(provider).own_network:
        return "127.0.0.1"
    from reb_ray.sandbox.docker.docker_client import connect, network_gateway

    host = network_gateway(connect(timeout=30), network)
    if host is None:
        raise RebRayError(f"network {network!r}: an LLM agent's sandbox needs a network to reach the node's LLM proxy")
    return host


def upstream_of(spec: AgentSpec) -> str:
    """The base URL the proxy relays `spec`'s requests to: spec.base_url, else the kind's vendor
    endpoint, without a trailing `/` or `/v1` (clients send `/v1/messages`, `/v1/responses`,
    `/v1/chat/completions`; `https://api.openai.com/v1` -> `https://api.openai.com`).
    Raises RebRayError when neither names one."""
    base = spec.base_url or KIND_DEFAULTS.get(spec.kind, (None, None))[0]
    if not base:
        raise RebRayError(f"agent {spec.name!r}: no base_url, and kind {spec.kind!r} has no vendor default")
    base = base.rstrip("/")
    return base[:-3] if base.endswith("/v1") else base


def check_llm_agent(spec: AgentSpec, prices: PriceTable, sweep_max_cost_usd: float | None) -> None:
    """What a sweep checks on the driver before any trial of LLM agent `spec`, so that no trial
    starts doomed: an endpoint to relay to, its key variable set in the driver's environment
    (the proxies get it from there), and a price for its model wherever a cost limit (the
    spec's or the sweep's) must be enforced. Raises RebRayError (one line naming the agent)."""
    upstream_of(spec)
    if spec.key_env and not os.environ.get(spec.key_env):
        raise RebRayError(f"agent {spec.name!r}: its key variable {spec.key_env} is not set; export it on the driver "
                          "(only the node's LLM proxy gets it, never the sandbox)")
    for flag, limit in (("max_cost_usd", spec.max_cost_usd), ("--max-cost-usd", sweep_max_cost_usd)):
        if limit is not None and prices.lookup(spec.model) is None:
            raise RebRayError(f"agent {spec.name!r}: {flag} needs a price for its model {spec.model!r}, which price table "
                              f"{prices.version} lacks; add it with --prices FILE (see `reb-ray llm prices`)")


def llm_verdict(log: list[dict], report_ok: bool) -> tuple[str, str] | None:
    """(infra category, one-line reason) when the attempt failed because of the LLM endpoint,
    else None: the rule in the module docstring. `log`: the proxy's request log entries."""
    if report_ok or not log:
        return None
    last = max(log, key=lambda entry: entry.get("started_at") or 0.0)
    category = last.get("category")
    if category not in CATEGORIES:
        return None
    failed = sum(1 for entry in log if entry.get("category"))
    status = f"HTTP {last['status']}" if last.get("status") is not None else "no answer"
    return category, (f"the agent wrote no usable report and its last LLM request failed ({status}: "
                      f"{last.get('error') or '?'}; {failed} of {len(log)} requests failed)")


def _last_error(meter: dict) -> str | None:
    error = meter.get("last_error")
    if not error:
        return None
    status = f"HTTP {error['status']}" if error.get("status") is not None else "no answer"
    return f"{error['category']}: {status}: {error.get('message') or '?'}"[:500]


class TrialLlm:
    """The LLM side of one attempt (module docstring). For an agent without `uses_llm` every
    method is a no-op and every LLM column stays null, except for an agent known to call no
    model (`Agent.calls_no_model`): its requests, tokens and cost are 0 (`cost_source` no_model)."""

    def __init__(self, agent: Agent, spec: TrialSpec, proxy: ProxyClient | None, provider: str) -> None:
        self.used = agent.uses_llm
        self.no_model = agent.calls_no_model and not agent.uses_llm
        self.spec, self.agent_spec = spec, spec.agent_spec
        self._proxy, self._provider = proxy, provider
        self._own: LocalProxy | None = None
        self.key = f"{spec.sweep_id}/{spec.trial_id}/{spec.attempt}"  # unique per attempt in the proxy
        self.access: LlmAccess | None = None
        self.meter: dict | None = None
        self.log: list[dict] | None = None

    def open(self) -> TrialLlm:
        """Registers the attempt with the proxy (LLM agents only). Raises InfraError."""
        if not self.used:
            return self
        spec = self.agent_spec
        if self._proxy is None:
            from reb_ray.trial.egress import proxy_ports, sandbox_network

            network = sandbox_network(self.spec.config)
            self._own = LocalProxy(proxy_host(self._provider, network), proxy_ports(network))
            self._proxy = self._own
        limits = TrialLimits(max_cost_usd=spec.max_cost_usd, max_concurrency=spec.max_concurrent)
        key, url = self._proxy.register(self.key, upstream_of(spec), spec.key_env, limits, spec.model)
        self.access = LlmAccess(base_url=url, api_key=key, model=spec.model, max_turns=spec.max_turns)
        return self

    def watch_auth(self, stop: Callable[[], object], interval_s: float = AUTH_POLL_S) -> AuthWatch:
        """An AuthWatch of this attempt's key (a no-op for an agent without an LLM)."""
        if not self.used or self.access is None or self._proxy is None:
            return AuthWatch(None, stop)
        proxy, key = self._proxy, self.key
        return AuthWatch(lambda: proxy.meter(key).get("auth_failure"), stop, interval_s)

    def sandbox_credentials(self) -> dict[str, str]:
        """The spec's credentials that may enter the sandbox: all of them for an agent without
        an LLM; for an LLM agent all but its LLM key (by name and by value)."""
        creds = dict(self.spec.credentials)
        if not self.used:
            return creds
        real = creds.get(self.agent_spec.key_env or "")
        return {k: v for k, v in creds.items() if k != self.agent_spec.key_env and v != real}

    def finish(self, run: AgentRun | None, artifacts: TrialArtifacts | None) -> dict:
        """Reads the meter and the request log, unregisters, stores the trajectory; returns the
        trials row's LLM, agent-reported and trajectory columns. Raises InfraError when the
        proxy cannot give the meter (an LLM attempt without one is not comparable: retried)."""
        columns: dict = {"trajectory_path": self._store_transcript(run, artifacts)}
        reported = (run.reported_usage if run is not None else None) or {}
        columns.update(agent_reported_input_tokens=reported.get("input_tokens"),
                       agent_reported_output_tokens=reported.get("output_tokens"),
                       agent_reported_cost_usd=reported.get("cost_usd"))
        if self.no_model:  # a built-in baseline: it spent nothing, and that is known
            columns.update(llm_requests=0, **dict.fromkeys(FIELDS, 0), cost_usd=0.0, cost_source="no_model")
        if not self.used or self.access is None or self._proxy is None:
            return columns
        proxy, self.access = self._proxy, None
        self.meter, self.log = proxy.finish(self.key)
        meter = self.meter
        limit = meter.get("max_cost_usd")
        if run is not None and run.limit is None and meter.get("cost_limit_reached") and meter.get("budget_refusals"):
            run.limit = f"max_cost_usd={limit:g}"  # the proxy refused further requests: the agent's own limit
        columns.update(self._meter_columns(meter, reported.get("cost_usd")))
        columns["llm_log_path"] = self._store_log(artifacts)
        return columns

    def _meter_columns(self, meter: dict, reported_cost: float | None) -> dict:
        models = Counter(meter.get("models") or {})
        model = models.most_common(1)[0][0] if models else None
        cost, source = meter.get("cost_usd"), meter.get("cost_source")
        tokens = {f: meter.get(f) for f in FIELDS}
        sent = [entry for entry in self.log or [] if not entry.get("refused")]
        if sent and all(v is None for v in tokens.values()):
            if all((entry.get("status") or 0) >= 400 for entry in sent):
                tokens = dict.fromkeys(FIELDS, 0)  # only error answers (429, 5xx, 402): nothing generated or billed
            else:
                cost = None  # a request unanswered or cut off may have been billed: unknown, not 0
        if cost is None and reported_cost is not None:
            from reb_ray.llm.prices import price_table

            prices = price_table(str(self.spec.config.llm.prices_file) if self.spec.config.llm.prices_file else None)
            if prices.lookup(model or self.agent_spec.model) is not None:
                cost, source = float(reported_cost), "agent_reported"
        failures = meter.get("failures") or {}
        # The failure columns say how the attempt's LLM use ended: filled only when its last
        # request (the latest started) failed. A 429 the CLI retried past stays in the counts
        # and the request log, not in llm_failure_category / llm_last_error.
        latest = max(self.log, key=lambda e: e.get("started_at") or 0.0) if self.log else None
        last = (meter.get("last_error") or {}) if latest is not None and latest.get("category") else {}
        return {
            "llm_requests": meter.get("requests"), **tokens,
            "cost_usd": cost, "cost_source": source if cost is not None else "unknown",
            "price_version": meter.get("price_version"), "llm_model": model,
            "llm_rate_limited": failures.get(RATE_LIMIT), "llm_unavailable": failures.get(UNAVAILABLE),
            "llm_auth_failures": failures.get(AUTH), "llm_budget_failures": failures.get(BUDGET),
            "llm_in_flight": meter.get("in_flight"), "llm_failure_category": last.get("category"),
            "llm_last_error": _last_error(meter) if last else None, "llm_retry_after_s": last.get("retry_after_s"),
        }

    def _store_transcript(self, run: AgentRun | None, artifacts: TrialArtifacts | None) -> str | None:
        data = run.transcript if run is not None else None
        if data is None or artifacts is None:
            return None
        if len(data) > TRANSCRIPT_MAX_BYTES:
            cut = len(data) - TRANSCRIPT_MAX_BYTES
            data = data[:TRANSCRIPT_MAX_BYTES] + (
                f'\n{{"type": "reb_ray.cut", "dropped_bytes": {cut}, "limit_bytes": {TRANSCRIPT_MAX_BYTES}}}\n').encode()
        return artifacts.write(TRAJECTORY, data)

    def _store_log(self, artifacts: TrialArtifacts | None) -> str | None:
        if artifacts is None or self.meter is None:
            return None
        lines = [json.dumps({"type": "meter", **self.meter}, default=str)]
        lines += [json.dumps({"type": "request", **entry}, default=str) for entry in self.log or []]
        return artifacts.write(REQUEST_LOG, ("\n".join(lines) + "\n").encode())

    def judge(self, report: Report | None) -> None:
        """Raises InfraError (an `infra_llm_*` category) when the agent failed because of its
        LLM endpoint (`llm_verdict`); nothing for an agent without an LLM."""
        if not self.used or self.log is None:
            return
        verdict = llm_verdict(self.log, report is not None)
        if verdict is not None:
            raise InfraError(*verdict)

    def close(self, artifacts: TrialArtifacts | None = None) -> dict:
        """Unregisters an attempt that never reached `finish` (an error path), returning what its
        meter says as row columns ({} otherwise), and stops a private proxy. Never raises."""
        columns: dict = {}
        try:
            if self.access is not None:
                columns = self.finish(None, artifacts)
        except RebRayError:
            pass
        finally:
            if self._own is not None:
                self._own.close()
                self._own = None
        return {k: v for k, v in columns.items() if v is not None}
