import pytest

from .cut import build_library


@pytest.fixture(scope="session")
def journal_library(tmp_path_factory):
    """fsync_journal.c, compiled for this session (cc comes from scripts/setup.sh)."""
    return build_library(tmp_path_factory.mktemp("power-cut"))
