"""What the ``curate serve`` tests share: real runs on the sample documents, the service on a
free loopback port (in a thread of this process, or as a ``curate serve`` subprocess), raw HTTP
requests that no client normalises, and waiting on a condition."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from aiohttp import web

from curator import LengthFilter, Pii, Pipeline, ReadJsonl, WriteParquet
from curator.serve.app import make_app
from tests.conftest import ROOT, sample_documents

T = TypeVar("T")
TOKEN = "test-token-" + "x" * 32
EMAIL = "alice.example@mail.example.com"
#: Ids as they come from the web: angle brackets, a colon, '#', '/', '%', a space.
ODD_IDS = ("<urn:uuid:6f1c-42>#frag/a b", "100%/pure?q=1&x=../y")
SHORT = "a short page that the length filter removes"


def input_documents() -> list[dict[str, Any]]:
    """The sample documents (ids with '/'), two with odd ids, one short page, and pages with an
    e-mail address (pii rewrites them)."""
    docs = [{"id": d["id"], "text": d["text"], "source": "sample"} for d in sample_documents()]
    long = docs[0]["text"]
    docs += [{"id": ODD_IDS[0], "text": SHORT, "source": "web", "url": "https://example.com/a"},
             {"id": ODD_IDS[1], "text": long[:3000], "source": "web",
              "url": "https://example.com/b"},
             {"id": "mail-1", "text": f"Write to {EMAIL} for details.\n" + long[:2500],
              "source": "web"}]
    return docs


def write_inputs(folder: Path, n_shards: int = 3) -> Path:
    """``input_documents()`` dealt into ``n_shards`` JSONL files; returns the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    docs = input_documents()
    for i in range(n_shards):
        (folder / f"shard-{i:03d}.jsonl").write_text(
            "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs[i::n_shards]),
            encoding="utf-8")
    return folder


def make_run(inputs: Path, run_dir: Path) -> Path:
    """A finished run: read → pii → length filter (2000 characters) → Parquet, every removed
    document kept with its text; its report written."""
    Pipeline([ReadJsonl(path=f"{inputs}/*.jsonl"), Pii(), LengthFilter(min_chars=2000),
              WriteParquet()], name="served", rejected="documents").run(
        output=run_dir, executor="local", progress=False)
    from curator.report.html import write_report

    write_report(run_dir)
    return run_dir


class Server:
    """The application on 127.0.0.1, a free port, served by a thread's event loop."""

    def __init__(self, roots: list[Path], token: str = TOKEN, submit: bool = False,
                 cwd: Path | None = None) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.runner = web.AppRunner(make_app(roots, token, submit, cwd))
        self._call(self._start())
        self.port = self.runner.addresses[0][1]
        self.token = token
        self.base = f"http://127.0.0.1:{self.port}"

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(60)

    async def _start(self) -> None:
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", 0).start()

    def close(self) -> None:
        self._call(self.runner.cleanup())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


class Response:
    def __init__(self, status: int, headers: http.client.HTTPMessage, body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body

    def json(self) -> Any:
        return json.loads(self.body)


def request(port: int, path: str, method: str = "GET", headers: dict[str, str] | None = None,
            body: bytes | str | None = None) -> Response:
    """``path`` sent exactly as given (no normalisation of ``..`` or percent-escapes)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.putrequest(method, path, skip_host=False, skip_accept_encoding=True)
        data = body.encode() if isinstance(body, str) else body
        for key, value in (headers or {}).items():
            conn.putheader(key, value)
        if data is not None:
            conn.putheader("Content-Length", str(len(data)))
        conn.endheaders(data)
        res = conn.getresponse()
        return Response(res.status, res.headers, res.read())
    finally:
        conn.close()


def bearer(token: str = TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def wait_for(what: Callable[[], T | None], timeout: float = 180, message: str = "") -> T:
    """Poll ``what`` until it returns something true (a condition, not a clock)."""
    deadline = time.monotonic() + timeout
    while True:
        value = what()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {message or what}")
        time.sleep(0.2)


#: A filter that holds each batch until the test opens its gate: ``<folder>/open-<n>`` lets the
#: n-th batch through (``<folder>/arrived-<n>`` says it is waiting): a run that moves one shard
#: at a time, when the test says, and never ends by itself.
GATE_PLUGIN = '''
import itertools, threading, time
from pathlib import Path
import pyarrow as pa
from curator import Filter

_count = itertools.count(1)
_lock = threading.Lock()


class Gate(Filter):
    """Holds each batch until its gate file is there."""

    type = "test_gate"
    folder: str

    def reasons(self, batch: pa.Table) -> pa.Array:
        with _lock:
            n = next(_count)
        gates = Path(self.folder)
        (gates / f"arrived-{n}").touch()
        while not (gates / f"open-{n}").exists():
            time.sleep(0.05)
        return pa.nulls(batch.num_rows, pa.string())
'''


def gated_pipeline(folder: Path, inputs: Path, output: Path, gates: Path) -> Path:
    """A pipeline YAML whose ``test_gate`` stage holds every shard (one batch each) on
    ``gates``; local executor, so that one batch passes at a time."""
    (folder / "gate_stage.py").write_text(GATE_PLUGIN, encoding="utf-8")
    gates.mkdir(parents=True, exist_ok=True)
    config = folder / "gated.yaml"
    config.write_text(
        f"name: gated\noutput: {output}\nexecutor: {{type: local}}\n"
        f"imports: [gate_stage.py]\nstages:\n"
        f"  - {{type: read_jsonl, path: '{inputs}/*.jsonl'}}\n"
        f"  - {{type: test_gate, folder: '{gates}'}}\n"
        f"  - {{type: write_parquet}}\n", encoding="utf-8")
    return config


def curate(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
           **popen: Any) -> subprocess.Popen:
    """``curate ARGS`` as a subprocess (this interpreter, the checkout on its path)."""
    full = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.Popen([sys.executable, "-m", "curator", *args], env=full,
                            cwd=cwd or ROOT, **popen)


URL_LINE = re.compile(r"curator serve: (http://(\S+?):(\d+)/\?token=(\S+))")


def serve_subprocess(*args: str, env: dict[str, str] | None = None,
                     cwd: Path | None = None) -> tuple[subprocess.Popen, re.Match]:
    """``curate serve ARGS --port 0`` started; returns it and its printed address line."""
    proc = curate("serve", *args, "--port", "0", env=env, cwd=cwd, stdout=subprocess.PIPE,
                  stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    match = URL_LINE.search(line)
    if match is None:
        proc.kill()
        raise AssertionError(f"no address printed: {line!r} {proc.stderr.read()}")
    return proc, match
