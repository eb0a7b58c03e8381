"""Analysis: what the book measures on a trained model.

* :mod:`.statistics` — token statistics of a batch (``alpha``, the posterior gap, classes), the
  selection and attention of a ``<cls>`` vector.
* :mod:`.shapes` — tokens binned by their posterior gap: the two shapes (U and increasing), their
  spreads, bootstrap intervals and controls.
* :mod:`.maxmargin` — the max-margin (ATT-SVM) problems for a selection, solved with cvxpy.
* :mod:`.dense` — the same problems, and normalised GD, on dense token features ``(n, T, d)``.
"""

from . import dense, maxmargin, shapes, statistics
