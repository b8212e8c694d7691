"""docs/testing.md's recipes, run from the document itself so they cannot rot: every
```python block under "## Recipes" that defines a test becomes a user's test file, and
pytester runs them all in one subprocess with the plugin, as a user would."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "testing.md"
EXPECTED_RECIPE_TESTS = 4  # keep in step with the document: a recipe lost is a failure


def recipe_files() -> dict[str, str]:
    recipes = DOC.read_text().split("\n## Recipes\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", recipes, flags=re.S)
    return {f"test_recipe_{n}": block for n, block in enumerate(blocks)
            if "def test_" in block and "..." not in block}


def test_recipes_in_docs_pass(pytester):
    from .conftest import plugin_args
    files = recipe_files()
    assert len(files) == 3, "docs/testing.md lost or gained a recipe block"
    pytester.makepyfile(**files)
    result = pytester.runpytest_subprocess(*plugin_args(), "-p", "no:cacheprovider", "-q",
                                           "-W", "ignore::DeprecationWarning", timeout=180)
    result.assert_outcomes(passed=EXPECTED_RECIPE_TESTS)
