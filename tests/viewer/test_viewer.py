"""`reb-ray view` served for real on a free port over a run written with the real ParquetSink,
its pages fetched over HTTP: the overview's numbers against the terminal summary, the matrix's
filters and paging, a trial page with its report, C5 audit, stages, trajectory and logs, the
ATIF document, two agents side by side, rows arriving while it runs, escaping and refused
paths."""

from __future__ import annotations

import gzip
import json
import os
import time
from urllib.parse import quote, urlencode

import pytest

from analysis.scores import summarize
from analysis.summary import row_cells
from reb_ray.llm.atif import validate
from reb_ray.results.parquet_sink import ParquetSink
from reb_ray.results.read import read_trials
from reb_ray.testing.synthetic import HOSTILE_TRIAL, PAYLOAD, trial
from tests.viewer.dom import parse, squares
from tests.viewer.runs import (CHAT_TRIAL, CLAUDE_REQUESTS, CLAUDE_TRIAL, CODEX_TRIAL, COMMAND_TRIAL,
                               HEURISTIC_OUTPUT, HEURISTIC_TRIAL, INFRA_TRIAL, MANIFEST_COMMANDS, STAGE_LOG_TEXT, SWEEP,
                               write_run)
from reb_ray.viewer.server import RUN_KEY, SUMMARY_KEY
from tests.viewer.served import Served


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return write_run(tmp_path_factory.mktemp("viewer") / "run")


@pytest.fixture(scope="module")
def served(run_dir):
    s = Served(run_dir)
    s.wait_summary()
    yield s
    s.close()


def q(**params) -> str:
    return urlencode(params)


def matrix(served, **params) -> list[dict]:
    return squares(parse(served.text(f"/matrix?{q(sweep=SWEEP, **params)}")))


def test_overview_shows_the_terminal_summary_numbers_and_intervals(served, run_dir):
    page = parse(served.text("/"))
    sweeps = page.tables["sweeps"]
    assert sweeps[1][:6] == [SWEEP, "37", "36", "1", "0", "38"]  # 37 trials (t7 infra only), 38 attempts written
    shown = page.tables["summary"][1:]
    expected = [row_cells(r) for r in summarize(read_trials(run_dir))]
    assert shown == expected
    frugal = next(r for r in shown if r[0] == "frugal")
    assert (frugal[1], frugal[5], frugal[14], frugal[15]) == ("12", "3/8", "0.2400", "1")  # by hand from the fixture
    rates = {r[0]: r for r in page.tables["rates"][1:]}
    assert rates["frugal"][2].startswith("3/8 38% [") and rates["weak"][2].startswith("0/8 0% [")
    assert "Computing" not in page.text


@pytest.mark.parametrize("params, trials", [
    ({"agent": "weak"}, {f"weak/t{t}/{i}" for t in range(1, 7) for i in (0, 1)}),
    ({"reached": "4"}, {"frugal/t1/0", "spender/t1/0"}),  # SSSS on t1 trial 0 only
    ({"status": "infra_error"}, {INFRA_TRIAL}),
    ({"owner": "infra"}, {INFRA_TRIAL}),
    ({"category": "infra_sandbox"}, {INFRA_TRIAL}),
    ({"cost_min": "0.1"}, {f"spender/t{t}/{i}" for t in range(1, 7) for i in (0, 1)}),
    ({"cost_max": "0.05", "task": "t6"}, {"frugal/t6/0", "frugal/t6/1"}),
    ({"reached": "none"}, {INFRA_TRIAL}),
])
def test_matrix_filters(served, params, trials):
    found = matrix(served, **params, per=100)
    assert {s["title"].split(":")[0] for s in found} == trials


def test_matrix_colours_and_paging(served):
    page = parse(served.text(f"/matrix?{q(sweep=SWEEP, per=2, page=2)}"))
    assert [r[0] for r in page.tables["matrix"][1:]] == ["t3", "t4"]
    assert page.tables["matrix"][0][:4] == ["task", "frugal", "spender", "weak"]
    assert "page 2 of 4" in page.text  # t1..t7
    nxt = [link["href"] for link in page.links if link["text"].startswith("next")]
    assert nxt and "page=3" in nxt[0]
    colours = {s["title"].split(":")[0]: s["class"] for s in matrix(served, task="t1")}
    assert colours["frugal/t1/0"] == "sq r4" and colours["frugal/t1/1"] == "sq r3" and colours["weak/t1/0"] == "sq r2"
    assert matrix(served, page=99, per=2)  # past the end: the last page
    status, _, body = served.get(f"/matrix?{q(sweep=SWEEP, page='x')}")
    assert status == 400 and b"page=" in body


