"""The status page's tables: every claim of the build with its value and tolerance (:func:`report`,
:func:`claims_table`), the paper's claims mapped to them (:func:`paper_claims_table`), the build's facts
(:func:`build_info`).
"""

from __future__ import annotations

import time
from pathlib import Path

from tokensel.errors import ArgumentTypeError, InvalidArgumentError
from tokensel_book.checks import ClaimFailedError

from .records import MALFORMED, _stamp, _this_build, book_results_dir, book_root
from .verification import problems


def report(expected: list[str], directory: Path | None = None):
    """Tables for the status page: ``(claims, chapters)`` as DataFrames, from the latest record of each
    chapter in ``expected``.

    Raises :class:`~tokensel_book.checks.ClaimFailedError` when a chapter in ``expected`` has no complete record
    from this build, lacks a claim its source makes, or any recorded claim failed (so a status page cannot
    vouch for a failed or missing claim)."""
    import pandas as pd

    d = Path(directory or book_results_dir())
    found = problems(list(expected), d)
    if found:
        raise ClaimFailedError("the status page cannot vouch for every chapter: " + "; ".join(found))
    latest = {}
    for r in _this_build(d)[0]:
        latest[r["chapter"]] = r
    claims = pd.DataFrame(
        [
            dict(
                chapter=ch,
                **{k: c.get(k) for k in ("name", "measured", "expected", "tol", "kind", "passed")},
                deviation=bool(c.get("deviation", False)),
                preregistered=bool(c.get("preregistered", False)),
                source=c.get("threshold", ""),
            )
            for ch in expected
            for c in latest[ch]["checks"]
        ],
        columns=[
            "chapter",
            "name",
            "measured",
            "expected",
            "tol",
            "kind",
            "passed",
            "deviation",
            "preregistered",
            "source",
        ],
    )
    chapters = pd.DataFrame(
        [
            dict(
                chapter=ch,
                claims=len(latest[ch]["checks"]),
                passed=sum(c["passed"] for c in latest[ch]["checks"]),
                seconds=latest[ch]["seconds"],
            )
            for ch in expected
        ]
    )
    return claims, chapters


def paper_claims_table(claims, claim_map: dict):
    """The paper's claims against this build's checks: ``claim_map`` maps each claim of the paper to
    ``(where the book states it, [(chapter, name prefix), ...])``; a recorded check belongs to a claim when its
    chapter matches and its name starts with the prefix. One row per claim: where it is stated, how many checks
    test it, how many of them record deviations, and its status (``holds``; ``holds in part`` when some of its
    checks record deviations; ``deviates`` when all do; ``FAILED``; or ``not checked`` when no recorded check
    matches, so a renamed check cannot vanish silently)."""
    import pandas as pd

    if not isinstance(claim_map, dict) or not claim_map:
        raise InvalidArgumentError("claim_map must be a non-empty dict: claim -> (where stated, [(chapter, prefix)])")
    rows = []
    for claim, entry in claim_map.items():
        if not (
            isinstance(entry, tuple)
            and len(entry) == 2
            and isinstance(entry[0], str)
            and isinstance(entry[1], list)
            and entry[1]
        ):
            raise InvalidArgumentError(f"claim_map[{claim!r}] must be (where stated, [(chapter, name prefix), ...])")
        hit = pd.Series(False, index=claims.index)
        for chapter, prefix in entry[1]:
            hit |= (claims["chapter"] == chapter) & claims["name"].str.startswith(prefix)
        mine = claims[hit]
        dev = int(mine["deviation"].sum()) if "deviation" in mine else 0
        if mine.empty:
            status = "not checked"
        elif not mine["passed"].all():
            status = "FAILED"
        else:
            status = (
                "holds"
                if dev == 0
                else "deviates"
                if dev == len(mine)
                else f"holds in part ({dev} of {len(mine)} checks record deviations)"
            )
        rows.append(
            {
                "the paper's claim": claim,
                "stated in": entry[0],
                "checks": len(mine),
                "deviations": dev,
                "status": status,
            }
        )
    return pd.DataFrame(rows)


