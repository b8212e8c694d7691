"""The fault proxy's address rewriting (``oncelog.verify.proxy``; the test kit's wire proxy
inherits it): every response naming a broker must name the broker's proxy instead.

The story (issue 32's swap path): Apache Kafka 4 answers a Produce to a topic created a moment
ago with NOT_LEADER_OR_FOLLOWER and, from Produce v10 (KIP-951), the leader's endpoint. The
proxy rewrote Metadata, FindCoordinator and DescribeCluster only, so librdkafka learned the
broker's own address from that endpoint, moved its connection there ("Broker hostname
updated"), dropped the produce requests in flight and sent them again: a plain producer
through the kit's ``ApacheKafka`` wrote 100-200 of 300 records twice on 3 of 6 new topics
(and would then have bypassed the proxy's faults). Now Produce v10+ and Fetch v16+ endpoints
name the proxy too; a response naming no broker host is forwarded without being decoded.
"""

from __future__ import annotations

import struct

from oncelog.protocol import messages
from oncelog.protocol.api_keys import ApiKey
from oncelog.verify.proxy import FaultProxy

BROKER, PROXY = ("127.0.0.1", 9092), ("127.0.0.1", 40001)


def response_frame(api_key: ApiKey, version: int, **fields) -> bytes:
    body = bytes(messages.RESPONSES[api_key](**fields).encode(version=version))
    payload = struct.pack(">i", 7) + b"\x00" + body  # correlation id, no header tags
    return struct.pack(">i", len(payload)) + payload


def endpoints_after_proxy(api_key: ApiKey, version: int, **fields) -> list:
    proxy = FaultProxy(f"{BROKER[0]}:{BROKER[1]}", addresses={BROKER: PROXY})
    frame = response_frame(api_key, version, **fields)
    assert proxy._names_brokers(frame, api_key, version)
    out = proxy._rewrite_addresses(frame, api_key, version)
    response = messages.RESPONSES[api_key].decode(out[9:], version=version)
    return [(node.node_id, node.host, node.port) for node in response.node_endpoints]


def endpoint(api_key: ApiKey, host: str, port: int):
    return messages.RESPONSES[api_key].NodeEndpoint(node_id=1, host=host, port=port, rack=None)


def test_a_produce_responses_leader_endpoint_names_the_proxy():
    assert endpoints_after_proxy(
        ApiKey.PRODUCE, 11, throttle_time_ms=0, responses=[],
        node_endpoints=[endpoint(ApiKey.PRODUCE, *BROKER)]) == [(1, *PROXY)]


def test_a_fetch_responses_leader_endpoint_names_the_proxy():
    assert endpoints_after_proxy(
        ApiKey.FETCH, 16, throttle_time_ms=0, error_code=0, session_id=0, responses=[],
        node_endpoints=[endpoint(ApiKey.FETCH, *BROKER)]) == [(1, *PROXY)]


def test_produce_and_fetch_responses_naming_no_broker_are_not_decoded():
    proxy = FaultProxy(f"{BROKER[0]}:{BROKER[1]}", addresses={BROKER: PROXY})
    plain = response_frame(ApiKey.PRODUCE, 11, throttle_time_ms=0, responses=[])
    assert not proxy._names_brokers(plain, ApiKey.PRODUCE, 11)
    older = response_frame(ApiKey.PRODUCE, 9, throttle_time_ms=0, responses=[])
    assert not proxy._names_brokers(older, ApiKey.PRODUCE, 9)   # no endpoints before v10
    assert proxy._names_brokers(b"", ApiKey.METADATA, 12)        # always rewritten
