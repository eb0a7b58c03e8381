"""Models: the one-layer attention model, the variants of chapter 7, and their exact gradients.

* :mod:`.attention` — :class:`~tokensel.models.attention.AttentionModel` and its ``K``-class form.
* :mod:`.core` — segment operations over a ragged batch and the closed-form score/value gradients.
* :mod:`.kernels` — the fused attention pass (numba), deterministic, float32 and float64.
* :mod:`.gradients` — full-batch gradients with respect to ``E``, ``p`` and ``v``.
* :mod:`.mixing` — sparse attention mixing for the two-layer variants.
* :mod:`.variants` — the model variants (MLP heads, two-layer models).

Imports :mod:`tokensel.data` and the plumbing modules.
"""

import importlib.util
from typing import TYPE_CHECKING

if not TYPE_CHECKING:  # the type checker sees the folder's modules themselves

    def __getattr__(name: str):
        """A module of this folder, imported when first used (``ts.models.variants``)."""
        if importlib.util.find_spec(f"{__name__}.{name}") is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        return importlib.import_module(f"{__name__}.{name}")
