"""A chapter's executed notebook made fit to leave the book: streams stored once (:func:`repair_streams`, undoing
myst-nb's in-place merge that shows lines twice), solutions taken out (:func:`split_solutions`), and MyST turned
into plain Markdown with the book's numbers and an install cell (:func:`standalone_notebook`)."""

from __future__ import annotations

import copy
import re
from typing import Any

from tokensel.errors import InvalidArgumentError

from .claims import MIME, TESTS

_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|:{3,})\{(?P<name>[\w:-]+)\}[ \t]*(?P<arg>.*?)\s*$")
_CODE_FENCE = re.compile(r"^\s*(?P<fence>`{3,}|~{3,})(?!.*`)")
_OPTION = re.compile(r"^\s*:(?P<key>[\w-]+):\s*(?P<value>.*?)\s*$")
_ROLE = re.compile(r"\{(?P<name>[\w:-]+)\}`(?P<body>[^`]*)`")
_EXPLICIT = re.compile(r"^(?P<text>.*?)\s*<(?P<target>[^<>]+)>$", re.S)
_DISPLAY_END = re.compile(r"^(?P<math>.*?)\$\$\s*(?:\((?P<label>[^()\s]+)\))?\s*$")

#: heading words of the directives that are numbered in the book (per kind and chapter)
PROOF_KINDS = {
    "prf:definition": "Definition",
    "prf:lemma": "Lemma",
    "prf:theorem": "Theorem",
    "prf:proposition": "Proposition",
    "prf:corollary": "Corollary",
    "prf:assumption": "Assumption",
    "prf:remark": "Remark",
    "prf:example": "Example",
    "prf:conjecture": "Conjecture",
    "prf:axiom": "Axiom",
    "prf:criterion": "Criterion",
    "prf:algorithm": "Algorithm",
    "prf:property": "Property",
    "prf:observation": "Observation",
    "prf:condition": "Condition",
}
ADMONITIONS = (
    "admonition",
    "note",
    "tip",
    "hint",
    "important",
    "warning",
    "caution",
    "attention",
    "danger",
    "error",
    "seealso",
)
SOLUTIONS = ("solution", "solution-start", "solution-end")


def _source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def _check_notebook(notebook) -> None:
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        raise InvalidArgumentError("notebook must be an nbformat-4 notebook as a dict (with a 'cells' list)")


# --- streams ----------------------------------------------------------------------------------------------


def repair_streams(outputs: list) -> list:
    """A cell's outputs with one stream per name, each line once (myst-nb's merged copy kept), without the record."""
    if not isinstance(outputs, list):
        raise InvalidArgumentError(f"outputs must be a cell's list of outputs, got {type(outputs).__name__}")
    first: dict[str, dict] = {}
    later: dict[str, list[dict]] = {}
    for out in outputs:
        if isinstance(out, dict) and out.get("output_type") == "stream":
            name = out.get("name", "stdout")
            if name in first:
                later[name].append(out)
            else:
                first[name], later[name] = out, []
    result = []
    for out in outputs:
        if isinstance(out, dict) and MIME in (out.get("metadata") or {}):  # a run's record: the build's, not yours
            out = dict(out, metadata={k: v for k, v in out["metadata"].items() if k != MIME})
        if not (isinstance(out, dict) and out.get("output_type") == "stream"):
            result.append(out)
            continue
        name = out.get("name", "stdout")
        if out is not first[name]:
            continue
        text = "".join(out["text"]) if isinstance(out.get("text"), list) else str(out.get("text", ""))
        tail = "".join(
            "".join(o.get("text", "")).rstrip() + "\n" for o in later[name] if "".join(o.get("text", "")).rstrip()
        )
        if tail and not _clean_stream(text).endswith(_clean_stream(tail)):
            text = text.rstrip() + "\n" + tail
        result.append(dict(out, text=text))
    return result


def _clean_stream(text: str) -> str:
    """A stream's text as a terminal shows it: backspaced characters and text before a carriage return dropped."""
    old = None
    while old != text:
        old, text = text, re.sub(r"[^\n]\x08", "", text)
    return re.sub(r".*\r(?=[^\n])", "", text)


# --- solutions --------------------------------------------------------------------------------------------


def _closes(line: str, fence: str) -> bool:
    s = line.strip()
    return bool(s) and set(s) == {fence[0]} and len(s) >= len(fence)


