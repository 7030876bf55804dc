"""Executors: ``local`` (in-process, for debugging), ``dask`` (default) and ``ray``."""

from __future__ import annotations

import importlib.util
import logging
import os
import pickle
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from curator.runtime.cluster.fork_server import start_fork_server
from curator.runtime.cluster.main_guard import MAIN_GUARD_HINT, main_is_a_script
from curator.runtime.cluster.threads import local_workers, threads_suffice
from curator.runtime.errors import ExecutorError
from curator.runtime.worker.progress import LOCAL_HANDLERS

log = logging.getLogger("curator")

#: Times a task is tried again after its worker died before it is reported as ``WorkerDied``
#: (our local cluster; a cluster we join keeps its own ``distributed.scheduler.allowed-failures``).
ALLOWED_FAILURES = 1
#: Dask settings of the clusters we start. The statistical profiler (on by default) takes the
#: GIL from the task 100 times a second for a dashboard page: off (0.9 of 18 CPU-s end to end on
#: 2 cores). The event-loop tick (20 ms), system monitor (0.5 s) and memory monitor (0.1 s) cost
#: an idle 2-worker cluster 0.21 CPU-s per second; at 1 s, 2 s and 0.5 s, 0.07.
QUIET = {"distributed.worker.profile.enabled": False,
         "distributed.admin.tick.interval": "1s",
         "distributed.admin.system-monitor.interval": "2s",
         "distributed.worker.memory.monitor-interval": "500ms"}
#: Seconds to wait for an existing Dask scheduler before giving up.
CONNECT_TIMEOUT_S = 5
#: Tasks one GPU worker process runs at once (its threads and its ``GPU`` resource; a GPU task
#: asks for 1): parts in flight per card, one read while another is hashed and a third's output
#: written. A threaded cluster (stages that release the GIL) lets every thread run one.
GPU_TASKS = 4
#: A resource every worker process we start offers once. A task of a segment that holds the GIL
#: asks for one where a worker runs several threads (a GPU worker), so that worker runs one such
#: task at a time beside its GPU tasks, not GPU_TASKS of them sharing one interpreter (each then
#: at a fraction of a core: a tail of several tasks' length at the end of a segment).
GIL = "GIL"
#: The most GPU worker processes the default puts on one card (``gpu_workers_per_device``).
WORKERS_PER_GPU_UP_TO = 4


