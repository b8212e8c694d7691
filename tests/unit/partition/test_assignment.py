"""Replica assignment of new topics follows Kafka's rack-unaware algorithm: leaders spread
over the brokers, followers shifted, no broker twice in one partition."""

from __future__ import annotations

from collections import Counter

import pytest

from oncelog.partition.manager import assign_replicas
from oncelog.protocol.errors import ErrorCode, KafkaError


def test_leaders_and_replicas_spread_evenly():
    assignment = assign_replicas(6, 3, [1, 2, 3])
    assert all(len(set(replicas)) == 3 for replicas in assignment)
    assert Counter(replicas[0] for replicas in assignment) == {1: 2, 2: 2, 3: 2}
    assert assignment[:3] == [[1, 2, 3], [2, 3, 1], [3, 1, 2]]
    assert assignment[3] == [1, 3, 2]  # after a full round the followers shift


def test_more_replicas_than_brokers_is_an_invalid_replication_factor():
    with pytest.raises(KafkaError) as raised:
        assign_replicas(1, 3, [1, 2])
    assert raised.value.code == ErrorCode.INVALID_REPLICATION_FACTOR
