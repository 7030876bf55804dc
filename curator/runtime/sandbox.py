"""A sandbox: a child process that runs one stage on one document at a time.

The parent sends a batch; the child runs the stage on each row in turn and sends the results
back in chunks. Before it starts a row it writes the row's index and start time into a small
shared memory map, so the parent always knows which document is running. When the child dies,
that document fails with reason ``worker_died``; when it runs longer than the stage's
``timeout_s``, the parent kills the child and fails it with reason ``timeout``. A new child then
takes the documents whose results had not come back, and the rest of the batch.

On Linux the child is forked from the worker (``os.fork``; ``multiprocessing`` refuses children
of a daemonic Dask worker): it starts with everything the worker has imported, the stage
included, and calls ``setup``. It must say it is ready within ``FORK_READY_S``; a forked child
that does not (a lock some other thread of the worker held at the fork), and every child of a
stage that asks for a GPU (CUDA does not survive a fork), is instead a fresh interpreter
(``subprocess``) that loads the pipeline's imports and the pickled stage: 1.3 CPU-s more per
start. Children are kept per worker process and stage, and reused batch after batch.
"""

from __future__ import annotations

import atexit
import mmap
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Connection

import cloudpickle
import pyarrow as pa

from curator.batch import ID, BatchResult, Failure, join_results
from curator.plugins import load_imports, loaded_imports
from curator.runtime.errors import CurationError
from curator.stages.base import BatchStage

CHUNK_ROWS = 256  # results travel back every CHUNK_ROWS documents...
CHUNK_SECONDS = 0.5  # ...or every CHUNK_SECONDS, whichever comes first
POLL_SECONDS = 0.5  # how often the parent looks at a child that has no timeout
MAX_SILENT_DEATHS = 3  # deaths outside any document (start-up, sending) before giving up
FORK_READY_S = 60.0  # a forked child not ready by then is replaced by a fresh interpreter

Progress = Callable[[int, int], None]  # (documents done, documents failed) in this batch


class _Slots:
    """Three int64 in shared memory: index of the running row, its start (monotonic ns), busy."""

    def __init__(self, fd: int) -> None:
        self._map = mmap.mmap(fd, 24)
        self.view = memoryview(self._map).cast("q")

    def begin(self, index: int) -> None:
        self.view[1] = time.monotonic_ns()  # start first: a reader that sees the new index
        self.view[0] = index  # sees its start time too
        self.view[2] = 1

    def end(self) -> None:
        self.view[2] = 0

    def running(self) -> tuple[int, float] | None:
        """(index, start in seconds) of the row being processed, or None between rows."""
        if not self.view[2]:
            return None
        index = self.view[0]
        return index, self.view[1] / 1e9


@dataclass
class _Lost:
    """The child is gone: ``index`` is the row it was running (None: between rows)."""

    index: int | None
    reason: str
    error: str


def forks(stage: BatchStage) -> bool:
    """Whether the sandbox of ``stage`` starts by forking the worker (Linux, no GPU)."""
    return sys.platform == "linux" and not stage.resources().get("GPU")


