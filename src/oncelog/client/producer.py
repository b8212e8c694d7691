"""Producers with a named guarantee: choose ``at_most_once``, ``at_least_once`` or
``exactly_once`` instead of assembling a dozen librdkafka settings.

| preset | settings | a lost acknowledgement means | a broker crash means |
|---|---|---|---|
| at_most_once | acks=0, no retries, no idempotence | nothing: acks=0 never waits for one | records in flight are lost |
| at_least_once | acks=all, retries, no idempotence | the batch is retried and may be written twice | retried: nothing acknowledged is lost, duplicates possible |
| exactly_once | enable.idempotence (acks=all, retries, max 5 in flight) | retried; the broker recognises the sequence numbers and keeps one copy | retried; the broker rebuilt its sequence state, so still one copy, in order |

``exactly_once`` here is exactly-once *into the log* per partition for one producer session
(producer id + epoch); end-to-end exactly-once also needs the consumer side (offsets stored
with the output, or transactions) - see docs/guarantees.md. Extra settings passed in
``config`` are applied on top, except those that would break the guarantee, which raise
``ValueError``.
"""  # noqa: E501 - a table's rows stay one line each

from __future__ import annotations

from confluent_kafka import Producer

PRESETS: dict[str, dict[str, object]] = {
    "at_most_once": {"acks": "0", "retries": 0, "enable.idempotence": False},
    "at_least_once": {"acks": "all", "retries": 2147483647, "enable.idempotence": False,
                      "max.in.flight.requests.per.connection": 5},
    "exactly_once": {"acks": "all", "enable.idempotence": True,
                     "max.in.flight.requests.per.connection": 5},
}

# Settings each guarantee depends on; overriding them would silently change the guarantee.
_PINNED = {
    "at_most_once": {"acks", "retries", "enable.idempotence"},
    "at_least_once": {"acks", "enable.idempotence"},
    "exactly_once": {"acks", "enable.idempotence"},
}


def producer_config(semantics: str, bootstrap: str, **config) -> dict[str, object]:
    """The librdkafka configuration for a guarantee (``at-most-once`` spellings work too)."""
    name = semantics.replace("-", "_")
    if name not in PRESETS:
        raise ValueError(f"unknown semantics {semantics!r}; choose at_most_once, "
                         "at_least_once or exactly_once")
    clash = sorted(set(config) & _PINNED[name])
    if clash:
        raise ValueError(f"{', '.join(clash)} would change the {name} guarantee; "
                         "choose another preset instead")
    return {"bootstrap.servers": bootstrap, **PRESETS[name], **config}


def at_most_once(bootstrap: str, **config) -> Producer:
    return Producer(producer_config("at_most_once", bootstrap, **config))


def at_least_once(bootstrap: str, **config) -> Producer:
    return Producer(producer_config("at_least_once", bootstrap, **config))


def exactly_once(bootstrap: str, **config) -> Producer:
    return Producer(producer_config("exactly_once", bootstrap, **config))
