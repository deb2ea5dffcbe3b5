#!/usr/bin/env python3
"""Compare every stage of the suite's task specs with the paper's release scripts.

    python scripts/compare_release.py RELEASE [--tasks DIR] [--task ID ...] [--all] [--json]

RELEASE is a checkout of the paper's release repository (a directory holding `scripts/`) or its
bare git directory (then `scripts/` of HEAD is exported to a temporary directory with
`git archive`; nothing is written into RELEASE). For each task of the suite (`--tasks`, default
tasks/researchenvbench) the release directory `scripts/<Owner>@<Name>/benchmark_scripts/` is found
from the spec's git URL (case-insensitive), and each stage is read beside its release script:

    cpu        run_cpu_entrypoint.sh          (C1)
    single_gpu run_single_gpu_entrypoint.sh   (C3)
    multi_gpu  run_multi_gpu_entrypoint.sh    (C4)

Decisive elements are extracted from both sides as text (shell scripts with embedded Python on the
release side; command, env, workdir, timeout_s, success and launcher on the spec side):

    timeout     the stage's time limit in seconds (release: runner.py's --timeout-sec)
    env         variables exported to the command (release: runner --env, export, `VAR=v cmd`,
                os.environ[...] = ...); PYTHONPATH also by its repository-relative parts (".",
                "src", ...). Variables that only place caches, logs and GPUs, which reb-ray sets
                for every stage itself (HARNESS_ENV), are not compared.
    entry       the repository's scripts (`x.py`) and modules (`-m pkg.mod`) the stage runs
    helper      a file of the benchmark's own (release: benchmark_scripts/ or a file the stage
                script writes; spec: $REB_RAY_HELPERS/...); a helper is named the same on both
                sides or it is a difference
    option      long options (`--name value`) and overrides (`a.b=v`, `++k=v`, detectron2's
                `SOLVER.MAX_ITER 1`, keyword arguments `name=v` in embedded Python), by name, and
                by value when both values are literals (no path, no variable)
    check       success and failure checks: regexes given to runner.py (--fail-regex ...),
                `grep` patterns, `"text" in log` tests, byte-size tests (`len(x) < N`), modules
                that must import before the run (runner.py --ensure-module), and the spec's
                success.log_pattern
    launcher    (multi_gpu) torchrun, accelerate, deepspeed or python, and the rank count
    workdir     the directory the command runs in, relative to the repository root

Release options that belong to the release's own plumbing are not elements: the options its
runner.py defines (how it records a run), the stage script's own command-line options, and the
launcher's options (reb-ray adds the launcher with the rank count and a free port). Spec options
given to reb-ray's helpers are not compared one by one (a helper's interface is its own); the
helper itself is an element.

A difference is a release element absent from the spec, a spec element absent from the release,
or an element with different values. Presence is decided on text: an option's name (with `-` and
`_` equal) occurring on the other side counts as present, so the comparison errs towards "same"
only where a name happens to occur in another role; values are compared exactly.

COVERED: a difference is covered only when the stage carries `deviation = "..."` AND that text
names the element: the option or override name (`--input-size`, `trainer.max_steps`), the
variable name (`PYTHONPATH`), the script or helper file name (`example.py`), the word `timeout`,
`launcher` or `workdir`, or, for a check, its pattern text (or for a size check `bytes`). A
deviation that names nothing that differs covers nothing; every other difference is UNDOCUMENTED.
The exit status is 1 when any undocumented difference is left, else 0.

Output: per task and stage the elements side by side (release | spec; `--all` also prints the
stages without differences), each difference with `covered` or `UNDOCUMENTED`, then the counts:
stages compared, identical, differing with every difference covered, stages with an undocumented
difference, and undocumented differences. Stdlib only.

Limits (stated, not hidden): extraction is textual, so a check written as arbitrary Python
(a JSON key test, a wait loop's length) is found only in the forms listed above, and a release
option that appears only inside a string the script never runs still counts.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import re
import shlex
import subprocess
import sys
import tarfile
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STAGES = {"cpu": "run_cpu_entrypoint.sh", "single_gpu": "run_single_gpu_entrypoint.sh",
          "multi_gpu": "run_multi_gpu_entrypoint.sh"}
HELPERS_VAR = "REB_RAY_HELPERS"
#: The release's table of which stages each repository supports (supports_cpu, ... = yes/no).
CATEGORIES_CSV = "scripts_repos_test_categories.csv"

#: Variables that only say where caches, logs and GPUs are: reb-ray sets them for every stage (the
#: harness assigns GPUs, HF_HOME is the asset cache, probes run offline, the sandbox is writable).
#: Also every name ending in _CACHE, _CACHE_DIR or _USERDIR, and telemetry switches (CACHE_ENV).
HARNESS_ENV = {
    "CUDA_VISIBLE_DEVICES", "HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_DATASETS_CACHE",
    "TRANSFORMERS_CACHE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE",
    "HF_HUB_DISABLE_TELEMETRY", "HF_HUB_DISABLE_PROGRESS_BARS", "XDG_CACHE_HOME", "TORCH_HOME",
    "TRITON_CACHE_DIR", "MPLCONFIGDIR", "WANDB_MODE", "WANDB_DIR", "WANDB_DISABLED", "WANDB_SILENT",
    "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE", "HOME", "TMPDIR", "PIP_CACHE_DIR",
    "PIP_DISABLE_PIP_VERSION_CHECK", "PYTHONNOUSERSITE", "TOKENIZERS_PARALLELISM",
    "HF_HUB_ENABLE_HF_TRANSFER", "MODELSCOPE_CACHE", "NLTK_DATA", "TORCHINDUCTOR_CACHE_DIR",
    "CUDA_DEVICE_ORDER", "PYTHONIOENCODING", "LC_ALL", "LANG", "XDG_DATA_HOME", "XDG_CONFIG_HOME",
    "TEMP", "TMP", "SENTENCE_TRANSFORMERS_HOME", "DIFFUSERS_CACHE", "XPU_VISIBLE_DEVICES", "WANDB_DATA_DIR", "WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "TORCH_EXTENSIONS_DIR", "PYTHONPYCACHEPREFIX",
}
#: ... and in the multi-GPU stage also the rendezvous and rank variables the launcher sets.
LAUNCHER_ENV = {"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NPROC"}
#: Options of the launchers (the harness runs the launcher itself with the rank count and port).
LAUNCHER_OPTIONS = {
    "standalone", "nproc_per_node", "nnodes", "node_rank", "master_addr", "master_port", "rdzv_backend",
    "rdzv_endpoint", "rdzv_id", "max_restarts", "num_processes", "num_machines", "main_process_port",
    "main_process_ip", "multi_gpu", "num_gpus", "num_nodes", "include", "no_python", "module", "gpu_ids",
    "machine_rank", "same_network", "monitor_interval", "log_dir", "redirects", "tee", "local_addr",
}
#: Options of shell tools and of Python's own command line.
TOOL_OPTIONS = {"help", "version", "quiet", "verbose", "preserve_status", "signal", "kill_after",
                "no_cache_dir", "upgrade", "user", "break_system_packages", "no_deps"}
#: Keyword arguments of the standard library the release's plumbing code uses (not options).
STDLIB_KWARGS = {
    "encoding", "errors", "indent", "ensure_ascii", "sort_keys", "exist_ok", "parents", "text", "check",
    "capture_output", "stdout", "stderr", "stdin", "cwd", "env", "timeout", "shell", "file", "flush", "end",
    "sep", "default", "key", "reverse", "mode", "newline", "dtype", "device", "type", "help", "action",
    "required", "choices", "nargs", "dest", "metavar", "universal_newlines", "bufsize", "start_new_session",
    "close_fds", "preexec_fn", "daemon", "target", "args", "kwargs", "name", "level", "format", "strict",
    "missing_ok", "ignore_errors", "dirs_exist_ok", "follow_symlinks", "exc_info", "stacklevel", "maxsplit",
    "count", "flags", "fillvalue", "initial", "start", "step", "stop", "size", "path", "value", "data",
    "json", "headers", "method", "params", "files", "proxies", "allow_redirects", "stream", "verify",
    "context", "family", "proto", "fileno", "source", "dst", "src", "prefix", "suffix", "dir", "delete",
    "chunk_size", "status", "exit_code", "message", "msg", "reason", "category", "log", "log_path",
    "results_path", "out_dir", "stage", "task", "framework", "timeout_sec", "command", "cmd", "extra",
    "meta", "assets", "payload", "p", "n", "i", "k", "v", "x", "s", "t", "f", "e", "lines", "limit",
    "max_lines", "max_chars", "tail", "head", "rc", "returncode", "ok", "result", "results", "run_name",
    "init_globals", "alter_sys", "map_location", "weights_only", "non_blocking", "allow_pickle",
}
#: Modules that run plumbing, not the repository (python -m X).
PLUMBING_MODULES = {"torch.distributed.run", "torch.distributed.launch", "accelerate.commands.launch",
                    "deepspeed", "deepspeed.launcher.runner", "pip", "venv", "json.tool", "zipfile",
                    "tarfile", "http.server", "site", "ensurepip", "py_compile", "compileall"}
#: Identifiers whose text the release searches for a success or failure string (`"x" in log`).
LOG_NAMES = {"txt", "text", "log", "log_text", "log_txt", "out", "output", "stdout", "stderr", "content",
             "body", "parsed", "resp", "response", "combined", "joined", "s_out", "logs"}

_OPTION = re.compile(r"""(?<![\w\-./$])(-{2}[A-Za-z][\w.\-]*)(?:(?:=|[ \t]+|["']\s*,\s*["'])"""
                     r"""(["']?)([^\s"'\\,;)|&<>]*)\2)?""")
_OVERRIDE = re.compile(r"""(?<![\w.\-$/{])(\+{0,2}[A-Za-z_][\w\-]*(?:\.[\w\-]+)+)=(["']?)([^\s"'\\;|&]*)""")
_YACS_OVERRIDE = re.compile(r"""(?<![\w.\-$/{])([A-Z][A-Z0-9_]*(?:\.[A-Z][A-Z0-9_]*)+)[ \t]+(["']?)([^\s"'\\]+)\2""")
_PLUS_OVERRIDE = re.compile(r"""(?<![\w.\-$/{])(\+{1,2}[A-Za-z_][\w\-]*)=(["']?)([^\s"'\\;|&]*)""")
_KWARG = re.compile(r"""(?<![\w.=!<>$\-{])([a-z][a-z0-9]*_[a-z0-9_]*)=(?!=)(?:(["'])([\w.\-]+)\2|()(-?\d[\d.e\-]*|True|False|None))\s*[,)]""")
_PY_FILE = re.compile(r"""(?<![\w\-])((?:[\w.\-${}]+/)*[\w.\-]+\.py)\b""")
_MODULE = re.compile(r"""(?:-m|"-m",)\s+["']?([A-Za-z_][\w.]*)""")
_ENV_ARG = re.compile(r"""--env[ =]+(?:"([A-Z_][A-Z0-9_]*)=([^"]*)"|'([A-Z_][A-Z0-9_]*)=([^']*)'|([A-Z_][A-Z0-9_]*)=("[^"]*"|'[^']*'|[^\s"']*))""")
_COMMAND_WORD = re.compile(r"""(?i)python|^\{python\}$|^\$\{?\w*py\w*\}?$|^(?:torchrun|accelerate|deepspeed|exec|env|"""
                           r"""timeout|bash|sh|uvicorn|nohup|stdbuf)$|\.(?:py|sh)$""")
_PREFIX = re.compile(r"""(?:^|&&|\|\||;|\{|\(|\bexec|')[ \t]*((?:[A-Z_][A-Z0-9_]*=(?:"[^"]*"|'[^']*'|[^\s"';&|])*[ \t]+)+)"""
                     r"""("?[^\s"]+"?)([^\n]*)""", re.MULTILINE)
_ASSIGN = re.compile(r"""([A-Z_][A-Z0-9_]*)=((?:"[^"]*"|'[^']*'|[^\s"'])*)""")
_OS_ENVIRON = re.compile(r"""(?:os\.environ|\benv)(?:\[\s*["']([A-Z_][A-Z0-9_]*)["']\s*\]\s*=(?!=)\s*([^\n]*)"""
                         r"""|\.setdefault\(\s*["']([A-Z_][A-Z0-9_]*)["']\s*,\s*([^\n]*))""")
_TIMEOUT = (re.compile(r"""--timeout-sec[= ]+["']?(\d+)"""), re.compile(r"""\btimeout_sec\s*=\s*["']?(\d+)"""),
            re.compile(r"""TIMEOUT_SEC\s*=\s*["']?(?:\$\{[A-Z_]+:-)?(\d+)"""),
            re.compile(r"""["']timeout_sec["']\s*:\s*(\d+)"""))
_REGEX_ARG = re.compile(r"""--(?:fail|success|require|expect|error|ok)[\w\-]*(?:regex|pattern|grep|log)[\w\-]*[= ]+"""
                        r"""("(?:[^"\\]|\\.)*"|'[^']*'|\S+)""")
_ENSURE_MODULE = re.compile(r"""--ensure-module[= ]+["']?([A-Za-z_][\w.]*)""")
_GREP = re.compile(r"""\bgrep\s+(?:-[A-Za-z]+\s+)*("(?:[^"\\]|\\.)*"|'[^']*')""")
_IN_LOG = re.compile(r"""(["'])([^"'\n]{4,120})\1\s+(?:not\s+)?in\s+([a-z_][a-z0-9_]*)\b""")
_SIZE = re.compile(r"""len\(\s*[\w.()\[\]"']+\s*\)\s*(<=|<|>=|>)\s*(\d{2,})""")
_CD = re.compile(r"""\bcd\s+["']?\$\{?(?:repo_root|REPO_ROOT|ROOT|root|repo|REPO)\}?/([\w.\-/]+)["']?""")
_CWD_ARG = re.compile(r"""--(?:cwd|workdir)[= ]+["']?\$\{?(?:repo_root|REPO_ROOT|ROOT|root|repo)\}?/([\w.\-/]+)""")
_ADD_ARGUMENT = re.compile(r"""add_argument\(\s*["'](--[\w\-]+)["']""")
_CASE_OPTION = re.compile(r"""^\s*((?:-\w\|)?--[\w\-]+(?:\|--?[\w\-]+)*)\)""", re.MULTILINE)
_NPROC = re.compile(r"""(?:--nproc[_-]per[_-]node|--num_processes|--num-processes|--num_gpus|NPROC)[= "',]+(\d+)""")


def norm(name: str) -> str:
    """The comparison key of an option or override name: no leading -/+, `-` as `_`, lower case."""
    return name.lstrip("-+").replace("-", "_").lower()


def literal(value: str | None) -> bool:
    """A value compared exactly: a plain word or number (no path, variable or placeholder)."""
    return bool(value) and re.fullmatch(r"[A-Za-z0-9_.:+\-]+", value or "") is not None


@dataclass
class Elements:
    """The decisive elements of one side of one stage."""

    applicable: bool = True
    timeout: int | None = None
    env: dict[str, str] = field(default_factory=dict)  # name -> value (PYTHONPATH: repo-relative parts)
    entries: set[str] = field(default_factory=set)  # repository scripts (basename) and modules
    helpers: set[str] = field(default_factory=set)  # benchmark helper files (basename)
    options: dict[str, str | None] = field(default_factory=dict)  # normalised name -> literal value or None
    spelled: dict[str, str] = field(default_factory=dict)  # normalised name -> as written
    checks: set[str] = field(default_factory=set)
    launcher: str | None = None
    ranks: int | None = None
    workdirs: set[str] = field(default_factory=set)
    text: str = ""  # the whole text searched for presence
    helper_text: str = ""  # (spec) reb-ray's helper files: presence of keys and values they write

    def summary(self) -> dict[str, str]:
        """Element kind -> one display line."""
        if not self.applicable:
            return {"applicable": "no"}
        opts = " ".join(f"{self.spelled[k]}={v}" if v is not None else self.spelled[k] for k, v in sorted(self.options.items()))
        out = {"timeout": str(self.timeout), "env": " ".join(f"{k}={v}" for k, v in sorted(self.env.items())) or "-",
               "entry": " ".join(sorted(self.entries)) or "-", "helper": " ".join(sorted(self.helpers)) or "-",
               "option": opts or "-", "check": " | ".join(sorted(self.checks)) or "-",
               "workdir": " ".join(sorted(self.workdirs)) or "."}
        if self.launcher is not None:
            out["launcher"] = f"{self.launcher} x{self.ranks}"
        return out


@dataclass
class Difference:
    kind: str  # timeout, env, entry, helper, option, check, launcher, workdir, applicable
    name: str  # what a deviation must name to cover it
    text: str  # one line: what differs
    covered: bool = False


# ------------------------------------------------------------------------------- release side


def _pythonpath_parts(value: str) -> str:
    """Repository-relative parts of a PYTHONPATH value, sorted (":"-joined); benchmark helpers as `helper`."""
    parts = set()
    value = re.sub(r"\$\{PYTHONPATH(?:[^{}]|\{[^{}]*\})*\}|\$PYTHONPATH\b", "", value.strip("\"'"))
    for raw in value.split(":"):
        part = raw.strip().strip("\"'")
        if not part or "PYTHONPATH" in part:
            continue
        part = re.sub(r"\$\{?(?:repo_root|REPO_ROOT|ROOT|root|repo|REPO|PWD|repo_dir)\}?|\$\(pwd\)|\$\{?PWD\}?", ".", part)
        if HELPERS_VAR in part or "benchmark_scripts" in part or "stage_dir" in part or "build_output" in part \
                or "$" in part:
            parts.add("helper")
            continue
        part = re.sub(r"^\./", "", part).rstrip("/") or "."
        parts.add(part)
    return ":".join(sorted(parts))


def _plumbing_options(bench: Path, script: str) -> set[str]:
    """Normalised options of the release's own plumbing: runner.py's CLI and the script's own CLI."""
    names: set[str] = set()
    for name in ("runner.py", "bench_utils.py"):
        path = bench / name
        if path.is_file():
            names |= {norm(o) for o in _ADD_ARGUMENT.findall(path.read_text(errors="replace"))}
    for group in _CASE_OPTION.findall(script):
        names |= {norm(o) for o in group.split("|") if o.startswith("--")}
    names |= {norm(o) for o in _ADD_ARGUMENT.findall(script)}  # a helper CLI the script writes inline
    return names


def release_applicability(scripts: Path) -> dict[str, dict[str, bool]]:
    """{owner@name lower case: {stage: supported}} from the release's CATEGORIES_CSV next to
    `scripts` ({} when it has none: then a script that only records a skip is not applicable)."""
    path = scripts.parent / CATEGORIES_CSV
    if not path.is_file():
        return {}
    with open(path, newline="", encoding="utf-8") as f:
        return {row["repo_slug"].lower(): {stage: row[f"supports_{stage}"].strip() == "yes" for stage in STAGES}
                for row in csv.DictReader(f)}


def release_elements(bench: Path, stage: str, supported: bool | None = None) -> Elements:
    """Extract the decisive elements of the release's script for `stage` in `bench`; `supported`:
    the release's own table entry for the stage (None: judged from the script)."""
    path = bench / STAGES[stage]
    if not path.is_file() or supported is False:
        return Elements(applicable=False)
    script = path.read_text(errors="replace")
    called = [bench / name for name in sorted({Path(p).name for p in _PY_FILE.findall(script)})
              if name not in ("runner.py", "bench_utils.py") and (bench / name).is_file()]
    text = script + "".join("\n" + p.read_text(errors="replace") for p in called)
    el = Elements(text=text)
    el.applicable = supported if supported is not None else not _release_skips(script)
    if not el.applicable:
        return el
    for rx in _TIMEOUT:
        found = rx.findall(script)
        if found:
            el.timeout = int(found[0])
            break
    _env_from(script, el, release=True)
    plumbing = _plumbing_options(bench, script)
    _options_from(_without_prose(text), el, skip=plumbing | LAUNCHER_OPTIONS | TOOL_OPTIONS, kwargs=True)
    for p in _PY_FILE.findall(script):
        name = Path(p).name
        if name in ("runner.py", "bench_utils.py"):
            continue
        in_repo = re.sub(r"^\\?\$\{?\w*(?:REPO_ROOT|repo_root|ROOT|root|REPO|repo)\}?/", "", p)
        if "benchmark_scripts" in p or "$" in in_repo or (bench / name).is_file() or re.search(
                r"stage_dir|build_output|out_dir|OUT_DIR", p):
            el.helpers.add(name)
        else:
            el.entries.add(name)
    el.entries |= {m for m in _MODULE.findall(script) if m not in PLUMBING_MODULES and not m.startswith("benchmark_scripts")}
    el.checks |= _checks_from(text)
    el.workdirs = {w.rstrip("/") for w in _CD.findall(script) + _CWD_ARG.findall(script)
                   if w.rstrip("/") not in ("", ".") and not w.startswith(("build_output", "benchmark_"))}
    if stage == "multi_gpu":
        el.launcher = _launcher_of(script)
        nproc = _NPROC.findall(script)
        el.ranks = int(nproc[0]) if nproc else 2
    return el


def _without_prose(text: str) -> str:
    """`text` without the release's explanations of its choices (runner.py's --decision-reason, the
    decision_reason variables, usage texts printed with `cat <<EOF`), which name options in prose,
    and without the option definitions of the helpers it calls (add_argument("--x"): what a helper
    accepts, not what the stage passes); all of it still counts for presence."""
    text = re.sub(r"""--decision-reason[= ]+(?:"(?:[^"\\]|\\.)*"|'[^']*')""", "", text)
    text = re.sub(r"""\bcat\s+<<-?\s*['"]?(\w+)['"]?[^\n]*\n.*?\n\s*\1\s*\n""", "\n", text, flags=re.S)  # usage texts
    text = re.sub(r"""(?i)\bdecision_reason["']?\s*[=:]\s*f?(?:"(?:[^"\\\n]|\\.)*"|'[^'\n]*')""", "", text)
    return re.sub(r"""add_argument\(\s*["'](?:-\w["']\s*,\s*["'])?--[\w\-]+["']""", "add_argument(", text)


def _release_skips(script: str) -> bool:
    """The release script only records a skip (runner --skip / a skipped status, no command run)."""
    skip = re.search(r"""--skip\b(?!-)|["']status["']\s*:\s*["']skipped["']|--status[= ]+["']?skipped|status=["']?skipped""",
                     script)
    runs = re.search(r"""\s--\s*\\?\s*\n?\s*["']?(?:\{python\}|\$|python)|--python-(?:script|module|code)|"""
                     r"""torch\.distributed\.run|torchrun""", script)
    return bool(skip) and not runs


def _launcher_of(text: str) -> str:
    if re.search(r"torch\.distributed\.run|torchrun|torch\.distributed\.launch", text):
        return "torchrun"
    if re.search(r"accelerate\.commands\.launch|accelerate\s+launch|[\"']accelerate[\"'],\s*[\"']launch", text):
        return "accelerate"
    if re.search(r"(?<![\w.])deepspeed(?:\.launcher)?\b(?!\.)", text) and re.search(r"--num_gpus|deepspeed\s", text):
        return "deepspeed"
    return "python"


def _read_by(name: str, text: str) -> bool:
    """`text` reads variable `name` (`$NAME`, `${NAME}` outside `NAME=${NAME:-...}`, os.environ
    lookups): a variable the benchmark's own code consumes, not one for the repository."""
    for m in re.finditer(r"\$\{?" + name + r"\b", text):
        line = text[text.rfind("\n", 0, m.start()) + 1:text.find("\n", m.end()) if text.find("\n", m.end()) >= 0 else None]
        if not re.search(r"(?<![\w])" + name + r"=", line):  # not its own assignment (X=${X:-1}, X=a:$X)
            return True
    return re.search(r"""environ(?:\.get\(\s*|\[\s*)["']""" + name + r"""["'](?!\s*\]\s*=(?!=))""", text) is not None \
        or re.search(r"""getenv\(\s*["']""" + name + r"""["']""", text) is not None


class _Values(dict):
    """name -> value; a name assigned several values keeps them all, "a|b" (e.g. one per replica group)."""

    def __setitem__(self, name: str, value: str) -> None:
        if name in self and self[name] != value:
            value = "|".join(dict.fromkeys([*self[name].split("|"), value]))
        super().__setitem__(name, value)

    def setdefault(self, name: str, value: str) -> str:  # type: ignore[override]
        if name not in self:
            self[name] = value
        return self[name]


def _named_in(name: str, text: str) -> bool:
    """reb-ray's helper text names variable `name` (how the spec passes a value to its own helper)."""
    return re.search(r"(?<![\w])" + name + r"(?![\w])", text) is not None


def _env_from(text: str, el: Elements, release: bool, reader: str | None = None) -> None:
    found: _Values = _Values()
    for m in _ENV_ARG.finditer(text):
        name, value = next((m.group(i), m.group(i + 1)) for i in (1, 3, 5) if m.group(i))
        found[name] = value
    for m in re.finditer(r"\bexport\s+", text):
        rest = text[m.end():]
        while (a := re.match(r"""([A-Z_][A-Z0-9_]*)=((?:"[^"]*"|'[^']*'|[^\s"';&|])*)\s*""", rest)):
            found[a.group(1)] = a.group(2)
            rest = rest[a.end():]
    for m in _PREFIX.finditer("\n".join(_logical_lines(text))):
        if not _COMMAND_WORD.search(m.group(2).strip("\"'")) or re.match(r"\s*-\s*(?:<<|$)", m.group(3)):
            continue  # not a command, or `VAR=x python - <<PY`: a heredoc writing the release's own results
        for name, value in _ASSIGN.findall(m.group(1)):
            found[name] = value
    for m in _OS_ENVIRON.finditer(text):
        name, value = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
        found.setdefault(name, value)
    shell_vars = dict(re.findall(r"""^\s*(?:local\s+)?([A-Za-z_]\w*)=["']?([^"'\n]*)["']?\s*$""", text, re.MULTILINE))
    for name, value in found.items():
        if name != "PYTHONPATH" and (_read_by(name, text) if reader is None else _named_in(name, reader)):
            continue  # the script (or reb-ray's helper) reads it itself: how it passes a value on
        if name == "PYTHONPATH":
            for _ in range(3):  # `pythonpath="${repo_root}..."; --env "PYTHONPATH=$pythonpath"`
                value = re.sub(r"\$\{?([a-z_]\w*)\}?", lambda m: shell_vars.get(m.group(1), m.group(0))
                               if m.group(1) not in ("repo_root", "root", "repo") else m.group(0), value)
        if name in HARNESS_ENV or name.startswith(("SCIMLOPSBENCH", "REB_RAY", "BENCH")) or name == "WORKER" \
                or re.search(r"_CACHE(?:_DIR)?$|_USERDIR$|TELEMETRY", name):
            continue
        el.env[name] = _pythonpath_parts(value.replace("|", ":")) if name == "PYTHONPATH" else \
            "|".join(dict.fromkeys(_env_value(v) for v in value.split("|")))


def _logical_lines(text: str) -> list[str]:
    """Lines with backslash continuations joined."""
    return re.sub(r"\\\n\s*", " ", text).splitlines()


def _env_value(value: str) -> str:
    value = value.strip().strip("\"'").rstrip(",)")
    return value if literal(value) else "*"


def _options_from(text: str, el: Elements, skip: set[str], kwargs: bool) -> None:
    def add(raw: str, value: str | None) -> None:
        raw = raw.rstrip(".")
        value = value.rstrip(".") if value else value
        key = norm(raw)
        if not key or key in skip or len(key) < 2:
            return
        value = value if literal(value) else None
        if key in el.options and el.options[key] is not None and value is not None and el.options[key] != value:
            el.options[key] = "|".join(sorted({*el.options[key].split("|"), value}))
            return
        if key not in el.options or el.options[key] is None:
            el.options[key] = value
            el.spelled.setdefault(key, raw.lstrip("+") if not raw.startswith("-") else raw)
    for m in _OPTION.finditer(text):
        value = m.group(3)
        add(m.group(1), None if value is None or value.startswith("-") else value)
    for rx in (_OVERRIDE, _PLUS_OVERRIDE, _YACS_OVERRIDE):
        for m in rx.finditer(text):
            if m.group(1).split(".")[0] in ("os", "sys", "self", "torch", "np", "args", "cfg", "config", "data", "json"):
                continue
            add(m.group(1), m.group(3))
    if kwargs:
        for m in _KWARG.finditer(text):
            if m.group(1) not in STDLIB_KWARGS:
                add(m.group(1), m.group(3) or m.group(5) or None)


def _checks_from(text: str) -> set[str]:
    checks: set[str] = set()
    for rx in (_REGEX_ARG, _GREP):
        for raw in rx.findall(text):
            checks.add(_unquote(raw))
    for _q, needle, ident in _IN_LOG.findall(text):
        if ident in LOG_NAMES:
            checks.add(needle)
    checks |= {f"import {m}" for m in _ENSURE_MODULE.findall(text)}
    for _op, n in _SIZE.findall(text):
        checks.add(f"bytes>={n}")
    return {c for c in checks if c and "$" not in c}


def _unquote(raw: str) -> str:
    try:
        parts = shlex.split(raw)
        value = parts[0] if parts else raw
    except ValueError:
        value = raw.strip("\"'")
    return value.replace("\\\\", "\\")


def _check_key(pattern: str) -> str:
    """A check's comparison key: its literal text (regex escapes dropped)."""
    return re.sub(r"\\(.)", r"\1", pattern).strip()


# ---------------------------------------------------------------------------------- spec side


def _helper_segments(command: str) -> tuple[str, set[str]]:
    """(command with the arguments of reb-ray's helpers blanked, helper file names)."""
    helpers = set(re.findall(r"\$\{?" + HELPERS_VAR + r"\}?/(?:[\w.\-]+/)*([\w.\-]+)", command))

    def blank(m: re.Match) -> str:
        return m.group(1) + re.sub(r"--[\w\-]+", "", m.group(2))
    stripped = re.sub(r"(\$\{?" + HELPERS_VAR + r"\}?/[\w.\-/]+\.py\"?)((?:(?!&&|\|\||;|\s--\s|\n).)*)", blank, command)
    return stripped, helpers


def _helper_texts(command: str, task_dir: Path | None) -> str:
    """The text of the helper files (or helper directories) `command` names, for presence checks:
    a value the release writes inline and reb-ray's helper writes is present in the spec."""
    if task_dir is None:
        return ""
    helpers = task_dir / "helpers"
    texts = []
    for used in sorted(set(re.findall(r"\$\{?" + HELPERS_VAR + r"\}?((?:/[\w.\-]+)*)", command))):
        path = helpers / used.strip("/")
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else []
        texts += [f.read_text(errors="replace") for f in files if f.suffix in (".py", ".json", ".yaml", ".yml", ".sh", ".txt", ".scp", "")]
    # a helper's own option definitions say what it accepts, not what the stage passes it
    return re.sub(r"""add_argument\(\s*["'](?:-\w["']\s*,\s*["'])?--[\w\-]+["']""", "add_argument(", "\n".join(texts))


def spec_elements(stage: dict, name: str, task_dir: Path | None = None) -> Elements:
    """Extract the decisive elements of one stage table of a task.toml (`task_dir`: where its
    helpers/ lie; their text counts for presence, not as elements)."""
    if not stage.get("applicable", True):
        return Elements(applicable=False)
    command = stage["command"] if isinstance(stage["command"], str) else shlex.join(stage["command"])
    success = stage.get("success", {})
    env = stage.get("env", {})
    text = "\n".join([command, *(f"{k}={v}" for k, v in env.items()), str(success.get("log_pattern") or ""),
                      str(stage.get("workdir", "."))])
    el = Elements(text=text, helper_text=_helper_texts(command, task_dir), timeout=int(stage.get("timeout_s", 600)))
    helper_text = el.helper_text
    _env_from(command, el, release=False, reader=helper_text)
    for key, value in env.items():
        if key != "PYTHONPATH" and _named_in(key, helper_text):
            continue
        if key not in HARNESS_ENV and not re.search(r"_CACHE(?:_DIR)?$|_USERDIR$|TELEMETRY", key):
            el.env[key] = _pythonpath_parts(value) if key == "PYTHONPATH" else _env_value(value)
    stripped, el.helpers = _helper_segments(command)
    _options_from(stripped, el, skip=LAUNCHER_OPTIONS | TOOL_OPTIONS, kwargs=True)
    for p in _PY_FILE.findall(command):
        if HELPERS_VAR not in p and not p.startswith("$"):
            el.entries.add(Path(p).name)
        elif HELPERS_VAR not in p and "/" in p:
            el.entries.add(Path(p).name)
    el.entries -= el.helpers
    el.entries |= {m for m in _MODULE.findall(command) if m not in PLUMBING_MODULES}
    el.checks = _checks_from(command)
    if success.get("log_pattern"):
        el.checks.add(success["log_pattern"])
    workdir = str(stage.get("workdir", ".")).rstrip("/")
    el.workdirs = {w for w in {workdir, *re.findall(r"\bcd\s+([\w.\-/]+)", command)} if w not in ("", ".")}
    if name == "multi_gpu":
        launcher = stage.get("launcher", "torchrun")
        el.launcher = _launcher_of(command) if launcher == "python" else launcher
        el.ranks = int(stage.get("ranks", 2))
    return el


# --------------------------------------------------------------------------------- comparison


def _present(name: str, text: str) -> bool:
    """`name` (an option name normalised, or a word) occurs in `text` as a whole name, `-` and `_`
    equal and leading dashes or pluses dropped (`--input-size` is present as input_size)."""
    flat = re.sub(r"(?<![\w])[-+]{1,2}(?=[A-Za-z])", " ", text).replace("-", "_").lower()
    return re.search(r"(?<![\w.])" + re.escape(name.replace("-", "_").lower()) + r"(?![\w])", flat) is not None


def compare(rel: Elements, spec: Elements, stage: str) -> list[Difference]:
    """Every difference between the release's and the spec's elements of one stage."""
    diffs: list[Difference] = []
    if rel.applicable != spec.applicable:
        return [Difference("applicable", "applicable", f"release applicable={rel.applicable}, spec {spec.applicable}")]
    if not rel.applicable:
        return []
    if rel.timeout is not None and rel.timeout != spec.timeout:
        diffs.append(Difference("timeout", "timeout", f"timeout: release {rel.timeout} s, spec {spec.timeout} s"))
    ignored = LAUNCHER_ENV if stage == "multi_gpu" else set()
    for name in sorted(set(rel.env) | set(spec.env)):
        if name in ignored:
            continue
        if name not in spec.env:
            if not (name != "PYTHONPATH" and _present(name, spec.text)):
                diffs.append(Difference("env", name, f"env {name}={rel.env[name]}: release sets it, spec does not"))
        elif name not in rel.env:
            if not (name != "PYTHONPATH" and _present(name, rel.text)):
                diffs.append(Difference("env", name, f"env {name}={spec.env[name]}: spec sets it, release does not"))
        elif name == "PYTHONPATH":
            r = {p for p in rel.env[name].split(":") if p and p != "helper"}
            s = {p for p in spec.env[name].split(":") if p and p != "helper"}
            if r != s:
                diffs.append(Difference("env", name, f"env PYTHONPATH: release {sorted(r)}, spec {sorted(s)}"))
        elif "*" not in (rel.env[name] + "|" + spec.env[name]).split("|") and not _same_value(rel.env[name], spec.env[name]):
            diffs.append(Difference("env", name, f"env {name}: release {rel.env[name]}, spec {spec.env[name]}"))
    for entry in sorted(rel.entries - spec.entries):
        if not re.search(r"(?<![\w])" + re.escape(entry.removesuffix(".py")) + r"(?![\w])",
                         spec.text + "\n" + spec.helper_text):
            diffs.append(Difference("entry", entry, f"entry {entry}: release runs it, spec does not"))
    for entry in sorted(spec.entries - rel.entries):
        if not _present(entry, rel.text):
            diffs.append(Difference("entry", entry, f"entry {entry}: spec runs it, release does not"))
    for helper in sorted(rel.helpers ^ spec.helpers):
        side = "release" if helper in rel.helpers else "spec"
        diffs.append(Difference("helper", helper, f"helper {helper}: only the {side} uses it"))
    for key in sorted(set(rel.options) | set(spec.options)):
        if key not in spec.options:
            # an option on the command line must be on the spec's; a key or keyword argument may
            # also be written by reb-ray's helper (a config file, a keyword argument in its code)
            where = spec.text if rel.spelled[key].startswith("-") else spec.text + "\n" + spec.helper_text
            if not _present(key, where):
                value = rel.options[key]
                diffs.append(Difference("option", rel.spelled[key],
                                        f"option {rel.spelled[key]}{'=' + value if value else ''}: release passes it, spec does not"))
        elif key not in rel.options:
            if not _present(key, rel.text):
                value = spec.options[key]
                diffs.append(Difference("option", spec.spelled[key],
                                        f"option {spec.spelled[key]}{'=' + value if value else ''}: spec passes it, release does not"))
        else:
            r, s = rel.options[key], spec.options[key]
            if r is not None and s is not None and not _same_value(r, s):
                diffs.append(Difference("option", spec.spelled[key], f"option {spec.spelled[key]}: release {r}, spec {s}"))
    rel_checks = {_check_key(c): c for c in rel.checks}
    spec_checks = {_check_key(c): c for c in spec.checks}
    spec_flat = _check_key(spec.text + "\n" + spec.helper_text)
    rel_flat = _check_key(rel.text)
    for key in sorted(set(rel_checks) - set(spec_checks)):
        if key.startswith("bytes>="):
            n = key.split(">=")[1]
            if not re.search(rf"\b{n}\b", spec.text):
                diffs.append(Difference("check", "bytes", f"check: release requires {key} of output, spec does not"))
        elif key.startswith("import "):
            if not re.search(r"\bimport\s+[\w., ]*\b" + re.escape(key.split()[1]) + r"\b", spec.text):
                diffs.append(Difference("check", key, f"check {key!r}: release requires it to succeed first, spec does not"))
        elif key not in spec_flat:
            diffs.append(Difference("check", key, f"check {key!r}: release checks it, spec does not"))
    for key in sorted(set(spec_checks) - set(rel_checks)):
        if not key.startswith(("bytes>=", "import ")) and key not in rel_flat:
            diffs.append(Difference("check", key, f"check {key!r}: spec checks it, release does not"))
    if stage == "multi_gpu" and (rel.launcher, rel.ranks) != (spec.launcher, spec.ranks):
        diffs.append(Difference("launcher", "launcher",
                                f"launcher: release {rel.launcher} x{rel.ranks}, spec {spec.launcher} x{spec.ranks}"))
    for w in sorted(rel.workdirs ^ spec.workdirs):
        side = "release" if w in rel.workdirs else "spec"
        other = spec if side == "release" else rel
        if not _present(w, other.text):
            diffs.append(Difference("workdir", "workdir", f"workdir {w}: only the {side} runs there"))
    return diffs


def _same_value(release: str, spec: str) -> bool:
    """Values (each possibly "a|b", the values seen in the script) share one, numbers by value."""
    def canon(v: str) -> str:
        try:
            return repr(float(v))
        except ValueError:
            return v.lower()
    return bool({canon(v) for v in release.split("|")} & {canon(v) for v in spec.split("|")})


def covers(deviation: str | None, diff: Difference) -> bool:
    """A deviation covers a difference when it exists and names the element (see the module doc)."""
    if not deviation:
        return False
    if diff.kind in ("timeout", "launcher", "workdir", "applicable"):
        return diff.name in deviation.lower()
    if diff.kind == "check":
        return diff.name == "bytes" and "bytes" in deviation or _check_key(diff.name) in _check_key(deviation)
    if diff.kind in ("entry", "helper", "env"):
        return re.search(r"(?<![\w])" + re.escape(diff.name) + r"(?![\w])", deviation) is not None
    return _present(norm(diff.name), deviation)


# -------------------------------------------------------------------------------------- main


def release_scripts(release: Path, tmp: Path) -> tuple[Path, str | None]:
    """(the release's scripts/ directory, its commit or None); a bare git dir is exported to `tmp`."""
    if (release / "scripts").is_dir():
        commit = None
        if (release / ".git").exists():
            res = subprocess.run(["git", "-C", str(release), "rev-parse", "HEAD"], capture_output=True, text=True)
            commit = res.stdout.strip() or None
        return release / "scripts", commit
    if (release / "HEAD").is_file() and (release / "objects").is_dir():
        listed = subprocess.run(["git", "--git-dir", str(release), "ls-tree", "--name-only", "HEAD"],
                                capture_output=True, text=True).stdout.split()
        paths = ["scripts"] + ([CATEGORIES_CSV] if CATEGORIES_CSV in listed else [])
        res = subprocess.run(["git", "--git-dir", str(release), "archive", "HEAD", *paths], capture_output=True)
        if res.returncode != 0:
            raise SystemExit(f"{release}: git archive HEAD scripts failed: {res.stderr.decode(errors='replace').strip()}")
        with tarfile.open(fileobj=io.BytesIO(res.stdout)) as tar:
            tar.extractall(tmp, filter="data")
        head = subprocess.run(["git", "--git-dir", str(release), "rev-parse", "HEAD"], capture_output=True, text=True)
        return tmp / "scripts", head.stdout.strip() or None
    raise SystemExit(f"{release}: not a release checkout (no scripts/) nor a bare git directory (no HEAD, objects/)")


def owner_repo(git_url: str) -> str:
    return "/".join(git_url.rstrip("/").removesuffix(".git").split("/")[-2:])


def run(release: Path, tasks_dir: Path, only: list[str], show_all: bool, as_json: bool, out=sys.stdout) -> int:
    with tempfile.TemporaryDirectory(prefix="compare-release-") as tmp:
        scripts, commit = release_scripts(release, Path(tmp))
        by_name = {d.name.lower(): d for d in scripts.iterdir() if d.is_dir() and "@" in d.name}
        supports = release_applicability(scripts)
        specs = sorted(tasks_dir.glob("*/task.toml"))
        if not specs:
            raise SystemExit(f"{tasks_dir}: no */task.toml")
        counts = {"stages": 0, "identical": 0, "covered": 0, "undocumented_stages": 0, "undocumented": 0,
                  "deviations": 0, "missing_release": 0}
        rows = []
        for path in specs:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
            if only and data["id"] not in only:
                continue
            source = data.get("source", {})
            if "git" not in source:
                continue
            bench_dir = by_name.get(owner_repo(source["git"]).replace("/", "@").lower())
            if bench_dir is None:
                counts["missing_release"] += 1
                print(f"{data['id']}: no scripts/{owner_repo(source['git']).replace('/', '@')} in the release", file=out)
                continue
            bench = bench_dir / "benchmark_scripts"
            for stage in STAGES:
                table = data.get("stages", {}).get(stage, {"applicable": False})
                deviation = table.get("deviation")
                supported = supports.get(bench_dir.name.lower(), {}).get(stage)
                rel, spec = release_elements(bench, stage, supported), spec_elements(table, stage, path.parent)
                diffs = compare(rel, spec, stage)
                for d in diffs:
                    d.covered = covers(deviation, d)
                counts["stages"] += 1
                counts["deviations"] += bool(deviation)
                undocumented = [d for d in diffs if not d.covered]
                if not diffs:
                    counts["identical"] += 1
                elif undocumented:
                    counts["undocumented_stages"] += 1
                else:
                    counts["covered"] += 1
                counts["undocumented"] += len(undocumented)
                rows.append({"task": data["id"], "stage": stage, "release": rel.summary(), "spec": spec.summary(),
                             "deviation": deviation,
                             "differences": [{"kind": d.kind, "name": d.name, "text": d.text, "covered": d.covered}
                                             for d in diffs]})
        if as_json:
            print(json.dumps({"release_commit": commit, "counts": counts, "stages": rows}, indent=1), file=out)
        else:
            for row in rows:
                if not row["differences"] and not show_all:
                    continue
                print(f"\n== {row['task']} {row['stage']}", file=out)
                for kind in row["release"].keys() | row["spec"].keys():
                    r, s = row["release"].get(kind, "-"), row["spec"].get(kind, "-")
                    mark = "  " if r == s else "≠ "
                    print(f"  {mark}{kind:<9} release: {r}", file=out)
                    if r != s:
                        print(f"  {'':2}{'':<9} spec:    {s}", file=out)
                if row["deviation"]:
                    print(f"  deviation: {row['deviation']}", file=out)
                for d in row["differences"]:
                    print(f"  {'covered     ' if d['covered'] else 'UNDOCUMENTED'} {d['text']}", file=out)
            print(f"\nrelease commit: {commit or 'unknown'}", file=out)
            print(f"stages compared: {counts['stages']}  identical: {counts['identical']}  "
                  f"differing, all covered by a deviation: {counts['covered']}  "
                  f"with undocumented differences: {counts['undocumented_stages']}  "
                  f"undocumented differences: {counts['undocumented']}  "
                  f"stages with a deviation: {counts['deviations']}", file=out)
        return 1 if counts["undocumented"] or counts["missing_release"] else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("release", type=Path, help="release checkout (with scripts/) or its bare git directory")
    parser.add_argument("--tasks", type=Path, default=ROOT / "tasks" / "researchenvbench", help="suite directory")
    parser.add_argument("--task", action="append", default=[], help="only this task id (repeatable)")
    parser.add_argument("--all", action="store_true", help="also print stages without differences")
    parser.add_argument("--json", action="store_true", help="one JSON document instead of text")
    args = parser.parse_args(argv)
    if not args.release.is_dir():
        raise SystemExit(f"{args.release}: no such directory")
    return run(args.release, args.tasks, args.task, args.all, args.json)


if __name__ == "__main__":
    sys.exit(main())
