"""The explicit, versioned Arrow schemas of the `trials` and `stages` datasets.

Every column is nullable and typed: an unknown value is null, never 0, and no column is ever
null-typed (a batch whose values are all null is still written with the real type, so files of
one dataset always share one schema). Bump SCHEMA_VERSION when a column changes meaning; add columns only at the end.
Status columns use: success | failure | skipped | not_run.
"""

from __future__ import annotations

import pyarrow as pa

SCHEMA_VERSION = 1

STAGE_STATUSES = ("success", "failure", "skipped", "not_run")
TRIAL_STATUSES = ("scored", "infra_error", "interrupted")  # only "scored" rows count for agents
FAILURE_OWNERS = ("agent", "infra", "hardware")  # or null when nothing failed; hardware = too few GPUs
REPORT_STATUSES = ("ok", "missing_report", "invalid_report")
REPORT_SOURCES = ("agent_file", "forced_from_output", "none")  # none: no report file at all

_ts = pa.timestamp("us", tz="UTC")
_strings = pa.list_(pa.string())
_side_logs = pa.list_(pa.struct([
    ("path", pa.string()),  # as declared in the task spec
    ("size_bytes", pa.int64()),  # the whole file's size (null: not found)
    ("truncated", pa.bool_()),  # only the file's last bytes are in `text`
    ("text", pa.string()),  # its last reb_ray.probing.side_logs.TAIL_BYTES, UTF-8 with replacement
    ("error", pa.string()),  # why nothing was read (e.g. not found after the stage)
]))

