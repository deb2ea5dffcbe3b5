"""Runs one NexAU agent headless and records what it did (copied into the sandbox by reb-ray).

Usage: <nexau venv>/bin/python driver.py CONFIG.yaml PROMPT_FILE EVENTS.jsonl

What `nexau chat CONFIG --query PROMPT` does (AgentConfig.from_yaml, Agent(...).run(...),
the response printed), plus a recorder middleware, NexAU's own extension point, that appends
one JSON line per event to EVENTS as it happens (flushed, so a killed run keeps what it did):
`start` (nexau's version), `model_call` (the model's text, its tool calls, NexAU's TokenUsage
of the call), `tool` (name, input, output), `end` (NexAU's stop reason, the response) or
`error`. Runs under NexAU's own interpreter: imports nothing of reb-ray.
"""

import importlib.metadata
import json
import sys
from pathlib import Path

OUTPUT_CHARS = 20000  # of one tool output in the events file


def _text(value) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= OUTPUT_CHARS else text[:OUTPUT_CHARS] + f"... [{len(text) - OUTPUT_CHARS} chars cut]"


def main(config_path: str, prompt_file: str, events_path: str) -> int:
    from nexau import Agent
    from nexau.archs.main_sub.config.config import AgentConfig
    from nexau.archs.main_sub.execution.hooks import HookResult, Middleware

    events = open(events_path, "a", buffering=1)

    def emit(record: dict) -> None:
        events.write(json.dumps(record, default=str) + "\n")
        events.flush()

    class Recorder(Middleware):
        def after_model(self, hook_input):
            response = hook_input.model_response
            emit({"type": "model_call", "iteration": hook_input.current_iteration,
                  "text": response.content if response else hook_input.original_response,
                  "tool_calls": [{"name": c.name, "arguments": c.arguments} for c in (response.tool_calls if response else [])],
                  "usage": response.usage.to_dict() if response else None})
            return HookResult.no_changes()

        def after_tool(self, hook_input):
            emit({"type": "tool", "name": hook_input.tool_name, "input": hook_input.tool_input,
                  "output": _text(hook_input.tool_output)})
            return HookResult.no_changes()

        def after_agent(self, hook_input):
            reason = hook_input.stop_reason
            emit({"type": "end", "stop_reason": reason.name if reason is not None else None,
                  "response": hook_input.agent_response})
            return HookResult.no_changes()

    emit({"type": "start", "nexau_version": importlib.metadata.version("nexau"), "python": sys.version.split()[0]})
    try:
        config = AgentConfig.from_yaml(Path(config_path))
        config.middlewares = [*(config.middlewares or []), Recorder()]
        agent = Agent(config=config)
        response = agent.run(message=Path(prompt_file).read_text(),
                             context={"working_directory": config.sandbox_config.work_dir if config.sandbox_config else "."})
    except Exception as exc:  # the run failed: say how, exit non-zero (the CLI's convention)
        emit({"type": "error", "error": f"{type(exc).__name__}: {exc}"})
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    print(response[0] if isinstance(response, tuple) else response)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
