"""The viewer's web application (aiohttp), its routes and its safety rules.

Routes (all GET; trial ids hold slashes, so they travel as query parameters):

- `/`: the sweeps (trials, scored, infra errors, agents, tasks, last finish) and per sweep the
  paper's table and the success rates with 95% intervals (reb_ray.viewer.summary; computed in a
  child process, shown when ready, recomputed when rows arrive).
- `/matrix?sweep=&agent=&task=&reached=&status=&owner=&category=&cost_min=&cost_max=&page=`:
  tasks x agents, each trial a square coloured by the highest stage it reached, filtered, a
  page of tasks at a time (reb_ray.viewer.data).
- `/trial?sweep=&id=&attempt=`: one attempt: identity, timings, tokens and cost, the report
  beside what C5 observed, every stage with its verdict, category, witness and kept output,
  the trajectory's steps (ATIF, reb_ray.llm.atif; for an agent kind that keeps no transcript,
  the commands of its environment manifest), leftovers, repository changes and restore, the
  interpreter's kind, start-up hooks, suspicious actions and C0 unowned, the environment kept
  (manifest digest, image), and links to every log, each once.
- `/trial.atif.json?sweep=&id=&attempt=`: that trajectory as an ATIF document.
- `/compare?sweep=&task=&a=&b=`: two agents on one task side by side.
- `/log?path=REL[&download=1]`: an artifact streamed (gzip logs decompressed on the fly, or
  the gzip file itself with download=1); only paths under `<output>/artifacts`. Shown, it is
  read as UTF-8 (an invalid byte as U+FFFD) with every control and bidi character written as a
  visible escape (`reb_ray.terminal.printable`: `\\x1b`, `\\u202e`), so a log line can neither
  move the cursor nor display reversed text; the download is the file's bytes.
- `/plot.svg?sweep=&plot=rates|frontier|spend` and `/plot.svg?sweep=&plot=paired&a=&b=`: the
  overview's and the compare page's pictures (reb_ray.viewer.pictures), drawn in a child
  process when the rows changed, kept until they change again.
- `/static/...`: the stylesheet shipped in this package.

Safety: it binds 127.0.0.1 unless told otherwise; every page is rendered by jinja2 with
autoescape on and every value passed through `reb_ray.terminal.printable` first (the HTML
report's rules: an agent's `<script>` is text); no page holds a script, and the
Content-Security-Policy header (`CSP`) forbids scripts and any resource from elsewhere; logs are
served as text/plain with nosniff, so a log cannot become a page.
"""

from __future__ import annotations

import asyncio
import codecs
import gzip
import json
import subprocess
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from aiohttp import web

import reb_ray
from reb_ray.errors import RebRayError
from reb_ray.terminal import printable
from reb_ray.viewer.pictures import PAIR_PICTURES, PICTURES
from reb_ray.viewer.pictures import available as pictures_available
from reb_ray.viewer.data import Forbidden, NotFound, Query, Run
from reb_ray.viewer.child import answer, start
from reb_ray.viewer.summary import launch

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"
CSP = ("default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'; "
       "frame-ancestors 'none'")
#: The pictures' own policy: matplotlib's SVG styles its elements inline; still no script, no fetch.
SVG_CSP = "default-src 'none'; style-src 'unsafe-inline'"
CHUNK = 64 * 1024
STEPS_SHOWN = 400  # trajectory steps rendered on a page (the ATIF link has them all)
STAGE_ORDER = ("agent", "report", "c0", "c1", "c2", "c3", "c4", "c5", "env_size")
RUN_KEY = web.AppKey("run", Run)
SUMMARY_KEY = web.AppKey("summary", object)
PICTURES_KEY = web.AppKey("pictures", object)
JINJA_KEY = web.AppKey("jinja", object)


