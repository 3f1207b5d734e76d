"""A small Starlette app that uses starlette-jobs the way an application would."""
