"""Sphinx extension: statements by their numbers and titles, for readers.

* **Check lines as a table that links what they test.** A cell's claim lines (``[ok] claim: value, required
  ... (tests lem-one-step)``, :mod:`tokensel_book.claims`) are shown as a compact table, closed where there are
  many; each label becomes a link to the statement by its number (``Lemma 2.1``, ``(1.2)``). A label that names no
  statement of the book is a build warning (an error under ``-W``).
* **The proof index by number and title.** sphinx-proof's index (``prf-prf``, "Proof Index") lists statements
  by their internal labels, sorted alphabetically. This one lists them chapter by chapter, each by its kind,
  number and title (``Lemma 2.1 One step from p0 = 0``), in the order the chapter states them, under the heading
  "Definitions, lemmas and proofs".
"""

from __future__ import annotations

import re
from typing import Any

from docutils import nodes
from sphinx.addnodes import pending_xref
from sphinx.domains import Index
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util import logging

logger = logging.getLogger(__name__)

_GREEK = {
    "alpha": "α",
    "beta": "β",
    "gamma": "γ",
    "delta": "δ",
    "Delta": "Δ",
    "eta": "η",
    "sigma": "σ",
    "lambda": "λ",
    "infty": "∞",
    "to": "→",
    "le": "≤",
    "ge": "≥",
    "cdot": "·",
    "quad": " ",
    "mathbb": "",
    "operatorname": "",
    "mathrm": "",
    "text": "",
}
_SUP = {"0": "⁰", "1": "¹", "2": "²", "3": "³", "4": "⁴", "T": "ᵀ", "t": "ᵗ"}
_SUB = {"0": "₀", "1": "₁", "2": "₂", "3": "₃", "t": "ₜ", "s": "ₛ", "k": "ₖ", "i": "ᵢ"}

_TEX: list[tuple[str, Any]] = [
    (r"\\[|]", "‖"),
    (r"\\(?:top|intercal)\b", "ᵀ"),
    (r"\\(?:ln|log|exp|max|min|arg)\b", lambda m: m.group(0)[1:]),
    (r"\\([A-Za-z]+)", lambda m: _GREEK.get(m.group(1), m.group(1))),
    (r"[{}$]", ""),
    (r"\^\s*(\w)", lambda m: _SUP.get(m.group(1), "^" + m.group(1))),
    (r"_\s*(\w)", lambda m: _SUB.get(m.group(1), "_" + m.group(1))),
]


def plain_title(title: str) -> str:
    """A statement's title as plain text for the index (TeX in ``$...$`` turned into Unicode as far as it is
    simple: ``$p^0 = 0$`` -> ``p⁰ = 0``, ``$\\|p_t\\|$`` -> ``‖pₜ‖``)."""

    def tex(m: re.Match) -> str:
        text = m.group(1)
        for pattern, repl in _TEX:
            text = re.sub(pattern, repl, text)
        return text

    return " ".join(re.sub(r"\$([^$]*)\$", tex, title).split())


#: a claim's line (tokensel_book.claims.claim_line): its mark, text, value, requirement and the label it tests
LINE = re.compile(
    r"^\[(?P<mark>ok|deviation|FAILED|outside its range)\] (?P<name>.+): (?P<value>[-+\w.]+)"
    r"(?:, required (?P<req>.+?)|, (?P<dev>.+?) as observed: a departure from the paper|; the bound .*?)?"
    r"(?: \(off by [^)]*\))?(?: \(tests (?P<label>[A-Za-z][\w:.-]*)\))?$"
)
MARKS = {"ok": "\u2713", "deviation": "deviation", "FAILED": "FAILED", "outside its range": "outside its range"}
COLLAPSE = 4  # a block of more claims than this is shown closed, with its count


class StatementLinks(SphinxPostTransform):
    """A cell's claim lines become a compact table (mark, claim, value, required, what it tests, as a link to the
    statement by its number), closed by default where there are many; a label that names no statement warns."""

    default_priority = 5  # before the references are resolved (ReferencesResolver: 10)

    def _link(self, label: str, block) -> nodes.Node:
        proofs = getattr(self.env, "proof_list", {})
        equations = self.env.domains["math"].data.get("objects", {})
        if label not in proofs and label not in equations:
            logger.warning(f"a check line tests {label!r}, which is no statement or equation of the book",
                           location=block)  # fmt: skip
            return nodes.Text(label)
        domain, kind = ("prf", "ref") if label in proofs else ("math", "eq")
        xref = pending_xref("", refdomain=domain, reftype=kind, reftarget=label, refexplicit=False, refwarn=True)
        xref["refdoc"] = self.env.docname
        xref += nodes.inline(label, label)
        return xref

    def run(self, **kwargs: Any) -> None:
        for block in list(self.document.findall(nodes.literal_block)):
            lines = block.astext().splitlines()
            claims = [LINE.match(line) for line in lines]
            if "output" not in block.get("classes", []) or not any(claims):
                continue
            body = nodes.tbody()
            rest = []
            for line, m in zip(lines, claims, strict=True):
                if m is None and line.startswith("    (") and body.children:  # the claim's fresh seeds
                    body.children[-1][1] += nodes.paragraph("", line.strip(), classes=["tokensel-note"])
                    continue
                if m is None:
                    rest.append(line)
                    continue
                row = nodes.row(classes=[f"tokensel-{m['mark'].split()[0].lower()}"])
                cells = [MARKS[m["mark"]], m["name"], m["value"], m["req"] or m["dev"] or ""]
                for text in cells:
                    row += nodes.entry("", nodes.paragraph("", text))
                row += nodes.entry("", nodes.paragraph("", "", self._link(m["label"], block)) if m["label"] else "")
                body += row
            group = nodes.tgroup(cols=5)
            group += [nodes.colspec(colwidth=w) for w in (1, 8, 2, 3, 2)]
            head = nodes.thead()
            titles = ("", "claim", "value", "required", "tests")
            head += nodes.row("", *[nodes.entry("", nodes.paragraph("", t)) for t in titles])
            group += [head, body]
            table = nodes.table(classes=["tokensel-claims"])
            table += group
            n, failed = len(body.children), sum("FAILED" in r["classes"][0] for r in body.children)
            new: list[nodes.Node] = []
            if n > COLLAPSE:
                said = f"{n} claims checked" + (f", {failed} failed" if failed else ", all hold")
                new.append(nodes.raw("", f"<details class='tokensel-claims'><summary>{said}</summary>", format="html"))
            new.append(table)
            if n > COLLAPSE:
                new.append(nodes.raw("", "</details>", format="html"))
            if any(line.strip() for line in rest):
                new.append(nodes.literal_block("\n".join(rest), "\n".join(rest), classes=block["classes"]))
            block.replace_self(new)


