"""Executors, the run directory, shard tasks, resume and stats."""
