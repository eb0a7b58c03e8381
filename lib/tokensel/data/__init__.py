"""Data: what the model reads.

* :mod:`.batch` — :class:`~tokensel.data.batch.RaggedBatch`, sequences of different lengths in one flat tensor.
* :mod:`.text` — the tokenizer and the vocabulary.
* :mod:`.synthetic` — the generators of chapters 1 to 5 (Assumption 1's paired data, i.i.d. tokens, ...).
* :mod:`.imdb_archive`, :mod:`.manifest`, :mod:`.loaders` — real reviews from their public sources or a
  local copy, checksum-verified.
* :mod:`.reviews` — reviews (or a reader's own texts) prepared as batches over one vocabulary.
"""

from . import batch, imdb_archive, loaders, manifest, reviews, synthetic, text
