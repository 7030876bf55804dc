"""Trainer formats: Megatron-Core indexed datasets, blend files, Megatron-Bridge packed
Parquet, and the FP8 shape rules they must meet."""
