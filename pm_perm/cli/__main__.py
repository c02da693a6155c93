"""``python -m pm_perm.cli``: the ``pm-perm`` command."""

from pm_perm.cli import main

raise SystemExit(main())
