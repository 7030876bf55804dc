"""The executors and how their worker processes start (fork server, imports)."""
