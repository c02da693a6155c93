"""The ``pm-perm`` command line: a thin dispatcher to the task subcommands.

Subcommands: ``learn-to-rank`` (:mod:`pm_perm.cli.learning_to_rank`: train a ranker on LETOR
files), ``preferences`` (:mod:`pm_perm.cli.preferences`: analyse ranking data, e.g. PrefLib
ballots); what they share is :mod:`pm_perm.cli.common`. ``pm-perm <command> --help`` for
options.
"""

from __future__ import annotations

import argparse

from pm_perm.cli import learning_to_rank, preferences

__all__ = ["main"]


def main(argv=None):
    """Parse ``argv`` (default ``sys.argv[1:]``), run the subcommand, return its exit status."""
    parser = argparse.ArgumentParser(prog="pm-perm", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    learning_to_rank.add_parser(sub)
    preferences.add_parser(sub)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
