"""What only the book needs. Nothing below this folder imports it.

* claims — :mod:`.checks` (``check``, ``start_chapter``, ``end_chapter``), their records (:mod:`.records`),
  the table of contents (``toc``), the build's verification (:mod:`.verification`, ``python -m tokensel
  verify``) and the status page's tables (:mod:`.status`), each claim's words (``wording``);
* the replication of every claim across fresh seeds (:mod:`.replication`, ``python -m tokensel replicate``);
* the shared figures (:mod:`.plots`) and HTML views of attention (:mod:`.display`);
* the API page (``api``), the student edition (``student``), the PDF (``pdf``), notebooks fit to
  download (``notebooks``), the chapters' code formatter (``formatting``), and the Sphinx extensions
  (``sphinx_mathjax``, ``sphinx_equations``, ``sphinx_notebooks``, ``sphinx_roadmap``, ``sphinx_execution``,
  ``sphinx_statements``, ``sphinx_figures``), the exercises' self-checks (``exercises``) and a class's assignments
  (``assignments``)."""

import importlib.util
from typing import TYPE_CHECKING

from . import checks, display, plots, records, replication, status, toc, verification

__all__ = ["checks", "display", "plots", "records", "replication", "status", "toc", "verification"]


if not TYPE_CHECKING:  # the type checker sees the folder's modules themselves

    def __getattr__(name: str):
        """A module of this folder, imported when first used (``ts.models.variants``)."""
        if importlib.util.find_spec(f"{__name__}.{name}") is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        return importlib.import_module(f"{__name__}.{name}")
