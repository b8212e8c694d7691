"""Shared fixtures: real broker processes, stopped by process id even when a test fails."""

from __future__ import annotations

import pytest

from oncelog.broker.process import BrokerProcess


@pytest.fixture
def broker_factory(tmp_path):
    """Start brokers with ``broker_factory(settings={...})``; every one is stopped afterwards."""
    started: list[BrokerProcess] = []

    def start(settings: dict[str, str] | None = None, name: str = "broker", **kwargs) -> BrokerProcess:
        process = BrokerProcess(tmp_path / name / "data", settings=settings,
                                log_path=tmp_path / name / "broker.log", **kwargs)
        started.append(process)
        return process.start()

    yield start
    for process in started:
        process.kill()


@pytest.fixture
def broker(broker_factory) -> BrokerProcess:
    return broker_factory()
