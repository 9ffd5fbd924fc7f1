"""The test tree collects as one run: pytest imports test modules by their basename (no
``__init__.py`` under ``test/``), so two ``test_x.py`` in different folders stop the whole run
at collection ("import file mismatch") however well each passes alone."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TEST_ROOT = Path(__file__).resolve().parents[1]


def test_every_test_module_has_a_basename_of_its_own() -> None:
    folders: dict[str, list[str]] = defaultdict(list)
    for path in TEST_ROOT.rglob("test_*.py"):
        if ".models-cache" not in path.parts:
            folders[path.name].append(str(path.parent.relative_to(TEST_ROOT)))
    assert {name: where for name, where in folders.items() if len(where) > 1} == {}
