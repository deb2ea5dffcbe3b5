"""Small real agents for tests: each does one scripted thing inside the sandbox."""

from __future__ import annotations

import time

from reb_ray.agents.base import Agent, AgentContext, AgentRun


class _Scripted(Agent):
    script = "true"

    def run(self, sandbox, ctx: AgentContext) -> AgentRun:
        started = time.monotonic()
        result = sandbox.exec(["sh", "-c", self.script, "agent", ctx.report_path], timeout=ctx.timeout_s, env=ctx.env)
        return AgentRun.from_exec(result, ctx.timeout_s, started)


class CrashAgent(_Scripted):
    """Dies with a Python traceback before writing anything."""

    script = "python3 -c 'raise SystemExit(\"agent crashed: out of ideas\")'"


class SilentAgent(_Scripted):
    """Exits 0 but never writes the report."""

    script = "echo 'I am done'"


class GarbageReportAgent(_Scripted):
    """Writes a report that is not valid JSON."""

    script = 'mkdir -p "$(dirname "$1")" && echo "{python_path: nope" > "$1"'


class SleepyAgent(_Scripted):
    """Sleeps for five minutes: a trial that is surely running when the driver is killed."""

    script = "sleep 300"


class KillInitAgent(_Scripted):
    """Writes a plausible report, then stops the container's init (field case F15a)."""

    script = ('mkdir -p "$(dirname "$1")" && printf \'{"python_path": "/usr/bin/python3", "python_version": null, '
              '"torch_version": null, "cuda_available": null, "gpu_count": null, "ddp_expected_ok": null, '
              '"env_tool": "system", "env_name": null, "notes": null}\' > "$1" && kill -TERM 1; sleep 5')


class SpyAgent(_Scripted):
    """Looks for anything of the harness it should not see, echoes its own credential, and
    writes that credential into its report and the repository (hidden probes, redaction)."""

    credential_env = ("REB_TEST_AGENT_KEY",)
    script = r"""
echo "spy: my key is $REB_TEST_AGENT_KEY"
echo "spy: harness secret is [${REB_TEST_HOST_SECRET:-absent}]"
for p in /opt/reb-ray-toolbox /dev/shm/reb-ray-toolbox-pyright; do [ -e "$p" ] && echo "spy: FOUND $p"; done
find / -xdev \( -name task.toml -o -name 'c0_probe.py' -o -name 'c2_probe.py' -o -name 'facts_probe.py' -o -name 'tiny_config.py' -o -name 'task-helpers' -o -name 'pyright*' \) \
  -not -path '/proc/*' 2>/dev/null | sed 's/^/spy: FOUND /'
grep -rIl --exclude-dir=proc --exclude-dir=sys -e 'log_pattern' -e 'skip_reason' /work /opt /root /tmp /etc /srv /home 2>/dev/null | sed 's/^/spy: FOUND /'
echo "spy: done"
mkdir -p "$(dirname "$1")"
printf '{"python_path": "/usr/bin/python3", "python_version": null, "torch_version": null, "cuda_available": null, "gpu_count": null, "ddp_expected_ok": null, "env_tool": "system", "env_name": null, "notes": "key=%s"}' "$REB_TEST_AGENT_KEY" > "$1"
echo "$REB_TEST_AGENT_KEY" >> /work/repo/train.py
"""


class FlakyInfraAgent(_Scripted):
    """The node fails it once (an infrastructure error), then it behaves like noop.

    The flag file lives on the host, named by FLAKY_FLAG in the driver's environment.
    """

    credential_env = ("FLAKY_FLAG",)

    def run(self, sandbox, ctx: AgentContext) -> AgentRun:
        import os

        from reb_ray.agents.noop import NoopAgent
        from reb_ray.errors import InfraError

        flag = ctx.env["FLAKY_FLAG"]
        if not os.path.exists(flag):
            open(flag, "w").close()
            raise InfraError("infra_daemon", "simulated daemon hiccup")
        return NoopAgent().run(sandbox, ctx)


