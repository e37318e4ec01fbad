"""``microbatch-demo`` (also ``microbatch demo``): the command line of the demo job."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

from rich.console import Console

from .demo import run_demo

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="microbatch demo",
        description="A generator drops JSON event files into a folder while a query streams "
        "them into a Delta table (json file source -> delta sink), then reads it back and "
        "shows the table's history.",
    )
    parser.add_argument(
        "--seconds", type=_positive_float, default=6.0, help="how long files arrive"
    )
    parser.add_argument(
        "--files-per-second", type=_positive_float, default=10.0, help="how fast files arrive"
    )
    parser.add_argument("--rows-per-file", type=_positive_int, default=5000, help="events per file")
    parser.add_argument(
        "--max-files-per-trigger", type=_positive_int, default=5, help="files per micro-batch"
    )
    parser.add_argument("--folder", help="where to put the files (default: a new temporary folder)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo with the command line ``argv``; returns the exit code."""
    args = build_parser().parse_args(argv)
    out, err = _console(stderr=False), _console(stderr=True)
    try:
        return run_demo(
            out,
            err,
            seconds=args.seconds,
            files_per_second=args.files_per_second,
            rows_per_file=args.rows_per_file,
            files_per_trigger=args.max_files_per_trigger,
            folder=args.folder,
        )
    except KeyboardInterrupt:
        err.print("Interrupted.")
        return 130


def _console(*, stderr: bool) -> Console:
    """A console that, when not writing to a terminal, is wide enough for the tables."""
    if os.isatty(2 if stderr else 1) or "COLUMNS" in os.environ:
        return Console(stderr=stderr, soft_wrap=stderr)
    return Console(stderr=stderr, soft_wrap=stderr, width=160)


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value
