"""The life of one trial attempt (docs/architecture.md, "The life of a trial"), with no Ray in sight.

`run_trial(spec, gpus)` runs the attempt's phases in order, each in a module of its own:
`prepare` (the node checked, the repository placed, the sandbox opened on reb-ray's network
for the sweep's policy with the repository in it, an LLM agent registered with the node's
metering proxy: a `Prepared`), the agent phase (`run_agent_phase`: the agent under its
watches, its meter read), the steps between the phases (`run_between_phases`: leftovers
stopped, the report read, the agent's changes to tracked files recorded and undone), the
environment phase (`EnvironmentPhase`: what the agent built captured), the probe phase
(`run_probe_phase`: the hidden probes), and `Prepared.close` on every path. Each phase sets
its part of the attempt's `AttemptResult` (reb_ray.trial.result); the recorder flattens it
(`flatten`) into one `trials` row plus its `stages` rows with the agent's credentials masked. In a sweep that
shares GPUs in the agent phase (a `gpu_lease` is given), the agent sees GPUs it does not hold
and the probe phase runs in sandboxes of its own, with GPUs it leases exclusively
(`PhaseSplit`). It always returns: infrastructure failures become an `infra_error` row
(retried by the orchestrator; an agent that failed because of its LLM endpoint is one,
`TrialLlm.judge`), agent failures a `scored` row. The sandbox and the host workspace are
removed on every path.
"""

from __future__ import annotations

import time

import requests

from reb_ray.environment.fingerprint import fingerprint  # environment artifacts
from reb_ray.environment.phase import EnvironmentPhase  # environment artifacts
from reb_ray.errors import InfraError, RebRayError
from reb_ray.grading.unmeasured import PROBE_STAGES, agent_failed
from reb_ray.models.report import Report
from reb_ray.models.sweep import TrialSpec
from reb_ray.redact import Redactor
from reb_ray.sandbox import Sandbox, SandboxConfig
from reb_ray.sandbox import package_cache
from reb_ray.sandbox.scratch import make_scratch
from reb_ray.trial import artifacts, atif_file
from reb_ray.trial.agent_phase import run_agent_phase
from reb_ray.trial.artifacts import TrialArtifacts
from reb_ray.trial.between_phases import run_between_phases
from reb_ray.trial.egress import harness_network
from reb_ray.trial.gpu_lease import GpuLease
from reb_ray.trial.llm import ProxyClient
from reb_ray.trial.phase_split import PhaseSplit
from reb_ray.trial.prepare import Prepared, prepare
from reb_ray.trial.probe_phase import record_startup, run_probe_phase
from reb_ray.trial.process_audit import after_probes, before_probes
from reb_ray.trial.repo_outside import RepoOutside, charge_stages
from reb_ray.trial.record import TrialOutcome, TrialRecorder

__all__ = ["TrialOutcome", "run_trial"]


def run_trial(spec: TrialSpec, gpus: list[str] | None = None, no_gpus_reason: str | None = None,
              llm_proxy: ProxyClient | None = None, ship_artifacts: bool = False,
              gpu_lease: GpuLease | None = None) -> TrialOutcome:
    """Run one attempt. `gpus` are the physical GPU ids assigned to it (may be empty).

    `no_gpus_reason` says why this node cannot give the sandbox GPUs (its Docker lacks the
    NVIDIA runtime: `docker_gpu_problems`); then the sandbox gets none, the CPU stages
    run, and the GPU stages are `insufficient_hardware` with that reason (never retried).
    `llm_proxy` is the node's metering proxy for an LLM agent (the orchestrator's); None starts
    a private one in this process, which reads the real key from this process's environment.
    The attempt's logs are staged on this node; `ship_artifacts` returns them in the outcome for
    the driver to store (a cluster without a shared filesystem), else they are moved into the
    sweep's output directory here (`artifacts.deliver`).
    `gpu_lease` (a GPU-sharing sweep's GPU trial; then `gpus` is empty): the agent sandbox gets
    its `agent_gpus`, held by nobody, and the probe phase the GPUs it leases exclusively.
    """
    gpus = [] if no_gpus_reason else (gpus or [])
    rec = TrialRecorder(spec)
    split = PhaseSplit(rec, gpu_lease, spec.task) if gpu_lease is not None and not no_gpus_reason else None
    redactor = Redactor(spec.credentials.values())
    staging = make_scratch("reb-ray-artifacts-")  # named for its owner: reaped if this process dies
    rec.artifacts = TrialArtifacts(staging, spec.sweep_id, spec.trial_id, spec.attempt, redactor)
    t0 = time.monotonic()
    p = Prepared.begin(spec, split)  # nothing opened yet: each part is added as it opens
    rec.result.hardware.set(**fingerprint(spec.config.sandbox.provider))  # environment artifacts: the node's hardware
    env_phase = EnvironmentPhase(rec, spec, redactor.secrets)  # environment artifacts
    try:
        prepare(p, rec, gpus, llm_proxy)
        assert p.sandbox is not None and p.agent is not None and p.ctx is not None and p.llm is not None
        agent = run_agent_phase(rec, p.sandbox, p.agent, p.ctx, p.llm)
        if agent.refused_key:  # the endpoint refused the key: the agent phase was ended at once, never retried
            raise InfraError("infra_llm_auth", f"the LLM endpoint refused the trial's key ({agent.refused_key}); "
                                               "the agent phase was ended")
        between = run_between_phases(rec, p.sandbox, p.report_path, p.repo_dir, p.baseline,
                                     p.placed.path if p.placed else None)
        p.llm.judge(between.report)  # failed because of its LLM endpoint (429, 5xx, auth, budget): infra, not the agent's
        p.slot.detach()  # gone before any probe runs: not on their PATH, not in the env size
        env_phase.run(p.sandbox, p.repo_dir, between.report)  # environment artifacts: manifest, then the container committed
        _probe(rec, p, between.report, gpus, agent.ended_by, between.repo_outside)
        if no_gpus_reason:
            rec.explain_hardware(no_gpus_reason)
        rec.settle()
    except InfraError as exc:
        rec.infra(exc.category, str(exc))
    except RebRayError as exc:
        rec.infra("infra_sandbox", str(exc))
    except requests.exceptions.ConnectionError as exc:  # the Docker daemon went away mid-attempt (a restart): infra, retried
        rec.infra("infra_daemon", f"Docker daemon connection lost: {exc}")
    except Exception as exc:  # a harness bug must not be scored against the agent
        rec.infra("infra_harness", f"{type(exc).__name__}: {exc}")
    finally:
        env_phase.settle()  # environment artifacts: keep the committed image or remove it
        p.close(rec)  # every part opened, in order, whichever phase failed
        rec.result.agent.set(**atif_file.write(rec, rec.agent_commands, redactor))  # trajectory.json (ATIF)
    rec.result.identity.trial_wall_time_s = time.monotonic() - t0
    outcome = rec.outcome(redactor)
    artifacts.deliver(outcome, staging, spec.config.output.dir.resolve(), ship_artifacts)
    return outcome


