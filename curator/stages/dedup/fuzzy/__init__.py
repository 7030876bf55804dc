"""Fuzzy dedup: MinHash-LSH candidates, distributed connected components, lowest id survives.

A document is named by a key ``part << 32 | row`` (int64) while the graph is built; ids are
joined back only once, to pick each component's survivor. Phases (each a ``run_phase`` over
tasks that commit their own files, so a restart redoes only the tasks that were cut):

  1. ``signatures`` per part:  MinHash (CPU numba or GPU CuPy) → band hashes, one row per
     (document, band) → ``bands/part-N/bucket-B.arrow``, bucketed by band hash.
  2. ``edges`` per bucket:  group by (band, hash) (sorted on the GPU where ``device`` is gpu);
     link each member to the bucket's smallest key (a star, no all-pairs); optional
     signature-Jaccard check of each link → undirected edges ``(lo, hi)`` sent to the node
     partitions of both ends: ``cc/r000/from-B/to-P``.
  3. ``cc-rNNN`` per node partition, iterated (on the GPU past ``GPU_GRAPH_EDGES``): a
     partition holds every edge touching its own nodes; a union-find over them gives each
     node the smallest node of its local component and re-emits the local stars
     ``(min, node)``. Connectivity is kept, and the edge set is a
     fixed point exactly when it is a star forest centred on each component's smallest key.
     A round whose input equals the previous round's input (per-partition digests) ends it.
  4. ``labels`` per node partition: each own node's label = its star centre
     → ``labels/node-P/part-N.arrow``.
  5. ``members`` per part: attach ids → ``members/part-N/bucket-B.arrow`` bucketed by label.
  6. ``clusters`` per bucket: sort by (label, id): the first id survives; cluster size
     → ``clusters/bucket-B/part-N.arrow``.
  3-6. ``components``, one task, instead of phases 3 to 6 where the candidate edges are at
     most ``whole_graph_edges``: a union-find over every edge gives the same labels (a
     component's smallest key is its star centre); the linked documents' ids are read from
     their parts and the clusters decided as phase 6 decides them → ``clusters/bucket-00000``.
     Each of those phases is a round of tasks with a fixed cost (~0.2 s each on the H200, nine
     of them on 4 GB); a small graph needs none of it.
  2-6. ``graph``, one task on the GPU, instead of phases 2 to 6 where ``verify`` is off and
     the band rows are at most ``ONE_TASK_BAND_ROWS``: each bucket's stars in turn, then one
     union-find on the device, then as ``components`` (the GPU sorts a bucket faster than a
     phase of tasks can share it).
  7. ``remove`` per part (the runtime's removal phase): ``cluster_id`` (the survivor's id),
     ``cluster_size`` and ``kept`` on every document; kept ones → ``out/``, others →
     ``rejected/<stage>/`` (reason ``near_duplicate``, ``duplicate_of``).

No phase collects the dataset, or a graph past ``whole_graph_edges``, in one process; a task
holds one part, one bucket or one node partition.
"""

from curator.stages.dedup.fuzzy.stage import FuzzyDedup

__all__ = ["FuzzyDedup"]
