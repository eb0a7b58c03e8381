"""Sphinx extension: every display equation of the book is numbered, as in a printed book.

Sphinx's ``math_number_all`` numbers the equations of its own ``math`` directive only; MyST's ``$$ ... $$``
blocks get a number only when they carry a label (``$$ ... $$ (eq-name)``). This extension gives every
unlabelled display equation of a page a label of its own (``<page>:<n>``) and an anchor once the page is
read, and numbers all of the page's equations in reading order. With ``numfig`` (Jupyter Book's default)
the numbers carry the chapter's number, ``(3.2)``; ``{eq}`eq-name``` refers to a labelled one by that number.
Switch it off with ``tokensel_number_all_equations = False`` in the Sphinx configuration.
"""

from __future__ import annotations

from docutils import nodes


def number_all_equations(app, doctree) -> None:
    """Label, anchor and number every display equation of the page just read, in reading order."""
    if not app.config.tokensel_number_all_equations:
        return
    env = app.env
    docname = env.docname
    domain = env.get_domain("math")
    blocks = list(doctree.findall(nodes.math_block))
    for label in [k for k, (doc, _) in domain.equations.items() if doc == docname]:
        del domain.equations[label]  # numbered again below, in reading order
    for number, block in enumerate(blocks, start=1):
        if not block.get("label"):
            block["label"] = f"{docname}:{number}"
        label = block["label"]
        if not block["ids"]:
            anchor = nodes.make_id(f"equation-{label}")
            block["ids"].append(anchor)
            doctree.ids[anchor] = block
        domain.equations[label] = (docname, number)
        block["number"] = number


def setup(app):
    app.add_config_value("tokensel_number_all_equations", True, "env")
    app.connect("doctree-read", number_all_equations)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
