"""The version of starlette-jobs: one place, read by the package, its tracer and the build."""

__version__ = "0.1.0"
