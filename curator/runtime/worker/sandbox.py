"""A sandbox: a child process that runs stages on batches so that one document cannot stop a run.

The parent sends a stage (once per child) and then batches; the child sends the results back in
chunks. While a document is being worked on, the child writes its row index and start time into
a small shared memory map, so the parent always knows which document is running. When that
document runs longer than the stage's ``timeout_s``, the parent kills the child and fails it
with reason ``timeout``. When the child dies under a document (a crash, the OOM killer, a kill
from outside), the document is run again alone in a new child, and fails with reason
``worker_died`` only if it kills that one too. A new child then takes the documents whose
results had not come back, and the rest of the batch.

Most stages run one row at a time. A stage with ``marks_documents`` gets chunks of
``CHUNK_ROWS`` rows in one call and marks each document as it starts it (:func:`each_document`):
its per-document overhead stays that of an ordinary call. Where a chunk dies, runs out of time
outside any marked document, or raises, the chunk is run again one row at a time.

One child serves every stage of a worker thread's fused segment (and the sources' guarded work):
each stage is sent and set up there once; children are kept per worker process and reused
batch after batch, shard after shard.

On Linux the child is forked from the worker (``os.fork``; ``multiprocessing`` refuses children
of a daemonic Dask worker): it starts with everything the worker has imported. A forked child
that does not set a stage up within ``FORK_READY_S`` (a lock some other thread of the worker held
at the fork), and every child of a stage that asks for a GPU (CUDA does not survive a fork), is
instead a fresh interpreter (``subprocess``) that loads the pipeline's imports: 1.3 CPU-s more
per start.
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
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import TypeVar

import cloudpickle
import pyarrow as pa

from curator.batch import ID, BatchResult, Failure, join_results
from curator.plugins import load_imports, loaded_imports
from curator.runtime.errors import CurationError
from curator.runtime.worker.cpu_clock import add_child_cpu, process_cpu
from curator.stages.base import BatchStage

CHUNK_ROWS = 256  # results travel back every CHUNK_ROWS documents...
CHUNK_SECONDS = 0.5  # ...or every CHUNK_SECONDS, whichever comes first (one row at a time)
POLL_SECONDS = 0.5  # how often the parent looks at a child that has no timeout
MAX_SILENT_DEATHS = 3  # deaths outside any document (start-up, sending) before giving up
FORK_READY_S = 60.0  # a forked child that has not set a stage up by then: fresh interpreters
IDLE, DOCUMENT, UNMARKED = 0, 1, 2  # what the child is doing: nothing, one row, a whole chunk

Progress = Callable[[int, int], None]  # (documents done, documents failed) in this batch
T = TypeVar("T")


class _Slots:
    """Three int64 in shared memory: index of the running row, its start (monotonic ns), state."""

    def __init__(self, fd: int) -> None:
        self._map = mmap.mmap(fd, 24)
        self.view = memoryview(self._map).cast("q")

    def begin(self, index: int) -> None:
        self.view[1] = time.monotonic_ns()  # start first: a reader that sees the new index
        self.view[0] = index  # sees its start time too
        self.view[2] = DOCUMENT

    def unmarked(self) -> None:
        """A chunk is being worked on, outside any one document, from now."""
        self.view[1] = time.monotonic_ns()
        self.view[2] = UNMARKED

    def end(self) -> None:
        self.view[2] = IDLE

    def running(self) -> tuple[int, int, float] | None:
        """(state, row index, start in seconds) while the child works, None between calls."""
        state = self.view[2]
        if state == IDLE:
            return None
        return state, self.view[0], self.view[1] / 1e9


#: In a child running a chunk: its slots and the chunk's first row (for :func:`each_document`).
_MARKING: tuple[_Slots, int] | None = None


def each_document(items: Iterable[T]) -> Iterator[T]:
    """``items``, one per row of the batch the stage is processing, in row order. In a sandbox
    child each row is marked as running while the stage works on it: ``timeout_s`` applies to it
    alone and a death is blamed on it. Outside a sandbox: ``items`` as they are. A stage that
    does all of its per-document work inside such a loop sets ``marks_documents``."""
    marking = _MARKING
    if marking is None:
        yield from items
        return
    slots, first = marking
    try:
        for i, item in enumerate(items):
            slots.begin(first + i)
            yield item
    finally:
        if _MARKING is marking:  # (not when the generator is closed after its chunk)
            slots.unmarked()


@dataclass
class _Lost:
    """The child is gone: ``index`` is the row it was running (None: none), ``unmarked`` whether
    it was inside a chunk outside any one document."""

    index: int | None
    reason: str
    error: str
    unmarked: bool = False


@dataclass
class _Range:
    start: int
    stop: int
    chunked: bool
    alone: bool = False  # one document run again alone: a death now is its own


def forks(stage: BatchStage) -> bool:
    """Whether the sandbox of ``stage`` starts by forking the worker (Linux, no GPU)."""
    return sys.platform == "linux" and not stage.resources().get("GPU")


def stage_key(stage: BatchStage, name: str) -> str:
    return f"{type(stage).__module__}.{type(stage).__qualname__}:{stage.fingerprint()}:{name}"


class Sandbox:
    """A child process running stages; restarted whenever it dies or is killed."""

    def __init__(self, fork: bool = sys.platform == "linux") -> None:
        self.fork = fork
        self.proc: subprocess.Popen | _Forked | None = None
        self.conn: Connection | None = None
        self.loaded: set[str] = set()  # stages set up in the running child
        self.imports: list[str] = []  # the pipeline imports the running child has
        self._file = tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the sandbox)
        os.ftruncate(self._file.fileno(), 24)
        self.slots = _Slots(self._file.fileno())

    def run(self, stage: BatchStage, name: str, batch: pa.Table,
            progress: Progress | None = None) -> BatchResult:
        """The stage's result on ``batch``, every document guarded on its own."""
        pieces: list[tuple[int, BatchResult]] = []
        tally = [0, 0]  # documents done, failed

        def add(start: int, result: BatchResult) -> None:
            pieces.append((start, result))
            tally[0] += result.kept.num_rows + result.n_removed + len(result.failed)
            tally[1] += len(result.failed)
            if progress is not None:
                progress(*tally)

        chunked = bool(getattr(stage, "marks_documents", False))
        todo = [_Range(0, batch.num_rows, chunked)] if batch.num_rows else []
        silent_deaths = 0
        while todo:
            job = todo.pop(0)
            child, cpu = self._child_cpu()
            received, lost = self._run_range(stage, name, batch, job, add)
            now_child, now_cpu = self._child_cpu()
            add_child_cpu(now_cpu - cpu if now_child == child else now_cpu)
            if lost is None:
                continue
            if lost.index is not None:
                index = lost.index
                if lost.reason == "worker_died" and not job.alone:  # was it this document?
                    rest = [_Range(received, index, job.chunked), _Range(index, index + 1, False,
                                                                         alone=True)]
                else:
                    add(index, BatchResult(kept=batch.slice(0, 0), failed=[Failure(
                        stage=name, error=f"{lost.reason}: {lost.error}", reason=lost.reason,
                        id=batch.column(ID)[index].as_py())]))
                    rest = [_Range(received, index, job.chunked)]
                rest.append(_Range(index + 1, job.stop, job.chunked))
            elif lost.unmarked:  # the chunk failed outside its documents: row by row now
                end = min(job.stop, received + CHUNK_ROWS)
                rest = [_Range(received, end, False), _Range(end, job.stop, job.chunked)]
            else:  # the child died between documents: none to blame
                silent_deaths += 1
                if silent_deaths >= MAX_SILENT_DEATHS:
                    raise CurationError(f"stage {name!r}: its sandbox process died "
                                        f"{silent_deaths} times outside any document "
                                        f"({lost.error})")
                rest = [_Range(received, job.stop, job.chunked, job.alone)]
            todo[:0] = [r for r in rest if r.stop > r.start]
        return _assemble(batch, pieces)

    def _child_cpu(self) -> tuple[int, float]:
        """The running child's pid and CPU seconds so far (0, 0.0 without one)."""
        pid = self.proc.pid if self.proc is not None else 0
        return pid, process_cpu(pid) if pid else 0.0

    def _run_range(self, stage: BatchStage, name: str, batch: pa.Table, job: _Range,
                   add: Callable[[int, BatchResult], None]) -> tuple[int, _Lost | None]:
        """Send rows ``job.start:job.stop`` and collect their chunks until done or the child is
        lost. Returns how far results came back, and what was lost (its row index in ``batch``)."""
        key = stage_key(stage, name)
        lost = self._load(stage, name, key)
        if lost is not None:
            return job.start, lost
        assert self.conn is not None
        _send(self.conn, ("run", key, job.chunked), batch.slice(job.start, job.stop - job.start))
        received = job.start
        while received < job.stop:
            message = self._next(stage.timeout_s)
            if isinstance(message, _Lost):
                if message.index is not None:
                    message.index += job.start
                return received, message
            first, last, result = message
            add(job.start + first, result)
            received = job.start + last
        return received, None

    def _load(self, stage: BatchStage, name: str, key: str) -> _Lost | None:
        """Start a child if none runs and set ``stage`` up in it (once per child)."""
        for _ in range(2):
            if key not in self.loaded and self.imports != loaded_imports():
                self.close()  # a plugin loaded since the child started: it would lack it
            self._start()
            if key in self.loaded:
                return None
            assert self.conn is not None and self.proc is not None
            _send(self.conn, ("load", key, name, cloudpickle.dumps(stage)))
            if self.fork and not self.conn.poll(FORK_READY_S):
                self.close()  # stuck in a forked child: from now on, fresh interpreters
                self.fork = False
                continue
            message = self._next(None)
            if isinstance(message, _Lost):
                return message
            if message[0] == "setup_failed":
                self.close()
                raise CurationError(f"stage {name!r}: setup failed in its sandbox: "
                                    f"{message[2]}")
            self.loaded.add(key)
            return None
        raise AssertionError("unreachable")

    def _next(self, timeout: float | None) -> tuple | _Lost:
        """The next message from the child, or what was lost when it died or ran out of time."""
        assert self.conn is not None and self.proc is not None
        while True:
            running = self.slots.running()
            wait = POLL_SECONDS
            if timeout is not None and running is not None:
                wait = min(wait, running[2] + timeout - time.monotonic())
            if self.conn.poll(max(0.0, wait)):
                try:
                    message, tables = _recv(self.conn)
                except (EOFError, OSError):
                    return self._lost("worker_died", self._exit_status())
                if message[0] != "chunk":
                    return message
                _, first, last, result = message
                result.kept, result.removed = tables
                return first, last, result
            if self.proc.poll() is not None:
                return self._lost("worker_died", self._exit_status())
            running = self.slots.running()
            if (timeout is not None and running is not None
                    and time.monotonic() - running[2] >= timeout):
                self.proc.kill()
                self.proc.wait()
                lost = self._lost("timeout", f"still running after {timeout:g} s (timeout_s); "
                                  "its process was killed", running)
                return lost

    def _lost(self, reason: str, error: str,
              running: tuple[int, int, float] | None = None) -> _Lost:
        """The child is gone: note what it was running (unless given) and forget it."""
        running = running or self.slots.running()
        self._forget()
        if running is None:
            return _Lost(None, reason, error)
        state, index, _ = running
        return _Lost(index if state == DOCUMENT else None, reason, error, state == UNMARKED)

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
        self.imports = loaded_imports()
        parent, child = socket.socketpair()
        if self.fork:
            self.proc = _fork(child, parent, self.slots)
            child.close()
            self.conn = Connection(parent.detach())
            return
        path = os.pathsep.join(p for p in sys.path if p)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from curator.runtime.worker.sandbox import serve; serve()",
             str(child.fileno()), str(self._file.fileno())],
            pass_fds=(child.fileno(), self._file.fileno()), stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": path})
        child.close()
        self.conn = Connection(parent.detach())
        self.conn.send(loaded_imports())

    def _forget(self) -> None:
        if self.conn is not None:
            self.conn.close()
        self.proc = self.conn = None
        self.loaded = set()

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


