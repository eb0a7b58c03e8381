"""The student edition: the same executed book with every exercise's solution left out.

:func:`prepare_student_sources` makes the sources of a second Sphinx build from the first build's executed
notebooks (no re-execution, the very same numbers), solutions taken out of the notebooks themselves
(``hide_solutions`` only hides them in HTML). :func:`leak_evidence` and :func:`find_leaks` test that no artefact
holds a solution's text or value. ``make book-student`` builds it."""

from __future__ import annotations

import html
import json
import re
import shutil
from collections.abc import Sequence
from pathlib import Path

import yaml

from tokensel.errors import DataUnavailableError, InvalidArgumentError

from .notebooks import repair_streams, restore_glue, split_solutions

#: files of the book's root that every build reads, besides the pages
SUPPORT_FILES = ("_toc.yml", "references.bib", "jupytext.toml")
SUPPORT_DIRS = ("_static",)
#: what the title says in the student edition
TITLE_SUFFIX = " (student edition: exercises without solutions)"


def student_notebook(notebook: dict) -> tuple[dict, list[dict]]:
    """A copy of ``notebook`` for the student edition, its streams stored once, and the solutions taken out."""
    out, solutions = split_solutions(notebook)
    cells = [
        dict(c, outputs=repair_streams(c.get("outputs") or [])) if c.get("cell_type") == "code" else c
        for c in out["cells"]
    ]
    return dict(out, cells=cells), solutions


def solution_claims(solutions: list[dict]) -> list[str]:
    """The ids of the claims that solutions' code cells make (``tb.check``, ``tb.prove``): each must be a literal,
    or the student edition could keep a solution's claim on its status page."""
    import ast

    from .verification import claim_ids

    ids = []
    for sol in solutions:
        for code in sol.get("code", []):
            found, bad = claim_ids(ast.parse(re.sub(r"^(\s*)([%!])", r"\1#\2", code, flags=re.M)))
            if bad:
                raise InvalidArgumentError(f"exercise {sol.get('label')}: a claim's id must be a string literal")
            ids += found
    return list(dict.fromkeys(ids))


_ROW = re.compile(r"<tr\b[^>]*\bdata-claim=\"[^\"]*/(?P<id>[a-z0-9-]+)\".*?</tr>", re.S)


def drop_claims(notebook: dict, ids: list[str]) -> tuple[dict, int]:
    """A copy of ``notebook`` without the status table's rows of claims ``ids``, and how many rows went."""
    removed = 0

    def rows(text: str) -> str:
        nonlocal removed
        kept = _ROW.sub(lambda m: "" if m["id"] in ids else m.group(0), text)
        removed += len(_ROW.findall(text)) - len(_ROW.findall(kept))
        return kept

    cells = []
    for cell in notebook["cells"]:
        if cell.get("cell_type") == "code" and cell.get("outputs"):
            outputs = json.loads(json.dumps(cell["outputs"]))
            for out in outputs:
                data = out.get("data") or {}
                if "text/html" in data:
                    data["text/html"] = rows("".join(data["text/html"]))
            cell = dict(cell, outputs=outputs)
        cells.append(cell)
    return dict(notebook, cells=cells), removed


def student_config(config: dict) -> dict:
    """The full book's ``_config.yml`` dict made the student edition's (no execution, solutions hidden); a copy."""
    if not isinstance(config, dict) or "execute" not in config or "sphinx" not in config:
        raise InvalidArgumentError(
            "config must be the book's _config.yml as a dict, with 'execute' and 'sphinx' sections; "
            f"got {type(config).__name__} with keys {sorted(config) if isinstance(config, dict) else '-'}"
        )
    out = yaml.safe_load(yaml.safe_dump(config))  # a deep copy of plain data
    out["title"] = str(out.get("title", "")) + TITLE_SUFFIX
    out["execute"] = dict(out["execute"], execute_notebooks="off")
    out["exclude_patterns"] = [p for p in out.get("exclude_patterns", []) if not p.endswith(".ipynb")]
    sphinx = out["sphinx"]
    sphinx["config"] = dict(sphinx.get("config") or {}, hide_solutions=True)
    return out