def _environment():
    import jinja2

    # Lenient undefined: optional keys of a row or an ATIF step read as empty. Autoescape on.
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                             finalize=lambda v: printable(v) if isinstance(v, str) else ("-" if v is None else v))
    env.filters["q"] = lambda params: urlencode({k: v for k, v in params.items() if v not in (None, "")})
    env.filters["fmt"] = lambda v, spec="": "-" if v is None else format(v, spec)
    env.filters["pretty"] = _pretty
    return env


def _pretty(raw: str | None) -> str:
    """A JSON text indented, or as it is when it is not JSON."""
    if not raw:
        return ""
    try:
        return json.dumps(json.loads(raw), indent=2, ensure_ascii=False)
    except ValueError:
        return raw


class Summary:
    """The paper's table of the run, computed by `python -m reb_ray.viewer.summary` in a child
    process whenever the trials files changed since the last computation (one at a time).
    `early`: a child already started on this run (`summary.launch`), adopted at the first
    refresh instead of starting one."""

    def __init__(self, run: Run, early: subprocess.Popen | None = None) -> None:
        self.run = run
        self.result: dict | None = None
        self.error: str | None = None
        self.snapshot: tuple | None = None  # what `result` was computed from
        self.running: asyncio.Task | None = None
        self.started: float | None = None
        self._early = early

    async def refresh(self) -> None:
        """Start a computation when the data changed and none is running."""
        if self._early is not None and self.running is None:
            early, self._early = self._early, None
            self.started = time.time()
            self.running = asyncio.get_running_loop().create_task(self._collect(early, None))
            return
        snapshot = await asyncio.to_thread(self.run.snapshot)
        if snapshot != self.snapshot and self.running is None:
            self.started = time.time()
            self.running = asyncio.get_running_loop().create_task(self._compute(snapshot))

    async def _compute(self, snapshot: tuple) -> None:
        try:
            proc = await asyncio.to_thread(launch, self.run.output_dir)
        except OSError as exc:
            self.error = f"the summary process failed: {exc}"
            self.snapshot, self.running = snapshot, None
            return
        await self._collect(proc, snapshot)

    async def _collect(self, proc: subprocess.Popen, snapshot: tuple | None) -> None:
        """Read a child's answer; the snapshot is the one the child took before it read the
        files (else `snapshot`, what was seen when it was started)."""
        try:
            result = await answer(proc, "the summary process")
            self.result, self.error = result, None
            if result.get("snapshot") is not None:
                snapshot = tuple(tuple(part) for part in result["snapshot"])
        except (OSError, RebRayError) as exc:
            self.error = str(exc) if isinstance(exc, RebRayError) else f"the summary process failed: {exc}"
        finally:
            self.snapshot, self.running = snapshot, None

    async def wait(self) -> None:
        """Until no computation runs (tests and the benchmark)."""
        while self.running is not None:
            await asyncio.shield(self.running)


class Pictures:
    """The SVG pictures (reb_ray.viewer.pictures), drawn by a child process per sweep (or per
    sweep and pair of agents) when the trials files changed since they were drawn; requests
    for a set being drawn wait for that one drawing."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.drawn: dict[tuple, tuple[tuple, dict]] = {}  # group -> (snapshot, {name: svg})
        self.drawing: dict[tuple, asyncio.Task] = {}

    async def get(self, sweep: str, picture: str, pair: tuple[str, str] | None) -> str:
        """The SVG text of `picture`. Raises RebRayError with the drawing's error."""
        group = (sweep, *pair) if pair else (sweep,)
        snapshot = await asyncio.to_thread(self.run.snapshot)
        hit = self.drawn.get(group)
        if hit is not None and hit[0] == snapshot:
            return hit[1][picture]
        task = self.drawing.get(group)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._draw(group, snapshot))
            self.drawing[group] = task
        svgs = await asyncio.shield(task)
        return svgs[picture]

    async def _draw(self, group: tuple, snapshot: tuple) -> dict:
        try:
            proc = await asyncio.to_thread(start, "reb_ray.viewer.pictures", str(self.run.output_dir), *group)
            result = await answer(proc, "the drawing process")
            self.drawn[group] = (snapshot, result)
            return result
        finally:
            self.drawing.pop(group, None)


