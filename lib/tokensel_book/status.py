"""The status page: every claim of the build in one filterable table, each proved symbolically or checked
numerically, each row opening to its card (the statement it tests, its bound and where the bound comes from, its
value here, its values at the fresh seeds against the bound, in how many it held), the paper's claims mapped to
them, and ``claims.json`` with a BibTeX entry to cite the book at its commit."""

from __future__ import annotations

import datetime
import html
import json
import subprocess
from pathlib import Path
from typing import Any

from tokensel.errors import InvalidArgumentError

from .claims import requirement
from .toc import root_or_error
from .verification import claiming_pages, verify

#: what claims.json holds for each claim (the status page's table is built from exactly these fields)
FIELDS: dict[str, Any] = {
    "chapter": str, "id": str, "name": str, "measured": (bool, int, float, str), "kind": str,
    "expected": (int, float, type(None)), "tol": (int, float, type(None)), "passed": bool, "deviation": bool,
    "preregistered": bool, "tests": (str, type(None)), "threshold": (str, type(None)), "k": (int, type(None)),
    "n": (int, type(None)), "low": (float, type(None)), "high": (float, type(None)), "fresh": list,
    "verdict": str, "commit": str,
}  # fmt: skip
VERDICTS = ("robust", "held in most", "seed-dependent", "not replicated", "failed at every fresh seed")
FILTER = """<script>(function () {
  const root = document.currentScript.parentElement, f = root.querySelectorAll("[data-filter]");
  function apply() {
    root.querySelectorAll("tbody tr").forEach(function (r) {
      const ok = (!f[0].value || r.dataset.chapter === f[0].value) && (!f[1].value || r.dataset.verdict === f[1].value)
        && (!f[2].checked || r.dataset.verdict === "seed-dependent");
      r.style.display = ok ? "" : "none";
    });
  }
  f.forEach(function (e) { e.addEventListener("change", apply); });
})();</script>"""


def commit(root: Path) -> str:
    """The git commit of the book (``+ local changes`` when its tracked files differ), or ``unknown``."""

    def git(*args):
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=20, check=True).stdout

    try:
        head = git("rev-parse", "--short=12", "HEAD").strip()
        return head + (" + local changes" if git("status", "--porcelain", "--untracked-files=no").strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def fresh_verdict(k: int, n: int) -> str:
    """What ``k`` of ``n`` fresh seeds say of a claim (the replication's 90 % line)."""
    return VERDICTS[3 if not n else 0 if k == n else 1 if k >= 0.9 * n else 4 if k == 0 else 2]


def claims(root: Path | None = None, build: Path | None = None) -> tuple[list[dict], list[dict]]:
    """``(claims, chapters)``: every claim of the verified build with its fresh seeds (the recorded replication on
    this code), and each chapter's seed, claims and seconds. Raises when any claim of any chapter does not hold."""
    from .replication import RECORDED, load, wilson

    root = Path(root) if root is not None else root_or_error()
    records = verify(root, Path(build) if build is not None else root / "_build", claiming_pages(root))
    results, fresh, _ = load(root / RECORDED, root) if (root / RECORDED).is_dir() else ([], [], [])
    tasks = {(r["chapter"], r["seed"]) for r in results}
    made = {(r["chapter"], r["seed"], c["id"], c["name"]): c for r in fresh for c in r["checks"]}  # names: seedless
    here = commit(root)
    rows = []
    for record in records:
        chapter = record["chapter"]
        seeds = sorted(s for ch, s in tasks if ch == chapter)
        for c in record["checks"]:
            got = [made.get((chapter, s, c["id"], c["name"])) for s in seeds]
            k = sum(1 for g in got if g is not None and g["passed"])
            n = len(seeds)
            values = [g["measured"] for g in got if g is not None and isinstance(g["measured"], (int, float))]
            low, high = wilson(k, n) if n else (None, None)
            verdict = fresh_verdict(k, n)
            row = {"chapter": chapter, **{f: c[f] for f in FIELDS if f in c}, "k": k if n else None, "n": n or None}
            rows.append(row | {"low": low, "high": high, "fresh": values, "verdict": verdict, "commit": here})
    chapters = [{"chapter": r["chapter"], "seed": r["seed"], "claims": len(r["checks"]), "seconds": r["seconds"]}
                for r in records]  # fmt: skip
    return rows, chapters


def claims_problems(rows) -> list[str]:
    """Why a ``claims.json`` does not have the schema of :data:`FIELDS` (empty when it does)."""
    if not isinstance(rows, list):
        return ["claims.json must be a list of claims"]
    out = []
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or set(row) != set(FIELDS):
            out.append(f"claim {i}: fields {sorted(row) if isinstance(row, dict) else row!r}")
        else:
            out += [
                f"claim {i}: {k} is {type(row[k]).__name__}" for k, t in FIELDS.items() if not isinstance(row[k], t)
            ]
    return out


def write_downloads(rows: list[dict], folder: Path, root: Path) -> tuple[Path, Path]:
    """``claims.json`` and ``tokensel.bib`` (the book at its commit) in ``folder``."""
    problems = claims_problems(rows)
    if problems:
        raise InvalidArgumentError(f"claims.json would not have its schema: {problems[:3]}")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "claims.json").write_text(json.dumps(rows, indent=1))
    config = (Path(root) / "_config.yml").read_text(encoding="utf-8")
    url = next((ln.split(":", 1)[1].strip() for ln in config.splitlines() if ln.strip().startswith("url:")), "")
    year = datetime.date.today().year
    at = rows[0]["commit"] if rows else commit(Path(root))
    (folder / "tokensel.bib").write_text(
        f"@software{{tokensel_book,\n  title = {{tokensel: an executable book on Attention with Trained Embeddings "
        f"Provably Selects Important Tokens}},\n  year = {{{year}}},\n  version = {{{at}}},\n"
        + (f"  url = {{{url}}},\n" if url else "")
        + "  note = {Every claim checked at its build; claims.json lists them}\n}\n"
    )
    return folder / "claims.json", folder / "tokensel.bib"


