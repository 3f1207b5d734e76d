"""What a command works on: the `Jobs` its target names (`module:attribute`, of the Jobs or of
the app beside it), with the command's options applied (`jobs_for`)."""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import os
import sys
import traceback
from collections.abc import Mapping
from typing import Any

from .._errors import JobDefinitionError, MemoryStoreUnsupportedError
from .._jobs import Jobs
from .._queue import Queue, declared_queues
from .._startup import configured_dsn
from ..memory._store import is_memory_dsn


class CommandError(Exception):
    """A mistake in the command line: said on one line, exit status 2."""


def jobs_for(args: argparse.Namespace) -> Jobs:
    """The `Jobs` a command runs on: its target's (a copy), with the command's options."""
    found = load_jobs(args.target) if args.target else Jobs(queues={})
    changes: dict[str, Any] = {}
    if args.dsn:
        changes["dsn"] = args.dsn
    if args.schema is not None:  # `--schema ""` (a variable unset) is refused, not ignored
        changes["schema"] = args.schema
    if args.command == "worker":
        if args.queue:
            changes["queues"] = parse_queues(args.queue, declared_queues(found.config.queues))
        elif not found.config.queues:
            raise CommandError(
                f"{args.target} declares no queues (queues={{}}); name them with --queue NAME=N"
            )
        for option in (
            "batch_size",
            "poll_interval",
            "lease_duration",
            "shutdown_grace",
            "unknown_job_grace",
            "events",
        ):
            if getattr(args, option) is not None:
                changes[option] = getattr(args, option)
        changes["protect_event_loop"] = args.protect_event_loop
    else:
        changes["queues"] = {}  # migrate, status, schedules, pause and resume run no worker
        # `status` only reads, `pause` and `resume` write a row that exists once migrated;
        # `migrate` applies them itself (`_main._migrate`)
        changes["migrate"] = False
        changes["require_database"] = True  # a one-off command has nothing to wait for
    jobs = found.replace(**changes)
    configured = configured_dsn(jobs.config.dsn)
    if configured is not None and is_memory_dsn(configured[0]):
        # A store in this process's memory: a worker would idle on jobs no other process can
        # enqueue, and `status` would count an empty store.
        dsn, source = configured
        source = "from --dsn" if args.dsn else source
        raise MemoryStoreUnsupportedError(
            f"{dsn!r} ({source}) is the in-memory store, which lives inside one process; "
            f"`starlette-jobs {args.command}` needs PostgreSQL (a postgresql:// URL)"
        )
    return jobs


def parse_queues(
    specs: list[str], declared: Mapping[str, Queue] | None = None
) -> dict[str, int | Queue]:
    """The queues of `--queue` options; one the Jobs declares with limits keeps them, with
    this concurrency."""
    declared = declared or {}
    queues: dict[str, int | Queue] = {}
    for spec in specs:
        name, _, concurrency = spec.partition("=")
        try:
            queues[name] = local = int(concurrency or "10")
        except ValueError:
            raise CommandError(
                f"--queue {spec!r}: expected NAME=CONCURRENCY, e.g. emails=5"
            ) from None
        if name in declared and declared[name].limits.limited:
            try:
                queues[name] = dataclasses.replace(declared[name], concurrency=local)
            except JobDefinitionError as error:
                raise CommandError(f"--queue {spec!r}: {error}") from None
    return queues


def load_jobs(target: str) -> Jobs:
    """Imports `module:attr` (or `module`) and finds the Jobs instance it names or holds."""
    # Like uvicorn: the current directory is importable, so `example_app.app:app` works.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    module_name, _, attribute = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise CommandError(f"cannot import {module_name!r}: {error}") from error
    except SyntaxError as error:
        raise CommandError(
            f"cannot import {module_name!r}: {error.filename}:{error.lineno}: "
            f"{type(error).__name__}: {error.msg}"
        ) from error
    except Exception as error:  # whatever the module raises as it runs: say where, on one line
        frame = traceback.extract_tb(error.__traceback__)[-1]
        detail = "; ".join(str(error).splitlines())
        raise CommandError(
            f"cannot import {module_name!r}: {frame.filename}:{frame.lineno}: "
            f"{type(error).__name__}: {detail}"
        ) from error
    if attribute:
        try:
            value = getattr(module, attribute)
        except AttributeError:
            raise CommandError(f"module {module_name!r} has no attribute {attribute!r}") from None
        if isinstance(value, Jobs):
            return value
    candidates = [value for value in vars(module).values() if isinstance(value, Jobs)]
    if len(candidates) != 1:
        raise CommandError(
            f"{target}: expected a Jobs instance, or a module holding exactly one "
            f"(found {len(candidates)}); name it as module:attribute"
        )
    return candidates[0]
