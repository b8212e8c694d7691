"""``GuaranteedConsumer.run()``'s result counts what a caller needs to know: records
processed, offset commits made, and commits that failed (``ConsumerStats.failed_commits``).

A reading of the tree for dead code (issue 29) found ``failed_commits`` written and never
read inside oncelog. It stays: it is part of what ``run()`` returns to the caller, and a
failed commit under at-least-once means those records will be processed again. This test
makes a commit fail for real - the topic is deleted while its first record is processed, so
the broker answers the commit with UNKNOWN_TOPIC_OR_PARTITION - and checks the count.
"""

from __future__ import annotations

import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from oncelog.client import consumer


def test_a_commit_the_broker_refuses_is_counted_as_failed(broker):
    bootstrap = broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    admin.create_topics([NewTopic("doomed", 1, 1)])["doomed"].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "log_level": 0})
    producer.produce("doomed", b"only record")
    assert producer.flush(30) == 0

    def process(record) -> None:  # deletes the topic before its offset can be committed
        admin.delete_topics(["doomed"])["doomed"].result(30)
        deadline = time.monotonic() + 30
        while "doomed" in admin.list_topics(timeout=10).topics:
            assert time.monotonic() < deadline, "the topic was never deleted"
            time.sleep(0.1)
        reader.stop()

    reader = consumer.at_least_once(bootstrap, "stats", ["doomed"], process,
                                    config={"session.timeout.ms": 6000})
    stats = reader.run(idle_timeout_s=30)
    assert (stats.processed, stats.commits, stats.failed_commits) == (1, 0, 1), stats
