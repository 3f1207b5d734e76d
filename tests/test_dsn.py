"""`masked_dsn`: a DSN as reprs, log lines and error messages show it, never with its password."""

from __future__ import annotations

import pytest

from starlette_jobs._dsn import masked_dsn


@pytest.mark.parametrize(
    ("dsn", "shown"),
    [
        ("postgresql://app:s3cret@db:5432/jobs", "postgresql://app:***@db:5432/jobs"),
        # A password holding '@' and ':' is still wholly hidden; the host stays readable.
        ("postgresql://app:p@ss:w0rd@db/jobs", "postgresql://app:***@db/jobs"),
        ("postgres://app:x@db/jobs?sslmode=require", "postgres://app:***@db/jobs?sslmode=require"),
        # In the query string, with other settings around it.
        (
            "postgresql://db/jobs?user=app&password=s3cret&sslmode=require",
            "postgresql://db/jobs?user=app&password=***&sslmode=require",
        ),
        # A key=value DSN, quoted or not, any case and spacing.
        (
            "host=db user=app password=s3cret dbname=jobs",
            "host=db user=app password=*** dbname=jobs",
        ),
        ("host=db PASSWORD = 'two words' dbname=jobs", "host=db password=*** dbname=jobs"),
        ("host=db password='it\\'s' dbname=jobs", "host=db password=*** dbname=jobs"),
    ],
)
def test_passwords_are_masked_and_the_rest_kept(dsn: str, shown: str) -> None:
    assert masked_dsn(dsn) == shown


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://app@db:5432/jobs",
        "postgresql://db/jobs",
        "postgresql:///jobs?host=/run/postgresql",
        "memory://shared",
    ],
)
def test_a_dsn_without_a_password_is_shown_as_it_is(dsn: str) -> None:
    assert masked_dsn(dsn) == dsn


def test_a_url_that_cannot_be_parsed_shows_nothing_past_its_scheme() -> None:
    # An unclosed IPv6 bracket makes urlsplit fail: the password must not leak with it.
    assert masked_dsn("postgresql://app:s3cret@[db/jobs") == "postgresql://***"
