"""tokensel_book.formatting: the chapters' code cells formatted by ruff, nothing else of a page touched."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokensel.errors import InvalidArgumentError
from tokensel_book.formatting import code_cells, format_page, lint_findings, lint_sources, project_config, unformatted

ROOT = Path(__file__).resolve().parents[2]

PAGE = """---
kernelspec:
  name: python3
---
# A page

```python
x=1   # a code block that is not a cell: untouched
```

```{code-cell} ipython3
:tags: [hide-input]
import numpy as np
y = np.array([1,2,3])
```

Text with `code=1`.

````{code-cell} ipython3
---
mystnb:
  figure:
    caption: |
      keep   this
---
z = f( 1,2 );
````
"""


def test_code_cells_finds_the_code_after_options_and_yaml():
    lines = PAGE.split("\n")
    cells = code_cells(PAGE)
    assert ["\n".join(lines[a:b]) for a, b in cells] == ["import numpy as np\ny = np.array([1,2,3])", "z = f( 1,2 );"]
    pytest.raises(InvalidArgumentError, lambda: code_cells("```{code-cell} ipython3\nx = 1\n")).match("never closed")


def test_format_page_formats_cells_only_and_keeps_a_trailing_semicolon():
    out = format_page(PAGE)
    assert "y = np.array([1, 2, 3])" in out
    assert "z = f(1, 2);" in out  # the semicolon that hides a cell's value stays
    assert "x=1   # a code block" in out and "keep   this" in out and "`code=1`" in out
    assert format_page(out) == out
    expected = PAGE.replace(
        "import numpy as np\ny = np.array([1,2,3])", "import numpy as np\n\ny = np.array([1, 2, 3])"
    )
    assert out == expected.replace("f( 1,2 );", "f(1, 2);")


def test_every_chapter_is_formatted_and_lint_free_under_the_projects_configuration():
    pages = sorted((ROOT / "book").glob("*.md"))
    assert all(project_config(p) == ROOT / "pyproject.toml" for p in pages)
    assert unformatted(pages) == [], "run `make format` (python -m tokensel_book format)"
    assert lint_findings(pages) == []


def test_the_projects_rules_fix_import_order_and_report_what_they_cannot_fix(tmp_path):
    config = ROOT / "pyproject.toml"
    page = PAGE.replace("import numpy as np\n", "import tokensel as ts\nimport numpy as np\nimport os\n")
    page = page.replace("y = np.array([1,2,3])", "y = ts.lift(np.array([1,2,3]))")
    out = format_page(page, config)
    # isort with tokensel first-party, the unused import removed (rules I and F of the project's configuration)
    assert "import numpy as np\n\nimport tokensel as ts\n\ny = ts.lift(np.array([1, 2, 3]))" in out
    assert "import os" not in out
    assert format_page(out, config) == out
    # what cannot be fixed is reported with the page's own line number: `f` is never defined
    (tmp_path / "page.md").write_text(out, encoding="utf-8")
    found = lint_findings([tmp_path / "page.md"])
    codes = {line.split(": ")[1].split()[0] for line in found}
    assert "F821" in codes  # f( ... ) is not defined
    lines = out.split("\n")
    undefined = next(line for line in found if "F821" in line)
    assert lines[int(undefined.split(": ")[0].rsplit(":", 1)[1]) - 1].startswith("z = f(")
    assert lint_sources(["import os\n"], config)[0][:3] == (0, 1, "F401")
    pytest.raises(InvalidArgumentError, lambda: lint_sources(["x = 1"], tmp_path / "missing.toml")).match("config")


def test_no_check_is_hidden():
    # plumbing cells are collapsed (hide-input); a cell that checks a claim stays visible
    for page in sorted((ROOT / "book").glob("*.md")):
        text = page.read_text(encoding="utf-8")
        lines = text.split("\n")
        for a, b in code_cells(text):
            header = []
            h = a - 1
            while not lines[h].startswith("```{code-cell}"):
                header.append(lines[h])
                h -= 1
            hidden = any("hide-input" in line or "remove-input" in line or "remove-cell" in line for line in header)
            assert not (hidden and "check(" in "\n".join(lines[a:b])), f"{page.name}:{h + 1} hides a check"
