"""HTML views of attention on real text, for the book."""

from __future__ import annotations

import html

import numpy as np

from tokensel.errors import InvalidArgumentError
from tokensel.validation import check_real_array


def attention_html(words, weights, in_vocab, title: str = "", color: str = "33, 102, 172") -> str:
    """One review as HTML, each word shaded by its attention weight (relative to the largest
    weight in the review); out-of-vocabulary words are shown in grey and take no attention."""
    if not isinstance(words, (list, tuple)) or not all(isinstance(w, str) for w in words):
        raise InvalidArgumentError("words must be a list of str (the review's words, e.g. from tokenize)")
    weights = check_real_array(weights, "weights", ndim=1)
    if not isinstance(in_vocab, (list, tuple, np.ndarray)) or not all(
        isinstance(b, (bool, np.bool_)) for b in in_vocab
    ):
        raise InvalidArgumentError("in_vocab must be a list of booleans, one per word")
    in_vocab = list(in_vocab)
    if len(in_vocab) != len(words):
        raise InvalidArgumentError(f"{len(words)} words but {len(in_vocab)} in-vocabulary flags")
    if weights.ndim != 1 or weights.size != sum(map(bool, in_vocab)):
        raise InvalidArgumentError(
            f"expected one weight per in-vocabulary word ({sum(map(bool, in_vocab))}), "
            f"got weights of shape {weights.shape}"
        )
    top = weights.max() if weights.size and weights.max() > 0 else 1.0
    parts, k = [], 0
    for word, known in zip(words, in_vocab, strict=True):
        w = html.escape(word)
        if known:
            a = weights[k] / top
            k += 1
            parts.append(
                f'<span title="attention {weights[k - 1]:.3g}" style="background: rgba({color}, '
                f"{a:.3f}); color: {'white' if a > 0.6 else 'inherit'}; padding: 0 1px; "
                f'border-radius: 2px">{w}</span>'
            )
        else:
            parts.append(f'<span style="color: #aaa">{w}</span>')
    head = (
        f'<div style="font-size: 0.85em; color: #555; margin-bottom: 2px">{html.escape(title)}</div>' if title else ""
    )
    return (
        f'<div style="border: 1px solid #ddd; border-radius: 4px; padding: 6px 8px; margin: 6px 0; '
        f'line-height: 1.7">{head}{" ".join(parts)}</div>'
    )


def review_attention(model, data, i: int) -> str:
    """HTML of test review ``i`` of a :class:`~tokensel.data.reviews.ReviewData` under ``model`` (its attention,
    :meth:`~tokensel.AttentionModel.attention`, over the words the encoding kept)."""
    from tokensel.data.text import kept_words

    words = data.test_words[i]
    review = data.test.subset([i])
    q = model.attention(review).cpu().numpy()
    known = kept_words(words, data.vocab, max_len=review.num_tokens)  # the batch may be truncated
    f = float(model.forward(review)[0])
    label = "positive" if data.test.labels[i] > 0 else "negative"
    title = f"test review {i}: label {label}, model output f = {f:+.2f}"
    return attention_html(words, q, known, title=title)


def reviews_attention(model, data, indices) -> str:
    """:func:`review_attention` for every test review in ``indices`` (e.g.
    :meth:`~tokensel.data.reviews.ReviewData.examples`), one after the other.

    Introduced in chapter 06."""
    if isinstance(indices, (str, bytes)) or not hasattr(indices, "__iter__"):
        raise InvalidArgumentError(f"indices must be a list of test review indices, got {indices!r}")
    return "".join(review_attention(model, data, int(i)) for i in indices)