class CacheHogAgent(_Scripted):
    """Fills ~/.cache/pip with 200 MB, then reports the image's interpreter (field case F13)."""

    script = ('mkdir -p /root/.cache/pip && head -c 200000000 /dev/zero > /root/.cache/pip/blob && mkdir -p "$(dirname "$1")" && '
              'printf \'{"python_path": "/usr/bin/python3", "python_version": null, "torch_version": null, "cuda_available": null, '
              '"gpu_count": null, "ddp_expected_ok": null, "env_tool": "system", "env_name": null, "notes": null}\' > "$1"')


class GhostInterpreterAgent(_Scripted):
    """Reports an interpreter that does not exist, claiming CUDA, two GPUs and working DDP."""

    script = ('mkdir -p "$(dirname "$1")" && printf \'{"python_path": "/opt/venvs/gone/bin/python", "python_version": "3.10.14", '
              '"torch_version": "2.5.1", "cuda_available": true, "gpu_count": 2, "ddp_expected_ok": true, '
              '"env_tool": "venv", "env_name": "gone", "notes": null}\' > "$1"')


class LeaveBehindAgent(_Scripted):
    """Starts `sleep 1000` in the background and exits 0 without a report (issue 9 item 10)."""

    # Waits until the child has become `sleep` (under load the forked shell may not have exec'd yet).
    script = "sleep 1000 & until ps -eo args | grep -q '^sleep 1000$'; do sleep 0.05; done; echo started"


class LeaveManyBehindAgent(_Scripted):
    """Leaves 25 sleeping processes running, each with a 300-character command line (one
    process each, so the order the cleanup lists them in cannot change what it records)."""

    script = ("pad=$(printf 'x%.0s' $(seq 300)); i=0; "
              "while [ $i -lt 25 ]; do python3 -c 'import time; time.sleep(1000)' \"$pad\" & i=$((i+1)); done; "
              "until [ \"$(ps -eo args | grep -c '^python3 -c import time; time.sleep(1000) x')\" -ge 25 ]; do sleep 0.1; done")


class SleepOnceAgent(_Scripted):
    """Sleeps for five minutes in the sandbox the first time (the test kills its trial actor
    meanwhile), and behaves like noop on the retry. The flag file lives on the host, named by
    SLEEP_ONCE_FLAG in the driver's environment."""

    credential_env = ("SLEEP_ONCE_FLAG",)

    def run(self, sandbox, ctx: AgentContext) -> AgentRun:
        import os

        from reb_ray.agents.noop import NoopAgent

        flag = ctx.env["SLEEP_ONCE_FLAG"]
        if not os.path.exists(flag):
            open(flag, "w").close()
            started = time.monotonic()
            return AgentRun.from_exec(sandbox.exec(["sleep", "300"], timeout=ctx.timeout_s), ctx.timeout_s, started)
        return NoopAgent().run(sandbox, ctx)


class ChattyAgent(_Scripted):
    """Prints 300 KiB and its own credential in two execs, then writes a plain report (full-log artifacts)."""

    trusted = True
    credential_env = ("REB_TEST_AGENT_KEY",)
    script = ('echo "chatty: key $REB_TEST_AGENT_KEY"; yes "chatty: installing numpy from source ..." | head -c 307200; '
              'echo; echo "chatty: done"; mkdir -p "$(dirname "$1")" && printf \'{"python_path": "/usr/bin/python3", '
              '"python_version": null, "torch_version": null, "cuda_available": null, "gpu_count": null, '
              '"ddp_expected_ok": null, "env_tool": "system", "env_name": null, "notes": null}\' > "$1"')

    def run(self, sandbox, ctx: AgentContext) -> AgentRun:
        sandbox.exec(["echo", "chatty: first step"], env=ctx.env)
        return super().run(sandbox, ctx)


