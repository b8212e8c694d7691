"""docs/testing.md's first recipe, as a newcomer meets it: a fresh virtualenv, ``pip install``
of the repository, the recipe saved as a test file in an empty folder, then ``pytest``.

What a newcomer sees is the point: the test passes, and the summary names no warning. Before
issue 29 it said ``1 passed, 218 warnings``: kafka-python's schema loading, imported by
oncelog's codecs, warns twice per schema, and the project's own pytest config hid it from
the project (tests/testing_kit/test_plugin_warnings.py has the story). Here nothing of the
project's config or environment takes part: the plugin comes from the installed entry point.
The recipe asks for ``oncelog_any_broker``, so it runs twice: against oncelog's broker and
against Apache Kafka (Java on the machine, the jars in the per-user cache ``make setup``
fills), whose JVM must be gone with pytest too.
"""

from __future__ import annotations

import re

import pytest


def first_recipe(repo_copy) -> str:
    """The first ```python block under "## Recipes" of the copy's docs/testing.md."""
    recipes = (repo_copy / "docs" / "testing.md").read_text().split("\n## Recipes\n", 1)[1]
    block = re.search(r"```python\n(.*?)```", recipes, flags=re.S)
    assert block and "def test_" in block.group(1), "docs/testing.md's first recipe is gone"
    return block.group(1)


@pytest.mark.slow
@pytest.mark.timeout(900)  # the first pip install may download; later ones use pip's cache
def test_the_first_testing_recipe_passes_in_a_fresh_virtualenv_with_no_warning(user, repo_copy):
    (user.folder / "test_recipe.py").write_text(first_recipe(repo_copy))
    result = user.run("pytest", timeout=300)
    summary = result.stdout.strip().splitlines()[-1]
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert re.fullmatch(r"=* ?2 passed in [0-9.]+s( \(.*\))? ?=*", summary), result.stdout[-3000:]
    assert "warning" not in result.stdout.lower(), result.stdout[-3000:]
    user.assert_nothing_left()  # the recipe's brokers (and Kafka's JVM) died with pytest
