"""``curate serve``: the web service (aiohttp) over the runs of the served folders.

Pages ``/`` (runs) and ``/runs/{run}`` (progress, report, documents) are static files that read
the JSON API under ``/api/`` (docs/serve.md). A run is found only by name through
``find_runs``, never by joining the request into a path; a document id is one percent-encoded
path segment (``encodeURIComponent``: ``/`` as ``%2F``). Every response carries the security
headers; every request needs the token (``auth.py``). What reads files (run folders, Parquet)
runs in a bounded thread pool, document queries at most :data:`DOCUMENT_QUERIES` at a time."""

from __future__ import annotations

import asyncio
import logging
import mimetypes
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import orjson
from aiohttp import web

from curator.serve import submit as submitting
from curator.serve.auth import Handler, stored_token, token_middleware
from curator.serve.documents import DocumentQuery, get_document, query_documents, stage_catalog
from curator.serve.runs import find_runs, run_detail, run_progress, run_summary
from curator.store.run_dir import RunDir

STATIC = Path(__file__).with_name("static")
PAGE_CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
            "frame-src 'self'; frame-ancestors 'self'; base-uri 'none'; form-action 'self'; "
            "object-src 'none'")
#: report.html is one page of inline CSS and SVG without script: it gets nothing else, in a
#: sandbox (an origin of its own, so not even injected markup could reach the API).
REPORT_CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
              "frame-ancestors 'self'; base-uri 'none'; form-action 'none'; sandbox")
HEADERS = {"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
           "X-Frame-Options": "SAMEORIGIN", "Cross-Origin-Opener-Policy": "same-origin",
           "Cross-Origin-Resource-Policy": "same-origin"}
#: How long the list of runs and a run's progress are reused: many pages polling every second
#: cost the served folders one listing and one read of progress.json per run at most.
RUNS_TTL_S = 1.0
PROGRESS_TTL_S = 0.5
FILE_THREADS = 8
DOCUMENT_QUERIES = 2
MAX_BODY = 1 << 20  # a submitted pipeline YAML

log = logging.getLogger("curator.serve")
T = TypeVar("T")


class ApiError(web.HTTPException):
    """An error answer whose body is ``{"error": message}`` (its first line)."""

    def __init__(self, status: int, message: str) -> None:
        self.status_code = status
        line = message.splitlines()[0] if message else ""
        super().__init__(text=orjson.dumps({"error": line}).decode(),
                         content_type="application/json")


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(data, default=str, option=orjson.OPT_SERIALIZE_NUMPY
                                          | orjson.OPT_NON_STR_KEYS),
                        status=status, content_type="application/json")


