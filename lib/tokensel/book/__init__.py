"""What only the book needs: numerical claims and their records (:mod:`.checks`), the shared figures
(:mod:`.plots`), the replication of every claim across fresh seeds (:mod:`.replication`), HTML views of
attention (:mod:`.display`) and two Sphinx extensions (the local MathJax, ``tokensel.book.sphinx_mathjax``;
notebooks in the download menu, ``tokensel.book.sphinx_notebooks``). Nothing below this
package imports it."""

from . import checks, display, plots, replication

__all__ = ["checks", "display", "plots", "replication"]