_POOL: dict[bool, list[Sandbox]] = {}
_POOL_LOCK = threading.Lock()


@contextmanager
def sandbox_for(stage: BatchStage) -> Iterator[Sandbox]:
    """A sandbox that no other thread is using, whose child can run ``stage`` (forked, or a
    fresh interpreter for GPU stages). Children are reused: one serves every stage of a
    segment's task in turn."""
    fork = forks(stage)
    with _POOL_LOCK:
        free = _POOL.setdefault(fork, [])
        box = free.pop() if free else None
    if box is None:
        box = Sandbox(fork)
    try:
        yield box
    except BaseException:
        box.release()  # it may be half-way through a batch nobody will read
        raise
    with _POOL_LOCK:
        _POOL[fork].append(box)


def run_sandboxed(stage: BatchStage, name: str, batch: pa.Table,
                  progress: Progress | None = None) -> BatchResult:
    """``stage`` on ``batch`` in a sandbox of this worker (see the module docstring)."""
    with sandbox_for(stage) as box:
        return box.run(stage, name, batch, progress)


@atexit.register
def release_all() -> None:
    """Stop every pooled child (the next batch forks a new one: it sees the worker as it is
    now)."""
    with _POOL_LOCK:
        boxes = [box for free in _POOL.values() for box in free]
        _POOL.clear()
    for box in boxes:
        box.release()


