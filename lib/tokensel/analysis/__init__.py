"""Analysis: what the book measures on a trained model.

* :mod:`.statistics` — token statistics of a batch (``alpha``, the posterior gap, classes), the
  selection and attention of a ``<cls>`` vector.
* :mod:`.shapes` — tokens binned by their posterior gap: the two shapes (U and increasing), their
  spreads, bootstrap intervals and controls.
* :mod:`.maxmargin` — the max-margin (ATT-SVM) problems for a selection, solved with cvxpy.
* :mod:`.dense` — the same problems, and normalised GD, on dense token features ``(n, T, d)``.

Imports :mod:`tokensel.models`, :mod:`tokensel.data` and the plumbing modules (not training).
"""

import importlib.util
from typing import TYPE_CHECKING

if not TYPE_CHECKING:  # the type checker sees the folder's modules themselves

    def __getattr__(name: str):
        """A module of this folder, imported when first used (``ts.models.variants``)."""
        if importlib.util.find_spec(f"{__name__}.{name}") is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        return importlib.import_module(f"{__name__}.{name}")
