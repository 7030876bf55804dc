"""The run store: the keys results are reused by (``keys``)."""
