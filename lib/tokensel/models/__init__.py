"""Models: the one-layer attention model, the variants of chapter 7, and their exact gradients.

* :mod:`.attention` — :class:`~tokensel.models.attention.AttentionModel` and its ``K``-class form.
* :mod:`.core` — segment operations over a ragged batch and the closed-form score/value gradients.
* :mod:`.kernels` — the fused attention pass (numba), deterministic, float32 and float64.
* :mod:`.gradients` — full-batch gradients with respect to ``E``, ``p`` and ``v``.
* :mod:`.mixing` — sparse attention mixing for the two-layer variants.
* :mod:`.variants` — the model variants (MLP heads, two-layer models).
"""

from . import attention, core, gradients, kernels, mixing, variants
