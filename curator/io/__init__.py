"""Readers and writers (JSONL, Parquet) over fsspec, and low-level byte streams."""
