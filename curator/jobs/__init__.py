"""Batch jobs that host a whole Dask cluster for one ``curate run`` (``curate submit``)."""