def build_info(root: Path | None = None) -> dict:
    """When and from what this build was made: ``built`` (UTC time of the build's start stamp, else now),
    ``commit`` (the git commit of the book's root, with ``+ local changes`` when the work tree differs;
    ``unknown`` outside a git checkout)."""
    import datetime
    import subprocess

    root = root or book_root()
    stamp = _stamp(book_results_dir()) if book_results_dir().is_dir() else None
    when = datetime.datetime.fromtimestamp(stamp or time.time(), tz=datetime.timezone.utc)
    try:

        def git(*args):
            return subprocess.run(
                ["git", *args], cwd=root, capture_output=True, text=True, timeout=20, check=True
            ).stdout

        commit = git("rev-parse", "--short=12", "HEAD").strip()
        if git("status", "--porcelain", "--untracked-files=no").strip():
            commit += " + local changes"
    except (OSError, subprocess.SubprocessError):
        commit = "unknown"
    return {"built": when.strftime("%Y-%m-%d %H:%M UTC"), "commit": commit}


RELATIONS = {
    "abs": "= expected ± tol",
    "rel": "= expected ± tol·|expected|",
    "le": "≤ expected",
    "ge": "≥ expected",
    "true": "holds",
    MALFORMED: "malformed claim",
}


def _shown(x) -> str:
    """A recorded number as the status page prints it (6 significant digits; blank for none)."""
    import pandas as pd

    if x is None or (isinstance(x, float) and pd.isna(x)):
        return ""
    return f"{x:.6g}" if isinstance(x, float) else str(x)


def claims_table(claims, deviations: bool | None = None, links: bool = False):
    """The status page's table of claims (from :func:`report`): one row per claim with its chapter, name,
    measured value, the relation it must satisfy, the expected value, the tolerance and its status:
    ``holds``, ``deviation`` (a tripwire that recorded a departure from the paper, see
    :func:`~tokensel_book.checks.check`) or
    ``FAILED``; and when its threshold was set: ``before the first run`` (``preregistered=True`` in
    :func:`~tokensel_book.checks.check`) or ``with a run in view``, followed by where it comes from when the
    claim says so (``threshold=`` of :func:`~tokensel_book.checks.check`, the column ``source``: ``with a run
    in view: the 30 % bound of Lemma 2.1 at eta0 = 30``). ``deviations=False`` keeps the claims of the
    paper's results,
    ``True`` the deviations. ``links=True`` writes each chapter as an HTML link to its page (``<chapter>.html``,
    for a table rendered by the book's status page)."""
    import html

    if not isinstance(links, bool):
        raise ArgumentTypeError(f"links must be True or False, got {links!r}")
    if "deviation" not in claims:
        claims = claims.assign(deviation=False)
    if "preregistered" not in claims:
        claims = claims.assign(preregistered=False)
    if deviations is not None:
        claims = claims[claims["deviation"] == deviations]
    dev = claims["deviation"].astype(bool)
    status = claims["passed"].map({True: "holds", False: "FAILED"}).where(~(claims["passed"] & dev), "deviation")
    table = claims.assign(
        measured=claims["measured"].map(_shown),
        expected=claims["expected"].map(_shown),
        tol=claims["tol"].map(_shown),
        claim=claims["kind"].map(RELATIONS),
        status=status,
        threshold=[
            when + (f": {html.escape(source) if links else source}" if isinstance(source, str) and source else "")
            for when, source in zip(
                claims["preregistered"].map({True: "before the first run", False: "with a run in view"}),
                claims["source"] if "source" in claims else [None] * len(claims),
                strict=True,
            )
        ],
    )
    if links:
        table = table.assign(
            chapter=table["chapter"].map(lambda c: f'<a href="{html.escape(str(c))}.html">{html.escape(str(c))}</a>')
        )
    return table[["chapter", "name", "measured", "claim", "expected", "tol", "status", "threshold"]]
