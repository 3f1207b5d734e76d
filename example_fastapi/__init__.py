"""A small FastAPI app that uses starlette-jobs the way docs/fastapi.md shows."""
