"""The metering proxy's cost: added latency per request, and streaming throughput.

A ScriptedEndpoint answers every request with the same message (TEXT_CHARS characters in
CHUNKS SSE deltas when streamed); clients are plain aiohttp. Prints, for JSON and streamed
answers, the median and p90 time per request direct and through the proxy (measured
alternately in one run) and their difference, then requests/s and MB/s with CLIENTS
concurrent streaming clients for SECONDS, direct and through the proxy. Endpoint, proxy and
clients are three processes (no shared GIL) on this machine's cores, so the proxy's numbers
include competing with the other two for them.
Usage: python benchmarks/llm_proxy.py [N=300] [CLIENTS=16] [SECONDS=5]
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

from reb_ray.llm.proxy import ProxyServer

TEXT_CHARS, CHUNKS = 2000, 50


def body(stream: bool) -> bytes:
    return json.dumps({"model": "claude-sonnet-4-5", "stream": stream, "max_tokens": 100,
                       "messages": [{"role": "user", "content": "hi"}]}).encode()


async def one(session: aiohttp.ClientSession, url: str, key: str, data: bytes) -> tuple[float, int]:
    start = time.perf_counter()
    async with session.post(url + "/v1/messages", data=data, headers={"x-api-key": key,
                                                                     "content-type": "application/json"}) as r:
        payload = await r.read()
        assert r.status == 200, payload[:200]
    return time.perf_counter() - start, len(payload)


async def latency(direct: str, proxied: str, key: str, n: int, stream: bool) -> tuple[list[float], list[float]]:
    ours, bare = [], []
    data = body(stream)
    async with aiohttp.ClientSession() as session:
        for _ in range(10):  # warm both paths (connections, caches)
            await one(session, direct, "direct", data)
            await one(session, proxied, key, data)
        for _ in range(n):
            bare.append((await one(session, direct, "direct", data))[0])
            ours.append((await one(session, proxied, key, data))[0])
    return bare, ours


async def throughput(url: str, keys: list[str], seconds: float) -> tuple[float, float]:
    data, count, volume = body(True), 0, 0
    deadline = time.perf_counter() + seconds

    async def client(key: str) -> None:
        nonlocal count, volume
        async with aiohttp.ClientSession() as session:
            while time.perf_counter() < deadline:
                _, size = await one(session, url, key, data)
                count, volume = count + 1, volume + size

    start = time.perf_counter()
    await asyncio.gather(*(client(k) for k in keys))
    elapsed = time.perf_counter() - start
    return count / elapsed, volume / elapsed / 1e6


def ms(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] * 1000 if q != 50 else statistics.median(values) * 1000


SCRIPT = f"""model = "claude-sonnet-4-5"
stream_chunks = {CHUNKS}
[[turns]]
kind = "message"
text = "{'x' * TEXT_CHARS}"
repeat = 10000000
usage = {{ input_tokens = 1000, cached_input_tokens = 800, output_tokens = 500 }}
"""


def serve_proxy(upstream: str, trials: int, out: multiprocessing.Queue, stop) -> None:
    """The proxy in its own process: registers `trials` trials, reports (url, keys), serves."""
    with ProxyServer() as proxy:
        keys = [proxy.register_trial(f"t{i}", upstream, None, model="claude-sonnet-4-5") for i in range(trials)]
        out.put((proxy.url, keys))
        stop.wait()
        out.put([proxy.meter(f"t{i}") for i in range(trials)])


def main(n: int = 300, clients: int = 16, seconds: float = 5.0) -> None:
    print(f"cpus: {os.cpu_count()}  answer: {TEXT_CHARS} chars, {CHUNKS} deltas when streamed")
    script = Path(tempfile.mkdtemp()) / "bench.toml"
    script.write_text(SCRIPT)
    endpoint = subprocess.Popen([sys.executable, "-c", "from reb_ray.cli import main; main()", "llm", "serve",
                                 "--script", str(script), "--port", "0"], stdout=subprocess.PIPE, text=True)
    context = multiprocessing.get_context("spawn")
    results, stop = context.Queue(), context.Event()
    try:
        upstream = re.search(r"on (http://\S+) ", endpoint.stdout.readline())[1]  # type: ignore[index]
        proxy = context.Process(target=serve_proxy, args=(upstream, clients + 1, results, stop))
        proxy.start()
        url, keys = results.get(timeout=60)
        for stream in (False, True):
            bare, ours = asyncio.run(latency(upstream, url, keys[-1], n, stream))
            kind = "stream" if stream else "json  "
            print(f"{kind} per request (ms, n={n}): direct median {ms(bare, 50):.2f} p90 {ms(bare, 90):.2f} | "
                  f"proxy median {ms(ours, 50):.2f} p90 {ms(ours, 90):.2f} | added median {ms(ours, 50) - ms(bare, 50):.2f}")
        direct_rps, direct_mbs = asyncio.run(throughput(upstream, [f"d{i}" for i in range(clients)], seconds))
        proxy_rps, proxy_mbs = asyncio.run(throughput(url, keys[:clients], seconds))
        stop.set()
        meters = results.get(timeout=60)[:clients]
        proxy.join(30)
        metered = sum(m["requests"] for m in meters)
        tokens = sum(m["output_tokens"] or 0 for m in meters)
        print(f"streaming throughput, {clients} clients, {seconds:g} s: direct {direct_rps:.0f} req/s "
              f"({direct_mbs:.1f} MB/s) | proxy {proxy_rps:.0f} req/s ({proxy_mbs:.1f} MB/s); "
              f"{metered} requests metered, {tokens} output tokens counted (= {metered} x 500: {tokens == metered * 500})")
    finally:
        endpoint.terminate()
        endpoint.wait(30)


if __name__ == "__main__":
    main(*(int(a) if i < 2 else float(a) for i, a in enumerate(sys.argv[1:])))
