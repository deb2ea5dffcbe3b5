"""`reb-ray llm serve|prices`: the scripted LLM endpoint in the foreground, and the price table."""

from __future__ import annotations

from pathlib import Path

import typer

app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="LLM plumbing: the scripted endpoint and the price table.")


@app.command("serve")
def serve(
    script: Path = typer.Option(..., "--script", help="Script file (TOML, or .json) of the turns to replay."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (0.0.0.0: every interface)."),
    port: int = typer.Option(8765, "--port", help="Port to listen on (0: any free port)."),
) -> None:
    """Serve a scripted LLM endpoint (Anthropic Messages, OpenAI Responses, Chat Completions)
    until interrupted; each API key replays the script from its start."""
    import asyncio

    from aiohttp import web

    from reb_ray.errors import RebRayError
    from reb_ray.llm.scripted import ScriptedEndpoint, load_script

    endpoint = ScriptedEndpoint(load_script(script), host, port)

    async def run() -> None:
        runner = web.AppRunner(endpoint.make_app(), handler_cancellation=True, access_log=None, shutdown_timeout=2.0)
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            raise RebRayError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
        bound = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        shown = f"[{host}]" if ":" in host else host
        typer.echo(f"scripted LLM endpoint on http://{shown}:{bound} ({len(endpoint.script.turns())} turns, "
                   f"model {endpoint.script.model}); Ctrl-C stops it")
        try:
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()

    try:
        asyncio.run(run())
    except KeyboardInterrupt:  # Ctrl-C is how this command ends: not an error
        typer.echo("scripted LLM endpoint stopped")


@app.command("prices")
def prices(
    file: Path | None = typer.Option(None, "--file", help="A user price file overriding the shipped table."),
) -> None:
    """Print the price table in use (USD per million tokens)."""
    from reb_ray.llm.prices import PriceTable

    table = PriceTable(file)
    typer.echo(f"price table {table.version} (USD per million tokens)")
    rows = [("model", "input", "cached_input", "cache_write", "output")]
    for name in table.models():
        p = table.lookup(name)
        assert p is not None
        rows.append((name, f"{p.input:g}", f"{p.cached_input:g}", "=input" if p.cache_write is None else f"{p.cache_write:g}",
                     f"{p.output:g}"))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    for row in rows:
        typer.echo("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