def visible_gpus() -> list[str]:
    """Device ids visible on this machine: ``CUDA_VISIBLE_DEVICES`` as listed (``0,0`` is one
    card for two GPU workers), else one per GPU ``nvidia-smi`` lists (none without it)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [d.strip() for d in visible.split(",") if d.strip()]
    return [str(g) for g in range(_smi_gpus())]


def gpu_count() -> int:
    """GPU workers this machine takes (0 without NVIDIA tools)."""
    return len(visible_gpus())


def gpu_workers_per_device(cpu_workers: int, gpus: int, asked: int | None = None) -> int:
    """GPU worker processes per card of a local cluster (a batch job's script applies the same
    rule): ``asked``, else one per ``GPU_TASKS``
    CPU workers a card has (at least 1, at most ``WORKERS_PER_GPU_UP_TO``): the host's share
    of a GPU phase then runs on about as many interpreters as the other phases
    (docs/dedup-scale.md, "GPU worker processes per card")."""
    if asked is not None:
        return asked
    return max(1, min(WORKERS_PER_GPU_UP_TO, cpu_workers // (GPU_TASKS * max(1, gpus))))


def _smi_gpus() -> int:
    if not shutil.which("nvidia-smi"):
        return 0
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.stdout.splitlines() if line.startswith("GPU "))


@dataclass
class WorkerDied:
    """Yielded by ``map`` in place of the result of a task whose worker process died (each time
    the cluster retried it): the caller decides what to do with the task."""

    task: Any


class Executor:
    """Maps a function over tasks and yields results as they complete (``WorkerDied`` for a
    task whose worker process died)."""

    name = "base"

    def map(self, fn: Callable[[Any], Any], tasks: list[Any], keys: list[str],
            resources: dict[str, float]) -> Iterator[Any]:
        raise NotImplementedError

    def offers(self, resource: str) -> bool:
        """Whether some worker advertises ``resource``."""
        return resource == "GPU" and gpu_count() > 0

    def subscribe(self, topic: str, handler: Callable[[Any], None]) -> None:
        """Call ``handler`` with each message a task sends on ``topic`` (none by default)."""

    def hosts(self) -> int:
        """How many machines (nodes) the workers run on: this one by default."""
        return 1

    def make_gpu_contexts(self) -> None:
        """Have the GPU workers make their CUDA contexts now, ahead of their first tasks (none
        by default: where tasks run in this process, the stages' ``warm_up`` does it)."""

    def close(self) -> None:
        """Release the workers this executor started."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LocalExecutor(Executor):
    """Runs tasks one after another in this process."""

    name = "local"

    def map(self, fn, tasks, keys, resources):
        for task in tasks:
            yield fn(task)

    def subscribe(self, topic: str, handler: Callable[[Any], None]) -> None:
        LOCAL_HANDLERS[topic] = handler

    def close(self) -> None:
        LOCAL_HANDLERS.clear()


def local_cluster(n: int, processes: bool, gpus: int, preload: list[str] | None = None,
                  workers_per_gpu: int | None = None):
    """A Dask cluster on this machine.

    Threads: one process with ``n`` threads (for pipelines whose stages release the GIL), each
    of which may run a GPU task (on device 0, when there are GPUs): the work around a GPU kernel
    (reading, writing, splitting) is most of a GPU task, and these threads share the cores.
    Processes: ``n`` CPU workers on loopback, each with its share of the cores for Arrow's and
    BLAS's pools, plus ``gpu_workers_per_device`` workers per GPU (``workers_per_gpu`` if
    given) that alone advertise the ``GPU`` resource and each see only their own device, so GPU
    tasks never pile onto one card; CPU workers see no GPU. They fork from a server that has
    imported distributed, curator's task runner and ``preload``.
    """
    from multiprocessing import resource_tracker

    import dask

    if not processes:
        from distributed import LocalCluster

        log.info("Dask LocalCluster: %d threads in one process (every stage releases the GIL)", n)
        with dask.config.set(QUIET):
            return LocalCluster(n_workers=1, threads_per_worker=n, processes=False,
                                dashboard_address="127.0.0.1:0", silence_logs=logging.CRITICAL,
                                resources={"GPU": n} if gpus else None)
    per_card = gpu_workers_per_device(n, gpus, workers_per_gpu)
    cards = visible_gpus()[:gpus]
    log.info("Dask LocalCluster: %d CPU worker processes%s", n,
             f" and {per_card * len(cards)} GPU workers ({per_card} per device)" if gpus else "")
    # Worker processes start with Ctrl-C blocked (the mask passes to the cluster's thread, which
    # spawns them) and ignore it once set up (worker_setup): the driver stops them itself.
    # Here, a Ctrl-C while the cluster starts waits until it has started. The resource tracker
    # starts now, as it would unblock the signal in the thread that starts it.
    resource_tracker.ensure_running()
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        start_fork_server(preload or [])  # it imports while this process imports distributed
        from distributed import Nanny, Scheduler, SpecCluster

        share = str(max(1, (os.cpu_count() or 1) // n))
        threads = {name: share for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS",
                                            "OPENBLAS_NUM_THREADS")}

        def worker(env: dict[str, str], gpu_tasks: int = 0) -> dict:
            return {"cls": Nanny, "options": {
                "nthreads": gpu_tasks or 1, "host": "127.0.0.1", "env": env,
                "resources": {GIL: 1, **({"GPU": gpu_tasks} if gpu_tasks else {})},
                "silence_logs": logging.CRITICAL,
                "preload": ["curator.runtime.cluster.worker_setup"]}}

        specs = {f"cpu-{i}": worker({**threads, "CUDA_VISIBLE_DEVICES": ""}) for i in range(n)}
        specs.update({f"gpu-{i}-{k}": worker({**threads, "CUDA_VISIBLE_DEVICES": device},
                                              GPU_TASKS)
                      for i, device in enumerate(cards) for k in range(per_card)})
        # A nanny's "pre-spawn" variables would be set in this process (and stay): the
        # workers get theirs through ``env``, the driver keeps its own (torch threads).
        with dask.config.set({"distributed.worker.multiprocessing-method": "forkserver",
                              "distributed.nanny.pre-spawn-environ": {}, **QUIET}):
            return SpecCluster(
                scheduler={"cls": Scheduler, "options": {
                    "host": "127.0.0.1", "dashboard_address": "127.0.0.1:0",
                    "allowed_failures": ALLOWED_FAILURES}},
                workers=specs, silence_logs=logging.CRITICAL)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


class DaskExecutor(Executor):
    """Runs tasks on a Dask cluster: a LocalCluster on loopback, or an existing one."""

    name = "dask"

    def __init__(self, workers: int | None = None, scheduler: str | None = None,
                 scheduler_file: str | None = None, processes: bool = True,
                 preload: list[str] | None = None, workers_per_gpu: int | None = None) -> None:
        from distributed import Client

        self.cluster = None
        self.address = scheduler or scheduler_file or "local"
        if scheduler or scheduler_file:
            if scheduler_file and not scheduler:
                _wait_for_file(scheduler_file, CONNECT_TIMEOUT_S)
            try:
                self.client = Client(address=scheduler, scheduler_file=scheduler_file,
                                     timeout=CONNECT_TIMEOUT_S)
            except OSError as err:  # refused, timed out, unknown host
                raise ExecutorError(f"cannot reach the Dask scheduler at "
                                    f"{scheduler or scheduler_file}: {err}") from None
            # A lost scheduler is reported in one line by ``map``, not by the client's retries.
            logging.getLogger("distributed.client").setLevel(logging.CRITICAL)
        else:
            self.cluster = _start(local_cluster, local_workers(workers), processes,
                                  gpu_count(), preload or [], workers_per_gpu)
            self.client = Client(self.cluster)
        log.info("%s", self.dashboard())

    def dashboard(self) -> str:
        """Where the dashboard listens, or that it is off and where the worker pages are."""
        if self.cluster is None:
            return f"Dask dashboard: {self.client.dashboard_link}"
        address = f"http://127.0.0.1:{self.cluster.scheduler.http_server.port}"
        if importlib.util.find_spec("bokeh") is None:
            return (f"Dask dashboard off (pip install bokeh); workers: "
                    f"{address}/info/main/workers.html")
        return f"Dask dashboard: {address}/status"

    def subscribe(self, topic: str, handler: Callable[[Any], None]) -> None:
        self.client.subscribe_topic(topic, lambda event: handler(event[1]))

    def hosts(self) -> int:
        workers = self.client.scheduler_info(n_workers=-1).get("workers", {})
        return len({info.get("host") for info in workers.values()}) or 1

    def map(self, fn, tasks, keys, resources):
        from distributed import KilledWorker, as_completed
        from distributed.client import FutureCancelledError
        from distributed.comm import CommClosedError

        resources = self._check_resources(resources)
        token = uuid.uuid4().hex[:8]
        futures = [self.client.submit(fn, task, key=f"{key}-{token}", pure=False, retries=1,
                                      resources=resources or None)
                   for task, key in zip(tasks, keys, strict=True)]
        task_of = {future.key: task for future, task in zip(futures, tasks, strict=True)}
        try:
            for future in as_completed(futures):
                try:
                    result = future.result()
                except KilledWorker:
                    result = WorkerDied(task_of[future.key])
                yield result
                future.release()
        except (FutureCancelledError, CommClosedError) as err:
            if isinstance(err, FutureCancelledError) and err.reason != "scheduler-connection-lost":
                raise
            raise ExecutorError(f"lost the Dask scheduler ({self.address}); committed shards "
                                "are kept: rerun against a new cluster to resume") from None
        finally:
            if self.client.status == "running":  # not after the scheduler was lost
                self.client.cancel([f for f in futures if not f.done()])

    def offers(self, resource: str) -> bool:
        return bool(self._offering(resource))

    def make_gpu_contexts(self) -> None:
        from curator.runtime.cluster.gpu_context import start_context_thread

        if workers := self._offering("GPU"):
            self.client.run(start_context_thread, workers=workers, on_error="ignore")

    def _offering(self, resource: str) -> list[str]:
        """The addresses of the workers that advertise ``resource``."""
        workers = self.client.scheduler_info(n_workers=-1)["workers"]
        return [address for address, w in workers.items()
                if w.get("resources", {}).get(resource, 0) > 0]

    def _check_resources(self, resources: dict[str, float]) -> dict[str, float]:
        """The resources to ask for: ``GIL`` only where it matters (some worker runs several
        threads) and every worker offers it; refuse at once (instead of waiting forever) when
        no worker offers another."""
        workers = list(self.client.scheduler_info(n_workers=-1)["workers"].values())
        if GIL in resources and not (
                any(w.get("nthreads", 1) > 1 for w in workers)
                and all(w.get("resources", {}).get(GIL, 0) >= 1 for w in workers)):
            resources = {k: v for k, v in resources.items() if k != GIL}
        for name, amount in resources.items():
            if not any(w.get("resources", {}).get(name, 0) >= amount for w in workers):
                raise ExecutorError(f"the stage needs {name}={amount} but no Dask worker offers "
                                    "it; start GPU workers (dask-cuda-worker) or run on a GPU node")
        return resources

    def close(self) -> None:
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()


class RayExecutor(Executor):
    """Runs tasks on Ray (``pip install curator[ray]``): a local instance or ``ray://`` address."""

    name = "ray"

    def __init__(self, workers: int | None = None, scheduler: str | None = None,
                 imports: list[str] | None = None) -> None:
        self.imports = imports or []
        try:
            import ray
        except ImportError:
            raise ExecutorError("executor 'ray' needs Ray: pip install 'curator[ray]'") from None
        self.ray = ray
        ray.init(address=scheduler, num_cpus=None if scheduler else workers,
                 ignore_reinit_error=True, include_dashboard=False, log_to_driver=False)

    def hosts(self) -> int:
        return sum(1 for node in self.ray.nodes() if node.get("Alive")) or 1

    def map(self, fn, tasks, keys, resources):
        from ray.exceptions import WorkerCrashedError

        # one retry, as Dask's: a task whose worker died twice comes back as WorkerDied
        remote = self.ray.remote(_with_imports).options(num_gpus=resources.get("GPU", 0),
                                                       max_retries=1)
        task_of = {}
        for task in tasks:  # pickled here, unpickled once the worker loaded the imports
            task_of[remote.remote(self.imports, fn, pickle.dumps(task))] = task
        pending = list(task_of)
        try:
            while pending:
                done, pending = self.ray.wait(pending, num_returns=1)
                try:
                    yield self.ray.get(done[0])
                except WorkerCrashedError:
                    yield WorkerDied(task_of[done[0]])
        finally:
            for ref in pending:
                self.ray.cancel(ref, force=True)

    def close(self) -> None:
        self.ray.shutdown()