# The in-sandbox client of the LLM test agents: the image's python3 and urllib, a tool loop of at
# most 5 requests against ctx.llm (Anthropic Messages or OpenAI Chat Completions, not streamed),
# each tool call run with sh. It writes its transcript (reb-ray's generic JSON Lines shape:
# {"type": "command", "command", "exit_code", "output"} ...) and its own usage sums, and the
# report only when the model ended with a message; an HTTP error ends it (exit 3) after
# REB_LLM_RETRIES retries REB_LLM_RETRY_S seconds apart (none by default).
LLM_CLIENT = r'''
import json, os, subprocess, sys, time, urllib.error, urllib.request
api, report, out_dir = sys.argv[1:4]
retries, retry_s = int(os.environ.get("REB_LLM_RETRIES", "0")), float(os.environ.get("REB_LLM_RETRY_S", "0"))
base, key, model = os.environ["REB_LLM_BASE"], os.environ["REB_LLM_KEY"], os.environ.get("REB_LLM_MODEL", "")
os.makedirs(out_dir, exist_ok=True)
transcript = open(os.path.join(out_dir, "transcript.jsonl"), "w")
usage = {"input_tokens": 0, "cached_input_tokens": 0, "cache_write_tokens": 0, "output_tokens": 0, "reasoning_tokens": 0}
def log(event):
    transcript.write(json.dumps(event) + "\n"); transcript.flush()
def done(code):
    json.dump(usage if api == "anthropic" else {**usage, "cache_write_tokens": None},
              open(os.path.join(out_dir, "usage.json"), "w"))
    sys.exit(code)
if api == "anthropic":
    path, headers = "/v1/messages", {"x-api-key": key, "anthropic-version": "2023-06-01"}
    tools = [{"name": "Bash", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}]
else:
    path, headers = "/v1/chat/completions", {"Authorization": "Bearer " + key}
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object",
             "properties": {"command": {"type": "string"}}, "required": ["command"]}}}]
messages = [{"role": "user", "content": "Build the environment."}]
for turn in range(5):
    body = {"model": model, "messages": messages, "tools": tools, **({"max_tokens": 1000} if api == "anthropic" else {})}
    request = urllib.request.Request(base + path, data=json.dumps(body).encode(),
                                     headers={**headers, "Content-Type": "application/json"})
    log({"type": "request", "turn": turn, "path": path})
    for attempt in range(retries + 1):
        try:
            with urllib.request.urlopen(request, timeout=600) as response:
                answer = json.loads(response.read())
            break
        except urllib.error.HTTPError as exc:
            log({"type": "error", "status": exc.code, "body": exc.read().decode(errors="replace")[:300]})
            print("llm error", exc.code, flush=True)
            if attempt == retries:
                done(3)
            time.sleep(retry_s)
    if api == "anthropic":
        u = answer["usage"]
        read, written = u.get("cache_read_input_tokens") or 0, u.get("cache_creation_input_tokens") or 0
        usage["input_tokens"] += u["input_tokens"] + read + written
        usage["cached_input_tokens"] += read
        usage["cache_write_tokens"] += written
        usage["output_tokens"] += u["output_tokens"]
        call = next((b for b in answer["content"] if b["type"] == "tool_use"), None)
        command = call["input"]["command"] if call else None
    else:
        u = answer["usage"]
        usage["input_tokens"] += u["prompt_tokens"]
        usage["cached_input_tokens"] += (u.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
        usage["output_tokens"] += u["completion_tokens"]
        usage["reasoning_tokens"] += (u.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0
        message = answer["choices"][0]["message"]
        call = (message.get("tool_calls") or [None])[0]
        command = json.loads(call["function"]["arguments"])["command"] if call else None
    log({"type": "response", "turn": turn, "tool_call": command is not None})
    if command is None:
        break
    proc = subprocess.run(["sh", "-c", command], capture_output=True, text=True)
    output = (proc.stdout + proc.stderr)[-2000:]
    log({"type": "command", "command": command, "exit_code": proc.returncode, "output": output})
    if api == "anthropic":
        messages += [{"role": "assistant", "content": answer["content"]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": output}]}]
    else:
        messages += [message, {"role": "tool", "tool_call_id": call["id"], "content": output}]
else:
    done(4)  # out of turns
os.makedirs(os.path.dirname(report), exist_ok=True)
json.dump({"python_path": "/usr/bin/python3", "python_version": None, "torch_version": None, "cuda_available": None,
           "gpu_count": None, "ddp_expected_ok": None, "env_tool": "system", "env_name": None, "notes": "scripted"},
          open(report, "w"))
print("llm agent: report written", flush=True)
done(0)
'''


