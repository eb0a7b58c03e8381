"""Progress bars for long runs (tqdm). ``TOKENSEL_PROGRESS=0`` turns them off (the book build does)."""

from __future__ import annotations

import os


def enabled() -> bool:
    return os.environ.get("TOKENSEL_PROGRESS", "1") not in ("0", "false", "no", "off")


def bar(total: int, desc: str, disable: bool | None = None, **kw):
    """A tqdm progress bar, or a silent stand-in when progress bars are off."""
    from tqdm.auto import tqdm

    off = (not enabled()) if disable is None else disable
    return tqdm(total=total, desc=desc, disable=off, leave=False, **kw)
