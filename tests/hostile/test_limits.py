"""The pure parts of broker/limits.py: the memory pool, connection quotas, rate-limited log."""

from __future__ import annotations

import logging

from oncelog.broker.limits import ConnectionQuotas, MemoryPool, RateLimitedLog


class Waiter:
    def __init__(self, pool: MemoryPool, need: int, partial: bool = False) -> None:
        self.pool, self.need, self.partial, self.woken = pool, need, partial, 0

    def memory_needed(self):
        return self.need, self.partial, 0

    def memory_available(self) -> None:
        self.woken += 1
        self.pool.charge(self.need, partial_frame=self.partial)


def test_pool_refuses_what_does_not_fit_and_records_what_exists():
    pool = MemoryPool(100)
    assert pool.try_reserve(60)
    assert not pool.try_reserve(50)
    pool.charge(50)  # memory that already exists is always recorded
    assert pool.exhausted and pool.used == 110 and pool.peak == 110
    pool.release(110)
    assert pool.used == 0 and not pool.exhausted


def test_frames_still_arriving_may_take_only_half():
    pool = MemoryPool(100)
    assert pool.try_reserve(40, partial_frame=True)
    assert not pool.try_reserve(20, partial_frame=True)
    assert pool.try_reserve(50)  # requests and responses have the other half


def test_a_frame_too_big_for_the_share_is_granted_alone_rather_than_never():
    pool = MemoryPool(100)
    assert pool.try_reserve(80, partial_frame=True)
    pool.release(80, partial_frame=True)
    pool.charge(10)
    assert not pool.try_reserve(80, partial_frame=True)


def test_waiters_are_woken_in_order_once_their_need_fits():
    pool = MemoryPool(100)
    pool.charge(100)
    first, second = Waiter(pool, 30), Waiter(pool, 30)
    pool.wait(first)
    pool.wait(second)
    pool.release(40)
    assert (first.woken, second.woken) == (1, 0)
    pool.release(30)
    assert second.woken == 1


def test_quotas():
    quotas = ConnectionQuotas(max_connections=3, max_connections_per_ip=2)
    assert quotas.admit("a") is None and quotas.admit("a") is None
    assert "per.ip" in quotas.admit("a")
    assert quotas.admit("b") is None
    assert "max.connections=3" in quotas.admit("c")
    quotas.release("a")
    assert quotas.admit("c") is None


def test_rate_limited_log_writes_one_line_per_kind_per_source_per_interval(caplog):
    now = [0.0]
    limited = RateLimitedLog(logging.getLogger("t"), 10.0, clock=lambda: now[0], max_keys=4)
    with caplog.at_level(logging.WARNING):
        for _ in range(100):
            limited.warning("bad frame", "10.0.0.1", "closing %s", "x")
        limited.warning("bad frame", "10.0.0.2", "closing %s", "y")
        limited.warning("refused", "10.0.0.1", "refusing %s", "z")
        now[0] = 11.0
        limited.warning("bad frame", "10.0.0.1", "closing %s", "x")
    lines = [record.getMessage() for record in caplog.records]
    assert lines[:3] == ["closing x", "closing y", "refusing z"]
    assert lines[3].startswith("closing x (99 more bad frame from 10.0.0.1 in the last 11 s")
    assert len(lines) == 4


def test_rate_limited_log_table_is_bounded(caplog):
    limited = RateLimitedLog(logging.getLogger("t"), 10.0, clock=lambda: 0.0, max_keys=4)
    with caplog.at_level(logging.WARNING):
        for source in range(1000):
            limited.warning("bad frame", f"10.0.{source // 256}.{source % 256}", "closing")
    assert len(limited._entries) <= 5
    assert len(caplog.records) <= 5
