"""The broker's log must not become the attack (issue 14): requests a client can repeat at
will cost no log line each."""

from __future__ import annotations

import time

from oncelog.protocol import messages as m
from oncelog.protocol.errors import ErrorCode as E
from tests.integration.raw import RawConnection


def test_join_group_without_member_ids_repeated_writes_no_line_per_request(broker_factory):
    """Found by ``make fuzz``: 1,000,000 mutated frames left 36,775 log lines, nearly all
    "pending member ... never came back" - every JoinGroup without a member id (KIP-394)
    creates a pending member, and each one's expiry was an INFO line. 300 such joins whose
    pending members all expire now add almost nothing to the log."""
    broker = broker_factory(settings={"group.min.session.timeout.ms": "1000"})
    J = m.JoinGroupRequest
    protocols = [J.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x00")]
    lines_before = len(broker.log_path.read_text().splitlines())
    with RawConnection(broker.bootstrap) as raw:
        for _ in range(300):
            answer = raw.request(J(group_id="churn", session_timeout_ms=1000,
                                   rebalance_timeout_ms=1000, member_id="",
                                   group_instance_id=None, protocol_type="consumer",
                                   protocols=protocols), 5)
            assert answer.error_code == E.MEMBER_ID_REQUIRED
        time.sleep(2.5)  # every pending member's session ends
        described = raw.request(m.DescribeGroupsRequest(groups=["churn"]), 0).groups[0]
        assert described.error_code == E.NONE and described.members == []
    added = len(broker.log_path.read_text().splitlines()) - lines_before
    assert added < 10, broker.log_path.read_text().splitlines()[-20:]
