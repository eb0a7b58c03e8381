// tokensel book: every table of a page learns its column names, so that on a narrow screen, or wherever
// it is wider than the text column, it reads as one card per row, each value labelled by its column (the
// class tokensel-cards-on, styled in tokensel.css), instead of overflowing its box.
const tokenselCardTables = [];

function tokenselFitTables() {
  for (const table of tokenselCardTables) {
    table.classList.remove("tokensel-cards-on");
    const box = table.parentElement.clientWidth;
    if (window.innerWidth <= 640 || table.scrollWidth > box + 1 || table.offsetWidth > box + 1) {
      table.classList.add("tokensel-cards-on");
    }
  }
}

document.addEventListener("DOMContentLoaded", () => {
  for (const table of document.querySelectorAll("article.bd-article table")) {
    const head = table.tHead ? Array.from(table.tHead.rows) : [];
    if (!head.length || !table.tBodies.length) continue;
    // the label of column i: the last non-empty header cell above it (pandas puts the index name in a
    // second header row)
    const labels = [];
    for (const row of head) {
      let col = 0;
      for (const cell of row.cells) {
        const text = cell.textContent.trim();
        for (let k = 0; k < (cell.colSpan || 1); k++, col++) if (text) labels[col] = text;
      }
    }
    for (const body of table.tBodies) {
      for (const row of body.rows) {
        let col = 0;
        for (const cell of row.cells) {
          if (labels[col]) cell.dataset.label = labels[col];
          col += cell.colSpan || 1;
        }
      }
    }
    tokenselCardTables.push(table);
  }
  tokenselFitTables();
  window.addEventListener("resize", tokenselFitTables);
});

// Figures: a PNG cannot reflow, so on a narrow screen a figure is not shrunk below the width at which its
// smallest text (the tick labels) is 10 px high; it scrolls sideways in its box instead, a panel at a time.
// The book's theme (tokensel_book.plots.theme: figure.dpi 110, tick labels 10.45 pt) draws that text
// 10.45 * 110 / 72 = 16 px high at a figure's natural width; we aim at 10.2 px (a little above 10, for
// the rounding of image widths); make browser-check measures the result.
const TOKENSEL_TICK_PX_AT_NATURAL_WIDTH = 10.45 * 110 / 72;
const TOKENSEL_MIN_TEXT_PX = 10.2;

function tokenselFigureMinWidth() {
  for (const img of document.querySelectorAll("article.bd-article figure img")) {
    const natural = parseFloat(img.style.width) || img.naturalWidth;
    if (natural > 0) {
      img.style.minWidth = `${Math.ceil(natural * TOKENSEL_MIN_TEXT_PX / TOKENSEL_TICK_PX_AT_NATURAL_WIDTH)}px`;
    }
    if (!img.parentElement.classList.contains("tokensel-figure-scroll")) {
      const box = document.createElement("div");  // the image scrolls, the caption stays put
      box.className = "tokensel-figure-scroll";
      img.replaceWith(box);
      box.appendChild(img);
    }
  }
}

document.addEventListener("DOMContentLoaded", tokenselFigureMinWidth);