class NumberedProofIndex(Index):
    """Every labelled statement of the book by chapter, number and title (replaces sphinx-proof's index)."""

    name = "prf"
    localname = "Definitions, lemmas and proofs"
    shortname = "Statements"

    def generate(self, docnames=None):
        env = self.domain.env
        proofs = getattr(env, "proof_list", {})
        titles = getattr(env, "tokensel_statement_titles", {})
        groups: dict[str, list] = {}
        order: dict[str, tuple] = {}
        for label, info in proofs.items():
            doc = info["docname"]
            if docnames and doc not in docnames:
                continue
            numbers = env.toc_fignumbers.get(doc, {}).get(info["countertype"], {}).get(label)
            if info.get("nonumber") or not numbers:
                continue
            number = ".".join(map(str, numbers))
            kind = info["realtype"].capitalize()
            heading = env.titles[doc].astext() if doc in env.titles else doc
            section = env.toc_secnumbers.get(doc, {}).get("")
            key = f"{'.'.join(map(str, section))}. {heading}" if section else heading
            order[key] = tuple(section or (10**6,))
            title = plain_title(titles.get(label, ""))
            name = f"{kind} {number}" + (f" {title}" if title else "")
            place = getattr(env, "tokensel_statement_order", {}).get(label, 10**6)
            groups.setdefault(key, []).append(((place, tuple(numbers)), [name, 0, doc, label, "", "", ""]))
        content = [
            (key, [entry for _, entry in sorted(groups[key], key=lambda e: e[0])])
            for key in sorted(groups, key=lambda k: (order[k], k))
        ]
        return content, False


def _record_titles(app, doctree) -> None:
    env = app.env
    titles = env.__dict__.setdefault("tokensel_statement_titles", {})
    order = env.__dict__.setdefault("tokensel_statement_order", {})
    position = 0
    for node in doctree.findall(nodes.Element):
        label = node.get("label") if "proof" in node.get("classes", []) else None
        if label and isinstance(node.get("title"), str):
            titles[label] = node["title"].strip().removeprefix("(").removesuffix(")")
            order[label] = position
            position += 1


def _purge(app, env, docname) -> None:
    titles = getattr(env, "tokensel_statement_titles", {})
    proofs = getattr(env, "proof_list", {})
    for label in [k for k in titles if proofs.get(k, {}).get("docname") == docname]:
        del titles[label]


def _merge(app, env, docnames, other) -> None:
    for key in ("tokensel_statement_titles", "tokensel_statement_order"):
        env.__dict__.setdefault(key, {}).update(getattr(other, key, {}))


def _use_numbered_index(app) -> None:
    domain = app.env.domains.get("prf")
    if domain is not None:
        domain.indices = [NumberedProofIndex]


def statement_target(env, label: str) -> tuple[str, str] | None:
    """``(docname, anchor)`` of a statement or equation of the book (None: no such label)."""
    proof = getattr(env, "proof_list", {}).get(label)
    if proof is not None:
        return proof["docname"], label
    found = env.domaindata["math"]["objects"].get(label)
    return (found[0], f"equation-{label}") if found else None


_CLAIM_HREF = re.compile(r'href="(?P<page>[\w.-]+)\.html#(?P<label>[A-Za-z][\w:.-]*)"')


def link_claim_cards(app, exception) -> None:
    """The status page links each claim's statement at the claim's own chapter (it runs without the book's index):
    point each link at the page and anchor where the statement is."""
    if exception is not None or app.builder.format != "html":
        return
    import os
    from pathlib import Path

    for page in Path(app.outdir).rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        if 'data-claim="' not in text:
            continue

        def fix(m: re.Match, page: Path = page) -> str:
            target = statement_target(app.env, m["label"])
            if target is None:
                return m.group(0)
            where = os.path.relpath(Path(app.outdir) / f"{target[0]}.html", page.parent)
            return f'href="{where}#{target[1]}"'

        page.write_text(_CLAIM_HREF.sub(fix, text), encoding="utf-8")


def setup(app):
    app.setup_extension("sphinx_proof")
    app.connect("build-finished", link_claim_cards)
    app.add_post_transform(StatementLinks)
    app.connect("doctree-read", _record_titles)
    app.connect("env-purge-doc", _purge)
    app.connect("env-merge-info", _merge)
    app.connect("builder-inited", _use_numbered_index)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