TRIALS_SCHEMA = pa.schema(
    [
        ("schema_version", pa.int32()),
        ("sweep_id", pa.string()),
        ("trial_id", pa.string()),  # "<agent>/<task_id>/<trial_index>", stable across attempts
        ("attempt", pa.int32()),
        ("trial_index", pa.int32()),
        ("task_id", pa.string()),
        ("suite", pa.string()),
        ("agent", pa.string()),
        ("status", pa.string()),  # TRIAL_STATUSES
        ("failure_owner", pa.string()),  # FAILURE_OWNERS or null
        ("failure_reason", pa.string()),
        ("node", pa.string()),
        ("sandbox_provider", pa.string()),
        ("repo_commit", pa.string()),
        ("report_status", pa.string()),  # REPORT_STATUSES
        ("report_python_path", pa.string()),
        ("c0_status", pa.string()),
        ("c0_missing", pa.int64()),  # distinct top-level modules flagged reportMissingImports
        ("c0_total", pa.int64()),  # the task's C0 baseline import total (denominator)
        ("c0_missing_modules", _strings),
        ("c0_missing_source", pa.int64()),  # distinct modules flagged reportMissingModuleSource
        ("c0_missing_source_modules", _strings),
        ("c0_guarded_modules", _strings),  # missing ones imported only under try/except ImportError
        ("pyright_version", pa.string()),
        ("c1_status", pa.string()),
        ("c1_exit_code", pa.int64()),
        ("c1_failure_category", pa.string()),
        ("agent_exit_code", pa.int64()),
        ("agent_timed_out", pa.bool_()),
        ("agent_wall_time_s", pa.float64()),
        ("probe_wall_time_s", pa.float64()),
        ("trial_wall_time_s", pa.float64()),
        ("env_size_bytes", pa.int64()),  # unique bytes of regular files under the report sys.prefix
        ("env_size_apparent_bytes", pa.int64()),  # same files, every path counted (hard links again): the release's figure
        ("agent_output_tail", pa.string()),
        ("started_at", _ts),
        ("finished_at", _ts),
        ("c0_editable_hooks", _strings),  # import-hook editable installs seen in site-packages (pyright cannot follow them)
        ("env_size_status", pa.string()),
        # -- the rest of the pyramid (C2-C5), between-phase checks, and the row's category
        ("failure_category", pa.string()),  # the owner's highest failed stage's category (or the infra kind)
        ("repo_modified", pa.bool_()),  # tracked repository files changed by the agent (git status)
        ("repo_modified_files", _strings),
        ("c2_status", pa.string()),
        ("c2_failure_category", pa.string()),
        ("c2_torch_version", pa.string()),
        ("c2_cuda_build", pa.string()),
        ("c2_device_count", pa.int64()),
        ("c2_capability", pa.string()),
        ("c3_status", pa.string()),
        ("c3_exit_code", pa.int64()),
        ("c3_failure_category", pa.string()),
        ("c4_status", pa.string()),
        ("c4_exit_code", pa.int64()),
        ("c4_failure_category", pa.string()),
        ("c4_port", pa.int64()),
        ("gpus_assigned", pa.int64()),
        ("c5_status", pa.string()),
        ("c5_path", pa.int64()),
        ("c5_version", pa.int64()),
        ("c5_capability", pa.int64()),
        ("c5_underclaims", pa.int64()),
        ("agent_limit", pa.string()),  # which limit fired in the agent phase, e.g. agent_timeout_s=600
        ("sandbox_shm_bytes", pa.int64()),  # /dev/shm size given to the sandbox, bytes
        ("c0_repo_path_modules", _strings),  # missing ones that live in the repo below its root (a runtime sys.path edit)
        # applicable stages left not_run because an asset they need was missing (--skip-missing-assets);
        # 0 on every scored row that lacked none, null only where no stage was settled (infra before probes)
        ("stages_missing_assets", pa.int64()),
        ("rerun", pa.bool_()),  # this attempt re-ran an already scored trial (--rerun); see read.latest_attempts
        ("leftover_processes", pa.int64()),  # processes the agent left running, stopped between phases
        ("leftover_commands", _strings),  # their command lines: the first 20, each cut to 200 characters
        ("agent_log_path", pa.string()),  # the agent's full output (gzip), relative to the output dir (reb_ray.trial.artifacts)
        # -- agents: which prompt, which agent program, where the report came from
        ("prompt_sha256", pa.string()),  # sha256 (hex) of the prompt text as rendered for a Docker sandbox
        ("agent_kind", pa.string()),  # the spec's kind: codex, claude_code, ..., command, heuristic, noop, or a class path
        ("agent_model", pa.string()),  # the spec's model, null when none was given
        ("agent_version", pa.string()),  # the agent program's version (a CLI's --version), null when unknown
        ("report_source", pa.string()),  # REPORT_SOURCES: who wrote the report file, or none
        # -- LLM metering: counted by the node's proxy from the responses' own usage
        # fields (`TrialLlm.finish`); every one null when the agent uses no LLM
        ("llm_requests", pa.int64()),  # requests the agent sent through the proxy (refused ones included)
        ("input_tokens", pa.int64()),  # prompt tokens, cache reads and writes included (reb_ray.llm.usage)
        ("cached_input_tokens", pa.int64()),  # of those, read from the prompt cache
        ("cache_write_tokens", pa.int64()),  # of those, written to the prompt cache
        ("output_tokens", pa.int64()),  # generated tokens, reasoning included
        ("reasoning_tokens", pa.int64()),  # of those, reasoning
        ("cost_usd", pa.float64()),  # USD; null when unknown (a model the price table lacks), never 0
        ("cost_source", pa.string()),  # COST_SOURCES: price_table | agent_reported | unknown | no_model
        ("price_version", pa.string()),  # the price table that priced it (e.g. 2026-12-01)
        ("llm_model", pa.string()),  # the model most responses named (the spec's may be null)
        ("llm_rate_limited", pa.int64()),  # requests answered infra_llm_rate_limit (429)
        ("llm_unavailable", pa.int64()),  # requests that failed infra_llm_unavailable (5xx, unreachable, cut off)
        ("llm_auth_failures", pa.int64()),  # requests that failed infra_llm_auth
        ("llm_budget_failures", pa.int64()),  # requests the upstream refused for quota or budget
        ("llm_in_flight", pa.int64()),  # requests still unanswered when the agent phase ended
        ("llm_failure_category", pa.string()),  # the infra_llm_* category of the attempt's last request, when it failed
        ("llm_last_error", pa.string()),  # that request: "category: HTTP status: message" (null: it succeeded)
        ("llm_retry_after_s", pa.float64()),  # its Retry-After, seconds (the orchestrator's backoff honours it)
        ("agent_reported_input_tokens", pa.int64()),  # the CLI's own usage report, kept beside the proxy's
        ("agent_reported_output_tokens", pa.int64()),
        ("agent_reported_cost_usd", pa.float64()),  # the CLI's own dollar figure (its guess for unknown models)
        ("trajectory_path", pa.string()),  # the CLI's transcript (JSON Lines, gzip), relative to the output dir
        ("llm_log_path", pa.string()),  # the proxy's meter and request log (JSON Lines, gzip), same
        ("sweep_max_cost_usd", pa.float64()),  # the sweep's --max-cost-usd when this attempt ran (null: none)
        # -- sandbox limits (`LimitWatch`); null for the local provider
        ("sandbox_pids_limit", pa.int64()),  # processes and threads the sandbox may hold
        ("sandbox_memory_bytes", pa.int64()),  # its memory (and memory+swap) limit
        # whether the engine applied the memory, pids and CPU limits above (false: a rootless
        # Podman engine on cgroup v1 dropped them; null: the local provider has none)
        ("sandbox_limits_enforced", pa.bool_()),
        ("sandbox_disk_quota_bytes", pa.int64()),  # writable-layer size past which the agent is stopped
        ("sandbox_limit_fired", pa.string()),  # the limit that ended the agent phase: pids_limit | disk_quota | oom
        ("sandbox_oom_kills", pa.int64()),  # processes the OOM killer killed during the agent phase
        ("sandbox_disk_peak_bytes", pa.int64()),  # largest writable-layer size the watch saw in the agent phase
        ("pip_cache_filled", pa.int64()),  # wheels the harness added to the node's package cache after this trial
        # -- network policy (`TrialEgress`)
        ("network_policy", pa.string()),  # open | registries (the sweep's --network-policy)
        ("network_denied_count", pa.int64()),  # connections the egress proxy refused (null: policy open)
        ("network_log_path", pa.string()),  # the egress proxy's connection log (JSON Lines, gzip), rel. to output
        # -- resume identity (`check_identity`)
        ("config_drift", pa.list_(pa.string())),  # scoring fields changed since the sweep's first run (--allow-drift); null: none
        ("sandbox_network", pa.string()),  # the Docker network the sandbox joined (null: local provider, or none made)
        ("network_host_guard", pa.bool_()),  # the node's services were closed to the sandbox (the host guard); false: an explicit `network` or the local provider
        # -- agent-phase GPU sharing (`PhaseSplit`)
        ("gpu_sharing", pa.bool_()),  # the sweep ran with --share-gpus-in-agent-phase
        ("probe_image_commit_s", pa.float64()),  # seconds to commit the agent's container to the attempt's image (null: none committed)
        ("probe_image_bytes", pa.int64()),  # bytes of that image's new layer (null: none committed)
        ("probe_gpu_wait_s", pa.float64()),  # seconds the probe phase waited for its exclusive GPU lease (null: no lease)
        # -- the witness of each command stage and the repository as pinned (reb_ray.grading.witness,
        # reb_ray.trial.repo_restore; docs/grading-witness.md)
        ("c1_witness", pa.string()),  # valid | unverified | missing; null: the stage's command did not run
        ("c3_witness", pa.string()),
        ("c4_witness", pa.string()),
        ("repo_head_moved", pa.bool_()),  # the agent moved HEAD off the pinned commit (commit, checkout, reset)
        ("repo_restored", pa.bool_()),  # tracked files were put back to the pinned commit before the probes (null: unknown)
        ("repo_restored_files", _strings),  # the tracked paths the restore changed back (committed edits included)
        # -- the report contract (reb_ray.models.report): slips in informational keys, counted by C5
        ("c5_report_faults", pa.int64()),  # keys missing or of the wrong JSON type (null: no report audited)
        ("c5_report_fault_keys", _strings),  # those keys, in the contract's order
        # -- who owns what C0 resolved, start-up hooks, the interpreter's kind (reb_ray.grading.startup)
        ("c0_unowned", pa.int64()),  # modules C0 counts resolved whose file no installed distribution owns (null: unknown)
        ("c0_unowned_modules", _strings),  # those modules, sorted
        ("python_path_kind", pa.string()),  # PYTHON_PATH_KINDS: elf | symlink_to_elf | script | other | missing
        ("startup_hooks", _strings),  # interpreter start-up hooks no distribution installed (sitecustomize, .pth imports, ...)
        ("suspicious_actions", _strings),  # shortcuts seen in the sandbox or the agent's trajectory, one line each
        # -- resume by trial identity (reb_ray.sweep.trial_identity)
        ("trial_identity", pa.string()),  # 16-hex digest of what decides the trial's score (null: written before it)
        ("reused_from", pa.string()),  # the sweep whose scored attempt this row copies (null: run by this sweep; a `-reprobe` row: its agent phase)
        # -- environments as artifacts (reb_ray/environment): the manifest, the kept image, the node's hardware
        ("env_manifest_path", pa.string()),  # the environment manifest (JSON, gzip), relative to the output dir
        ("env_manifest_digest", pa.string()),  # sha256 (hex) of the manifest's JSON bytes, uncompressed
        ("env_manifest_bytes", pa.int64()),  # those bytes' length
        ("env_capture_s", pa.float64()),  # seconds the capture took (between the agent and probe phases)
        ("env_capture_error", pa.string()),  # why no manifest was taken (null: taken, or never tried)
        ("env_keep_policy", pa.string()),  # KEEP_POLICIES: none | successes | scored | all
        ("env_kept", pa.bool_()),  # the agent's container is kept as an image on `node` (null: never decided)
        ("env_image_id", pa.string()),  # that image's id (null: not kept)
        ("env_image_tag", pa.string()),  # and its tag, reb-ray/env:<...>
        ("env_image_bytes", pa.int64()),  # the kept image's own layer's bytes, what keeping costs (null: not kept)
        ("env_image_total_bytes", pa.int64()),  # the kept image's bytes, the sandbox image included (null: not kept)
        ("env_commit_s", pa.float64()),  # seconds the commit took
        ("env_keep_error", pa.string()),  # why the commit or the removal failed (null: none)
        ("gpu_model", pa.string()),  # nvidia-smi's GPU name(s), " + "-joined when mixed (null: no nvidia-smi)
        ("gpu_count", pa.int64()),  # GPUs on the node (not those assigned: gpus_assigned)
        ("gpu_memory_bytes", pa.int64()),  # memory of the first GPU, bytes
        ("gpu_compute_capability", pa.string()),  # e.g. "9.0"
        ("gpu_driver_version", pa.string()),  # the NVIDIA driver's version
        ("cuda_driver_version", pa.string()),  # the newest CUDA that driver supports (nvidia-smi's "CUDA Version")
        ("container_runtime", pa.string()),  # docker (null: the local provider)
        ("container_runtime_version", pa.string()),  # the daemon's version
        ("cpu_model", pa.string()),  # /proc/cpuinfo's model name
        ("cpu_count", pa.int64()),  # logical CPUs of the node
        ("kernel", pa.string()),  # the node's kernel release
        ("env_disk_budget_bytes", pa.int64()),  # the node's budget for kept images, bytes, applied after this attempt's keep (null: not applied)
        ("env_evicted", _strings),  # tags of other attempts' kept images that budget removed (oldest first)
        ("env_node_kept_bytes", pa.int64()),  # bytes the node's kept images' own layers hold after it
        ("atif_path", pa.string()),  # the attempt's trajectory in ATIF (trajectory.json, plain JSON), relative to the output dir (reb_ray.trial.atif_file)
        # -- which probes graded the row (reb_ray.probing.toolbox.toolbox_key: layout, pyright and node versions,
        # the probe programs' bytes); a `-reprobe` row's own, its source's in the source row (null: written before it)
        ("probe_toolbox", pa.string()),
        # -- observed from outside the sandbox (reb_ray.trial.process_audit, reb_ray.trial.repo_outside;
        # docs/grading-witness.md, "Processes and the repository, observed from outside"); null: not observable
        ("probe_processes_before", pa.int64()),  # processes the harness did not start, in the sandbox's cgroup as the probe phase began
        ("probe_processes_after", pa.int64()),  # the same after the last stage
        ("probe_process_commands", _strings),  # their command lines, "before: ..." / "after: ...", the first 20
        ("repo_outside_restored", _strings),  # tracked paths whose content (read from outside) differed from the pinned commit after the in-sandbox restore; put back
        ("repo_probe_changed", _strings),  # tracked paths whose content changed during the probe phase (fails the stages that ran with it)
        ("outside_check_s", pa.float64()),  # seconds the outside reads took in this attempt
        # -- installed code against what was published (reb_ray.grading.installed; docs/grading-witness.md,
        # "Installed packages and start-up code, checked against what was published"); null: not checked
        ("dist_checked", pa.int64()),  # distributions on the reported interpreter's import path that were judged
        ("dist_modified", _strings),  # "name version: files" of those whose files differ from the published artifact
        ("dist_unmatched", _strings),  # metadata no published artifact matches, and modules no distribution names
        ("dist_unverifiable", _strings),  # "name version (why)": local builds, sdist-only releases, no index
        ("startup_hooks_unverified", _strings),  # .pth import lines, sitecustomize, usercustomize no verified distribution owns
        # -- a Harbor task's trial (reb_ray.harbor; docs/harbor.md); null for reb-ray's own tasks
        ("reward", pa.float64()),  # the verifier's reward: reward.json's `reward` (else its first key) or reward.txt (null: none usable)
        ("rewards", pa.string()),  # every numeric key of reward.json as one JSON object, keys sorted (reward.txt: {"reward": x}); results.read.reward_columns spreads it into `reward_<key>` columns
        ("harbor_image", pa.string()),  # the task's image the sandbox ran (built from its Dockerfile, or its docker_image)
        ("harbor_build_s", pa.float64()),  # seconds spent getting that image for this attempt (0-ish when already built on the node)
    ],
    metadata={"reb_ray.dataset": "trials", "reb_ray.schema_version": str(SCHEMA_VERSION)},
)

