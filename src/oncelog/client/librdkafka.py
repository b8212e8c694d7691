"""librdkafka's own log lines, kept out of a user's terminal: ``quiet_logger()`` is the
``logger`` a confluent-kafka client of oncelog's tools is built with (the CLI's commands, the
example pipeline's topic lookups). Failures reach the user as one sentence from the caller
instead."""

from __future__ import annotations

import logging


def quiet_logger() -> logging.Logger:
    quiet = logging.getLogger("oncelog.client.librdkafka")
    quiet.setLevel(logging.CRITICAL)
    return quiet