def _with_imports(imports: list[str], fn: Callable[[Any], Any], task: bytes) -> Any:
    """Run ``fn`` on a pickled task in a Ray worker, after the pipeline's ``imports:`` (the
    task's stages may come from them)."""
    from curator.plugins import load_imports

    load_imports(imports)
    return fn(pickle.loads(task))


def make_executor(kind: str, workers: int | None = None, scheduler: str | None = None,
                  scheduler_file: str | None = None, processes: bool = True,
                  preload: list[str] | None = None,
                  imports: list[str] | None = None,
                  workers_per_gpu: int | None = None) -> Executor:
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be at least 1; got {workers}")
    if kind == "local":
        return LocalExecutor()
    if kind == "ray":
        return RayExecutor(workers, scheduler, imports)
    if kind == "dask":
        return DaskExecutor(workers, scheduler, scheduler_file, processes, preload,
                            workers_per_gpu)
    raise ValueError(f"unknown executor {kind!r}; expected local, dask or ray")


def _wait_for_file(path: str, seconds: float) -> None:
    """Wait for a scheduler file (a batch job may still be writing it); Dask would wait forever."""
    deadline = time.monotonic() + seconds
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise ExecutorError(f"no Dask scheduler file at {path} after {seconds:g} s")
        time.sleep(0.1)


