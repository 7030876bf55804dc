"""The ``fuzzy_dedup`` stage: its parameters and its recipe (the phases in order)."""

from __future__ import annotations

import importlib.util
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

import pyarrow as pa
from pydantic import Field

from curator.stages.base import DatasetResult, DatasetStage
from curator.stages.context import DatasetContext
from curator.stages.dedup.buckets import default_buckets
from curator.stages.dedup.cluster_sizes import sum_size_counts
from curator.stages.dedup.fuzzy.clusters import (
    ClusterResult,
    Clusters,
    ClusterTask,
    MemberResult,
    MemberTask,
    clusters_bucket,
    members_part,
)
from curator.stages.dedup.fuzzy.common import (
    GPU_GRAPH_EDGES,
    ONE_TASK_BAND_ROWS,
    ONE_TASK_GRAPH_DEVICES,
    WHOLE_GRAPH_EDGES,
)
from curator.stages.dedup.fuzzy.components import (
    ComponentsResult,
    GraphResult,
    GraphTask,
    LabelResult,
    LabelTask,
    RoundResult,
    RoundTask,
    cc_round,
    components_whole,
    graph_whole,
    labels_partition,
)
from curator.stages.dedup.fuzzy.edges import EdgeResult, EdgeTask, edges_bucket
from curator.stages.dedup.fuzzy.signatures import (
    SignatureResult,
    SignatureTask,
    part_band_rows,
    signature_part,
)