# ---------------------------------------------------------------------------- the child
def serve() -> None:
    """A fresh interpreter's main loop: ``python -c '...serve()' CONN_FD SLOTS_FD``."""
    conn = Connection(int(sys.argv[1]))
    slots = _Slots(int(sys.argv[2]))
    _exit_with_parent(os.getppid())
    load_imports(conn.recv())
    _loop(conn, slots)


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


def _fork(child: socket.socket, parent: socket.socket, slots: _Slots) -> _Forked:
    """Fork a child that serves stages and batches on ``child``."""
    worker = os.getpid()
    pid = os.fork()
    if pid == 0:  # the child never returns into the worker's code
        try:
            parent.close()
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            _exit_with_parent(worker)
            _loop(Connection(child.detach()), slots)
        finally:
            os._exit(0)
    return _Forked(pid)


def _loop(conn: Connection, slots: _Slots) -> None:
    """Set stages up and run batches, as the parent asks."""
    stages: dict[str, tuple[BatchStage, str]] = {}
    while True:
        try:
            message, tables = _recv(conn)
        except EOFError:
            return
        if message[0] == "load":
            _, key, name, payload = message
            try:
                stage = cloudpickle.loads(payload)
                stage.setup()
            except Exception as err:
                _send(conn, ("setup_failed", key, f"{type(err).__name__}: {err}"))
                continue
            stages[key] = (stage, name)
            _send(conn, ("loaded", key))
        else:
            _, key, chunked = message
            _process(*stages[key], tables[0], chunked, conn, slots)


