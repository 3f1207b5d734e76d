"""The `Store` protocol (`_store`): both stores are it, method for method. mypy checks the
assignment below; the tests check, at run time, what mypy cannot see from here (parameter
names, which callers may pass by keyword) and that no store grows a public method the protocol
lacks."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from starlette_jobs.memory._rows import OutcomeListener, QueueListener
from starlette_jobs.memory._store import MemoryStore
from starlette_jobs.postgres._listener import Listener as PostgresListener
from starlette_jobs.postgres._store import PostgresStore
from starlette_jobs.store._protocol import Listener, Store


def as_stores(postgres: PostgresStore, memory: MemoryStore) -> list[Store]:
    """Type-checked only: mypy refuses this if either store stops matching the protocol."""
    return [postgres, memory]


def as_listeners(postgres: PostgresListener, memory: QueueListener) -> list[Listener]:
    return [postgres, memory]


def members(protocol: type[Any]) -> dict[str, Any]:
    """Its methods and properties, its parts' included (`store/_parts.py`)."""
    return {
        name: value
        for part in reversed(protocol.__mro__)
        if part.__module__.startswith("starlette_jobs.")
        for name, value in vars(part).items()
        if not name.startswith("_") and (callable(value) or isinstance(value, property))
    }


STORE_METHODS = members(Store)


def test_the_protocol_speaks_of_jobs_not_sql() -> None:
    assert "insert_jobs" in STORE_METHODS
    assert "claim_batch" in STORE_METHODS
    assert not [name for name in STORE_METHODS if "sql" in name or "query" in name]


@pytest.mark.parametrize("store", [PostgresStore, MemoryStore])
@pytest.mark.parametrize("name", sorted(STORE_METHODS))
def test_each_store_has_each_method_with_its_signature(store: type[Any], name: str) -> None:
    expected, actual = STORE_METHODS[name], inspect.getattr_static(store, name, None)
    assert actual is not None, f"{store.__name__} lacks {name}"
    if isinstance(expected, property):
        assert isinstance(actual, property), f"{store.__name__}.{name} is not a property"
        return
    assert inspect.iscoroutinefunction(actual) == inspect.iscoroutinefunction(expected), name
    wanted = [(p.name, p.kind) for p in inspect.signature(expected).parameters.values()]
    found = [(p.name, p.kind) for p in inspect.signature(actual).parameters.values()]
    assert found == wanted, f"{store.__name__}.{name}"


# Public methods a store may have beyond the protocol: what only its own module and tests use.
OWN = {PostgresStore: {"open"}, MemoryStore: set()}


@pytest.mark.parametrize("store", [PostgresStore, MemoryStore])
def test_no_store_has_public_methods_the_protocol_lacks(store: type[Any]) -> None:
    extra = set(members(store)) - set(STORE_METHODS) - OWN[store]
    assert extra == set()


@pytest.mark.parametrize("listener", [PostgresListener, QueueListener, OutcomeListener])
def test_each_listener_is_the_listener_protocol(listener: type[Any]) -> None:
    for name, expected in members(Listener).items():
        actual = getattr(listener, name)
        assert inspect.iscoroutinefunction(actual) == inspect.iscoroutinefunction(expected), name