class FuzzyDedup(DatasetStage):
    """Remove near-duplicates (MinHash LSH over character or word n-grams); in each connected
    component of candidate links the document with the lowest id survives. Every document
    gets ``cluster_id`` (its survivor's id), ``cluster_size`` and ``kept``."""

    type = "fuzzy_dedup"
    holds_gil: ClassVar[bool] = False  # numba kernels (nogil), Arrow and NumPy
    # GPU == CPU, and one task == rounds, bit for bit
    placement: ClassVar[frozenset[str]] = frozenset({"device", "whole_graph_edges"})

    shingle: Literal["char", "word"] = Field(
        "char", description="char: 24-character shingles, 20x13; word: 5-word, 14x8.")
    ngram: int | None = Field(None, gt=0, description="Shingle length; default per mode.")
    num_perm: int | None = Field(None, gt=0, description="Hashes; default per mode.")
    bands: int | None = Field(None, gt=0)
    rows: int | None = Field(None, gt=0)
    seed: int = 42
    threshold: float = Field(0.8, ge=0, le=1, description="Estimated Jaccard for `verify`.")
    verify: bool = Field(False, description="Keep only links whose signatures agree enough.")
    device: Literal["cpu", "gpu", "auto"] = Field(
        "auto", description="auto: gpu when the cluster has GPU workers and CuPy is installed.")
    keep: Literal["lowest_id"] = "lowest_id"
    buckets: int | None = Field(None, gt=0, description="Shuffle partitions; default: 16 to "
                                "one per 256 MB of parts, at most one per part.")
    max_rounds: int = Field(64, gt=0, description="Component rounds before giving up.")
    whole_graph_edges: int = Field(
        WHOLE_GRAPH_EDGES, ge=0, description="Candidate edges up to which the connected "
        "components and the clusters are found in one task (a union-find over all of them, "
        "~16 bytes an edge, and the linked documents' ids) instead of rounds of tasks over node "
        "partitions; the same output either way. 0: always rounds (and no one-task graph on "
        "the GPU either).")

    def resources(self) -> dict[str, float]:
        return {"GPU": 1} if self.device == "gpu" else {}

    def for_cluster(self, gpus: bool) -> FuzzyDedup:
        if self.device != "auto":
            return self
        gpu = gpus and importlib.util.find_spec("cupy") is not None
        return self.model_copy(update={"device": "gpu" if gpu else "cpu"})

    def warm_up(self) -> None:
        """Everything a signatures task runs, compiled or loaded, before the first one: the
        CUDA context and the kernel (~1.5 s on an H200), or numba's functions (left to the first
        tasks, 16 threads queued on numba's compiler lock: 8.0 thread-seconds, profiled)."""
        task = SignatureTask("", "", "", self.minhash_params(), self.device, False)
        part_band_rows(task, pa.array(["warm up the kernels", ""]))

    def minhash_params(self) -> Any:
        from curator.kernels.minhash import MinHashParams

        base = MinHashParams() if self.shingle == "char" else MinHashParams.word()
        bands, rows = self.bands or base.bands, self.rows or base.rows
        num_perm = self.num_perm or max(base.num_perm, bands * rows)
        return MinHashParams(num_perm=num_perm, ngram=self.ngram or base.ngram,
                             mode=self.shingle, seed=self.seed, bands=bands, rows=rows)

    def _component_rounds(self, ctx: DatasetContext, nb: int, n_parts: int,
                          graph_gpu: dict[str, float]) -> int:
        """The ``cc-rNNN`` rounds to a fixed point, then the ``labels`` phase; rounds run."""
        work = str(ctx.work_dir)
        round_device = self.device if graph_gpu else "cpu"
        previous: list[str] | None = None
        rnd = 0
        bucket_keys = [f"bucket-{b:05d}" for b in range(nb)]
        while True:
            if rnd >= self.max_rounds:
                raise ValueError(f"{ctx.stage_name}: components did not converge in "
                                 f"{self.max_rounds} rounds; raise max_rounds (rounds done "
                                 "are kept: the rerun resumes)")
            result = ctx.run_phase(f"cc-r{rnd:03d}", cc_round, [
                RoundTask(p, rnd, work, nb, round_device) for p in range(nb)], bucket_keys,
                RoundResult, graph_gpu)
            digests = [r.digest for r in result]
            if digests == previous:
                break  # round rnd's input equals round rnd-1's: a fixed point (star forest)
            previous = digests
            if rnd >= 2:  # inputs of rounds before rnd-1 are no longer read
                shutil.rmtree(ctx.work_dir / "cc" / f"r{rnd - 2:03d}", ignore_errors=True)
            rnd += 1
        ctx.run_phase("labels", labels_partition, [
            LabelTask(p, rnd, work, nb, n_parts) for p in range(nb)], bucket_keys, LabelResult)
        return rnd + 1

    def run_dataset(self, parts: list[Path], ctx: DatasetContext) -> DatasetResult:
        started = time.perf_counter()
        work = str(ctx.work_dir)
        params = self.minhash_params()
        nb = self.buckets or default_buckets(parts)
        keys = [f"part-{i:05d}" for i in range(len(parts))]
        bucket_keys = [f"bucket-{b:05d}" for b in range(nb)]
        gpu = self.resources()
        names = [p.stem for p in parts]
        sig = ctx.run_phase("signatures", signature_part, [
            SignatureTask(name, str(p), work, params, self.device, self.verify)
            for name, p in zip(names, parts, strict=True)], names, SignatureResult, gpu,
            reads=parts)
        graph = GraphTask(work, nb, tuple(s.docs for s in sig),
                           tuple(str(p) for p in parts), self.device)
        rounds, cluster_buckets = 0, 1  # a graph solved in one task: its clusters in one bucket
        edges: Sequence[EdgeResult]
        clusters: Sequence[ClusterResult]
        if (self.device in ONE_TASK_GRAPH_DEVICES and not self.verify and self.whole_graph_edges
                and sum(s.band_rows for s in sig) <= ONE_TASK_BAND_ROWS):
            edges = clusters = ctx.run_phase("graph", graph_whole, [graph], ["graph"],
                                             GraphResult, gpu)
            n_edges = edges[0].edges
        else:
            edges = ctx.run_phase("edges", edges_bucket, [
                EdgeTask(b, work, tuple(names), nb, self.verify, self.threshold,
                         self.device)
                for b in range(nb)], bucket_keys, EdgeResult, gpu)
            n_edges = sum(e.edges for e in edges)
            if n_edges <= self.whole_graph_edges:
                clusters = ctx.run_phase("components", components_whole, [graph], ["graph"],
                                         ComponentsResult)
            else:
                rounds = self._component_rounds(ctx, nb, len(parts),
                                                gpu if n_edges >= GPU_GRAPH_EDGES * nb else {})
                ctx.run_phase("members", members_part, [
                    MemberTask(i, str(p), work, nb, nb) for i, p in enumerate(parts)], keys,
                    MemberResult)
                clusters = ctx.run_phase("clusters", clusters_bucket, [
                    ClusterTask(b, work, len(parts)) for b in range(nb)], bucket_keys,
                    ClusterResult)
                cluster_buckets = nb
        outputs, count = ctx.remove(parts, Clusters(work, cluster_buckets))
        count.seconds = time.perf_counter() - started
        count.facts["dedup"] = {
            "candidates": sum(e.candidates for e in edges),
            "edges": n_edges, "component_rounds": rounds,
            "clusters": sum(c.clusters for c in clusters),
            "in_clusters": sum(c.in_clusters for c in clusters),
            "cluster_sizes": sum_size_counts(c.sizes for c in clusters),
            "no_shingle": sum(s.empty for s in sig), "device": self.device}
        return DatasetResult(outputs, count)
