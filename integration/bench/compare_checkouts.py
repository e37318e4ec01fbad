"""Run one benchmark of two checkouts alternately, in one run, and compare their figures.

Each round runs the benchmark of the other checkout (``--before``) and this one's, each with
its own packages first on ``PYTHONPATH`` and the same Python, so both see the same machine
state; the order alternates from round to round, because a machine can get slower over a
sequence of runs (on ext4 without a journal, for example, creating a file gets slower the more
files were deleted in the minutes before), which would otherwise always favour the first.

Every number the benchmark prints is a figure, labelled by its line's heading (the last line
not indented; one ending in a colon names a section and holds no figures) and the text before
it; the table gives each figure's median over the rounds, for both. Usage::

    .venv/bin/python integration/bench/compare_checkouts.py --before ../old-checkout \\
        --rounds 5 bench_engine_overhead.py --repeat 3

The benchmark's own arguments follow its file name (a file under ``integration/bench/``).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def package_path(checkout: Path) -> str:
    """``PYTHONPATH`` that puts the checkout's core, connectors and plugins first."""
    folders = [checkout / "core"]
    for parent in ("connectors", "plugins"):
        folders += sorted(p for p in (checkout / parent).glob("*/src") if p.is_dir())
    return os.pathsep.join(str(folder) for folder in folders)


def run(checkout: Path, script: str, arguments: list[str]) -> dict[str, float]:
    """The figures one run of ``script`` in ``checkout`` prints, by label."""
    environment = {**os.environ, "PYTHONPATH": package_path(checkout)}
    result = subprocess.run(
        [sys.executable, str(checkout / "integration" / "bench" / script), *arguments],
        cwd=checkout,
        env=environment,
        check=True,
        capture_output=True,
        text=True,
    )
    figures: dict[str, float] = {}
    heading = ""
    for line in result.stdout.splitlines():
        if not line.startswith(" "):
            heading = NUMBER.split(line)[0].strip(" (:")
            if line.rstrip().endswith(":"):
                continue  # a section heading: its numbers are the benchmark's settings
        previous = 0
        for match in NUMBER.finditer(line):
            label = line[previous : match.start()].strip(" (),:")
            key = " / ".join(part for part in (heading, label) if part) or "figure"
            while key in figures:  # the same label twice on one line
                key += "'"
            figures[key] = float(match.group().replace(",", ""))
            previous = match.end()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="the checkout to compare with")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("script", help="a benchmark under integration/bench/")
    parser.add_argument("arguments", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    checkouts = {"before": args.before.resolve(), "after": ROOT}
    runs: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
    for round_number in range(1, args.rounds + 1):
        order = list(checkouts.items())
        for side, checkout in order if round_number % 2 else order[::-1]:
            runs[side].append(run(checkout, args.script, args.arguments))
        print(f"round {round_number} of {args.rounds} done", file=sys.stderr)
    labels = [label for label in runs["after"][0] if label in runs["before"][0]]
    width = max(len(label) for label in labels)
    print(f"{args.script}, median of {args.rounds} alternating rounds:")
    print(f"{'figure':<{width}}  {'before':>14}  {'after':>14}  after/before")
    for label in labels:
        before = statistics.median(r[label] for r in runs["before"] if label in r)
        after = statistics.median(r[label] for r in runs["after"] if label in r)
        ratio = f"{after / before:.2f}" if before else "-"
        print(f"{label:<{width}}  {before:>14,.1f}  {after:>14,.1f}  {ratio:>12}")


if __name__ == "__main__":
    main()
