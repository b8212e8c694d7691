"""ApiVersions is answered from one response encoded once per version (handlers.api_versions)."""

from __future__ import annotations

import asyncio

import pytest

from oncelog.broker.dispatch import HANDLERS
from oncelog.broker.handlers import api_versions
from oncelog.protocol import messages
from oncelog.protocol.api_keys import ApiKey
from oncelog.protocol.errors import ErrorCode


@pytest.mark.parametrize("version", api_versions.VERSIONS)
def test_every_client_gets_the_same_bytes_the_codec_would_write(version):
    first = asyncio.run(api_versions.handle(None, None))
    again = asyncio.run(api_versions.handle(None, None))
    fresh = messages.ApiVersionsResponse(error_code=ErrorCode.NONE,
                                         api_keys=api_versions._api_keys(), throttle_time_ms=0)

    assert again is first  # built once
    assert first.encode(version=version) is again.encode(version=version)  # encoded once
    assert first.encode(version=version) == bytes(fresh.encode(version=version))
    (frame,) = messages.encode_response(ApiKey.API_VERSIONS, version, 5, first)
    decoded = messages.ApiVersionsResponse.decode(frame[8:], version=version)
    assert decoded.error_code == ErrorCode.NONE
    assert {k.api_key: (k.min_version, k.max_version) for k in decoded.api_keys} == {
        key: (offered.start, offered.stop - 1) for key, module in HANDLERS.items()
        for offered in [getattr(module, "ADVERTISED_VERSIONS", module.VERSIONS)]}


def test_error_answers_keep_their_own_code():
    refused = api_versions.unsupported_version_response()
    invalid = api_versions.error_response(None, ErrorCode.INVALID_REQUEST, "bad")

    assert refused.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert invalid.error_code == ErrorCode.INVALID_REQUEST
    assert api_versions.error_response(None, ErrorCode.NONE, None) is asyncio.run(
        api_versions.handle(None, None))


def test_fetch_by_topic_id_is_served_to_followers_but_not_offered_to_clients():
    """oncelog's followers fetch with v13 (topic ids: a leader holding an older incarnation
    of a topic answers UNKNOWN_TOPIC_ID); clients are offered v12 at most until topic ids
    are supported end to end."""
    from oncelog.broker.handlers import fetch
    offered = {k.api_key: k.max_version for k in api_versions._api_keys()}
    assert offered[ApiKey.FETCH] == 12
    assert 13 in fetch.VERSIONS
