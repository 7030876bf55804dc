"""Exact and fuzzy deduplication: dataset-wide stages in restartable phases."""
