"""`python -m tilegrad`: the command line (see `tilegrad.cli`)."""

from .cli import main

raise SystemExit(main())
