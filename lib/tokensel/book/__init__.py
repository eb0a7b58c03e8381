"""What only the book needs. Nothing below this folder imports it.

* claims — :mod:`.checks` (``check``, ``start_chapter``, ``end_chapter``), their records (:mod:`.records`),
  the table of contents (:mod:`.toc`), the build's verification (:mod:`.verification`, ``python -m tokensel
  verify``) and the status page's tables (:mod:`.status`), each claim's words (:mod:`.wording`);
* the replication of every claim across fresh seeds (:mod:`.replication`, ``python -m tokensel replicate``);
* the shared figures (:mod:`.plots`) and HTML views of attention (:mod:`.display`);
* the API page (:mod:`.api`), the student edition (:mod:`.student`), the PDF (:mod:`.pdf`), notebooks fit to
  download (:mod:`.notebooks`), the chapters' code formatter (:mod:`.formatting`), and the Sphinx extensions
  (``sphinx_mathjax``, ``sphinx_equations``, ``sphinx_notebooks``, ``sphinx_roadmap``, ``sphinx_execution``)."""

from . import checks, display, plots, records, replication, status, toc, verification

__all__ = ["checks", "display", "plots", "records", "replication", "status", "toc", "verification"]
