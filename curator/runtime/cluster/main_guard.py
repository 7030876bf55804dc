"""Dask starts worker processes by *spawning*: each imports the parent's ``__main__`` script
again, so a script that calls ``Pipeline.run()`` outside ``if __name__ == "__main__":`` would
start a cluster inside every worker. Such a child leaves quietly; its parent explains."""

from __future__ import annotations

import multiprocessing
import sys
from pathlib import Path

MAIN_GUARD_HINT = ('a script that runs a pipeline must do it under `if __name__ == "__main__":`, '
                   "because every worker process imports the script again")


def importing_main_in_child() -> bool:
    """True while a spawned child process runs its parent's main script as ``__mp_main__``
    (before the child knows its parent: ``parent_process()`` is still None then)."""
    return ("__mp_main__" in sys.modules
            and getattr(multiprocessing.current_process(), "_inheriting", False))


def leave_if_importing_main() -> None:
    """In a child that is importing its parent's script, exit before running anything."""
    if importing_main_in_child():
        raise SystemExit(1)


def main_is_a_script() -> bool:
    """True when ``__main__`` is a user's script file (not ``python -m`` nor ``curate``)."""
    main = sys.modules.get("__main__")
    file = getattr(main, "__file__", None)
    return bool(file) and getattr(main, "__spec__", None) is None and Path(file).stem != "curate"
