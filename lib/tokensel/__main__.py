"""``python -m tokensel verify [RESULTS_DIR]``: check a built book's claim records (see
:func:`tokensel.checks.verify`); exits 1 naming every failed claim and unfinished chapter."""

from .checks import main

raise SystemExit(main())
