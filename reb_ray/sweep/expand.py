"""Expanding a sweep into trial specs, minus the trials already scored (resume)."""

from __future__ import annotations

import os

from reb_ray.agents import get_agent
from reb_ray.errors import RebRayError
from reb_ray.llm.prices import price_table
from reb_ray.trial.llm import check_llm_agent
from reb_ray.models.sweep import SweepConfig, TrialSpec
from reb_ray.sandbox import capabilities_of
from reb_ray.sweep.state import SweepState


def expand(config: SweepConfig, image: str | None, state: SweepState | None = None) -> tuple[list[TrialSpec], int]:
    """(trial specs to run, number skipped because already scored). Agents x tasks x trials.

    `state`: the output directory as the sweep's start read it (None: read it now).

    Raises RebRayError for an agent that cannot run (an unknown kind, a kind that needs a model
    and names none, an LLM agent without its key or, under a cost limit, without a price: check_llm_agent),
    LLMFileError for a bad --prices file, and TaskSpecError for a bad suite or pattern.
    """
    credentials = {}
    for name in config.agents:
        agent = get_agent(config.agent_spec(name))
        # An LLM agent's key goes to the node's proxy only (reb_ray.llm.keys): never in a trial's spec.
        llm_key = config.agent_spec(name).key_env if agent.uses_llm else None
        credentials[name] = {k: os.environ[k] for k in agent.credential_names() if k in os.environ and k != llm_key}
        if agent.requires_model and not config.agent_spec(name).model:
            raise RebRayError(f"agent {name!r}: kind {config.agent_spec(name).kind} needs a model "
                              f"(`{config.agent_spec(name).kind}@MODEL` or `model = ...` in its table)")
        if not (agent.trusted or config.sandbox.unsafe_local or _isolated(config.sandbox.provider)):
            raise RebRayError(f"agent {name!r}: the {config.sandbox.provider} sandbox does not keep an agent from the node's "
                              "network or files (no host guard), so it runs only the trusted built-in agents (noop, "
                              "heuristic); use `--sandbox docker`, or pass `--unsafe-local` to run this agent anyway")
        if agent.uses_llm:  # its key, endpoint and prices, before any trial starts
            check_llm_agent(config.agent_spec(name), price_table(str(config.llm.prices_file) if config.llm.prices_file else None),
                            config.llm.max_cost_usd)
    state = state or SweepState.read(config)
    # Trials write their log artifacts under the output directory from wherever their worker
    # runs (reb_ray.trial.artifacts): a relative path must mean the driver's.
    config = config.updated(output=config.output.dir.resolve())
    sweep_id = state.sweep_id
    scored = state.scored_ids
    done = set() if config.resume.rerun else scored
    previous = state.last_attempts
    specs, skipped = [], 0
    for agent in config.agents:
        for task in state.tasks:
            for index in range(config.trials):
                spec = TrialSpec(sweep_id=sweep_id, agent=agent, task=task, trial_index=index, config=config, image=image,
                                 credentials=credentials[agent])
                spec.attempt = previous.get(spec.trial_id, 0) + 1
                spec.retries_left = config.max_attempts - 1
                spec.rerun = spec.trial_id in scored  # a scored trial gets a spec only under --rerun
                if spec.trial_id in done:
                    skipped += 1
                else:
                    specs.append(spec)
    return specs, skipped


def _isolated(provider: str) -> bool:
    """Whether `provider`'s sandboxes keep agent code away from the node: a network of their own
    behind the host guard, or no agent code run at all (scripted sleeps). A container that shares
    the node's network (rootless Podman) or a host process (local) reaches every service of the
    node (Ray's GCS and dashboard, sshd), so only trusted agents run there unless the user opts in."""
    caps = capabilities_of(provider)
    return caps.own_network or not (caps.image or caps.host_paths)
