"""tokensel_book: the book's machinery beside the library ``tokensel``, which never imports it.

* claims — :func:`check`, :func:`prove`, :func:`start_chapter`, :func:`end_chapter` and each chapter's claims table
  (:mod:`.claims`), the build's verification (:mod:`.verification`) and the status page (:mod:`.status`);
* the replication of every claim across fresh seeds (:mod:`.replication`);
* the shared figures (:mod:`.plots`) and HTML views of attention (:mod:`.display`);
* the exercises' self-checks (:func:`self_check`), the student edition, assignments and their grader;
* the API page, the PDF, downloadable notebooks, the chapters' formatter and the Sphinx extensions.

``python -m tokensel_book --help`` lists its commands.
"""

from . import claims, display, plots, replication, status, toc, verification
from .claims import check, end_chapter, prove, start_chapter
from .exercises import self_check

__all__ = [
    "check",
    "prove",
    "start_chapter",
    "end_chapter",
    "self_check",
    "claims",
    "display",
    "plots",
    "replication",
    "status",
    "toc",
    "verification",
]
