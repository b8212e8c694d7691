"""docs/testing.md's recipes, run from the document itself so they cannot rot: every
```python block under "## Recipes" that defines a test becomes a user's test file, and
pytester runs them in a subprocess with the plugin, as a user would. The Spark recipe (two
Spark drivers, tens of seconds) runs on its own, marked slow."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .conftest import plugin_args

DOC = Path(__file__).resolve().parents[2] / "docs" / "testing.md"


def recipe_files(spark: bool) -> dict[str, str]:
    recipes = DOC.read_text().split("\n## Recipes\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", recipes, flags=re.S)
    return {f"test_recipe_{n}": block for n, block in enumerate(blocks)
            if "def test_" in block and not re.search(r"^\s*\.\.\.", block, flags=re.M)
            and ("SparkDriver" in block) == spark}


def run_recipes(pytester, files: dict[str, str]):
    pytester.makepyfile(**files)
    return pytester.runpytest_subprocess(*plugin_args(), "-p", "no:cacheprovider", "-q",
                                         timeout=400)


def test_recipes_in_docs_pass(pytester):
    files = recipe_files(spark=False)
    assert len(files) == 3, "docs/testing.md lost or gained a recipe block"
    run_recipes(pytester, files).assert_outcomes(passed=4, warnings=0)


@pytest.mark.slow
def test_spark_recipe_in_docs_passes(pytester):
    files = recipe_files(spark=True)
    assert len(files) == 1, "docs/testing.md lost its Spark recipe"
    run_recipes(pytester, files).assert_outcomes(passed=1)
