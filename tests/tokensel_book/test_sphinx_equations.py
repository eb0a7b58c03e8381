"""tokensel_book.sphinx_equations: every display equation numbered in reading order, labelled ones too."""

from __future__ import annotations

import io
import re

import pytest

PAGE = """# Page

$$
a = 1
$$

$$
b = 2
$$ (eq-b)

$$
\\begin{aligned} c &= 3 \\\\ d &= 4 \\end{aligned}
$$

See {eq}`eq-b`.
"""


def _build(tmp_path, number_all=True):
    from sphinx.application import Sphinx

    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    (src / "conf.py").write_text(
        "extensions = ['myst_parser', 'tokensel_book.sphinx_equations']\n"
        "myst_enable_extensions = ['dollarmath', 'amsmath']\n"
        f"tokensel_number_all_equations = {number_all}\n"
    )
    (src / "index.md").write_text(PAGE)
    out = tmp_path / ("html" if number_all else "html-off")
    warnings = io.StringIO()
    doctrees = tmp_path / "doctrees"
    app = Sphinx(str(src), str(src), str(out), str(doctrees), "html", status=None, warning=warnings, freshenv=True)
    app.build()
    # a second Sphinx app in one process re-registers docutils nodes: that warning is not about the page
    problems = [w for w in warnings.getvalue().splitlines() if "WARNING" in w and "already registered" not in w]
    assert not problems, problems
    return (out / "index.html").read_text(encoding="utf-8")


@pytest.mark.slow
def test_every_display_equation_is_numbered_in_reading_order(tmp_path):
    html = _build(tmp_path)
    assert re.findall(r'class="eqno">\((\d+)\)', html) == ["1", "2", "3"]
    # the labelled equation keeps its label and is referred to by its number
    assert 'id="equation-eq-b"' in html
    assert re.search(r'href="#equation-eq-b"[^>]*>\(2\)</a>', html)


@pytest.mark.slow
def test_switched_off_only_labelled_equations_are_numbered(tmp_path):
    html = _build(tmp_path, number_all=False)
    assert re.findall(r'class="eqno">\((\d+)\)', html) == ["1"]
