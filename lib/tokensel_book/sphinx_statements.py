"""Sphinx extension: statements by their numbers and titles, for readers.

* **Check lines link what they test.** A claim checked with ``statement="lem-one-step"`` prints
  ``... (tests lem-one-step)`` (:mod:`tokensel_book.claims`); in the HTML, that label becomes a link to the
  statement, shown by its number (``Lemma 2.1``, ``(1.2)`` for an equation), in every cell output of the
  book. A label that names no statement of the book is a build warning (an error under ``-W``).
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

from .claims import TESTS

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


class StatementLinks(SphinxPostTransform):
    """``(tests <label>)`` in a cell's output: the label becomes a link to the statement, by its number."""

    default_priority = 5  # before the references are resolved (ReferencesResolver: 10)

    def run(self, **kwargs: Any) -> None:
        proofs = getattr(self.env, "proof_list", {})
        equations = self.env.domains["math"].data.get("objects", {})
        for block in list(self.document.findall(nodes.literal_block)):
            if "output" not in block.get("classes", []) or not TESTS.search(block.astext()):
                continue
            children: list[nodes.Node] = []
            text = block.astext()
            at = 0
            for m in TESTS.finditer(text):
                label = m["label"]
                if label in proofs:
                    xref = pending_xref(
                        "", refdomain="prf", reftype="ref", reftarget=label, refexplicit=False, refwarn=True
                    )
                elif label in equations:
                    xref = pending_xref(
                        "", refdomain="math", reftype="eq", reftarget=label, refexplicit=False, refwarn=True
                    )
                else:
                    logger.warning(
                        f"a check line tests {label!r}, which is no statement or equation of the book "
                        "(check(..., statement=) takes the label of a prf directive or of an equation)",
                        location=block,
                    )
                    continue
                xref["refdoc"] = self.env.docname
                xref += nodes.inline(label, label)
                children += [nodes.Text(text[at : m.start("label")]), xref]
                at = m.end("label")
            if not children:
                continue
            children.append(nodes.Text(text[at:]))
            block.children = []
            block.extend(children)
            block["classes"].append("tokensel-claims")


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


def setup(app):
    app.setup_extension("sphinx_proof")
    app.add_post_transform(StatementLinks)
    app.connect("doctree-read", _record_titles)
    app.connect("env-purge-doc", _purge)
    app.connect("env-merge-info", _merge)
    app.connect("builder-inited", _use_numbered_index)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
