"""The worker: claims jobs from a store, runs them, and writes their outcomes.

`_worker.Worker` runs one claim loop per queue; `_attempt` runs one claimed job; `_leases`,
`_outcomes` and `_progress` batch what attempts tell the store; `_upkeep` rescues for the whole
cluster and `_retention` deletes old finished jobs; `_shutdown`, `_loop_lag` and `_loop_time`
decide when to stop and when to yield to the web tier; `_context` is what a running job sees
(`current_job()`).

May import: `store/` (the protocol, never a store of its own choosing) and the domain modules
at the top of the package.
"""
