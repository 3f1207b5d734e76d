"""`starlette-jobs` / `python -m starlette_jobs`: the command line (`_main.main`).

May import: anything below it (`Jobs`, the stores, the worker).
"""
