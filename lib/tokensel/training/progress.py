"""Progress bars for long runs (tqdm). ``TOKENSEL_PROGRESS=0`` turns them off (the book build does)."""

from __future__ import annotations

import importlib.util

from .. import config
from ..validation import Bool, Int, Text, declare


@declare(total=Int(min=0), desc=Text(), disable=Bool(allow_none=True))
def bar(total: int, desc: str, disable: bool | None = None):
    """A tqdm bar (the notebook widget where ipywidgets is installed; console tqdm without it, which needs no
    widget); ``disable`` None follows ``TOKENSEL_PROGRESS``."""
    if importlib.util.find_spec("ipywidgets") is not None:
        from tqdm.auto import tqdm
    else:
        from tqdm import tqdm
    return tqdm(total=total, desc=desc, leave=False, disable=not config.progress() if disable is None else disable)
