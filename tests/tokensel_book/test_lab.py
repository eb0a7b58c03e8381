"""`make lab` as a reader uses it: a chapter opened in JupyterLab renders its MyST, and a claim broken on purpose
shows in red while the notebook runs on (``--browser``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import MYST_FRONT_MATTER
from test_browser import chromium
from test_replication import _port

pytestmark = pytest.mark.browser
ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

CHAPTER = (
    MYST_FRONT_MATTER[:-4]
    + """claims:
  doubling: {claim: "twice x is 2x", tests: lem-arith, threshold: "exact arithmetic"}
---
# A chapter to break

````{prf:lemma} Arithmetic
:label: lem-arith

For every $x \\in \\mathbb{R}$, $x + x = 2x$.
````

```{code-cell} ipython3
import tokensel as ts
import tokensel_book as tb
tb.start_chapter("demo")
x = 3.0  # a reader changes a parameter here
tb.check("doubling", x + x, close_to=7.0, tol=1e-9)
```

```{code-cell} ipython3
print("the next cell ran")
```
"""
)


def _wait(predicate, timeout: float, what: str):
    t0 = time.time()
    while time.time() - t0 < timeout:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    pytest.fail(f"JupyterLab: timed out after {timeout:.0f} s waiting for {what}")


def test_lab_opens_a_chapter_as_a_rendered_notebook_and_reports_a_broken_claim(tmp_path):
    from selenium.webdriver.common.by import By

    labextensions = subprocess.run([str(BIN / "jupyter"), "labextension", "list"], capture_output=True, text=True)
    listing = labextensions.stdout + labextensions.stderr
    for ext in ("jupyterlab-myst", "jupyterlab-jupytext"):
        line = next((ln for ln in listing.splitlines() if ext in ln), "")
        assert "enabled" in line and "OK" in line, f"{ext} is not enabled and compatible:\n{listing}"
    (work := tmp_path / "book").mkdir()
    shutil.copy(ROOT / "jupytext.toml", tmp_path / "jupytext.toml")
    (tmp_path / "_config.yml").write_text("title: lab test\n")
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: book/demo\n")
    (work / "demo.md").write_text(CHAPTER)
    # what `make notebooks` does: the paired .ipynb, then the .md touched so that it is the newer file
    subprocess.run([str(BIN / "jupytext"), "--quiet", "--to", "ipynb", str(work / "demo.md")], check=True)
    os.utime(work / "demo.md")
    port, token = _port(), "tokensel-test"
    env = dict(os.environ, TOKENSEL_CLAIMS="report", TOKENSEL_RESULTS_DIR=str(tmp_path / "checks"))
    env |= dict(PATH=f"{BIN}:{os.environ.get('PATH', '')}", JUPYTER_CONFIG_DIR=str(tmp_path / "jupyter-config"))
    env |= dict(JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "workspaces"))
    cmd = [str(BIN / "jupyter"), "lab", "--no-browser", f"--port={port}", "--ip=127.0.0.1"]
    cmd += [f"--ServerApp.token={token}", f"--notebook-dir={tmp_path}"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    server = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        with chromium(tmp_path) as driver:
            driver.set_window_size(1400, 1000)
            url = f"http://127.0.0.1:{port}/lab/workspaces/test/tree/book/demo.ipynb?token={token}&reset"
            _wait(lambda: _try_get(driver, url), 60, "the server to answer")
            find = lambda css: driver.find_elements(By.CSS_SELECTOR, css)  # noqa: E731
            _wait(lambda: len(find(".jp-Notebook .jp-CodeCell")) >= 2, 90, "the chapter to open as a notebook")
            nb = lambda: driver.find_element(By.CSS_SELECTOR, ".jp-Notebook").text  # noqa: E731
            rendered = _wait(lambda: nb() if "Lemma" in nb() else None, 60, "jupyterlab-myst to render the lemma")
            assert "{prf:lemma}" not in rendered and "Arithmetic" in rendered
            # Run > Run All Cells, as a reader would
            next(e for e in find(".lm-MenuBar-item") if e.text == "Run").click()
            run_all = lambda: [e for e in find(".lm-Menu-item") if e.text.startswith("Run All Cells")]  # noqa: E731
            _wait(run_all, 10, "the Run menu")[0].click()

            def outputs():
                text = "\n".join(e.text for e in find(".jp-OutputArea-output"))
                return text if "the next cell ran" in text else None

            out = _wait(outputs, 180, "the notebook to run to its last cell")
            assert "[FAILED] twice x is 2x: 6, required within 1e-09 of 7 (tests lem-arith)" in out
            stderr = find('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')
            assert any("claim failed" in e.text for e in stderr), "the failure is not shown as a warning"
            SHOTS = ROOT / "_build" / "browser"
            SHOTS.mkdir(parents=True, exist_ok=True)
            driver.save_screenshot(str(SHOTS / "lab-broken-claim.png"))
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()


def _try_get(driver, url) -> bool:
    try:
        driver.get(url)
        return "JupyterLab" in driver.title or bool(driver.find_elements("css selector", "#main"))
    except Exception:  # the server is still starting
        return False