STAGES_SCHEMA = pa.schema(
    [
        ("schema_version", pa.int32()),
        ("sweep_id", pa.string()),
        ("trial_id", pa.string()),
        ("attempt", pa.int32()),
        ("task_id", pa.string()),
        ("agent", pa.string()),
        ("stage", pa.string()),  # agent | c0 | c1 | env_size | ...
        ("status", pa.string()),  # STAGE_STATUSES
        ("reason", pa.string()),  # why not_run / skipped, or the failure detail
        ("exit_code", pa.int64()),
        ("timed_out", pa.bool_()),
        ("failure_category", pa.string()),
        ("duration_s", pa.float64()),
        ("command", pa.string()),
        ("log_head", pa.string()),
        ("log_tail", pa.string()),
        ("raw", pa.string()),  # raw probe output kept for re-grading (e.g. pyright JSON)
        ("started_at", _ts),
        # -- evidence: what of the output is not in log_head/log_tail, and where it all is
        ("output_truncated", pa.bool_()),  # log_head + log_tail are not the whole output
        ("output_dropped_bytes", pa.int64()),  # bytes of the output in neither log_head nor log_tail
        ("log_pattern", pa.string()),  # the success rule's regex, searched in the whole output as it streamed
        ("log_pattern_matched", pa.bool_()),  # its verdict on the whole output (null: no pattern / not watched)
        ("side_logs", _side_logs),  # files the command wrote besides its output, tails (reb_ray.probing.side_logs)
        ("log_path", pa.string()),  # the full output (gzip), relative to the output dir (reb_ray.trial.artifacts)
        ("log_cut_bytes", pa.int64()),  # bytes of the output not in the log_path file (0: whole; null: no file)
        # -- a command stage's witness (reb_ray.grading.witness): did the pinned repository's code run
        # in the reported interpreter; null for other stages and rows written before it
        ("witness_status", pa.string()),  # valid | unverified | missing
        ("witness_interpreters", pa.int64()),  # interpreters that wrote a witness with the stage's nonce
        ("witness_interpreter", pa.string()),  # the binary of the passing one (else of the first seen)
        ("witness_repo_files", pa.int64()),  # distinct pinned repository files the passing interpreters ran
        ("witness_observed", pa.string()),  # the kernel's trace of it: agrees | contradicts | tampered | incomplete | unavailable
    ],
    metadata={"reb_ray.dataset": "stages", "reb_ray.schema_version": str(SCHEMA_VERSION)},
)
