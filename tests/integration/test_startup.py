"""A database setting that cannot work stops the start with one clear line; an outage does not."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

import asyncpg
import pytest

from starlette_jobs import ConfigurationError, Jobs, StarletteJobsError
from starlette_jobs.cli._main import main
from starlette_jobs.postgres._checks import configuration_mistake
from tests.conftest import with_database


def with_user(dsn: str, user: str) -> str:
    parts = urlsplit(dsn)
    return parts._replace(netloc=f"{user}@{parts.netloc.rpartition('@')[2]}").geturl()


async def start_error(dsn: str, *, require_database: bool) -> ConfigurationError:
    with pytest.raises(ConfigurationError) as caught:
        async with Jobs(dsn, require_database=require_database):
            pass
    return caught.value


@pytest.mark.parametrize("require_database", [False, True])
@pytest.mark.parametrize(
    ("dsn", "phrases"),
    [
        (
            "mysql://app:s3cret@localhost/app",
            ["not a PostgreSQL URL", "mysql://app:***@localhost/app", "postgresql://"],
        ),
        ("postgres:/app", ["not a PostgreSQL URL", "'postgres:/app'", "postgresql://"]),
        ("localhost:5432/app", ["not a PostgreSQL URL", "postgresql://"]),
        (
            "postgresql://app:s3cret@localhost:54x2/app",
            ["invalid DSN", "postgresql://app:***@localhost:54x2/app", "port"],
        ),
        (
            "postgresql://app:s3cret@localhost/app?sslmode=sometimes",
            ["invalid DSN", "sslmode", "postgresql://app:***@localhost/app?sslmode=sometimes"],
        ),
        (
            "postgresql://app:s3cret@no-such-host.invalid/app",
            ["unknown host 'no-such-host.invalid'", "postgresql://app:***@no-such-host.invalid"],
        ),
    ],
)
async def test_a_dsn_that_cannot_work_stops_the_start_with_one_clear_line(
    dsn: str, phrases: list[str], require_database: bool
) -> None:
    if ".invalid" in dsn and not _dns_says_no_such_host("no-such-host.invalid"):
        pytest.skip("no DNS server answers here (the classification is tested below)")
    error = await start_error(dsn, require_database=require_database)
    message = str(error)
    assert "\n" not in message
    assert "s3cret" not in message
    for phrase in phrases:
        assert phrase in message


async def test_a_missing_database_says_which_and_how_to_create_it(
    server_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    for require_database in (False, True):
        error = await start_error(
            with_database(server_dsn, "no_such_db"), require_database=require_database
        )
        assert 'database "no_such_db" does not exist' in str(error)
        assert "CREATE DATABASE no_such_db" in str(error)
        # A traceback printed in full (uvicorn's) ends with this line, not the driver's chain.
        assert error.__cause__ is None
        assert error.__suppress_context__
        assert isinstance(error.__context__, asyncpg.InvalidCatalogNameError)
    assert "starting anyway" not in caplog.text


async def test_a_missing_role_says_to_check_the_user_and_password(server_dsn: str) -> None:
    dsn = with_user(with_database(server_dsn, "postgres"), "no_such_role")
    error = await start_error(dsn, require_database=False)
    assert 'role "no_such_role" does not exist' in str(error)
    assert "check the user name and password" in str(error)


async def test_a_dsn_from_database_url_is_named_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "mysql://app@localhost/app")
    with pytest.raises(ConfigurationError, match=r"\(from DATABASE_URL\)"):
        async with Jobs():
            pass


def test_the_cli_prints_the_mistake_on_one_line_and_exits_2(
    server_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    dsn = with_database(server_dsn, "no_such_db")
    assert main(["worker", "tests.integration.cli_app:jobs", "--dsn", dsn]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("starlette-jobs: error: ")
    assert 'database "no_such_db" does not exist' in err
    assert "\n" not in err


def _dns_says_no_such_host(host: str) -> bool:
    try:
        socket.getaddrinfo(host, 5432)
    except socket.gaierror as error:
        return error.errno == socket.EAI_NONAME
    return False


def test_a_host_dns_says_does_not_exist_is_a_configuration_mistake() -> None:
    error = socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    mistake = configuration_mistake(error, "postgresql://app:s3cret@db.intrenal/app", "dsn=")
    assert mistake is not None
    assert "unknown host 'db.intrenal'" in str(mistake)
    assert "s3cret" not in str(mistake)


def test_configuration_error_is_a_library_error() -> None:
    assert issubclass(ConfigurationError, StarletteJobsError)


@pytest.mark.parametrize(
    "error",
    [
        ConnectionRefusedError(111, "Connect call failed"),
        TimeoutError(),
        asyncpg.exceptions.CannotConnectNowError("the database system is starting up"),
        asyncpg.exceptions.AdminShutdownError("terminating connection due to administrator"),
        socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution"),
    ],
)
def test_an_outage_is_not_a_configuration_mistake(error: BaseException) -> None:
    assert configuration_mistake(error, "postgresql://app@db/app", "dsn=") is None