def split_solutions(notebook: dict) -> tuple[dict, list[dict]]:
    """``(notebook without solutions, solutions)``, each solution a dict of ``label``, ``markdown``, ``code`` and
    ``outputs``; ``notebook`` is not changed, an unclosed solution is an error."""
    _check_notebook(notebook)
    cells, solutions = [], []
    current: dict[str, Any] | None = None  # current solution
    gated, fence = False, None  # inside a gate, fence of an open {solution}
    closing = None  # fence of the {solution-end} that closes the gate, once seen
    for cell in notebook["cells"]:
        if cell.get("cell_type") != "markdown":
            if current is not None:
                current["code"].append(_source(cell))
                current["outputs"].append(_outputs_text(cell))
            else:
                cells.append(cell)
            continue
        kept = []
        for line in _source(cell).splitlines(keepends=True):
            if current is None:
                m = _FENCE.match(line)
                if m and m["name"] in ("solution", "solution-start"):
                    current = {"label": m["arg"], "markdown": "", "code": [], "outputs": []}
                    gated, fence, closing = m["name"] == "solution-start", m["fence"], None
                    solutions.append(current)
                    continue
                kept.append(line)
                continue
            if not gated:
                assert fence is not None  # set together with current
                if _closes(line, fence):
                    current = None
                else:
                    current["markdown"] += line
                continue
            m = _FENCE.match(line)
            if closing is None and m and m["name"] == "solution-end":
                closing = m["fence"]
            elif closing is not None and _closes(line, closing):
                current = None
            elif closing is None and not (fence and _closes(line, fence)):
                current["markdown"] += line
        if "".join(kept).strip():
            cells.append(dict(cell, source="".join(kept)))
    if current is not None:
        raise InvalidArgumentError(f"notebook has a solution of {current['label']!r} that is never closed")
    for s in solutions:
        s["markdown"] = "\n".join(ln for ln in s["markdown"].splitlines() if not _OPTION.match(ln)).strip()
    return dict(notebook, cells=cells), solutions


def _outputs_text(cell) -> str:
    parts = []
    for out in cell.get("outputs") or []:
        if out.get("output_type") == "stream":
            parts.append("".join(out.get("text", "")))
        for key in ("text/plain", "text/html", "text/markdown", "text/latex"):
            value = (out.get("data") or {}).get(key)
            if value:
                parts.append("".join(value))
    return "\n".join(parts)


# --- MyST to plain Markdown -------------------------------------------------------------------------------


def collect_labels(notebook: dict, chapter: int | None = None, page: str | None = None) -> dict[str, str]:
    """What the book calls each label of ``notebook`` (``{"lem-one-step": "Lemma 2.1", "eq-one-step": "(2.3)"}``),
    numbered per kind in reading order as the Sphinx extensions do; ``page`` adds itself as ``"chapter N"``."""
    _check_notebook(notebook)
    counts: dict[str, int] = {}
    labels: dict[str, str] = {}

    def number(kind):
        counts[kind] = counts.get(kind, 0) + 1
        return f"{chapter}.{counts[kind]}" if chapter is not None else str(counts[kind])

    if page:
        labels[page] = f"chapter {chapter}" if chapter is not None else page
    for cell in notebook["cells"]:
        if cell.get("cell_type") == "code":
            meta = cell.get("metadata") or {}
            fig = (meta.get("mystnb") or meta.get("myst") or {}).get("figure") or {}
            if isinstance(fig, dict) and fig.get("name"):
                labels[str(fig["name"])] = f"Figure {number('figure')}"
            continue
        if cell.get("cell_type") != "markdown":
            continue
        lines = _source(cell).splitlines()
        pending: tuple[str, str] | None = None  # kind (and its number) whose :label: may follow
        in_math = False
        for line in lines:
            if in_math:
                end = _DISPLAY_END.match(line)
                if end:
                    in_math = False
                    n = number("equation")
                    if end["label"]:
                        labels[end["label"]] = f"({n})"
                continue
            m = _FENCE.match(line)
            if m:
                name = m["name"]
                opened = "exercise" if name == "exercise" else name if name in PROOF_KINDS else None
                pending = (opened, number(opened)) if opened else None
                continue
            opt = _OPTION.match(line)
            if opt and pending and opt["key"] == "label":
                kind, n = pending
                labels[opt["value"]] = f"{'Exercise' if kind == 'exercise' else PROOF_KINDS[kind]} {n}"
                continue
            if not opt:
                pending = None
            stripped = line.strip()
            if stripped.startswith("$$"):
                rest = stripped[2:]
                end = _DISPLAY_END.match(rest)
                if end:  # one line: $$ x $$ (label)
                    n = number("equation")
                    if end["label"]:
                        labels[end["label"]] = f"({n})"
                else:
                    in_math = True
    return labels