class Sandbox:
    """A child process running ``stage``; restarted whenever it dies or is killed."""

    def __init__(self, stage: BatchStage, name: str) -> None:
        self.name, self.timeout, self.stage = name, stage.timeout_s, stage
        self.payload = cloudpickle.dumps(stage)
        self.fork = forks(stage)
        self.proc: subprocess.Popen | _Forked | None = None
        self.conn: Connection | None = None
        self._file = tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the sandbox)
        os.ftruncate(self._file.fileno(), 24)
        self.slots = _Slots(self._file.fileno())

    def run(self, batch: pa.Table, progress: Progress | None = None) -> BatchResult:
        """The stage's result on ``batch``, every row processed on its own."""
        pieces: list[tuple[int, BatchResult]] = []
        tally = [0, 0]  # documents done, failed

        def add(start: int, result: BatchResult) -> None:
            pieces.append((start, result))
            tally[0] += result.kept.num_rows + result.n_removed + len(result.failed)
            tally[1] += len(result.failed)
            if progress is not None:
                progress(*tally)

        todo = [(0, batch.num_rows)] if batch.num_rows else []
        silent_deaths = 0
        while todo:
            start, stop = todo.pop(0)
            received, lost = self._run_range(batch, start, stop, add)
            if lost is None:
                continue
            if lost.index is None:  # the child died between documents: none to blame
                silent_deaths += 1
                if silent_deaths >= MAX_SILENT_DEATHS:
                    raise CurationError(f"stage {self.name!r}: its sandbox process died "
                                        f"{silent_deaths} times outside any document "
                                        f"({lost.error})")
                todo.insert(0, (received, stop))
                continue
            index = lost.index
            add(index, BatchResult(kept=batch.slice(0, 0), failed=[Failure(
                stage=self.name, error=f"{lost.reason}: {lost.error}", reason=lost.reason,
                id=batch.column(ID)[index].as_py())]))
            todo[:0] = [(a, b) for a, b in ((received, index), (index + 1, stop)) if b > a]
        return _assemble(batch, pieces)

    def _run_range(self, batch: pa.Table, start: int, stop: int,
                   add: Callable[[int, BatchResult], None]) -> tuple[int, _Lost | None]:
        """Send rows ``start:stop`` and collect their chunks until done or the child is lost.
        Returns how far results came back, and what was lost (its row index in ``batch``)."""
        self._start()
        assert self.conn is not None
        self.conn.send(batch.slice(start, stop - start))
        received = start
        while received < stop:
            message = self._next()
            if isinstance(message, _Lost):
                if message.index is not None:
                    message.index += start
                return received, message
            first, last, result = message
            add(start + first, result)
            received = start + last
        return received, None

    def _next(self) -> tuple[int, int, BatchResult] | _Lost:
        """The next chunk from the child, or what was lost when it died or ran out of time."""
        assert self.conn is not None and self.proc is not None
        while True:
            running = self.slots.running()
            wait = POLL_SECONDS
            if self.timeout is not None and running is not None:
                wait = min(wait, running[1] + self.timeout - time.monotonic())
            if self.conn.poll(max(0.0, wait)):
                try:
                    message = self.conn.recv()
                except (EOFError, OSError):
                    return self._lost("worker_died", self._exit_status())
                if message[0] == "setup_failed":
                    self.close()
                    raise CurationError(f"stage {self.name!r}: setup failed in its sandbox: "
                                        f"{message[1]}")
                return message[1:]
            if self.proc.poll() is not None:
                return self._lost("worker_died", self._exit_status())
            running = self.slots.running()
            if (self.timeout is not None and running is not None
                    and time.monotonic() - running[1] >= self.timeout):
                self.proc.kill()
                self.proc.wait()
                return self._lost("timeout", f"still running after {self.timeout:g} s "
                                  "(timeout_s); its process was killed", running[0])

    def _lost(self, reason: str, error: str, index: int | None = None) -> _Lost:
        """The child is gone: note the row it was running (unless given) and forget it."""
        if index is None:
            running = self.slots.running()
            index = None if running is None else running[0]
        self._forget()
        return _Lost(index, reason, error)

    def _exit_status(self) -> str:
        assert self.proc is not None
        code = self.proc.wait()
        if code < 0:
            return f"the process running the stage was killed by {signal.Signals(-code).name}"
        return f"the process running the stage exited with code {code}"

    def _start(self) -> None:
        if self.proc is not None:
            return
        self.slots.end()
        parent, child = socket.socketpair()
        if self.fork:
            self.proc = _fork(self.stage, self.name, child, parent, self.slots)
            child.close()
            self.conn = Connection(parent.detach())
            if self._ready():
                return
            self.close()  # stuck before it was ready: from now on, fresh interpreters
            self.fork = False
            parent, child = socket.socketpair()
        path = os.pathsep.join(p for p in sys.path if p)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from curator.runtime.sandbox import serve; serve()",
             str(child.fileno()), str(self._file.fileno())],
            pass_fds=(child.fileno(), self._file.fileno()), stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": path})
        child.close()
        self.conn = Connection(parent.detach())
        self.conn.send((self.name, loaded_imports(), self.payload))

    def _ready(self) -> bool:
        """Whether the forked child set the stage up within ``FORK_READY_S`` (a failed setup
        raises, as in a fresh interpreter)."""
        assert self.conn is not None
        try:
            if not self.conn.poll(FORK_READY_S):
                return False
            message = self.conn.recv()
        except (EOFError, OSError):
            return False
        if message[0] == "setup_failed":
            self.close()
            raise CurationError(f"stage {self.name!r}: setup failed in its sandbox: {message[1]}")
        return True

    def _forget(self) -> None:
        if self.conn is not None:
            self.conn.close()
        self.proc = self.conn = None

    def close(self) -> None:
        """Stop the child."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
        self._forget()

    def release(self) -> None:
        """Stop the child and free the shared slots: the sandbox is not used again."""
        self.close()
        self._file.close()


def _assemble(batch: pa.Table, pieces: list[tuple[int, BatchResult]]) -> BatchResult:
    """One result from the pieces, in row order."""
    pieces.sort(key=lambda piece: piece[0])
    return join_results([r for _, r in pieces], batch.slice(0, 0))


_POOL: dict[str, list[Sandbox]] = {}
_POOL_LOCK = threading.Lock()


@contextmanager
def sandbox_for(stage: BatchStage, name: str) -> Iterator[Sandbox]:
    """A sandbox for ``stage`` that no other thread is using (children are reused)."""
    key = f"{type(stage).__module__}.{type(stage).__qualname__}:{stage.fingerprint()}:{name}"
    with _POOL_LOCK:
        free = _POOL.setdefault(key, [])
        box = free.pop() if free else None
    if box is None:
        box = Sandbox(stage, name)
    try:
        yield box
    except BaseException:
        box.release()  # it may be half-way through a batch nobody will read
        raise
    with _POOL_LOCK:
        _POOL[key].append(box)


@atexit.register
def _close_all() -> None:
    for boxes in _POOL.values():
        for box in boxes:
            box.release()


# ---------------------------------------------------------------------------- the child
def serve() -> None:
    """The child's main loop: ``python -c '...serve()' CONN_FD SLOTS_FD``."""
    conn = Connection(int(sys.argv[1]))
    slots = _Slots(int(sys.argv[2]))
    _exit_with_parent(os.getppid())
    name, imports, payload = conn.recv()
    try:
        load_imports(imports)
        stage = cloudpickle.loads(payload)
        stage.setup()
    except Exception as err:
        conn.send(("setup_failed", f"{type(err).__name__}: {err}"))
        return
    _loop(stage, name, conn, slots)


