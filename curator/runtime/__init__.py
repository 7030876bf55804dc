"""Running a pipeline, grouped by where the code runs, each group importing only those after
it: ``driver`` (the run loop, dataset stages' phases, stats, the lock), ``cluster`` (executors
and how their worker processes start), ``worker`` (shard tasks, per-document guards);
``errors`` is shared."""
