"""`python -m ys.daemon run [--workflows DIR] [--concurrency N] [--database URL]`: the daemon in
the foreground. `ys daemon start` passes a database URL through YS_DATABASE instead, so that
no password shows in `ps`."""

from __future__ import annotations

import argparse
import sys

from ys.daemon.main import run
from ys.paths import resolve


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ys.daemon")
    parser.add_argument("command", choices=["run"])
    parser.add_argument("--workflows", default=None)
    parser.add_argument("--concurrency", type=int, default=None)
    parser.add_argument("--database", default=None)
    args = parser.parse_args(argv)
    return run(resolve(args.workflows), concurrency=args.concurrency, database=args.database)


if __name__ == "__main__":
    sys.exit(main())
