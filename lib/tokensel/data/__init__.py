"""Data: what the model reads (ragged batches, text and vocabulary, synthetic generators, real reviews from
checksum-verified sources)."""

from . import batch, imdb_archive, loaders, manifest, reviews, synthetic, text
