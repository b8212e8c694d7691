"""Fixtures for the sink tests: a database URL of each kind (``spark`` is in tests/conftest.py)."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path) -> str:
    """A fresh SQLite file, then a fresh database on the session's real PostgreSQL server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/sink.db"
    return request.getfixturevalue("postgres_url")