class _Forked:
    """A forked child, with the part of ``subprocess.Popen`` the sandbox uses."""

    def __init__(self, pid: int) -> None:
        self.pid, self.returncode = pid, None

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self) -> int:
        if self.returncode is None:
            self.returncode = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            os.kill(self.pid, signal.SIGKILL)


def _fork(stage: BatchStage, name: str, child: socket.socket, parent: socket.socket,
          slots: _Slots) -> _Forked:
    """Fork a child that sets ``stage`` up, says so, and serves batches on ``child``."""
    worker = os.getpid()
    pid = os.fork()
    if pid == 0:  # the child never returns into the worker's code
        try:
            parent.close()
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            _exit_with_parent(worker)
            _serve_forked(stage, name, Connection(child.detach()), slots)
        finally:
            os._exit(0)
    return _Forked(pid)


def _serve_forked(stage: BatchStage, name: str, conn: Connection, slots: _Slots) -> None:
    try:
        stage.setup()
    except Exception as err:
        conn.send(("setup_failed", f"{type(err).__name__}: {err}"))
        return
    conn.send(("ready",))
    _loop(stage, name, conn, slots)


def _loop(stage: BatchStage, name: str, conn: Connection, slots: _Slots) -> None:
    while True:
        try:
            batch = conn.recv()
        except EOFError:
            return
        _process(stage, name, batch, conn, slots)


def _process(stage: BatchStage, name: str, batch: pa.Table, conn: Connection,
             slots: _Slots) -> None:
    """Run ``stage`` on each row of ``batch``; send results every chunk."""
    chunk: list[BatchResult] = []
    first, sent_at = 0, time.monotonic()
    for i in range(batch.num_rows):
        row = batch.slice(i, 1)
        slots.begin(i)
        try:
            chunk.append(stage.process(row))
        except Exception as err:  # a document the stage cannot handle fails alone
            chunk.append(BatchResult(kept=row.slice(0, 0), failed=[Failure(
                stage=name, error=f"{type(err).__name__}: {err}", id=row.column(ID)[0].as_py())]))
        slots.end()
        now = time.monotonic()
        if i + 1 - first >= CHUNK_ROWS or now - sent_at >= CHUNK_SECONDS or i + 1 == batch.num_rows:
            result = _assemble(row, list(enumerate(chunk)))
            result.kept = result.kept.combine_chunks()
            if result.removed is not None:
                result.removed = result.removed.combine_chunks()
            conn.send(("chunk", first, i + 1, result))
            chunk, first, sent_at = [], i + 1, now


def _exit_with_parent(parent: int) -> None:
    """Exit when the parent process is gone (a killed worker leaves no orphan running)."""
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()
