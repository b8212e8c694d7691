"""The requests handlers receive are typed, and the type checker holds handlers to them
(``make lint``, issue 29).

Each handler's ``request`` is annotated with the codec class of its API, whose fields
kafka-python's generated stubs declare (``[tool.mypy]`` in pyproject.toml reads them). Those
stubs name ``DataContainer`` as the base class, whose run-time ``__getattr__`` would make any
attribute ``Any`` to mypy; ``stubs/kafka/`` declares the class without it. These tests run
mypy with the project's configuration on a small file, so they fail if either part goes (a
kafka-python upgrade without stubs, the shadow stub removed): a misspelt field would then
pass ``make lint`` unseen.
"""

from __future__ import annotations

import typing
from pathlib import Path

import pytest

from oncelog.broker.dispatch import HANDLERS
from oncelog.protocol.messages import REQUESTS

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("api_key", sorted(HANDLERS), ids=lambda key: HANDLERS[key].__name__)
def test_every_handler_takes_its_apis_request_class(api_key):
    module = HANDLERS[api_key]
    for function in (module.handle, module.error_response):
        hints = typing.get_type_hints(function)
        assert hints["request"] is REQUESTS[api_key], function.__qualname__


def _mypy(tmp_path: Path, source: str) -> tuple[str, int]:
    mypy_api = pytest.importorskip("mypy.api")
    probe = tmp_path / "probe.py"
    probe.write_text(source)
    stdout, stderr, status = mypy_api.run([
        "--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(tmp_path / "cache"),
        "--no-error-summary", str(probe)])
    return stdout + stderr, status


@pytest.mark.slow  # mypy reads kafka-python's stubs afresh: a few seconds
def test_a_misspelt_request_field_is_a_type_error_and_a_right_one_is_typed(tmp_path):
    output, status = _mypy(tmp_path, (
        "from oncelog.protocol.messages import InitProducerIdRequest\n"
        "def f(request: InitProducerIdRequest) -> None:\n"
        "    reveal_type(request.transactional_id)\n"
        "    request.transactional_idd\n"))

    assert status == 1, output
    assert 'Revealed type is "str | None"' in output  # the stub's field, not Any
    assert '"InitProducerIdRequest" has no attribute "transactional_idd"' in output