def _role(name: str, body: str, labels: dict[str, str]) -> str:
    explicit = _EXPLICIT.match(body)
    text, target = (explicit["text"], explicit["target"]) if explicit else (None, body)
    if name == "math":
        return f"${body}$"
    if name.startswith("glue"):  # a number computed by the notebook (myst-nb's glue), as the book shows it
        key, _, spec = body.partition(":")
        return glued_text(labels.get(f"glue:{key.strip()}"), spec) or f"`{key.strip()}`"
    if name.startswith("cite"):
        cited = [labels.get(k.strip(), k.strip()) for k in body.split(",")]
        if name == "cite:p":
            return "(" + "; ".join(re.sub(r" \((\d{4}\w?)\)$", r", \1", c) for c in cited) + ")"
        return "; ".join(cited)
    if name == "doc":
        stem = target.rsplit("/", 1)[-1]
        return text or labels.get(stem, stem)
    known = labels.get(target)
    if name == "numref" and text and "%s" in text:
        return text.replace("%s", (known or target).split()[-1].strip("()"))
    if text:
        return text
    if known:
        return known
    if name == "eq":
        return f"({target})"
    return target


def glued(notebook: dict) -> dict[str, str]:
    """The ``text/plain`` of the values a notebook glues, as ``{"glue:<name>": text}`` (empty before it runs)."""
    _check_notebook(notebook)
    found = {}
    for cell in notebook["cells"]:
        for out in cell.get("outputs") or []:
            name = ((out.get("metadata") or {}).get("scrapbook") or {}).get("name")
            data = out.get("data") or {}
            text = next((v for k, v in data.items() if k.endswith("text/plain")), None)
            if name and text is not None:
                found[f"glue:{name}"] = "".join(text) if isinstance(text, list) else str(text)
    return found


def restore_glue(notebook: dict, outputs: dict) -> dict:
    """A copy of ``notebook`` with the glued ``outputs`` (from ``<page>.glue.json``, which myst-nb strips) put back
    into its first code cell, so a re-rendered or downloaded notebook has them."""
    _check_notebook(notebook)
    if not isinstance(outputs, dict):
        raise InvalidArgumentError(
            f"outputs must be the glue file's name -> output mapping, got {type(outputs).__name__}"
        )
    nb = copy.deepcopy(notebook)
    code = next((c for c in nb["cells"] if c.get("cell_type") == "code"), None)
    if code is None or not outputs:
        return nb
    have = set(glued(nb))
    for name, out in outputs.items():
        if f"glue:{name}" in have or not isinstance(out, dict):
            continue
        scrap = dict((out.get("metadata") or {}).get("scrapbook") or {}, name=name)
        prefix = scrap.get("mime_prefix", "")
        data = {(k if k.startswith(prefix) else prefix + k): v for k, v in (out.get("data") or {}).items()}
        code.setdefault("outputs", []).append(
            {"output_type": "display_data", "metadata": {"scrapbook": scrap}, "data": data}
        )
    return nb


def glued_text(value: str | None, spec: str = "") -> str | None:
    """A glued value's ``text/plain`` formatted by ``spec`` (e.g. ``.2f``); text as is if not a number; None if none."""
    import ast

    if value is None:
        return None
    if not spec:
        return value
    try:
        number = ast.literal_eval(value)
        return format(number, spec)
    except (ValueError, SyntaxError, TypeError):
        return value


