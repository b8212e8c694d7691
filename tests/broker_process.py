"""A broker process for a folder of tests (``with running_broker(folder) as broker:`` in a
package- or module-scoped fixture): data and log in ``folder``, killed by pid at the end."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from oncelog.broker.process import BrokerProcess


@contextmanager
def running_broker(folder: Path, settings: dict[str, str] | None = None) -> Iterator[BrokerProcess]:
    process = BrokerProcess(folder / "data", log_path=folder / "broker.log", settings=settings)
    try:
        yield process.start()
    finally:
        process.kill()
