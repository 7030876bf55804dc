"""What runs in worker processes: a shard task and what it reuses, per-document guards
(sandbox, failure budget), memory and progress reporting."""
