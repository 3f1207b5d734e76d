"""`starlette-jobs` / `python -m starlette_jobs`: the command line (`_main.main`), its options
(`_parser`) and the `Jobs` they apply to (`_target`).

May import: anything below it (`Jobs`, the stores, the worker).
"""