def prepare_student_sources(root, built, out) -> Path:
    """Write the student edition's sources to ``out`` (emptied first) and return it: each ``_toc.yml`` page
    from ``built`` (``_build``) when executed there, else from ``root``."""
    from .toc import front_matter, toc_files

    root, built, out = Path(root), Path(built), Path(out)
    if not (root / "_config.yml").is_file() or not (root / "_toc.yml").is_file():
        raise InvalidArgumentError(f"root={str(root)!r} has no _config.yml and _toc.yml: pass the book's root folder")
    executed = built / "jupyter_execute"
    if not executed.is_dir():
        raise DataUnavailableError(
            f"built={str(built)!r} has no jupyter_execute/ folder: run `make book` first "
            "(the student edition reuses its executed notebooks)"
        )
    protected = (root.resolve(), built.resolve())
    if out.resolve() in protected or any(out.resolve() in p.parents for p in protected):
        raise InvalidArgumentError(
            f"out={str(out)!r} is the book's root or build folder or holds one: pass a "
            "folder of its own (it is emptied first), e.g. _build/student"
        )
    pages = toc_files(root)
    sources = {}
    for page in pages:
        nb = executed / f"{page}.ipynb"
        md = root / f"{page}.md"
        if nb.is_file():
            sources[page] = nb
        elif md.is_file() and "kernelspec" not in front_matter(md):
            sources[page] = md
        else:
            raise DataUnavailableError(
                f"page {page!r} was not executed in {str(executed)!r}: run `make book` "
                "first (the student edition shows the outputs of that build)"
            )
    from .assignments import prepare_folder

    prepare_folder(out, ".tokensel-student")  # only a folder this command made is written over
    config = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))
    (out / "_config.yml").write_text(
        "# written by tokensel_book.student from the book's _config.yml\n"
        + yaml.safe_dump(student_config(config), sort_keys=False),
        encoding="utf-8",
    )
    for name in SUPPORT_FILES:
        if (root / name).is_file():
            shutil.copy2(root / name, out / name)
    for name in SUPPORT_DIRS:
        if (root / name).is_dir():
            shutil.copytree(root / name, out / name)
    notebooks, names = {}, []
    for page, src in sources.items():
        if src.suffix == ".ipynb":
            notebook = json.loads(src.read_text(encoding="utf-8"))
            glue = src.with_name(src.stem + ".glue.json")  # what the page glued, kept apart by myst-nb
            if glue.is_file():
                notebook = restore_glue(notebook, json.loads(glue.read_text(encoding="utf-8")))
            notebooks[page], solutions = student_notebook(notebook)
            names += solution_claims(solutions)
    for page, src in sources.items():
        dest = out / (page + src.suffix)
        dest.parent.mkdir(parents=True, exist_ok=True)
        if src.suffix == ".ipynb":
            notebook, _ = drop_claims(notebooks[page], names)  # the status page lists the exercises' checks
            dest.write_text(json.dumps(notebook, indent=1, ensure_ascii=False), encoding="utf-8")
        else:
            shutil.copy2(src, dest)
    downloads = built / "downloads"  # the status page's claims.json and citation, without the exercises' claims
    if (downloads / "claims.json").is_file():
        rows = [r for r in json.loads((downloads / "claims.json").read_text()) if r["id"] not in names]
        (out / "_build" / "downloads").mkdir(parents=True)
        (out / "_build" / "downloads" / "claims.json").write_text(json.dumps(rows, indent=1))
        shutil.copy2(downloads / "tokensel.bib", out / "_build" / "downloads" / "tokensel.bib")
    return out


# --- the evidence of a leaked solution ----------------------------------------------------------------------

