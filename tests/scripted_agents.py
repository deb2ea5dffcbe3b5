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
