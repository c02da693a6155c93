"""The ``pm-perm`` command line: a thin dispatcher to the task subcommands.

Subcommands: ``rank`` (:mod:`pm_perm.ranking.cli`), ``rankings``
(:mod:`pm_perm.rankings.cli`). ``pm-perm <command> --help`` for options.
"""

from __future__ import annotations

import argparse

from pm_perm.ranking.cli import add_rank_parser
from pm_perm.rankings.cli import add_rankings_parser

__all__ = ["main"]


def main(argv=None):
    """Parse ``argv`` (default ``sys.argv[1:]``), run the subcommand, return its exit status."""
    parser = argparse.ArgumentParser(prog="pm-perm", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_rank_parser(sub)
    add_rankings_parser(sub)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
