# Type stubs for mypy only (make lint; [tool.mypy] in pyproject.toml), kafka-python 3.0.12.
#
# This folder exists for one file, protocol/data_container.pyi. A stub there must come with
# the packages above it, and mypy then takes these two __init__.pyi for kafka-python's own:
# everything else (kafka.errors, kafka.protocol.producer, ...) is still read from the
# installed package. The top level is left untyped, as it is without these stubs.
from typing import Any

def __getattr__(name: str) -> Any: ...
