"""ApiVersions (API key 18), versions 0-3.

Behaviour: lists every API in ``dispatch.HANDLERS`` with the versions its module serves, so we
advertise exactly what is implemented. A request for a version we do not know is answered
at v0 with UNSUPPORTED_VERSION and the same list (KIP-511), which lets the client retry with
a version we speak. No features are advertised (the tagged feature fields stay at their
defaults and are therefore left off the wire).
"""

from __future__ import annotations

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...protocol.messages import ApiVersionsResponse
from ..context import RequestContext

API_KEY = ApiKey.API_VERSIONS
VERSIONS = range(0, 4)


def _api_keys() -> list:
    from ..dispatch import HANDLERS  # the table imports this module
    return [ApiVersionsResponse.ApiVersion(api_key=int(key), min_version=module.VERSIONS.start,
                                           max_version=module.VERSIONS.stop - 1)
            for key, module in sorted(HANDLERS.items())]


async def handle(ctx: RequestContext, request) -> ApiVersionsResponse:
    return ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=_api_keys(),
                               throttle_time_ms=0)


def unsupported_version_response() -> ApiVersionsResponse:
    return ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=_api_keys(),
                               throttle_time_ms=0)


def error_response(request, code: ErrorCode, message: str | None) -> ApiVersionsResponse:
    return ApiVersionsResponse(error_code=code, api_keys=_api_keys(), throttle_time_ms=0)