def _strip(row: dict) -> str:
    """The fresh seeds' values against the bound, as a small SVG (each dot a seed; red where the claim failed)."""
    values = [float(v) for v in row["fresh"]]
    bound = [row["expected"]] if row["expected"] is not None else []
    if row["kind"] in ("abs", "rel") and row["expected"] is not None:
        t = row["tol"] * (abs(row["expected"]) if row["kind"] == "rel" else 1)
        bound = [row["expected"] - t, row["expected"] + t]
    span = values + bound + [float(row["measured"])] if not isinstance(row["measured"], (bool, str)) else values + bound
    if not span:
        return ""
    lo, hi = min(span), max(span)
    x = (lambda v: 6 + 148 * (v - lo) / (hi - lo)) if hi > lo else (lambda v: 80.0)
    ok = {"le": lambda v: v <= bound[0], "ge": lambda v: v >= bound[0]}.get(
        row["kind"], lambda v: bound[0] <= v <= bound[-1]
    )
    parts = [
        f'<line x1="{x(b):.1f}" x2="{x(b):.1f}" y1="2" y2="22" stroke="#555" stroke-dasharray="2,2"/>' for b in bound
    ]
    parts += [
        f'<circle cx="{x(v):.1f}" cy="12" r="3" fill="{"#2a7" if not bound or ok(v) else "#c22"}" opacity="0.7"/>'
        for v in values
    ]
    label = f"{len(values)} fresh seeds against the bound ({requirement(row)})"
    return f'<svg width="160" height="24" role="img" aria-label="{html.escape(label)}">{"".join(parts)}</svg>'


def _value(x) -> str:
    return "yes" if x is True else f"{x:.4g}" if isinstance(x, float) else str(x)


def table_html(rows: list[dict]) -> str:
    """The status table: one row per claim, filterable by chapter, verdict and seed dependence; each opens to its
    card. Built from the rows of ``claims.json`` alone."""
    esc = html.escape
    chapters = sorted({r["chapter"] for r in rows})
    opts = "".join(f'<option value="{esc(c)}">{esc(c)}</option>' for c in chapters)
    verdicts = "".join(f'<option value="{esc(v)}">{esc(v)}</option>' for v in VERDICTS)
    body = []
    for r in rows:
        shown = _value(r["measured"])
        how = "proved symbolically" if r["kind"] == "proof" else "checked numerically"
        fresh = "not replicated" if r["n"] is None else f"{r['k']} of {r['n']} ({r['low']:.2f}-{r['high']:.2f})"
        tests = f'<a href="{esc(r["chapter"])}.html#{esc(r["tests"])}">{esc(r["tests"])}</a>' if r["tests"] else "-"
        origin = r["threshold"] or ("fixed before the first run" if r["preregistered"] else "set with a run in view")
        card = (
            f"<p><b>tests</b> {tests}; <b>requires</b> {esc(requirement(r))}; <b>bound from</b> {esc(origin)}"
            + (" (preregistered)" if r["preregistered"] else "")
            + ("; a recorded deviation" if r["deviation"] else "")
            + "</p>"
            + f"<p><b>at the book's seed</b> {esc(shown)}; <b>fresh seeds</b> held in {esc(fresh)} {_strip(r)}</p>"
            + f"<p><b>commit</b> {esc(r['commit'])}</p>"
        )
        body.append(
            f'<tr data-chapter="{esc(r["chapter"])}" data-verdict="{esc(r["verdict"])}" '
            f'data-claim="{esc(r["chapter"])}/{esc(r["id"])}">'
            f'<td><a href="{esc(r["chapter"])}.html">{esc(r["chapter"])}</a></td>'
            f"<td><details><summary>{esc(r['name'])}</summary>{card}</details></td><td>{esc(shown)}</td>"
            f"<td>{esc(requirement(r))}</td><td>{how}</td><td>{esc(fresh)}</td>"
            f"<td>{esc(r['verdict'])}</td></tr>"
        )
    return (
        '<div class="tokensel-status"><p><label>chapter <select data-filter="chapter"><option value="">all</option>'
        f'{opts}</select></label> <label>replication <select data-filter="verdict"><option value="">all</option>'
        f'{verdicts}</select></label> <label><input type="checkbox" data-filter="dependent"> seed-dependent only'
        '</label></p><table class="tokensel-claims"><thead><tr><th>chapter</th><th>claim</th><th>here</th>'
        "<th>required</th><th>how</th><th>fresh seeds</th><th>replication</th></tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table>"
        f"{FILTER}</div>"
    )


def paper_claims_table(rows: list[dict], claim_map: dict):
    """The paper's claims against this build's checks: ``claim_map`` maps each to ``(where the book states it,
    [(chapter, name prefix), ...])``; a claim no check matches is shown ``not checked``."""
    import pandas as pd

    out = []
    for claim, (where, prefixes) in claim_map.items():
        mine = [r for r in rows if any(r["chapter"] == ch and r["name"].startswith(p) for ch, p in prefixes)]
        dev = sum(r["deviation"] for r in mine)
        status = (
            "not checked" if not mine else "FAILED" if not all(r["passed"] for r in mine) else "holds" if not dev
            else "deviates" if dev == len(mine) else f"holds in part ({dev} of {len(mine)} checks record deviations)"
        )  # fmt: skip
        out.append({"the paper's claim": claim, "stated in": where, "checks": len(mine), "status": status})
    return pd.DataFrame(out)