class LlmScriptAgent(Agent):
    """A small real LLM agent (`uses_llm`): runs LLM_CLIENT with the image's python3 inside the
    sandbox against ctx.llm (Anthropic Messages), and returns its transcript and usage sums as
    the CLI runners do (AgentRun.transcript, reported_usage)."""

    uses_llm = True
    api = "anthropic"
    out_dir = "/tmp/llm-agent"
    retries, retry_s = 0, 0.0  # of a request the endpoint answered with an HTTP error

    def run(self, sandbox, ctx: AgentContext) -> AgentRun:
        import json

        assert ctx.llm is not None, "the trial passes ctx.llm to an agent with uses_llm"
        started = time.monotonic()
        env = {**ctx.env, "REB_LLM_BASE": ctx.llm.base_url, "REB_LLM_KEY": ctx.llm.api_key,
               "REB_LLM_MODEL": ctx.llm.model or "", "REB_LLM_RETRIES": str(self.retries),
               "REB_LLM_RETRY_S": str(self.retry_s)}
        result = sandbox.exec(["python3", "-c", LLM_CLIENT, self.api, ctx.report_path, self.out_dir],
                              timeout=ctx.timeout_s, env=env)
        self.after(sandbox, env)
        run = AgentRun.from_exec(result, ctx.timeout_s, started)
        try:
            run.transcript = sandbox.read_bytes(f"{self.out_dir}/transcript.jsonl")
            run.reported_usage = json.loads(sandbox.read_bytes(f"{self.out_dir}/usage.json"))
        except (FileNotFoundError, ValueError):
            pass  # killed by its time limit before it wrote them
        return run

    def after(self, sandbox, env: dict) -> None:
        """A hook run in the sandbox after the client (the spy looks around)."""


class LlmPersistentAgent(LlmScriptAgent):
    """LlmScriptAgent that retries a failed request 12 times, 15 s apart (about 3 minutes), as
    a CLI does with an error it takes for a passing one."""

    retries, retry_s = 12, 15.0


class LlmChatAgent(LlmScriptAgent):
    """LlmScriptAgent speaking OpenAI Chat Completions."""

    api = "openai_chat"


class LlmSpyAgent(LlmScriptAgent):
    """LlmScriptAgent that then prints its environment and searches the whole sandbox (files and
    every process's environment) for the test's real-key prefix `sk-REALKEY-`."""

    def after(self, sandbox, env: dict) -> None:
        # The pattern is written so that it does not match itself (a grep's own command line).
        sandbox.exec(["sh", "-c", "echo '--- spy env'; env; echo '--- spy search'; "
                      "grep -rIl -E 'sk-REAL[K]EY-' / --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev "
                      "2>/dev/null | sed 's/^/spy: FOUND /'; "
                      "cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -E 'sk-REAL[K]EY-' "
                      "| sed 's/^/spy: FOUND in environ /'; echo '--- spy done'"], timeout=120, env=env)


_SYSTEM_REPORT = ('mkdir -p "$(dirname "$1")" && printf \'{"python_path": "/usr/bin/python3", "python_version": null, '
                  '"torch_version": null, "cuda_available": null, "gpu_count": null, "ddp_expected_ok": null, '
                  '"env_tool": "system", "env_name": null, "notes": null}\' > "$1"')


class ForkBombAgent(_Scripted):
    """Writes a report, then forks forever (issue 11: stopped at the pids limit)."""

    script = (_SYSTEM_REPORT + "; python3 -c 'import os, time\nwhile True:\n    try:\n        os.fork()\n"
              "    except OSError:\n        time.sleep(0.01)\n'")


class PoisonCacheAgent(_Scripted):
    """Writes a fake numpy wheel into every pip cache and find-links directory it can reach (issue 11)."""

    script = ('printf "not a wheel" > /tmp/numpy-9.9.9-py3-none-any.whl; '
              'for d in $PIP_FIND_LINKS /root/.cache/pip ${PIP_CACHE_DIR:-}; do mkdir -p "$d" 2>/dev/null; '
              'cp /tmp/numpy-9.9.9-py3-none-any.whl "$d/" 2>/dev/null && echo "poisoned $d"; done; ' + _SYSTEM_REPORT)


