"""The in-memory store (`Jobs("memory://")`): the `Store` protocol without a database, for tests.

`_store.MemoryStore` keeps the PostgreSQL store's semantics over the tables of `_tables` and the
rows of `_rows`; `_outage` makes it fail as an unavailable database, for tests; the
contract suite (tests/contract/) holds both stores to the same behaviour.

May import: `store/` and the domain modules at the top of the package.
"""