_MATH = re.compile(r"\$\$.*?\$\$|\$[^$]*\$|\\\(.*?\\\)|\\\[.*?\\\]|\{[\w:-]+\}`[^`]*`|`[^`]*`", re.S)
_TAG = re.compile(r"<[^>]+>")
_NUMBER = re.compile(r"(?<![\w.])-?\d+\.\d+(?:e[-+]?\d+)?(?![\w.]*\d)")
#: a phrase of a solution counts as evidence when it has at least this many words
PHRASE_WORDS = 5


_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"', "\u00a0": " "})


def normalise(text: str) -> str:
    """Text as the leak search compares it: tags dropped, entities decoded, quotes straightened, words lower-cased."""
    return " ".join(html.unescape(_TAG.sub(" ", text)).translate(_QUOTES).lower().split())


def _phrases(markdown: str) -> list[str]:
    text = _MATH.sub(" | ", markdown).replace("*", " ").replace("_", " ").translate(_QUOTES)
    parts = re.split(r"[|.;:,()?!\[\]\n]+|\s-+\s|—", text)
    return [p for p in (" ".join(x.lower().split()) for x in parts) if len(p.split()) >= PHRASE_WORDS]


def _significant(number: str) -> int:
    mantissa = number.lstrip("-").split("e")[0].replace(".", "").lstrip("0")
    return len(mantissa)


def _values(text: str) -> list[str]:
    """The numbers of ``text`` with three or more significant digits (fewer match too much by chance)."""
    return [n.lstrip("-") for n in _NUMBER.findall(text) if _significant(n) >= 3]


def leak_evidence(
    notebooks: list[dict], claims: Sequence[dict] = (), elsewhere: Sequence[str] = ()
) -> dict[str, list[str]]:
    """What would show a leaked solution, from the full book's ``notebooks`` and ``claims``: ``phrases`` (runs of
    five or more words of a solution), ``values`` (numbers of three or more significant digits its cells print or claims
    record) and ``claims`` (ids it checks), minus what is shown outside solutions or in ``elsewhere``."""

    def _shown(x) -> str:
        return f"{x:.6g}" if isinstance(x, float) else str(x)

    phrases, values, names = [], [], []
    outside = [normalise(t) for t in elsewhere]
    for nb in notebooks:
        rest, solutions = split_solutions(nb)
        names += solution_claims(solutions)
        for sol in solutions:
            phrases += _phrases(sol["markdown"])
            values += _values(sol["markdown"]) + [v for o in sol["outputs"] for v in _values(o)]
        for cell in rest["cells"]:
            outside.append(normalise("".join(cell.get("source", ""))))
            outside += [normalise("".join(o.get("text", ""))) for o in cell.get("outputs") or []]
            outside += [
                normalise("".join(v))
                for o in cell.get("outputs") or []
                for k, v in (o.get("data") or {}).items()
                if k.startswith("text/")
            ]
    for claim in claims:
        if claim.get("id") in names:
            values += [
                _shown(claim[k]).lstrip("-")
                for k in ("measured", "expected")
                if isinstance(claim.get(k), float) and _significant(_shown(claim[k])) >= 3
            ]
    shown = " \n ".join(outside)
    phrases = [p for p in dict.fromkeys(phrases) if p not in shown]
    values = [v for v in dict.fromkeys(values) if not re.search(rf"(?<![\d.]){re.escape(v)}(?!\d)", shown)]
    return {"phrases": phrases, "values": values, "claims": names}


def find_leaks(text: str, evidence: dict[str, list[str]]) -> list[str]:
    """Every piece of ``evidence`` (:func:`leak_evidence`) found in ``text`` (a page, a notebook, a PDF's text)."""
    flat = normalise(text)
    found = [f"phrase {p!r}" for p in evidence.get("phrases", []) if p in flat]
    found += [f"value {v}" for v in evidence.get("values", []) if re.search(rf"(?<![\d.]){re.escape(v)}(?!\d)", flat)]
    found += [f"claim {n!r}" for n in evidence.get("claims", []) if normalise(n) in flat]
    return found
