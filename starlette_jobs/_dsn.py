"""A DSN as it may be shown: in reprs, log lines and error messages, never with its password."""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

_MASK = "***"
# `password=...` in a query string (`?password=x&...`) or a key=value DSN (`password = 'x y'`).
_PASSWORD_SETTING = re.compile(r"(?i)\bpassword\s*=\s*(?:'(?:[^'\\]|\\.)*'|[^\s&]*)")


def masked_dsn(dsn: str) -> str:
    """`dsn` with any password replaced by `***`; the rest (user, host, database) kept, since it
    is what a reader needs to tell which server is meant."""
    if "://" in dsn:
        try:
            parts = urlsplit(dsn)
            if parts.password is not None:
                credentials, _, host = parts.netloc.rpartition("@")
                user = credentials.partition(":")[0]
                dsn = urlunsplit(parts._replace(netloc=f"{user}:{_MASK}@{host}"))
        except ValueError:
            # Not a URL after all (a bad port, say): show nothing of what follows the scheme.
            return dsn.partition("://")[0] + f"://{_MASK}"
    return _PASSWORD_SETTING.sub(f"password={_MASK}", dsn)