def _process(stage: BatchStage, name: str, batch: pa.Table, chunked: bool, conn: Connection,
             slots: _Slots) -> None:
    """Run ``stage`` on ``batch`` (in chunks, or each row in turn); send results as they come."""
    if chunked:
        for first in range(0, batch.num_rows, CHUNK_ROWS):
            rows = batch.slice(first, CHUNK_ROWS)
            result = _chunk(stage, name, rows, first, slots)
            _send_result(conn, first, first + rows.num_rows, result)
        return
    chunk: list[BatchResult] = []
    first, sent_at = 0, time.monotonic()
    for i in range(batch.num_rows):
        chunk.append(_row(stage, name, batch.slice(i, 1), i, slots))
        now = time.monotonic()
        if i + 1 - first >= CHUNK_ROWS or now - sent_at >= CHUNK_SECONDS or i + 1 == batch.num_rows:
            result = _assemble(batch, list(enumerate(chunk)))
            _send_result(conn, first, i + 1, result)
            chunk, first, sent_at = [], i + 1, now


def _chunk(stage: BatchStage, name: str, rows: pa.Table, first: int,
           slots: _Slots) -> BatchResult:
    """``stage`` on a chunk in one call, its documents marked (:func:`each_document`); where
    the call raises, each row on its own."""
    global _MARKING
    slots.unmarked()
    _MARKING = (slots, first)
    try:
        return stage.process(rows)
    except Exception:  # a document the stage cannot handle: find it
        pass
    finally:
        _MARKING = None
        slots.end()
    parts = [_row(stage, name, rows.slice(i, 1), first + i, slots) for i in range(rows.num_rows)]
    return _assemble(rows, list(enumerate(parts)))


def _row(stage: BatchStage, name: str, row: pa.Table, index: int, slots: _Slots) -> BatchResult:
    """``stage`` on one row; an exception fails that document alone."""
    slots.begin(index)
    try:
        return stage.process(row)
    except Exception as err:
        return BatchResult(kept=row.slice(0, 0), failed=[Failure(
            stage=name, error=f"{type(err).__name__}: {err}", id=row.column(ID)[0].as_py())])
    finally:
        slots.end()


# Tables travel as Arrow IPC streams, each its own frame after a pickled message: a slice goes
# as its rows alone (a pickled slice carries its whole buffers), and nothing is pickled twice.
def _send(conn: Connection, message: tuple, *tables: pa.Table | None) -> None:
    conn.send((message, tuple(t is not None for t in tables)))
    for table in tables:
        if table is not None:
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, table.schema) as writer:
                writer.write_table(table)
            conn.send_bytes(sink.getvalue())


def _recv(conn: Connection) -> tuple[tuple, list[pa.Table | None]]:
    message, present = conn.recv()
    return message, [pa.ipc.open_stream(pa.py_buffer(conn.recv_bytes())).read_all()
                     if here else None for here in present]


def _send_result(conn: Connection, first: int, last: int, result: BatchResult) -> None:
    kept, removed = result.kept, result.removed
    result.kept, result.removed = _NO_ROWS, None
    _send(conn, ("chunk", first, last, result), kept, removed)


_NO_ROWS = pa.table({})


def _exit_with_parent(parent: int) -> None:
    """Exit when the parent process is gone (a killed worker leaves no orphan running)."""
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()
