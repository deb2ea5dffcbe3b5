"""The documentation says what the code does: every `reb-ray` command line in the README, the
user guide, the design documents and the examples parses against the real command line, every
relative link and anchor resolves, and every example configuration loads.

A command line is parsed the way the shell would hand it to `reb-ray` and then by click itself
(`make_context` with resilient parsing off: unknown options, missing values, bad choices and
values of the wrong type fail), without running the command. A synopsis written in prose
(`reb-ray env gc [--budget GiB] [--sweep S]`) is read as a command line: brackets are dropped,
`a|b` takes its first alternative, `...` is dropped, and an upper-case placeholder that stands for
a number or a choice (`--port P`, `--attempt N`) is given a valid value of the option's type. A
command named without any argument (`reb-ray trial show` in a sentence) must name a real command.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import typer

from reb_ray.cli import app

ROOT = Path(__file__).resolve().parents[1]

#: The files whose command lines and links are checked (examples: their comments too).
DOC_FILES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *(ROOT / "examples").glob("*.md")])
EXAMPLE_CONFIGS = sorted((ROOT / "examples").glob("*.toml"))
#: Words the shell treats as the end of one command.
SHELL_OPERATORS = {"&&", "||", "|", ";", "&"}
#: An upper-case stand-in for a value (`DIR`, `N`, `GiB`, `USD`, `ID`).
PLACEHOLDER = re.compile(r"^[A-Z][A-Za-z0-9_]*$")


def _fenced_blocks(text: str) -> list[str]:
    return re.findall(r"^```[^\n]*\n(.*?)^```", text, re.S | re.M)


def _prose(text: str) -> str:
    """The text outside fenced blocks."""
    return re.sub(r"^```[^\n]*\n.*?^```", "", text, flags=re.S | re.M)


def _code_spans(prose: str) -> list[str]:
    """Inline code spans, a span wrapped over lines joined back into one line."""
    return [" ".join(span.split()) for span in re.findall(r"`([^`]+?)`", prose) if "\n\n" not in span]


def _commands_in_shell_line(line: str) -> list[list[str]]:
    """The argument lists of every `reb-ray` invocation on one shell line, also one quoted inside
    another command (`ray exec cluster.yaml 'reb-ray sweep ...'`)."""
    try:
        words = shlex.split(line, comments=True)
    except ValueError:  # an unbalanced quote: not a shell line
        return []
    found: list[list[str]] = []
    for i, word in enumerate(words):
        if word == "reb-ray" or word.endswith("/reb-ray"):
            args = []
            for arg in words[i + 1:]:
                if arg in SHELL_OPERATORS:
                    break
                args.append(arg)
            found.append(args)
        elif " " in word and re.search(r"(^|/)reb-ray ", word):
            found.extend(_commands_in_shell_line(word))
    return found


def _synopsis_args(args: list[str] | None) -> list[str] | None:
    """A prose synopsis as arguments: no brackets or ellipses, the first of `a|b`."""
    if args is None:
        return None
    out = []
    for arg in args:
        arg = arg.replace("[", "").replace("]", "")
        if arg.endswith(",..."):
            arg = arg[: -len(",...")]
        if arg in ("", "...", "…"):
            continue
        if "|" in arg and arg not in SHELL_OPERATORS:
            arg = arg.split("|", 1)[0]
        out.append(arg)
    return out


def command_lines(path: Path) -> list[tuple[str, list[str] | None, bool]]:
    """(the line as written, its arguments after `reb-ray`, whether it is a whole command line)
    for every `reb-ray` command in `path`: a line of a fenced block is one to run as written; a
    code span in a sentence may name a command and some of its options without the rest."""
    text = path.read_text()
    if path.suffix == ".toml":  # an example configuration: the commands in its comments
        comments = [line.split("#", 1)[1] for line in text.splitlines() if "#" in line]
        text = "```\n" + "\n".join(c.strip() for c in comments) + "\n```\n" + "\n".join(comments)
    found = []
    for block in _fenced_blocks(text):
        for line in block.splitlines():
            if "reb-ray" not in line or line.lstrip().startswith(("[", "{")) or "=" in line.split("reb-ray")[0]:
                continue  # TOML and JSON lines are not shell lines
            found.extend((line.strip(), _synopsis_args(args), True) for args in _commands_in_shell_line(line))
    for span in _code_spans(_prose(text)):
        if re.match(r"^(\.venv/bin/)?reb-ray ", span) or re.search(r"^ray (exec|attach) .*'reb-ray ", span):
            commands = _commands_in_shell_line(span)
            # A span the shell cannot split (an unbalanced quote) is reported, never skipped.
            found.extend((span, _synopsis_args(args), False) for args in commands or [None])
    return found


def _is_group(command) -> bool:
    return hasattr(command, "list_commands")


def _fill_placeholders(command, ctx, args: list[str]) -> list[str]:
    """A placeholder after an option of a number or a choice type becomes a valid value."""
    options = {opt: p for p in command.params for opt in (*p.opts, *p.secondary_opts) if opt.startswith("-")}
    out = list(args)
    for i, arg in enumerate(out[:-1]):
        param = options.get(arg)
        if param is None or getattr(param, "is_flag", False) or not PLACEHOLDER.match(out[i + 1]):
            continue
        try:
            param.type.convert(out[i + 1], param, ctx)
        except Exception:
            choices = getattr(param.type, "choices", None)
            out[i + 1] = str(choices[0]) if choices else "1"
    return out


def parse(args: list[str] | None, whole: bool = True) -> str | None:
    """None when `reb-ray ARGS` names a real command whose arguments parse; else why not. A
    command line that is not `whole` (named in a sentence) may leave out required parameters."""
    if args is None:
        return "the shell cannot split this line (an unbalanced quote)"
    root = typer.main.get_command(app)
    command, ctx = root, root.context_class(root, info_name="reb-ray")
    rest = list(args)
    while _is_group(command) and rest and not rest[0].startswith("-"):
        sub = command.get_command(ctx, rest[0])
        if sub is None:
            return f"no command {rest[0]!r} under {ctx.command_path!r}"
        ctx = sub.context_class(sub, info_name=rest[0], parent=ctx)
        command, rest = sub, rest[1:]
    if not rest:  # a command named in a sentence, without its arguments
        return None
    rest = _fill_placeholders(command, ctx, rest)
    try:
        command.make_context(ctx.info_name, rest, parent=ctx.parent, resilient_parsing=False)
    except Exception as exc:  # click's (or typer's vendored click's) usage errors and Exit
        if getattr(exc, "exit_code", 1) == 0:  # --help, --version
            return None
        if not whole and type(exc).__name__ == "MissingParameter":
            return None
        message = exc.format_message() if hasattr(exc, "format_message") else repr(exc)
        return " ".join(message.split())
    return None


def test_the_parser_refuses_what_the_cli_refuses():
    """The check itself tells a wrong command line from a right one."""
    assert parse(["sweep", "--trials", "2", "--agents", "heuristic"]) is None
    assert parse(_synopsis_args("env gc [--budget GiB] [--sweep S] [--output DIR]".split())) is None
    assert parse(["sweep", "--trials", "two"]) is not None
    assert "No such option" in parse(["sweep", "--no-such-flag"])
    assert "no command 'frobnicate'" in parse(["frobnicate"])
    assert parse(["trial", "show", "reb-runs"]) is not None  # its trial id is missing
    assert parse(["env", "export", "reb-runs", "a/b/0"]) is not None  # --out is required
    assert parse(["regrade", "--rerun-probes"], whole=False) is None  # named in a sentence
    assert parse(["regrade", "--rerun-probes", "--bogus"], whole=False) is not None
    assert [(args, whole) for _, args, whole in command_lines_of("x `reb-ray report RUN [--csv FILE|-]` y")] == [
        (["report", "RUN", "--csv", "FILE"], False)]
    assert [(args, whole) for _, args, whole in command_lines_of("```bash\nreb-ray view out  # serve\n```\n")] == [
        (["view", "out"], True)]


def command_lines_of(text: str) -> list[tuple[str, list[str]]]:
    path = ROOT / "tests" / ".doc-check-sample.md"
    try:
        path.write_text(text)
        return command_lines(path)
    finally:
        path.unlink(missing_ok=True)


@pytest.mark.parametrize("path", [*DOC_FILES, *EXAMPLE_CONFIGS], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_command_line_parses(path):
    lines = command_lines(path)
    errors = [f"{line!r}: {why}" for line, args, whole in lines if (why := parse(args, whole)) is not None]
    assert not errors, f"{path.relative_to(ROOT)}: command lines the CLI refuses:\n" + "\n".join(errors)


def test_the_user_facing_pages_show_commands():
    """The README, every guide page (but its index and the test suite's) and every example show
    command lines to check."""
    pages = [p for p in (ROOT / "docs/guide").glob("*.md") if p.name not in ("README.md", "tests.md")]
    assert len(pages) >= 7
    for path in [ROOT / "README.md", *pages, *EXAMPLE_CONFIGS]:
        assert command_lines(path), f"{path.relative_to(ROOT)} shows no reb-ray command line"


def github_anchor(heading: str) -> str:
    """A heading's anchor as GitHub writes it: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[`*_]|\[([^]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for heading in re.findall(r"^#{1,6} (.+)$", _prose(path.read_text()), re.M):
        slug = github_anchor(heading)
        out.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return out


def headings(path: Path) -> set[str]:
    return {h.strip() for h in re.findall(r"^#{1,6} (.+)$", _prose(path.read_text()), re.M)}


def test_github_anchors():
    assert github_anchor("Weights & Biases") == "weights--biases"
    assert github_anchor("Today's probes on a kept environment") == "todays-probes-on-a-kept-environment"
    assert github_anchor("The `heuristic` and `noop` baselines") == "the-heuristic-and-noop-baselines"
    assert github_anchor("SLURM and HPC clusters (rootless Podman)") == "slurm-and-hpc-clusters-rootless-podman"


@pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(path):
    prose = re.sub(r"`[^`]*`", "", _prose(path.read_text()))
    errors = []
    for target in re.findall(r"\]\(([^)\s]+)\)", prose):
        if re.match(r"^[a-z]+:", target):  # https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            errors.append(f"{target}: no such file {dest}")
        elif anchor and (dest.suffix != ".md" or anchor not in anchors(dest)):
            errors.append(f"{target}: no heading with anchor #{anchor} in {dest.relative_to(ROOT)}")
    # A section of the decisions named in prose, as `docs/DECISIONS.md, "Faults"`, is a link too.
    decisions = headings(ROOT / "docs/DECISIONS.md")
    for name in re.findall(r"DECISIONS\.md[,]? \(?\"([^\"]+)\"", " ".join(prose.split())):
        if name not in decisions:
            errors.append(f'DECISIONS.md, "{name}": no such heading in docs/DECISIONS.md')
    assert not errors, f"{path.relative_to(ROOT)}:\n" + "\n".join(errors)


@pytest.mark.parametrize("path", EXAMPLE_CONFIGS, ids=lambda p: p.name)
def test_every_example_configuration_loads(path):
    """Each example is a valid sweep.toml for the real loader, and says in comments how to run it."""
    from reb_ray.cli.sweep import load_config

    config = load_config(path, {})
    assert config.agents and f"--config examples/{path.name}" in path.read_text()


def test_the_cluster_example_is_three_llm_agents_on_the_suite_with_budgets():
    from reb_ray.cli.sweep import load_config
    from reb_ray.models.agent import LLM_KINDS
    from reb_ray.suite.load import load_suite

    config = load_config(ROOT / "examples/llm-agents-cluster.toml", {})
    specs = [config.agent_spec(name) for name in config.agents]
    assert len(specs) == 3 and all(s.kind in LLM_KINDS and s.model and s.max_cost_usd for s in specs)
    assert config.llm.max_cost_usd and config.cluster.address == "auto"
    assert len(load_suite(config.suite)) == 44
