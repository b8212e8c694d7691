"""Helpers for the test kit's own tests: run a generated user test file with pytester in a
subprocess, with the oncelog plugin loaded however this environment loads it."""

from __future__ import annotations

import importlib.metadata
import os

import pytest

# The plugin's fixtures for the recipe tests here, exactly as a user gets them (on CI the
# installed plugin provides them too; these, being closer, win - the same code either way).
from oncelog.testing.plugin import (oncelog_broker, oncelog_broker_session,  # noqa: F401
                                    oncelog_group, oncelog_secured_brokers, oncelog_topic)

PLUGIN_MODULE = "oncelog.testing.plugin"


def plugin_autoloaded() -> bool:
    """True when an installed distribution registers the plugin through ``pytest11`` (a fresh
    ``pip install -e .``, as on CI) and autoloading is on; then ``-p`` must not load it a
    second time under another name."""
    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        return False
    return any(ep.value == PLUGIN_MODULE
               for ep in importlib.metadata.entry_points(group="pytest11"))


def plugin_args() -> list[str]:
    return [] if plugin_autoloaded() else ["-p", PLUGIN_MODULE]


@pytest.fixture
def run_user_tests(pytester):
    """``run_user_tests(source, *args)``: write ``source`` as a user's test file, run pytest on
    it in a subprocess with the plugin, return pytester's ``RunResult``."""
    def run(source: str, *args: str, timeout: float = 150):
        pytester.makepyfile(test_user=source)
        return pytester.runpytest_subprocess(*plugin_args(), "-p", "no:cacheprovider",
                                             "-q", *args, timeout=timeout)
    return run


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is a dead process its parent has not reaped yet
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False
