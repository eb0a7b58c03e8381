"""Data: what the model reads.

* :mod:`.batch` — :class:`~tokensel.data.batch.RaggedBatch`, sequences of different lengths in one flat tensor.
* :mod:`.text` — the tokenizer and the vocabulary.
* :mod:`.synthetic` — the generators of chapters 1 to 5 (Assumption 1's paired data, i.i.d. tokens, ...).
* :mod:`.imdb_archive`, :mod:`.manifest`, :mod:`.loaders` — real reviews from their public sources or a
  local copy, checksum-verified.
* :mod:`.reviews` — reviews (or a reader's own texts) prepared as batches over one vocabulary.

Imports only the plumbing modules of :mod:`tokensel` (errors, config, validation, files, seeding).
"""

import importlib.util
from typing import TYPE_CHECKING

if not TYPE_CHECKING:  # the type checker sees the folder's modules themselves

    def __getattr__(name: str):
        """A module of this folder, imported when first used (``ts.models.variants``)."""
        if importlib.util.find_spec(f"{__name__}.{name}") is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        return importlib.import_module(f"{__name__}.{name}")
