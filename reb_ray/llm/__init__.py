"""LLM plumbing shared by every LLM agent: the metering proxy, cost, and the scripted endpoint.

- `proxy.ProxyServer`: the per-node proxy (stand-in keys, unchanged relay, per-trial meters).
- `usage.Usage`: token counts in one convention for Anthropic Messages, OpenAI Responses and
  Chat Completions.
- `prices.cost_usd` and the shipped `prices.toml`: USD from tokens; unknown stays None.
- `failures`: the `infra_llm_*` categories of LLM-side failures.
- `scripted`: a real HTTP server replaying scripted turns, the model stand-in for tests.
"""
