"""ApiVersions (API key 18), versions 0-3.

Behaviour: lists every API in ``dispatch.HANDLERS`` with the versions its module serves, so we
advertise exactly what is implemented. A request for a version we do not know is answered
at v0 with UNSUPPORTED_VERSION and the same list (KIP-511), which lets the client retry with
a version we speak. No features are advertised (the tagged feature fields stay at their
defaults and are therefore left off the wire).

The answer is the same for every client while the broker runs, so it is built once and
encoded once per version (through the codec it took ~200 us of CPU, paid by every new
connection).
"""

from __future__ import annotations

from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...protocol.messages import ApiVersionsRequest, ApiVersionsResponse
from ..context import RequestContext

API_KEY = ApiKey.API_VERSIONS
VERSIONS = range(0, 4)


class _Answer:
    """One ApiVersions response, encoded once per version; reads like the response."""

    __slots__ = ("response", "_encoded")

    def __init__(self, response: ApiVersionsResponse) -> None:
        self.response = response
        self._encoded: dict[int, bytes] = {}

    def encode(self, version: int) -> bytes:
        encoded = self._encoded.get(version)
        if encoded is None:
            encoded = self._encoded[version] = bytes(self.response.encode(version=version))
        return encoded

    def __getattr__(self, name: str) -> Any:
        return getattr(self.response, name)


_ANSWERS: dict[int, _Answer] = {}


def _answer(code: ErrorCode) -> _Answer:
    answer = _ANSWERS.get(code)
    if answer is None:
        answer = _ANSWERS[code] = _Answer(ApiVersionsResponse(
            error_code=code, api_keys=_api_keys(), throttle_time_ms=0))
    return answer


def _api_keys() -> list[ApiVersionsResponse.ApiVersion]:
    from ..dispatch import HANDLERS  # the table imports this module
    offered = {key: getattr(module, "ADVERTISED_VERSIONS", module.VERSIONS)
               for key, module in HANDLERS.items()}
    return [ApiVersionsResponse.ApiVersion(api_key=int(key), min_version=versions.start,
                                           max_version=versions.stop - 1)
            for key, versions in sorted(offered.items())]


async def handle(ctx: RequestContext, request: ApiVersionsRequest) -> _Answer:
    return _answer(ErrorCode.NONE)


def unsupported_version_response() -> _Answer:
    return _answer(ErrorCode.UNSUPPORTED_VERSION)


def error_response(request: ApiVersionsRequest, code: ErrorCode, message: str | None) -> _Answer:
    return _answer(code)