def _render(request: web.Request, template: str, status: int = 200, **context) -> web.Response:
    text = request.app[JINJA_KEY].get_template(template).render(version=reb_ray.__version__,
                                                                output_dir=str(request.app[RUN_KEY].output_dir), **context)
    return web.Response(text=text, content_type="text/html", charset="utf-8", status=status)


@web.middleware
async def _guard(request: web.Request, handler) -> web.StreamResponse:
    """Security headers on every answer; the library's errors as pages with their status."""
    try:
        response = await handler(request)
    except (NotFound, Forbidden, RebRayError) as exc:
        status = 404 if isinstance(exc, NotFound) else 403 if isinstance(exc, Forbidden) else 400
        response = _render(request, "error.html.j2", status=status, title=f"{status}", message=str(exc))
    except web.HTTPNotFound:  # no such route: the same page as a trial that is not there
        response = _render(request, "error.html.j2", status=404, title="404",
                           message=f"no page at {request.path} (the overview is at /)")
    except web.HTTPException as exc:  # aiohttp's other answers (a redirect, a method not allowed)
        _secure(exc.headers)
        raise
    _secure(response.headers, SVG_CSP if response.content_type == "image/svg+xml" else CSP)
    return response


def _secure(headers, csp: str = CSP) -> None:
    headers["Content-Security-Policy"] = csp
    headers["X-Content-Type-Options"] = "nosniff"
    headers["Referrer-Policy"] = "no-referrer"
    headers["X-Frame-Options"] = "DENY"


async def overview(request: web.Request) -> web.Response:
    run, summary = request.app[RUN_KEY], request.app[SUMMARY_KEY]
    await summary.refresh()
    sweeps = await asyncio.to_thread(run.sweeps)
    result = summary.result or {}
    by_id = {s["id"]: s for s in result.get("sweeps", [])}
    return _render(request, "overview.html.j2", title="reb-ray view", sweeps=sweeps, by_id=by_id,
                   headers=result.get("headers", []), legend=result.get("legend", ""),
                   computing=summary.running is not None, stale=summary.result is not None,
                   summary_error=summary.error, summary_seconds=result.get("seconds"),
                   summary_attempts=result.get("attempts"), summary_peak=result.get("peak_mb"),
                   pictures=pictures_available())


async def plot_svg(request: web.Request) -> web.Response:
    sweep, picture = _required(request, "sweep", "plot")
    if picture not in PICTURES:
        raise RebRayError(f"plot={picture!r}: expected one of {', '.join(PICTURES)}")
    pair = tuple(_required(request, "a", "b")) if picture in PAIR_PICTURES else None
    if not pictures_available():
        raise NotFound("pictures need matplotlib: pip install 'reb-ray[plots]'")
    svg = await request.app[PICTURES_KEY].get(sweep, picture, pair)
    return web.Response(text=svg, content_type="image/svg+xml", charset="utf-8")


async def matrix(request: web.Request) -> web.Response:
    run = request.app[RUN_KEY]
    q = Query.parse(request.query)
    m = await asyncio.to_thread(run.matrix, q)
    return _render(request, "matrix.html.j2", title=f"matrix: {m.sweep}", m=m, q=q)


def _int_param(request: web.Request, name: str) -> int | None:
    raw = request.query.get(name)
    if raw in (None, ""):
        return None
    try:
        return int(raw)
    except ValueError:
        raise RebRayError(f"{name}={raw!r}: not an integer") from None


def _required(request: web.Request, *names: str) -> list[str]:
    missing = [n for n in names if not request.query.get(n)]
    if missing:
        raise RebRayError(f"missing parameter(s): {', '.join(missing)}")
    return [request.query[n] for n in names]


def trajectory_of(run: Run, row: dict) -> dict:
    """The ATIF document of an attempt: its own trajectory.json, else built from its stored
    transcript and request log (a run written before attempts wrote one)."""
    from reb_ray.viewer.trajectories import of_attempt

    return of_attempt(run, row)