def _probe(rec: TrialRecorder, p: Prepared, report: Report | None, gpus: list[str],
           ended_by: tuple[str, str] | None, repo: RepoOutside | None = None) -> None:
    """The probe phase as the trial runs it: nothing probed when a sandbox limit stopped the
    agent (`LimitWatch`); in a GPU-sharing sweep the agent's sandbox is committed, exclusive
    GPUs leased and the probe sandbox opened first; afterwards the node's package cache filled.
    Records `probe_wall_time_s`: from here, or in a GPU-sharing sweep from the probe sandbox's
    opening (the commit and the wait have columns of their own)."""
    spec, split = p.spec, p.split
    assert p.sandbox is not None and p.config is not None
    probe_t0 = time.monotonic()
    if ended_by:
        rec.apply(agent_failed(spec.task, PROBE_STAGES, *ended_by))
    else:
        if split:
            p.sandbox, gpus = split.probe_sandbox(p.sandbox)
            p.egress.attach(p.sandbox)
            probe_t0 = time.monotonic()
        # Seen from outside: no process of the agent alive as the probes begin (else none run),
        # what is alive after the last stage, and the tracked files the stages ran with.
        gate = before_probes(p.sandbox, rec.result.outside, spec.task)
        if gate:
            rec.apply(gate)
            record_startup(rec, None, report, "a process of the agent ran in the sandbox")
        else:
            run_probe_phase(rec, p.sandbox, spec, p.repo_dir, report, gpus,
                            c1_sandbox=split.c1_opener() if split else None)
        after_probes(p.sandbox, rec.result.outside)
        if repo is not None:
            charge_stages(rec, repo.changed(p.sandbox))
        if split:
            split.release_gpus()  # the GPU work is done: the next probe phase on the node may start
        # The harness's own container fetches from the index on Docker's default bridge
        # (or the sweep's explicit network): it runs no agent code.
        _fill_package_cache(rec, spec, p.config.model_copy(update={"network": harness_network(spec.config)}),
                            p.sandbox, report)
    rec.result.probe.probe_wall_time_s = time.monotonic() - probe_t0


def _fill_package_cache(rec: TrialRecorder, spec: TrialSpec, config: SandboxConfig, sandbox: Sandbox,
                        report: Report | None) -> None:
    """Add the wheels of what the reported interpreter holds to the node's cache, downloaded
    from the index by the harness (`package_cache.fill`); never fails the trial."""
    if not spec.config.sandbox.pip_cache or not sandbox.capabilities.image or report is None:
        return
    try:  # a sandbox the agent stopped has nothing to list: the trial's verdict stands
        listed = package_cache.installed(sandbox, report.python_path)
        if listed is not None:
            filled = package_cache.fill(spec.config.sandbox.pip_cache_dir, config, *listed, provider=spec.config.sandbox.provider)
            rec.result.probe.pip_cache_filled = len(filled)
    except RebRayError:
        pass  # the cache stays as it was: slower later trials, never a different result
