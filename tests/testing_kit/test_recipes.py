"""docs/testing.md's recipes, run from the document itself so they cannot rot: every
```python block under "## Recipes" that defines a test becomes a user's test file, and
pytester runs them in a subprocess with the plugin, as a user would. The three that ask for
``oncelog_any_broker`` run twice, against oncelog's broker and against a real Apache Kafka
(the subprocess's own session Kafka: the broker-kill recipe kills and restarts it). The Spark
recipe (two Spark drivers, tens of seconds) runs on its own, marked slow, against oncelog's
broker (docs/testing.md says why); the same copy job reads Kafka in
``tests/fault/test_verify_apache_kafka.py``'s pipeline run."""

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
    return pytester.runpytest_subprocess(*plugin_args(), "-p", "no:cacheprovider", "-v",
                                         timeout=400)


@pytest.mark.slow  # Apache Kafka's JVM starts and is killed and restarted: ~40 s
def test_recipes_in_docs_pass_against_both_brokers(pytester):
    files = recipe_files(spark=False)
    assert len(files) == 3, "docs/testing.md lost or gained a recipe block"
    result = run_recipes(pytester, files)
    result.assert_outcomes(passed=8, warnings=0)
    for name in ("test_at_least_once_consumer_survives_a_broker_kill",
                 "test_idempotent_producer_does_not_duplicate_when_acks_are_lost",
                 "test_without_idempotence_the_same_fault_duplicates",
                 "test_transform_is_exactly_once_under_coordinator_errors"):
        result.stdout.fnmatch_lines([f"*{name}?oncelog? PASSED*",
                                     f"*{name}?apache-kafka? PASSED*"])


@pytest.mark.slow
def test_spark_recipe_in_docs_passes(pytester):
    files = recipe_files(spark=True)
    assert len(files) == 1, "docs/testing.md lost its Spark recipe"
    run_recipes(pytester, files).assert_outcomes(passed=1)
