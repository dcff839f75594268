"""`python -m ys.daemon run [--workflows DIR] [--concurrency N]`: the daemon in the foreground."""

from __future__ import annotations

import argparse
import sys

from ys.daemon.main import run
from ys.paths import resolve


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ys.daemon")
    parser.add_argument("command", choices=["run"])
    parser.add_argument("--workflows", default=None)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args(argv)
    return run(resolve(args.workflows), concurrency=args.concurrency)


if __name__ == "__main__":
    sys.exit(main())
