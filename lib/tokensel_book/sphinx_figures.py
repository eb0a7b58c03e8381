"""Sphinx extension: a figure of several panels is shown panel by panel on a phone.

A PNG of :mod:`tokensel_book.plots` records its panels' boxes (``tokensel-panels``); each is cut out and placed
after the whole image, which the style sheet shows on wide screens and paper, the panels stacked at 640 px or
less. Each panel's alt text names the panel and carries the caption."""

from __future__ import annotations

from pathlib import Path

from docutils import nodes
from sphinx.transforms import SphinxTransform
from sphinx.util import logging

from .plots import png_panels

logger = logging.getLogger(__name__)

WHOLE = "tokensel-panels-whole"
STACKED = "tokensel-panels-stacked"
PANEL = "tokensel-panel"


def cut_panels(path: Path, boxes: list[list[float]]) -> list[tuple[Path, float]]:
    """Cut the PNG ``path`` into the panels ``boxes`` (``[left, top, right, bottom]`` fractions); each panel is
    written beside it as ``<stem>.panel<k>.png`` (kept when it is newer than ``path``) with the same
    resolution. Returns ``(path of the panel, its width as a fraction of the whole)`` per panel."""
    from PIL import Image

    out = []
    with Image.open(path) as im:
        im.load()
        w, h = im.size
        dpi = im.info.get("dpi")
        for k, (x0, y0, x1, y1) in enumerate(boxes, 1):
            target = path.with_name(f"{path.stem}.panel{k}.png")
            if not (target.is_file() and target.stat().st_mtime >= path.stat().st_mtime):
                crop = im.crop((round(x0 * w), round(y0 * h), round(x1 * w), round(y1 * h)))
                crop.save(target, dpi=dpi) if dpi else crop.save(target)
            out.append((target, x1 - x0))
    return out


def _width_px(value) -> float | None:
    if isinstance(value, str) and value.endswith("px"):
        value = value[:-2]
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


class StackedPanels(SphinxTransform):
    """Every image of a figure whose PNG records two or more panels: the whole image, then its panels."""

    default_priority = 700

    def apply(self, **kwargs) -> None:
        for figure in list(self.document.findall(nodes.figure)):
            caption = next(iter(figure.findall(nodes.caption)), None)
            said = " ".join(caption.astext().split()) if caption is not None else ""
            for image in list(figure.findall(nodes.image)):
                uri = image.get("uri", "")
                if not uri.endswith(".png") or "://" in uri or WHOLE in image.get("classes", []):
                    continue
                path = Path(self.env.relfn2path(uri, self.env.docname)[1])
                if not path.is_file():
                    continue
                boxes = png_panels(path)
                if len(boxes) < 2:
                    continue
                try:
                    panels = cut_panels(path, boxes)
                except OSError as exc:
                    logger.warning(f"the panels of {uri} could not be cut: {exc}", location=image)
                    continue
                width = _width_px(image.get("width"))
                stacked = nodes.container(classes=[STACKED])
                base = uri.rsplit("/", 1)[0] + "/" if "/" in uri else ""
                for k, (panel, fraction) in enumerate(panels, 1):
                    node = nodes.image(
                        uri=base + panel.name,
                        classes=[PANEL],
                        alt=f"Panel {k} of {len(panels)}" + (f" of the figure: {said}" if said else ""),
                    )
                    if width:
                        node["width"] = f"{round(width * fraction)}px"
                    stacked += node
                image["classes"] = [*image.get("classes", []), WHOLE]
                image.parent.insert(image.parent.index(image) + 1, stacked)


def setup(app):
    app.add_transform(StackedPanels)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
