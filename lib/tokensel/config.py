"""Every setting tokensel reads from the environment, in one place, read when used (never at import).

A notebook started by hand in Jupyter therefore behaves like ``make book``: both ask these functions,
and the Makefile only sets variables that a reader may set too.

=========================  ==========================================================================
variable                   meaning
=========================  ==========================================================================
``TOKENSEL_DATA_DIR``      a local data folder (``imdb/{train,test}.parquet``,
                           ``yelp_polarity_sample/test.parquet``), checked against the manifest
``TOKENSEL_CACHE_DIR``     where downloaded, parsed and prepared data are kept (default ``~/.cache/tokensel``)
``TOKENSEL_IMDB_ARCHIVE``  the IMDB archive ``aclImdb_v1.tar.gz``: a URL or a local path (default the
                           Stanford release); when set, it is used even if ``TOKENSEL_DATA_DIR`` is set
``TOKENSEL_IMDB_SHA256``   the SHA-256 such an archive must have (the canonical archive's is built in)
``TOKENSEL_YELP_SOURCE``   Yelp polarity: a hub id or a local folder in the hub's layout
                           (default ``fancyzhx/yelp_polarity``)
``TOKENSEL_YELP_SIZE``     reviews per split taken from the full Yelp data (stratified, deterministic):
                           a number, or ``full`` (default 25000)
``TOKENSEL_PROGRESS``      ``0`` turns progress bars off
``TOKENSEL_THREADS``       torch's thread count set by :func:`tokensel.seed_everything` (default 2)
=========================  ==========================================================================
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .errors import InvalidArgumentError

DATA_DIR = "TOKENSEL_DATA_DIR"
CACHE_DIR = "TOKENSEL_CACHE_DIR"
IMDB_ARCHIVE = "TOKENSEL_IMDB_ARCHIVE"
IMDB_SHA256 = "TOKENSEL_IMDB_SHA256"
YELP_SOURCE = "TOKENSEL_YELP_SOURCE"
YELP_SIZE = "TOKENSEL_YELP_SIZE"
PROGRESS = "TOKENSEL_PROGRESS"
THREADS = "TOKENSEL_THREADS"

CANONICAL_IMDB_URL = "https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz"
DEFAULT_YELP_SOURCE = "fancyzhx/yelp_polarity"
DEFAULT_YELP_SIZE = 25_000
DEFAULT_THREADS = 2


def _get(name: str) -> str | None:
    value = os.environ.get(name)
    return value if value not in (None, "") else None


def _bad(name: str, value: str, want: str) -> InvalidArgumentError:
    shown = value if len(value) <= 40 else value[:37] + "..."
    return InvalidArgumentError(
        f"environment variable {name}={shown!r} is not {want}; set it to {want} or unset it (see tokensel.config)"
    )


def _whole(value: str, digits: int) -> int | None:
    """``value`` as a whole number of ASCII digits (``_`` between groups), at most ``digits`` of them; else None
    (refusing Unicode digits ``int`` rejects, signs, inner spaces, absurd lengths)."""
    value = value.strip()
    if not re.fullmatch(r"[0-9]+(?:_[0-9]+)*", value, flags=re.ASCII) or len(value.replace("_", "")) > digits:
        return None
    return int(value.replace("_", ""))


def redact(location: str) -> str:
    """``location`` safe to print: the password (and any user name) of a URL replaced by ``***``."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(location)
        if parts.username is None and parts.password is None:
            return location
        host = parts.hostname or ""
        netloc = "***@" + host + (f":{parts.port}" if parts.port else "")
        return urlunsplit(parts._replace(netloc=netloc))
    except ValueError:  # an invalid port, an unbalanced bracket: say nothing of it
        return "<an unparseable URL>" if "@" in location else location


def redact_text(text: str) -> str:
    """``text`` with the credentials of every URL in it replaced by ``***`` (for error messages)."""
    return re.sub(r"([a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]*@", r"\1***@", text)


def data_dir() -> Path | None:
    """The local data folder named by ``TOKENSEL_DATA_DIR``, or None."""
    value = _get(DATA_DIR)
    return None if value is None else Path(value).expanduser()


def cache_dir() -> Path:
    """Where downloaded, parsed and prepared data are kept: ``TOKENSEL_CACHE_DIR``, else ``~/.cache/tokensel``
    (``$XDG_CACHE_HOME/tokensel`` when that is set)."""
    value = _get(CACHE_DIR)
    if value is not None:
        return Path(value).expanduser()
    base = _get("XDG_CACHE_HOME")
    return (Path(base).expanduser() if base else Path.home() / ".cache") / "tokensel"


def imdb_archive() -> tuple[str, bool]:
    """The IMDB archive location and whether it was set explicitly (``TOKENSEL_IMDB_ARCHIVE``)."""
    value = _get(IMDB_ARCHIVE)
    return (CANONICAL_IMDB_URL, False) if value is None else (value, True)


def imdb_sha256() -> str | None:
    """The SHA-256 the IMDB archive must have when ``TOKENSEL_IMDB_SHA256`` is set (64 hex digits)."""
    value = _get(IMDB_SHA256)
    if value is None:
        return None
    if not re.fullmatch(r"[0-9a-fA-F]{64}", value.strip()):
        raise _bad(IMDB_SHA256, value, "64 hexadecimal digits (a SHA-256)")
    return value.strip().lower()


def yelp_source() -> str:
    """The Yelp polarity source: a hub id, or a local folder laid out as the hub copy."""
    return _get(YELP_SOURCE) or DEFAULT_YELP_SOURCE


def yelp_size() -> int | None:
    """Reviews per split taken from the full Yelp polarity data; None means all of them."""
    value = _get(YELP_SIZE)
    if value is None:
        return DEFAULT_YELP_SIZE
    if value.strip().lower() == "full":
        return None
    number = _whole(value, 15)
    if number is None or number < 2:
        raise _bad(YELP_SIZE, value, "a number of reviews per split (at least 2) or 'full'")
    return number


def progress() -> bool:
    """Whether progress bars are shown (``TOKENSEL_PROGRESS`` not 0/false/no/off)."""
    return (_get(PROGRESS) or "1").strip().lower() not in ("0", "false", "no", "off")


def threads() -> int:
    """torch's thread count for :func:`tokensel.seed_everything` (``TOKENSEL_THREADS``, default 2)."""
    value = _get(THREADS)
    if value is None:
        return DEFAULT_THREADS
    number = _whole(value, 6)
    if number is None or not 1 <= number <= 4096:
        raise _bad(THREADS, value, "a whole number of threads between 1 and 4096")
    return number