def test_trial_page(served):
    page = parse(served.text(f"/trial?{q(sweep=SWEEP, id=CLAUDE_TRIAL)}"))
    stages = {r[0]: r for r in page.tables["stages"][1:]}
    assert stages["c1"][1] == "success" and stages["c4"][1] == "success"
    assert "pip install -r requirements.txt" in page.text and "No module named 'apex'" in page.text
    assert "tokens in 1000" in page.text and "$0.005000" in page.text  # the first model turn's request
    assert "deps first" in " ".join(page.pres)  # the reasoning
    log = [link["href"] for link in page.links if link["text"] == "full log"]
    assert len(log) == 1
    status, headers, body = served.get(log[0])
    assert status == 200 and body.decode() == STAGE_LOG_TEXT and headers["Content-Type"].startswith("text/plain")
    status, _, raw = served.get(log[0] + "&download=1")
    assert status == 200 and gzip.decompress(raw).decode() == STAGE_LOG_TEXT
    audited = parse(served.text(f"/trial?{q(sweep=SWEEP, id='frugal/t2/0')}"))
    assert ["torch_version", "version", "null", "null", "hallucination", ""] in audited.tables["c5"]


def test_trial_page_of_an_agent_without_a_transcript(served):
    """Each log listed once, the agent's output shown once (under its stage), the commands from the
    environment manifest in place of a transcript, and the shortcut checks and kept environment."""
    html = served.text(f"/trial?{q(sweep=SWEEP, id=HEURISTIC_TRIAL)}")
    page = parse(html)
    listed = [link["text"] for link in page.links if link["text"].startswith("artifacts/")]
    agent_log = [t for t in listed if t.endswith("/agent.jsonl.gz")]
    assert len(agent_log) == 1 and page.text.count("agent log:") == 1, listed  # the agent stage names it too
    assert sum(p.count("[heuristic] $ python -m venv") for p in page.pres) == 1  # not as a step, not as a tail again
    assert "agent output (tail)" not in page.text and "heuristic unknown" not in page.text
    assert "No transcript is stored for this attempt: the agent kind heuristic keeps none" in page.text
    assert [r[1:] for r in page.tables["commands"][1:]] == [[c["command"], str(c["exit_code"])] for c in MANIFEST_COMMANDS]
    assert "<dt>C0 unowned</dt><dd>2: fakepkg, fakepkg.sub (" in html
    timings = html.split("<h2>Timings</h2>", 1)[1].split("</section>", 1)[0]
    assert "<dt>agent phase</dt>" in timings and "<dt>agent</dt>" not in timings  # its time once, not again as a stage
    assert "pip install --no-deps fakepkg" in page.text and "x.pth" in page.text
    manifest = [link["href"] for link in page.links if link["text"].endswith("env_manifest.jsonl.gz")]
    assert manifest and json.loads(served.text(manifest[0]))["commands"]["list"] == MANIFEST_COMMANDS
    assert f"(sha256 {'ab' * 32}, 123 bytes of JSON, gzipped on disk)" in page.text
    assert "yes, image reb-ray/env:syn-weak (sha256:" in page.text and "its layer 28672 bytes" in page.text
    other = parse(served.text(f"/trial?{q(sweep=SWEEP, id=CLAUDE_TRIAL)}"))
    assert "No transcript" not in other.text and "Environment" in other.text and "not recorded" in other.text


def test_agent_words_are_text(served):
    status, headers, body = served.get(f"/trial?{q(sweep=SWEEP, id=HOSTILE_TRIAL)}")
    page = parse(body.decode())
    assert status == 200 and page.scripts == 0 and "<script" not in body.decode()
    assert PAYLOAD in page.text and "script-src" not in headers["Content-Security-Policy"]
    assert "default-src 'none'" in headers["Content-Security-Policy"]