_TRIAL_FILES = (("agent log", "agent_log_path"), ("transcript", "trajectory_path"), ("trajectory (ATIF)", "atif_path"),
                ("LLM request log", "llm_log_path"),
                ("network log", "network_log_path"), ("environment manifest", "env_manifest_path"))
#: The ATIF step reb_ray.llm.atif builds from the row's output tail when no transcript is kept:
#: the page shows that output once, under the agent stage, not again as a step.
_TAIL_STEP = "agent_output_tail"


def _manifest_commands(run: Run, row: dict) -> list[dict] | None:
    """The environment manifest's `commands` list (the commands the agent ran, read from its
    transcript or full log at capture), None when no manifest or no list is stored."""
    from reb_ray.viewer.trajectories import read_artifact

    data = read_artifact(run, row.get("env_manifest_path"))
    try:
        listed = ((json.loads(data) if data else {}).get("commands") or {}).get("list")
    except (ValueError, AttributeError):
        return None
    return [c for c in listed if isinstance(c, dict)] if isinstance(listed, list) else None


def _trial_context(run: Run, sweep: str, trial_id: str, attempt: int | None) -> dict:
    row, attempts, stages = run.trial(sweep, trial_id, attempt)
    stages.sort(key=lambda s: STAGE_ORDER.index(s["stage"]) if s["stage"] in STAGE_ORDER else len(STAGE_ORDER))
    named = [(name, row.get(key)) for name, key in _TRIAL_FILES]
    named += [(f"{s['stage']} log", s.get("log_path")) for s in stages]
    seen: set[str] = set()  # the agent stage names the trial's own agent log: listed once
    files = [(name, rel) for name, rel in named if rel and not (rel in seen or seen.add(rel))]
    files += [("other", rel) for rel in run.other_files(row, {rel for _, rel in files})]
    sizes = {}
    for _, rel in files:
        try:
            sizes[rel] = run.artifact(rel).stat().st_size
        except RebRayError:
            sizes[rel] = None
    report = next((s for s in stages if s["stage"] == "report"), None)
    c5 = next((s for s in stages if s["stage"] == "c5"), None)
    items = []
    if c5 and c5.get("raw"):
        try:
            items = [i for i in json.loads(c5["raw"]).get("items", []) if isinstance(i, dict)]
        except (ValueError, AttributeError):
            items = []
    traj = trajectory_of(run, row)
    steps = [s for s in traj["steps"] if not str((s.get("extra") or {}).get("from", "")).startswith(_TAIL_STEP)]
    agent_output_shown = any(s["stage"] == "agent" and (s.get("log_head") or s.get("log_tail")) for s in stages)
    transcript = len(steps) > 1  # more than the task prompt's step
    presence = None
    if row.get("env_kept"):  # whether the kept image is still on its node (asked of Docker here)
        from reb_ray.environment.keep import image_presence

        presence = image_presence(row)
    return {"row": row, "attempts": attempts, "stages": stages, "files": files, "sizes": sizes,
            "image_presence": presence, "report": report, "c5_items": items, "traj": traj, "steps": steps[:STEPS_SHOWN],
            "steps_total": len(steps), "transcript": transcript, "agent_output_shown": agent_output_shown,
            "commands": None if transcript else _manifest_commands(run, row)}


async def trial(request: web.Request) -> web.Response:
    sweep, trial_id = _required(request, "sweep", "id")
    ctx = await asyncio.to_thread(_trial_context, request.app[RUN_KEY], sweep, trial_id, _int_param(request, "attempt"))
    return _render(request, "trial.html.j2", title=f"trial {trial_id}", **ctx)


async def trial_atif(request: web.Request) -> web.Response:
    sweep, trial_id = _required(request, "sweep", "id")
    run = request.app[RUN_KEY]

    def build() -> dict:
        row, _, _ = run.trial(sweep, trial_id, _int_param(request, "attempt"))
        return trajectory_of(run, row)

    doc = await asyncio.to_thread(build)
    return web.Response(text=json.dumps(doc, indent=1, ensure_ascii=False), content_type="application/json", charset="utf-8")


