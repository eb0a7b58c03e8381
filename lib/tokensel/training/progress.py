"""Progress bars for long runs (tqdm). ``TOKENSEL_PROGRESS=0`` turns them off (the book build does)."""

from __future__ import annotations

import importlib.util

from .. import config
from ..validation import Bool, Int, Text, declare


def enabled() -> bool:
    return config.progress()


class _Silent:
    """Stand-in for a disabled bar (no tqdm import, so no notebook warnings)."""

    def update(self, n=1):
        pass

    def set_postfix(self, *a, **k):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@declare(total=Int(min=0), desc=Text(), disable=Bool(allow_none=True))
def bar(total: int, desc: str, disable: bool | None = None, **kw):
    """A tqdm progress bar (the notebook widget when ipywidgets is installed), or a silent stand-in
    when progress bars are off."""
    off = (not enabled()) if disable is None else disable
    if off:
        return _Silent()
    if importlib.util.find_spec("ipywidgets") is not None:
        from tqdm.auto import tqdm
    else:
        from tqdm import tqdm
    return tqdm(total=total, desc=desc, leave=False, **kw)
