"""Differential conformance: every conversation replayed against Apache Kafka and oncelog.

One Apache Kafka (the plugin's session fixture: one per xdist worker, shared with the other
tests) and one oncelog broker (``oncelog_broker_session``), both reached directly, not through
their fault proxies. Each conversation (``conversations/*.json``; ``replay.py`` says what one
is and what is masked) is replayed against both with the same topic and group names, and
every difference in the responses must be listed, with its reason, in docs/compatibility.md's
table (``allowed.py``). A divergence that is not fails the test with the API, version, field
and both values; so does a row that no conversation shows any more, so the table stays true.
"""

from __future__ import annotations

import pytest

from .allowed import load_allowed
from .replay import Difference, all_conversations, authorizer_conversations, compare, replay

@pytest.mark.slow
def test_oncelog_answers_as_apache_kafka_does(oncelog_apache_kafka_session,
                                              oncelog_broker_session):
    """Every conversation in one test, so that the table's rows no conversation shows any
    more are found too, whichever xdist worker runs it."""
    allowed = load_allowed()
    unlisted: list[Difference] = []
    for conversation in all_conversations():
        names: dict[str, str] = {}
        kafka = replay(oncelog_apache_kafka_session.direct_bootstrap, conversation, names)
        oncelog = replay(oncelog_broker_session.direct_bootstrap, conversation, names)
        assert [e.step for e in kafka] == [e.step for e in oncelog] == conversation.steps
        unlisted += [d for d in compare(conversation.name, kafka, oncelog)
                     if allowed.reason(d) is None]
    stale = [entry for entry in allowed.entries if not entry.used]
    assert not unlisted, (
        f"{len(unlisted)} divergences from Apache Kafka not listed in docs/compatibility.md "
        "(fix oncelog, or add a row with the reason):\n"
        + "\n".join(d.describe() for d in unlisted[:60]))
    assert not stale, "rows of docs/compatibility.md's divergence table that no conversation " \
        "shows any more (remove them):\n" + "\n".join(
            f"line {e.line}: {e.conversations} | {e.api} | {e.field}" for e in stale)


AUTHORIZED = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "allow.everyone.if.no.acl.found": "true"}


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_with_an_authorizer_oncelog_answers_as_apache_kafka_does(tmp_path):
    """conversations/authorizer/*.json against an Apache Kafka and an oncelog broker of their
    own, both with ACLs on (the same settings); divergences as above, and no stale check:
    the session's test owns the table."""
    from oncelog.testing.apache_kafka import ApacheKafka
    from oncelog.testing.broker import Broker
    allowed = load_allowed()
    unlisted: list[Difference] = []
    with ApacheKafka(tmp_path / "kafka", settings=AUTHORIZED, wire_faults=False) as kafka, \
            Broker(tmp_path / "oncelog", settings=AUTHORIZED) as broker:
        for conversation in authorizer_conversations():
            names: dict[str, str] = {}
            on_kafka = replay(kafka.direct_bootstrap, conversation, names)
            on_oncelog = replay(broker.direct_bootstrap, conversation, names)
            unlisted += [d for d in compare(conversation.name, on_kafka, on_oncelog)
                         if allowed.reason(d) is None]
    assert not unlisted, (
        f"{len(unlisted)} divergences from Apache Kafka not listed in docs/compatibility.md "
        "(fix oncelog, or add a row with the reason):\n"
        + "\n".join(d.describe() for d in unlisted[:60]))


def test_the_replayer_sees_a_difference():
    """The comparison itself: a changed error code is a difference naming API, version and
    field; a masked field and an id learned in the same order are not."""
    from .replay import ApiKey, Exchange, Step
    step = Step(ApiKey.HEARTBEAT, 4, {})
    kafka = [Exchange(step, {"error_code": 0, "throttle_time_ms": "<masked>"}, 1)]
    oncelog = [Exchange(step, {"error_code": 25, "throttle_time_ms": "<masked>"}, 1)]
    [difference] = compare("c", kafka, oncelog)
    assert (difference.api, difference.version, difference.path, difference.kafka,
            difference.oncelog) == ("Heartbeat", 4, "error_code", 0, 25)
    assert compare("c", kafka, kafka) == []


def test_every_version_oncelog_advertises_is_in_a_conversation():
    """A version a handler starts to serve (and ApiVersions to advertise) needs a step in
    some conversation ("versions": "served" adds it by itself), so it is compared too."""
    from oncelog.broker.dispatch import HANDLERS
    seen = {(step.api, step.version) for c in all_conversations() for step in c.steps}
    missing = {key.name: sorted(v for v in getattr(module, "ADVERTISED_VERSIONS",
                                                   module.VERSIONS) if (key, v) not in seen)
               for key, module in HANDLERS.items()}
    assert not {name: versions for name, versions in missing.items() if versions}