def plain_markdown(text: str, labels: dict[str, str] | None = None, chapter: int | None = None) -> str:
    """MyST as plain Markdown for a notebook outside the book: directives as bold headings, proofs ending in ∎,
    admonitions as quotes, display equations tagged, roles as text via ``labels`` (:func:`collect_labels`)."""
    if not isinstance(text, str):
        raise InvalidArgumentError(f"text must be a string of Markdown, got {type(text).__name__}")
    labels = dict(labels or {})
    counts: dict[str, int] = {}

    def number(kind):
        counts[kind] = counts.get(kind, 0) + 1
        return f"{chapter}.{counts[kind]}" if chapter is not None else str(counts[kind])

    out: list[str] = []
    stack: list[tuple[str, str, str]] = []  # (fence, kind, quote prefix) of open directives
    code_fence = None
    math: list[str] | None = None
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        prefix = "".join(p for _, _, p in stack)
        if code_fence is not None:
            out.append(prefix + line)
            if _closes(line, code_fence):
                code_fence = None
            continue
        if math is not None:
            end = _DISPLAY_END.match(line.strip())
            if end:
                math.append(end["math"])
                body = "\n".join(m for m in math if m.strip())
                out += [
                    prefix + "$$",
                    *(prefix + m for m in body.splitlines()),
                    prefix + f"\\tag{{{number('equation')}}}",
                    prefix + "$$",
                ]
                math = None
            else:
                math.append(line)
            continue
        if stack and _closes(line, stack[-1][0]):
            _, kind, _ = stack.pop()
            if kind == "proof":
                out.append(prefix + "∎")
            continue
        m = _FENCE.match(line)
        if m:
            name, arg = m["name"], m["arg"]
            while i < len(lines) and _OPTION.match(lines[i]):
                i += 1
            title = _inline(arg, labels)
            if name in PROOF_KINDS:
                heading = f"**{PROOF_KINDS[name]} {number(name)}**" + (f" ({title})." if title else ".")
                out += [prefix + heading, prefix]
                stack.append((m["fence"], name, ""))
            elif name == "prf:proof":
                out.append(prefix + "*Proof.*" + (f" ({title})" if title else ""))
                out.append(prefix)
                stack.append((m["fence"], "proof", ""))
            elif name == "exercise":
                out += [prefix + f"**Exercise {number('exercise')}**" + (f" ({title})" if title else ""), prefix]
                stack.append((m["fence"], name, ""))
            elif name in ("solution", "solution-start"):
                ref = labels.get(arg.strip(), arg.strip())
                out += [prefix + f"**Solution to {ref}**", prefix]
                stack.append((m["fence"], name, ""))  # a gate's start holds options only: its fence closes it
            elif name == "solution-end":
                out.append(prefix + "*End of the solution.*")
                stack.append((m["fence"], name, ""))
            elif name in ADMONITIONS:
                head = title if name == "admonition" else name.capitalize() + (f": {title}" if title else "")
                out += [prefix + f"> **{head}**", prefix + ">"]
                stack.append((m["fence"], name, "> "))
            elif name.startswith("glue"):  # a figure or value computed by a code cell of the page
                out += [prefix + "**Figure** (drawn by a code cell of this notebook).", prefix]
                stack.append((m["fence"], name, ""))
            elif name == "bibliography":
                out.append(prefix + "*The works cited are listed on the book's References page.*")
                stack.append((m["fence"], name, ""))
            else:
                if title:
                    out += [prefix + f"**{title}**", prefix]
                stack.append((m["fence"], name, ""))
            # a directive with nothing but options closes on its next line
            continue
        cf = _CODE_FENCE.match(line)
        if cf:
            code_fence = cf["fence"]
            out.append(prefix + line)
            continue
        stripped = line.strip()
        if stripped.startswith("$$"):
            end = _DISPLAY_END.match(stripped[2:])
            if end:
                out += [
                    prefix + "$$",
                    prefix + end["math"].strip(),
                    prefix + f"\\tag{{{number('equation')}}}",
                    prefix + "$$",
                ]
            else:
                math = [stripped[2:]]
            continue
        out.append(prefix + _inline(line, labels))
    if stack or math is not None:
        raise InvalidArgumentError("text has a directive or display equation that is never closed")
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


def _inline(line: str, labels: dict[str, str]) -> str:
    return _ROLE.sub(lambda m: _role(m["name"], m["body"], labels), line)


def bib_labels(bibtex: str) -> dict[str, str]:
    """Each entry of a BibTeX file as the text cites it: ``{"wu2025attention": "Wu et al. (2025)"}``."""
    if not isinstance(bibtex, str):
        raise InvalidArgumentError(f"bibtex must be the text of a .bib file, got {type(bibtex).__name__}")
    labels = {}
    for entry in re.split(r"(?m)^@", bibtex)[1:]:
        key = re.match(r"\w+\s*\{\s*([^,\s]+)\s*,", entry)
        author = re.search(r"\bauthor\s*=\s*\{(.*?)\}\s*,?\s*$", entry, re.M)
        year = re.search(r"\byear\s*=\s*\{?(\d{4})", entry)
        if not key:
            continue
        names = (
            [a.split(",")[0].strip() if "," in a else a.split()[-1] for a in re.split(r"\s+and\s+", author.group(1))]
            if author
            else [key.group(1)]
        )
        who = names[0] if len(names) == 1 else " and ".join(names) if len(names) == 2 else f"{names[0]} et al."
        labels[key.group(1)] = who + (f" ({year.group(1)})" if year else "")
    return labels


