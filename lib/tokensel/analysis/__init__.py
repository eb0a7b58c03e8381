"""Analysis: what the book measures on a trained model (token statistics, the two shapes, the max-margin
problems on tokens and on dense features).

The book's exact identities are proved with sympy in :mod:`.symbolic`."""

from . import dense, maxmargin, shapes, statistics, symbolic
