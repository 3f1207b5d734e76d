"""The store protocol: what the rest of the library asks of wherever jobs are kept.

`_protocol.Store` speaks of jobs, claims, leases and outcomes, never of SQL or of a driver; the
records that cross it live in `starlette_jobs._records`, its errors in `starlette_jobs._errors`.
`_connectivity` says how long a caller waits for a store and how it backs off.

May import: the domain modules at the top of the package (`_records`, `_errors`, `_storable`).
Imported by: the stores that implement it (`postgres/`, `memory/`), and everything that uses
one (`worker/`, the enqueue and query paths, `Jobs`).
"""
