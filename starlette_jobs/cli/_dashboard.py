"""`starlette-jobs dashboard`: the operator's dashboard (docs/dashboard.md) served on its own,
for a team that does not mount it in its app. Read-only unless `--authorize` names a hook."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import os
import signal
import socket
from collections.abc import Iterator
from typing import TYPE_CHECKING, cast

from .._jobs import Jobs
from ._output import Exit
from ._target import CommandError

if TYPE_CHECKING:  # the dashboard's extra (jinja2) may not be installed
    from ..dashboard._actions import Authorize

SECRET_VARIABLE = "STARLETTE_JOBS_DASHBOARD_SECRET"
"""Signs the dashboard's CSRF cookies: the same value for every process serving it."""


async def serve_dashboard(jobs: Jobs, args: argparse.Namespace) -> Exit:
    try:
        import uvicorn

        from ..dashboard import Dashboard
        from ..dashboard._trace_links import TraceLinks
    except ImportError as error:
        raise CommandError(
            f"`starlette-jobs dashboard` needs the dashboard extra and uvicorn ({error}): "
            "pip install 'starlette-jobs[dashboard]' uvicorn"
        ) from None

    class Server(uvicorn.Server):
        """uvicorn's server, whose stop on SIGTERM or SIGINT ends this command with status 0
        (uvicorn raises the signal again once it has stopped, which kills the process)."""

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            loop = asyncio.get_running_loop()
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(signum, setattr, self, "should_exit", True)
            try:
                yield
            finally:
                for signum in (signal.SIGTERM, signal.SIGINT):
                    loop.remove_signal_handler(signum)

    authorize = _hook(args.authorize) if args.authorize else None
    secret = _secret()
    try:  # before the database: a --trace-url that cannot link is a mistake of the command
        TraceLinks(args.trace_url)
    except ValueError as error:
        raise CommandError(f"--trace-url: {error}") from None
    # Bound before the database, and before saying where it serves: uvicorn would print its
    # own bind error after that line, and exit with a status of its own.
    with _listen(args.host, args.port) as listening:
        async with jobs:
            app = Dashboard(
                jobs, authorize=authorize, secret=secret, trace_url=args.trace_url,
            )  # fmt: skip
            config = uvicorn.Config(app, host=args.host, port=args.port, log_level="warning")
            mode = "read-only" if authorize is None else f"actions allowed by {args.authorize}"
            print(f"dashboard on http://{args.host}:{args.port}/ ({mode})", flush=True)
            await Server(config).serve(sockets=[listening])
    return Exit.OK


def _listen(host: str, port: int) -> socket.socket:
    """A socket listening on `host:port` (as uvicorn binds one); a port another process holds,
    or an address not of this machine, is a mistake of the command line (exit 2)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family, backlog=2048)
    except OSError as error:
        reason = error.strerror or str(error)
        raise CommandError(f"--port {port}: cannot listen on {host}:{port}: {reason}") from None


def _secret() -> str | None:
    """`SECRET_VARIABLE`'s value; None when unset (a random key). Set but empty is a mistake
    (`SECRET=${UNSET}` in a compose file), refused before the database, as `Dashboard` does."""
    secret = os.environ.get(SECRET_VARIABLE)
    if secret == "":
        raise CommandError(
            f"{SECRET_VARIABLE} is set but empty: give it a random value shared by every "
            "process serving the dashboard, or unset it for a random key of this process"
        )
    return secret


def _hook(path: str) -> Authorize:
    """The `module:function` an operator named with `--authorize`."""
    module_name, _, name = path.partition(":")
    if not module_name or not name:
        raise CommandError(f"--authorize takes module:function, got {path!r}")
    try:
        hook = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as error:
        raise CommandError(f"--authorize {path}: {error}") from None
    except Exception as error:  # whatever the module raises as it runs: one line, as the target
        raise CommandError(f"--authorize {path}: {type(error).__name__}: {error}") from None
    if not callable(hook):
        raise CommandError(f"--authorize {path}: not a function")
    return cast("Authorize", hook)
