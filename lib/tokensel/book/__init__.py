"""What only the book needs: numerical claims and their records (:mod:`.checks`), the shared figures
(:mod:`.plots`), HTML views of attention (:mod:`.display`) and two Sphinx extensions (the local MathJax,
``tokensel.book.sphinx_mathjax``; notebooks in the download menu, ``tokensel.book.sphinx_notebooks``). Nothing below this
package imports it."""

from . import checks, display, plots

__all__ = ["checks", "display", "plots"]
