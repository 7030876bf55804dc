"""``python -m curator ...``: the ``curate`` command (curator.launch)."""

from curator.launch import main

main()
