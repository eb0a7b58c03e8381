"""Print, as one shell-quoted line, the uv arguments that give uv the package sources pip is configured with.

uv does not read pip's configuration (pip.conf files, ``PIP_*`` variables). On a machine whose packages come
from a configured index or from local wheels (``find-links``), a uv install without these arguments would
resolve the pinned versions from PyPI instead: the same versions, possibly other builds (torch's CUDA wheels
where pip takes the CPU wheel of a local folder). ``.ci/run`` passes this line to ``make venv UV_ARGS=...``.

pip's precedence is kept: an environment variable wins over the ``install`` section of a configuration
file, which wins over its ``global`` section.
"""

from __future__ import annotations

import ast
import shlex
import subprocess
import sys

# pip's option -> uv's option
OPTIONS = {"index-url": "--index-url", "extra-index-url": "--extra-index-url", "find-links": "--find-links"}
RANK = {":env:": 0, "install": 1, "global": 2}


def pip_settings(listing: str) -> dict[str, list[str]]:
    """The values of OPTIONS in `pip config list` output, each from the section pip would use."""
    chosen: dict[str, tuple[int, list[str]]] = {}
    for line in listing.splitlines():
        name, sep, raw = line.partition("=")
        section, _, key = name.rpartition(".")
        if not sep or key not in OPTIONS or section not in RANK:
            continue
        value = ast.literal_eval(raw)
        if not isinstance(value, str):
            raise SystemExit(f"uv_args: cannot read pip's setting {line!r}")
        rank = RANK[section]
        if key not in chosen or rank < chosen[key][0]:
            chosen[key] = (rank, value.split())
    return {key: values for key, (_, values) in chosen.items()}


def uv_arguments(settings: dict[str, list[str]]) -> list[str]:
    """uv's arguments for pip's settings; with several sources uv, like pip, takes the best match of all."""
    args: list[str] = []
    for key, values in settings.items():
        for value in values:
            args += [OPTIONS[key], value]
    if args:
        args += ["--index-strategy", "unsafe-best-match"]
    return args


def main() -> None:
    listing = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, check=True
    ).stdout
    print(shlex.join(uv_arguments(pip_settings(listing))))


if __name__ == "__main__":
    main()