class CacheSpyAgent(_Scripted):
    """Lists every wheel its pip could take from a cache or find-links directory."""

    script = ('for d in $PIP_FIND_LINKS /root/.cache/pip ${PIP_CACHE_DIR:-}; do find "$d" -name "*.whl" 2>/dev/null '
              '| sed "s/^/seen /"; done; echo spy-done; ' + _SYSTEM_REPORT)


class SymlinkReportAgent(_Scripted):
    """Makes the report a symlink out of the sandbox's files (to the process environment)."""

    script = 'mkdir -p "$(dirname "$1")" && ln -sf /proc/self/environ "$1"'


class FifoReportAgent(_Scripted):
    """Makes the report a FIFO nobody writes: a reader that opens it would block forever."""

    script = 'mkdir -p "$(dirname "$1")" && rm -f "$1" && mkfifo "$1"'


class DirectoryReportAgent(_Scripted):
    """Makes the report a directory holding a large file."""

    script = 'mkdir -p "$1" && head -c 5000000 /dev/zero > "$1/x"'


class SleepAgent(_Scripted):
    """Sleeps 8 s in the sandbox and writes nothing: a trial surely running while a test
    restarts the Docker daemon (F20), and short enough to run again. With SLEEP_AGENT_FLAGS (a
    host directory, named in the driver's environment) it sleeps in each task's first attempt
    only (a flag file per task marks it): the retry's subject is that it runs and is scored once
    the daemon answers, not another 8 s of sleep."""

    credential_env = ("SLEEP_AGENT_FLAGS",)
    script = "sleep 8"

    def run(self, sandbox, ctx: AgentContext) -> AgentRun:
        import os

        flags = ctx.env.get("SLEEP_AGENT_FLAGS")
        if flags and ctx.task is not None:
            flag = os.path.join(flags, ctx.task.id)
            if os.path.exists(flag):
                started = time.monotonic()
                return AgentRun.from_exec(sandbox.exec(["true"], timeout=ctx.timeout_s), ctx.timeout_s, started)
            open(flag, "w").close()
        return super().run(sandbox, ctx)


class DieOnceAgent(_Scripted):
    """Kills the Ray worker that runs it (SIGKILL) the first time, and behaves like noop on the
    retry. The flag file lives on the host, named by DIE_ONCE_FLAG in the driver's environment."""

    credential_env = ("DIE_ONCE_FLAG",)

    def run(self, sandbox, ctx: AgentContext) -> AgentRun:
        import os
        import signal

        from reb_ray.agents.noop import NoopAgent

        flag = ctx.env["DIE_ONCE_FLAG"]
        if not os.path.exists(flag):
            open(flag, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
        return NoopAgent().run(sandbox, ctx)


class PauseAgent(_Scripted):
    """Holds its trial in the agent phase, its sandbox up, until the host file named by
    PAUSE_RELEASE (in the driver's environment) exists, then writes a plausible report: a trial
    that is surely still running while another sweep starts and while a fault is injected beside
    it, for exactly as long as the test needs (an attempt that starts after the release, a retry,
    does not wait). The wait is on the host, polling the file (no exec per poll: four such
    trials at once would keep the daemon busy); it ends at the agent's timeout at the latest."""

    credential_env = ("PAUSE_RELEASE",)
    script = ('mkdir -p "$(dirname "$1")" && printf \'{"python_path": "/usr/bin/python3", '
              '"env_tool": "system"}\' > "$1"')

    def run(self, sandbox, ctx: AgentContext) -> AgentRun:
        import os

        started = time.monotonic()
        release = ctx.env["PAUSE_RELEASE"]
        while not os.path.exists(release):
            if time.monotonic() - started >= ctx.timeout_s:
                return AgentRun(exit_code=None, timed_out=True, wall_time_s=time.monotonic() - started, output="",
                                limit=f"agent_timeout_s={ctx.timeout_s:g}")
            time.sleep(0.2)
        result = sandbox.exec(["sh", "-c", self.script, "agent", ctx.report_path], timeout=ctx.timeout_s, env=ctx.env)
        return AgentRun.from_exec(result, ctx.timeout_s, started)
