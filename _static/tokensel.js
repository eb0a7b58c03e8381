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
