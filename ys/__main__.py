"""`python -m ys`: the command line."""

from ys.cli import main

main()