def install_cell(repository: str | None = None) -> dict:
    """A downloaded chapter's first cell: install the library from the book's repository, or say how to."""
    if repository and "ADDRESS" in repository:
        raise InvalidArgumentError(f"tokensel_repository is still the placeholder {repository!r}: set the address")
    if repository:
        url = repository.removesuffix("/").removesuffix(".git")
        source = (
            "# Outside the book this chapter needs the library and the book's machinery (Python 3.10 or later):\n"
            f'%pip install --quiet "tokensel @ git+{url}" "tokensel-book @ git+{url}#subdirectory=lib"\n'
        )
        return {"cell_type": "code", "metadata": {"tags": ["tokensel-install"]}, "source": source,
                "outputs": [], "execution_count": None}  # fmt: skip
    text = (
        "**Running this chapter outside the book.** Its code imports the library `tokensel` and the book's "
        "machinery `tokensel_book`: `git clone` the book's repository and, in it, `pip install . ./lib` "
        "(Python 3.10 or later). Chapters on real reviews download their data the first time. The outputs below "
        "are the book's own; running the cells reproduces them.\n"
    )
    return {"cell_type": "markdown", "metadata": {"tags": ["tokensel-install"]}, "source": text}


#: a chapter's glue import, given a fallback outside a book (the value is then only shown)
GLUE = "from myst_nb import glue"
GLUE_FALLBACK = (
    "try:\n    from myst_nb import glue\nexcept ImportError:  # outside a book: show the value\n\n"
    "    def glue(name, value, display=True):\n        if display:\n            print(name, value)\n"
)


def standalone_notebook(
    notebook: dict, labels: dict[str, str] | None = None, chapter: int | None = None, repository: str | None = None
) -> dict:
    """A copy of ``notebook`` for Jupyter, Colab or VS Code: Markdown through :func:`plain_markdown`, streams
    through :func:`repair_streams`, :func:`install_cell` first."""
    _check_notebook(notebook)
    labels = collect_labels(notebook, chapter) if labels is None else dict(labels)
    labels |= glued(notebook)
    nb = copy.deepcopy(notebook)
    # numbers run over the whole notebook: its Markdown is converted as one text, then split back into cells
    markdown = [k for k, c in enumerate(nb["cells"]) if c.get("cell_type") == "markdown"]
    marker = "\n\n<!-- tokensel-cell-break -->\n\n"
    whole = plain_markdown(marker.join(_source(nb["cells"][k]) for k in markdown), labels, chapter)
    parts = whole.split(marker.strip()) if markdown else []
    if len(parts) != len(markdown):
        raise InvalidArgumentError("a directive of the notebook spans Markdown cells: it cannot be converted")
    for k, text in zip(markdown, parts, strict=True):
        nb["cells"][k] = dict(nb["cells"][k], source=text.strip("\n") + "\n")
    for cell in nb["cells"]:
        if cell.get("cell_type") == "code":
            cell["outputs"] = repair_streams(cell.get("outputs") or [])
            for out in cell["outputs"]:  # a check line names its statement as the reader sees it
                if out.get("output_type") == "stream":
                    out["text"] = TESTS.sub(lambda m: f"(tests {labels.get(m['label'], m['label'])})", out["text"])
            cell["source"] = _source(cell).replace(GLUE, GLUE_FALLBACK.rstrip("\n"))
    nb["cells"].insert(0, install_cell(repository))
    return nb


def standalone_problems(notebook: dict) -> list[str]:
    """Why ``notebook`` would not stand alone: no install cell first, or MyST directives, roles or options left
    (shown raw by classic Jupyter, Colab and VS Code)."""
    _check_notebook(notebook)
    cells = notebook["cells"]
    problems = []
    if not cells or "pip install" not in _source(cells[0]) or "ADDRESS" in _source(cells[0]):
        problems.append("the first cell does not say how to install tokensel (pip install)")
    for k, cell in enumerate(cells):
        if cell.get("cell_type") != "markdown":
            continue
        code, directives = None, []
        for line in _source(cell).splitlines():
            if code is not None:
                code = None if _closes(line, code) else code
                continue
            fence = _FENCE.match(line)
            if fence or _OPTION.match(line):
                problems.append(f"cell {k}: MyST left: {line.strip()[:60]!r}")
                if fence:
                    directives.append(fence["fence"])
            elif directives and _closes(line, directives[-1]):
                directives.pop()
            elif code_fence := _CODE_FENCE.match(line):
                code = code_fence["fence"]
            else:
                problems += [f"cell {k}: MyST role left: {m.group(0)[:60]!r}" for m in _ROLE.finditer(line)]
    return problems