@pytest.mark.parametrize("path, status", [
    ("../trials", 403), ("artifacts/../../../../etc/passwd", 403), ("/etc/passwd", 403), ("trials", 403),
    ("artifacts/evil/passwd", 403), ("artifacts/missing.log.gz", 404), ("", 403),
])
def test_log_paths_outside_artifacts_are_refused(served, run_dir, path, status):
    evil = run_dir / "artifacts" / "evil"
    if not evil.exists():
        os.symlink("/etc", evil)
    got, _, body = served.get(f"/log?path={quote(path, safe='')}")
    assert got == status
    assert b"root:" not in body


def test_a_log_shows_control_and_bidi_characters_as_escapes(served, run_dir):
    """A log line with a terminal escape, a right-to-left override and a character split across
    the stream's 64 KiB chunks (the 49-byte first line puts a 2-byte 'é' across the first
    boundary): shown escaped (never applied), the rest as written; the download is
    the file's own bytes."""
    text = "ok! \x1b[2J cleared? \u202edesrever\u202c done \u2067iso\u2069\r\n" + "é" * 40_000 + "\nend\n"
    raw = gzip.compress(text.encode())
    (run_dir / "artifacts" / "bidi.log.gz").write_bytes(raw)
    status, headers, body = served.get("/log?path=artifacts%2Fbidi.log.gz")
    shown = body.decode("utf-8")
    assert status == 200 and headers["Content-Type"].startswith("text/plain")
    assert shown.startswith("ok! \\x1b[2J cleared? \\u202edesrever\\u202c done \\u2067iso\\u2069\\r\n"), shown[:120]
    assert not any(c in shown for c in "\x1b\u202e\u202c\u2067\u2069\r\ufffd")
    assert shown.endswith("é" * 40_000 + "\nend\n")
    assert served.get("/log?path=artifacts%2Fbidi.log.gz&download=1")[2] == raw


@pytest.mark.integration  # two drawing processes (matplotlib): seconds, kept out of the unit tier
def test_pictures_are_svg_of_the_sweeps_agents_without_script(served, run_dir):
    """The overview links its three pictures and the compare page its paired one; each is an SVG
    drawn from the rows (the agents' names in its text), holds no script, is sent with a policy
    that forbids scripts and fetches; a second request is served from what was drawn."""
    overview = served.text("/")
    for picture in ("rates", "frontier", "spend"):
        assert f"/plot.svg?{q(sweep=SWEEP, plot=picture)}".replace("&", "&amp;") in overview
    agents = ("frugal", "spender", "weak")
    for picture, params in (("rates", {}), ("frontier", {}), ("spend", {}), ("paired", {"a": "frugal", "b": "spender"})):
        status, headers, body = served.get(f"/plot.svg?{q(sweep=SWEEP, plot=picture, **params)}")
        svg = body.decode()
        assert status == 200 and headers["Content-Type"].startswith("image/svg+xml"), (picture, status, svg[:300])
        assert headers["Content-Security-Policy"] == "default-src 'none'; style-src 'unsafe-inline'"
        assert svg.lstrip().startswith("<?xml") and "<svg" in svg and "<script" not in svg.lower()
        named = [a for a in agents if a in svg]
        assert named == (["frugal", "spender"] if picture == "paired" else list(agents)), (picture, named)
        assert served.get(f"/plot.svg?{q(sweep=SWEEP, plot=picture, **params)}")[2] == body
    assert served.get(f"/plot.svg?{q(sweep=SWEEP, plot='pie')}")[0] == 400
    assert served.get(f"/plot.svg?{q(sweep=SWEEP, plot='paired', a='frugal', b='nobody')}")[0] == 400
    compare = served.text(f"/compare?{q(sweep=SWEEP, task='t1', a='frugal', b='spender')}")
    assert f"/plot.svg?{q(sweep=SWEEP, plot='paired', a='frugal', b='spender')}".replace("&", "&amp;") in compare


@pytest.mark.parametrize("trial_id", [CLAUDE_TRIAL, CODEX_TRIAL, CHAT_TRIAL, COMMAND_TRIAL, HOSTILE_TRIAL, INFRA_TRIAL])
def test_atif_documents_validate(served, run_dir, trial_id):
    doc = json.loads(served.text(f"/trial.atif.json?{q(sweep=SWEEP, id=trial_id)}"))
    assert validate(doc) == []
    assert doc["schema_version"] == "ATIF-v1.7" and doc["steps"][0]["source"] == "user"