def _start(factory: Callable[..., Any], *args: Any) -> Any:
    """Start a local cluster; a failure to start worker processes becomes one line."""
    try:
        return factory(*args)
    except (RuntimeError, OSError) as err:
        why = MAIN_GUARD_HINT if main_is_a_script() else str(err)
        raise ExecutorError(f"the Dask worker processes failed to start: {why}") from None


class ExecutorPool:
    """The executors of one run, one per worker kind, started on first use: on a local cluster
    of a few workers (``threads_suffice``), segments whose stages all release the GIL run on
    threads of one process until worker processes have been started (then on those), the others
    on worker processes; a larger local cluster runs every segment on worker processes
    (``processes`` set: every segment on that kind). A joined cluster serves every segment."""

    def __init__(self, kind: str, workers: int | None, scheduler: str | None,
                 scheduler_file: str | None, processes: bool | None,
                 imports: list[str] | None = None, preload: list[str] | None = None,
                 workers_per_gpu: int | None = None) -> None:
        self.kind, self.workers, self.processes = kind, workers, processes
        self.workers_per_gpu = workers_per_gpu
        self.preload = preload or []
        self.scheduler, self.scheduler_file = scheduler, scheduler_file
        self.imports = imports or []
        self._started: dict[bool, Executor] = {}
        self.start_seconds = 0.0  # spent starting clusters (shown in stats.json)
        self.gpu_contexts = False  # GPU workers make their CUDA contexts as they start

    def get(self, holds_gil: bool) -> Executor:
        """The executor for work that holds (or releases) the GIL."""
        shared = self.kind != "dask" or self.scheduler or self.scheduler_file
        if shared:
            processes = True
        elif self.processes is not None:
            processes = self.processes
        else:  # worker processes, once started, serve the segments that release the GIL too
            processes = holds_gil or not threads_suffice(self.workers) or True in self._started
        if processes not in self._started:
            clock = time.perf_counter()
            executor = make_executor(self.kind, self.workers, self.scheduler,
                                     self.scheduler_file, processes, self.preload, self.imports,
                                     self.workers_per_gpu)
            if self.imports and isinstance(executor, DaskExecutor):
                from curator.runtime.cluster.worker_imports import import_on_cluster

                import_on_cluster(executor.client, self.imports)
            if self.gpu_contexts:
                executor.make_gpu_contexts()
            self._started[processes] = executor
            self.start_seconds += time.perf_counter() - clock
        return self._started[processes]

    def runs_here(self, holds_gil: bool) -> bool:
        """Whether the tasks of a run whose stages hold (or release) the GIL run in this
        process: the local executor, or a cluster of threads started here."""
        if self.kind == "local":
            return True
        if self.kind != "dask" or self.scheduler or self.scheduler_file or holds_gil:
            return False
        return self.processes is False or (self.processes is None
                                           and threads_suffice(self.workers))

    def offers(self, resource: str) -> bool:
        """Whether the cluster has workers with ``resource`` (GPU workers)."""
        if self.kind == "dask" and (self.scheduler or self.scheduler_file):
            return self.get(True).offers(resource)
        return resource == "GPU" and gpu_count() > 0

    def make_gpu_contexts(self) -> None:
        """Have every GPU worker make its CUDA context ahead of its first task: the workers of
        executors already started now, those of executors started later as they start."""
        self.gpu_contexts = True
        for executor in self._started.values():
            executor.make_gpu_contexts()

    def hosts(self) -> int:
        """How many machines the run's workers ran on (1 before any executor started)."""
        return max((executor.hosts() for executor in self._started.values()), default=1)

    def close(self) -> None:
        for executor in self._started.values():
            executor.close()

    def __enter__(self) -> ExecutorPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
