"""The PostgreSQL store: the one part of the package that knows the driver (asyncpg).

`_store.PostgresStore` implements the `Store` protocol with the named queries of
`sql/queries.sql`; `_connections` and `_lanes` hold the connections; `_migrations` brings the
schema up to date; `_transactions` joins a caller's transaction; `_embedded` runs the embedded
server. The driver's errors stop here (`_driver_errors` says what each means): what leaves this
folder is the library's own.

May import: `store/` and the domain modules at the top of the package.
"""
