"""How ``curate`` ends when something goes wrong: one line on stderr and an exit code
(2 bad usage or configuration, 1 failed, 130 interrupted), never a traceback of an expected
failure. Unexpected exceptions (bugs) keep their traceback."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from curator.runtime.driver.requirements import MissingRequirement
from curator.runtime.driver.run_lock import RunLocked
from curator.runtime.errors import CurationError, ExecutorError
from curator.store.run_dir import RunDirError

USAGE, FAILED, INTERRUPTED = 2, 1, 130
INTERRUPTED_MESSAGE = "interrupted; rerun the same command to resume"

console = Console(stderr=True, soft_wrap=True, width=None if sys.stderr.isatty() else 200)


def fail(message: str, code: int) -> NoReturn:
    """Print ``error: message`` on stderr and exit with ``code``."""
    console.print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def _describe(err: OSError) -> str:
    if err.strerror and err.filename:
        return f"{err.filename}: {err.strerror}"
    return str(err)


@contextmanager
def one_line_errors() -> Iterator[None]:
    """Run a command's work: expected failures and Ctrl-C become one line and an exit code.

    The first Ctrl-C stops the run (the cluster shuts down quietly); a second leaves at once."""
    interrupted = False

    def on_sigint(signum: int, frame: Any) -> None:
        nonlocal interrupted
        if interrupted:
            console.print(INTERRUPTED_MESSAGE, highlight=False)
            os._exit(INTERRUPTED)
        interrupted = True
        logging.getLogger("distributed").setLevel(logging.CRITICAL + 1)
        raise KeyboardInterrupt

    main = threading.current_thread() is threading.main_thread()  # signals go there only
    previous = signal.signal(signal.SIGINT, on_sigint) if main else None
    try:
        yield
    except KeyboardInterrupt:
        sys.unraisablehook = lambda _: None  # a cluster cut while starting fails to close at exit
        console.print(INTERRUPTED_MESSAGE, highlight=False)
        raise typer.Exit(INTERRUPTED) from None
    except MissingRequirement as err:
        fail(str(err), USAGE)
    except (CurationError, RunDirError, RunLocked, ExecutorError, ValueError) as err:
        fail(str(err), FAILED)
    except OSError as err:  # an unwritable run directory, a full disk, a missing input
        fail(_describe(err), FAILED)
    finally:
        if main:
            signal.signal(signal.SIGINT, previous)
