"""Entry point: ``fdcontrol serve`` / ``python -m server.main`` → uvicorn on the settings' host/port."""

from __future__ import annotations

import argparse
import sys

import uvicorn
from pydantic import ValidationError

from .app import create_app
from .settings import load_settings


def run(args: argparse.Namespace) -> int:
    overrides = {k: getattr(args, k, None) for k in ("robot", "mapping", "gamma", "alpha", "rate",
                                                     "host", "port", "driver", "record", "record_dir")}
    try:
        settings = load_settings(getattr(args, "config", None), **overrides)
    except (ValidationError, ValueError) as exc:
        print(f"fdcontrol serve: invalid settings: {exc}".replace("\n", " "), file=sys.stderr)
        return 2
    uvicorn.run(create_app(settings), host=settings.host, port=settings.port, log_level="warning",
                ws_max_queue=4)
    return 0


def main(argv: list[str] | None = None) -> int:
    from fdcontrol.cli import build_parser

    args = build_parser().parse_args(["serve", *(sys.argv[1:] if argv is None else argv)])
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