def test_atif_step_metrics_sum_to_the_row(served):
    doc = json.loads(served.text(f"/trial.atif.json?{q(sweep=SWEEP, id=CLAUDE_TRIAL)}"))
    turns = [s for s in doc["steps"] if "metrics" in s]
    assert [(s["metrics"]["prompt_tokens"], s["metrics"]["completion_tokens"]) for s in turns] == \
        [(i, o) for i, o, _ in CLAUDE_REQUESTS]
    assert sum(s["metrics"]["prompt_tokens"] for s in turns) == doc["final_metrics"]["total_prompt_tokens"] == 4000
    assert sum(s["metrics"]["completion_tokens"] for s in turns) == doc["final_metrics"]["total_completion_tokens"] == 1000
    assert sum(s["metrics"]["cost_usd"] for s in turns) == pytest.approx(doc["final_metrics"]["total_cost_usd"])
    codex = json.loads(served.text(f"/trial.atif.json?{q(sweep=SWEEP, id=CODEX_TRIAL)}"))
    assert not any("metrics" in s for s in codex["steps"]) and "not per step" in codex["extra"]["metrics_attribution"]
    assert codex["final_metrics"]["total_prompt_tokens"] == 90000


def test_compare_page(served):
    page = parse(served.text(f"/compare?{q(sweep=SWEEP, task='t1', a='frugal', b='weak')}"))
    assert "frugal/t1/0" in page.text and "weak/t1/0" in page.text
    assert "pip install -r requirements.txt" in page.text  # frugal's trajectory
    assert len(page.tables["stages"]) > 1


def test_unknown_trial_and_missing_parameters(served):
    assert served.get(f"/trial?{q(sweep=SWEEP, id='nobody/t1/0')}")[0] == 404
    assert served.get(f"/trial?{q(sweep=SWEEP, id=CLAUDE_TRIAL, attempt=9)}")[0] == 404
    assert served.get("/trial?sweep=syn")[0] == 400
    assert served.get("/matrix?sweep=nope")[0] == 404
    status, headers, body = served.get("/nope")  # no such page: the viewer's own error page, headers set
    assert status == 404 and "no page at /nope" in body.decode() and "Content-Security-Policy" in headers


def test_rows_written_while_it_runs_show_without_a_restart(served, run_dir):
    assert not matrix(served, task="t9")
    with ParquetSink(run_dir) as sink:
        row, stages = trial("frugal", "t9", 0, "SSSS")
        sink.write([row], stages)
    assert [s["title"].split(":")[0] for s in matrix(served, task="t9")] == ["frugal/t9/0"]
    served.wait_summary()
    assert parse(served.text("/")).tables["sweeps"][1][1] == "38"


def test_an_early_summary_child_is_adopted_and_rows_after_its_read_are_computed_again(tmp_path):
    """`reb-ray view` starts the table's child before the server: the server adopts its answer
    and takes the files as the child found them, so rows written after that read are computed
    at the next page, not lost behind a snapshot taken later."""
    from reb_ray.viewer.summary import launch

    run = write_run(tmp_path / "run")
    early = launch(run)
    assert early.wait(120) == 0
    with ParquetSink(run) as sink:  # after the child read the files
        row, stages = trial("frugal", "t9", 0, "SSSS")
        sink.write([row], stages)
    s = Served(run, early_summary=early)  # adopted at start-up, before any page
    try:
        summary = s.app[SUMMARY_KEY]
        deadline = time.monotonic() + 60
        while summary.running is not None or summary.snapshot is None:
            assert time.monotonic() < deadline, "the adopted child's answer was not read"
            time.sleep(0.1)
        assert summary.result["attempts"] == 38 and summary.snapshot != s.app[RUN_KEY].snapshot()
        s.wait_summary()  # the page sees newer files than the child did: computed again
        assert summary.result["attempts"] == 39 and summary.snapshot == s.app[RUN_KEY].snapshot()
    finally:
        s.close()


def test_export_trajectories(run_dir, tmp_path):
    from typer.testing import CliRunner

    from reb_ray.cli import app

    result = CliRunner().invoke(app, ["export-trajectories", str(run_dir), str(tmp_path / "atif")])
    assert result.exit_code == 0, result.output
    files = sorted((tmp_path / "atif").rglob("trajectory.json"))
    assert len(files) >= 37
    for path in files:
        assert validate(json.loads(path.read_text())) == [], path