class Service:
    """The served folders and what the handlers share: the thread pool, the cached run list
    and progress."""

    def __init__(self, roots: list[Path], submit: bool, cwd: Path) -> None:
        self.roots = [r.resolve() for r in roots]
        self.submit = submit
        self.cwd = cwd
        self.pool = ThreadPoolExecutor(FILE_THREADS, thread_name_prefix="curator-serve")
        self.documents = asyncio.Semaphore(DOCUMENT_QUERIES)
        self._cache: dict[Any, tuple[float, asyncio.Future[Any]]] = {}

    async def blocking(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in the thread pool."""
        return await asyncio.get_running_loop().run_in_executor(self.pool, partial(fn, *args))

    async def cached(self, key: Any, ttl: float, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in the pool, its answer shared with every caller for ``ttl`` seconds
        (callers that come while it runs wait for the same answer)."""
        now = time.monotonic()
        hit = self._cache.get(key)
        if hit is None or now - hit[0] > ttl or (hit[1].done() and hit[1].exception()):
            future = asyncio.ensure_future(self.blocking(fn, *args))
            self._cache[key] = hit = (now, future)
        return await asyncio.shield(hit[1])

    async def runs(self) -> dict[str, Path]:
        return await self.cached("runs", RUNS_TTL_S, find_runs, self.roots)

    async def run(self, request: web.Request) -> tuple[str, Path]:
        """The run the request names, by its name alone; 404 when no served folder has it."""
        name = request.match_info["run"]
        path = (await self.runs()).get(name)
        if path is None or not any(path.is_relative_to(r) for r in self.roots):
            raise ApiError(404, f"no run named {name!r}")
        return name, path


SERVICE = web.AppKey("service", Service)


def _service(request: web.Request) -> Service:
    return request.app[SERVICE]


# ---------------------------------------------------------------------------- pages
def _static_files() -> dict[str, tuple[bytes, str]]:
    """The page files by name, read once: a request names one of them, never a path."""
    return {p.name: (p.read_bytes(), mimetypes.guess_type(p.name)[0] or "text/plain")
            for p in STATIC.iterdir() if p.is_file()}


STATIC_FILES = web.AppKey("static", dict)


def _file(request: web.Request, name: str) -> web.Response:
    found = request.app[STATIC_FILES].get(name)
    if found is None:
        raise web.HTTPNotFound()
    body, kind = found
    return web.Response(body=body, content_type=kind, charset="utf-8")


async def index_page(request: web.Request) -> web.Response:
    return _file(request, "index.html")


async def run_page(request: web.Request) -> web.Response:
    await _service(request).run(request)
    return _file(request, "run.html")


async def static_file(request: web.Request) -> web.Response:
    return _file(request, request.match_info["name"])


# ---------------------------------------------------------------------------- the JSON API
def _summaries(runs: dict[str, Path]) -> list[dict[str, Any]]:
    return [run_summary(path, name) for name, path in runs.items()]


async def list_runs(request: web.Request) -> web.Response:
    service = _service(request)
    runs = await service.runs()
    return _json({"runs": await service.blocking(_summaries, runs), "submit": service.submit})


async def one_run(request: web.Request) -> web.Response:
    service = _service(request)
    name, path = await service.run(request)
    return _json(await service.blocking(run_detail, path, name))


async def progress(request: web.Request) -> web.Response:
    service = _service(request)
    _, path = await service.run(request)
    return _json(await service.cached(("progress", path), PROGRESS_TTL_S, run_progress, path))


async def stages(request: web.Request) -> web.Response:
    service = _service(request)
    _, path = await service.run(request)
    return _json({"stages": await service.blocking(stage_catalog, path)})


async def documents(request: web.Request) -> web.Response:
    service = _service(request)
    _, path = await service.run(request)
    try:
        query = DocumentQuery.from_params(request.query)
    except ValueError as err:
        raise ApiError(400, str(err)) from None
    async with service.documents:
        try:
            return _json(await service.blocking(query_documents, path, query))
        except LookupError as err:  # a stage the run does not have
            raise ApiError(404, str(err).strip("'\"")) from None


async def document(request: web.Request) -> web.Response:
    service = _service(request)
    _, path = await service.run(request)
    doc_id = request.match_info["id"]
    async with service.documents:
        found = await service.blocking(get_document, path, doc_id)
    if found is None:
        raise ApiError(404, f"no document {doc_id!r} in this run")
    return _json(found)


def _read_report(run: Path, roots: list[Path]) -> bytes | None:
    """The run's report.html, if it is a file of the run (a link leading out is refused)."""
    report = RunDir(run).report_file
    resolved = report.resolve()
    if not (resolved.is_relative_to(run.resolve()) and any(
            resolved.is_relative_to(r) for r in roots)) or not resolved.is_file():
        return None
    return resolved.read_bytes()


async def report(request: web.Request) -> web.Response:
    service = _service(request)
    _, path = await service.run(request)
    body = await service.blocking(_read_report, path, service.roots)
    if body is None:
        raise ApiError(404, "this run has no report.html yet (`curate report` writes one)")
    return web.Response(body=body, content_type="text/html", charset="utf-8",
                        headers={"Content-Security-Policy": REPORT_CSP})


async def submit_run(request: web.Request) -> web.Response:
    service = _service(request)
    try:
        text = (await request.read()).decode("utf-8")
    except UnicodeDecodeError:
        raise ApiError(400, "the pipeline YAML must be UTF-8 text") from None
    try:
        submission = await service.blocking(submitting.prepare, text, request.query,
                                            service.roots, service.cwd)
        await service.blocking(submitting.start, submission, service.cwd)
    except submitting.Refused as err:
        raise ApiError(err.status, str(err)) from None
    log.info("submitted %s (%s)", submission.output, submission.log)
    return _json({"run": submission.output.name, "output": str(submission.output),
                  "log": str(submission.log)}, status=202)


# ---------------------------------------------------------------------------- the application
@web.middleware
async def json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """API errors as one-line JSON (aiohttp's own 404/405/413 too); a bug as a 500 that says
    nothing of the server (its traceback goes to the log)."""
    try:
        return await handler(request)
    except web.HTTPException as err:
        if err.status < 400 or err.content_type == "application/json" or not \
                request.path.startswith("/api/"):
            raise
        raise ApiError(err.status, err.reason) from None
    except Exception:
        log.exception("%s %s", request.method, request.path)
        raise ApiError(500, "internal error (see the server's log)") from None


async def _headers(request: web.Request, response: web.StreamResponse) -> None:
    response.headers.setdefault("Content-Security-Policy", PAGE_CSP)
    for key, value in HEADERS.items():
        response.headers.setdefault(key, value)
    if request.path.startswith("/api/"):
        response.headers.setdefault("Cache-Control", "no-store")


def make_app(roots: list[Path], token: str, submit: bool = False,
             cwd: Path | None = None) -> web.Application:
    """The application serving the runs under ``roots``, for requests with ``token``; with
    ``submit``, ``POST /api/runs`` starts runs (relative paths from ``cwd``)."""
    if not token:
        raise ValueError("an empty token would let anyone in")
    app = web.Application(middlewares=[json_errors, token_middleware(token)],
                          client_max_size=MAX_BODY)
    service = Service(roots, submit, cwd or Path.cwd())
    app[SERVICE] = service
    app[STATIC_FILES] = _static_files()
    app.on_response_prepare.append(_headers)

    async def close_pool(_: web.Application) -> None:
        service.pool.shutdown(wait=False, cancel_futures=True)

    app.on_cleanup.append(close_pool)
    app.router.add_get("/", index_page)
    app.router.add_get("/runs/{run}", run_page)
    app.router.add_get("/static/{name}", static_file)
    app.router.add_get("/api/runs", list_runs)
    if submit:
        app.router.add_post("/api/runs", submit_run)
    app.router.add_get("/api/runs/{run}", one_run)
    app.router.add_get("/api/runs/{run}/progress", progress)
    app.router.add_get("/api/runs/{run}/stages", stages)
    app.router.add_get("/api/runs/{run}/documents", documents)
    app.router.add_get("/api/runs/{run}/documents/{id}", document)
    app.router.add_get("/api/runs/{run}/report", report)
    return app


def serve(roots: list[Path], host: str, port: int, token: str | None, submit: bool) -> None:
    """Serve until interrupted; print the address with the token once listening."""
    asyncio.run(_serve(roots, host, port, token or stored_token(), submit))


async def _serve(roots: list[Path], host: str, port: int, token: str, submit: bool) -> None:
    runner = web.AppRunner(make_app(roots, token, submit), access_log=None)  # tokens in URLs
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
        bound = runner.addresses[0][1]
        shown = f"[{host}]" if ":" in host else host
        print(f"curator serve: http://{shown}:{bound}/?token={token}", flush=True)
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