async def compare(request: web.Request) -> web.Response:
    sweep, task, a, b = _required(request, "sweep", "task", "a", "b")
    run = request.app[RUN_KEY]
    index = _int_param(request, "index")

    def build() -> list[dict]:
        sides = []
        for agent in (a, b):
            trials = run.trials_of(sweep, task, agent)
            chosen = next((t for t in trials if index is None or t["trial_index"] == index), None)
            detail = _trial_context(run, sweep, chosen["trial_id"], chosen["attempt"]) if chosen else None
            sides.append({"agent": agent, "trials": trials, "detail": detail})
        return sides

    sides = await asyncio.to_thread(build)
    agents = (await asyncio.to_thread(run.matrix, Query(sweep=sweep, task=task))).choices["agents"]
    return _render(request, "compare.html.j2", title=f"{a} vs {b} on {task}", sweep=sweep, task=task, sides=sides,
                   agents=agents, a=a, b=b, pictures=pictures_available() and a != b)


async def log(request: web.Request) -> web.StreamResponse:
    run = request.app[RUN_KEY]
    path = run.artifact(request.query.get("path", ""))
    if request.query.get("download"):
        return web.FileResponse(path, headers={"Content-Type": "application/octet-stream",
                                               "Content-Disposition": f'attachment; filename="{path.name}"'})
    response = web.StreamResponse(headers={"Content-Type": "text/plain; charset=utf-8"})
    _secure(response.headers)  # set before prepare: the middleware comes too late for a stream
    await response.prepare(request)
    opener = gzip.open if path.name.endswith(".gz") else open
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")  # a character split across chunks stays whole
    with opener(path, "rb") as f:
        while True:
            try:
                chunk = await asyncio.to_thread(f.read, CHUNK)
            except (OSError, EOFError) as exc:
                await response.write(f"\n[reb-ray view: the file ends early or is damaged: {exc}]\n".encode())
                break
            if not chunk:
                break
            await response.write(printable(decoder.decode(chunk)).encode())
    await response.write(printable(decoder.decode(b"", final=True)).encode())
    await response.write_eof()
    return response


async def _start_summary(app: web.Application) -> None:
    """At start: the paper's table begins computing, and the matrix base is read in a worker
    thread, so the first page usually finds it ready."""
    await app[SUMMARY_KEY].refresh()
    asyncio.get_running_loop().run_in_executor(None, app[RUN_KEY].base)


def make_app(output_dir: Path, early_summary: subprocess.Popen | None = None) -> web.Application:
    """The application serving the results directory `output_dir` (`early_summary`: the paper
    table's child, started already). Raises RebRayError when it holds no trials dataset."""
    run = Run(Path(output_dir))
    app = web.Application(middlewares=[_guard])
    app[RUN_KEY] = run
    app[SUMMARY_KEY] = Summary(run, early_summary)
    app[PICTURES_KEY] = Pictures(run)
    app[JINJA_KEY] = _environment()
    app.router.add_get("/", overview)
    app.router.add_get("/matrix", matrix)
    app.router.add_get("/trial", trial)
    app.router.add_get("/trial.atif.json", trial_atif)
    app.router.add_get("/compare", compare)
    app.router.add_get("/log", log)
    app.router.add_get("/plot.svg", plot_svg)
    app.router.add_static("/static", STATIC, follow_symlinks=False)
    app.on_startup.append(_start_summary)
    return app


def serve(output_dir: Path, host: str = "127.0.0.1", port: int = 8765, announce: Any = print,
          early_summary: subprocess.Popen | None = None) -> None:
    """Serve `output_dir` on host:port until interrupted (`early_summary`: as make_app)."""
    app = make_app(output_dir, early_summary)
    announce(f"reb-ray view: http://{host}:{port}/ serving {Path(output_dir).resolve()} (Ctrl-C stops)")
    web.run_app(app, host=host, port=port, print=None, handle_signals=True)
