"""``python -m oncelog.testing.fetch_apache_kafka``: put the pinned Apache Kafka's jars in the
per-user cache (``make setup`` runs it, so tests never download); quiet when they are there.

A module of its own, imported by nothing: ``oncelog.testing`` imports ``apache_kafka`` when it
loads, and ``python -m`` on a module already imported runs it twice (with a RuntimeWarning).
"""

from __future__ import annotations

import sys

from .apache_kafka import KAFKA_VERSION, KafkaUnavailable, cache_root, java_command, kafka_jars


def main(argv: list[str]) -> int:
    if argv not in ([], ["--quiet"]):
        print("usage: python -m oncelog.testing.fetch_apache_kafka [--quiet]", file=sys.stderr)
        return 2
    cached = (cache_root() / KAFKA_VERSION / "jars").is_dir()
    try:
        java_command()
        jars = kafka_jars()
    except KafkaUnavailable as error:
        print(error, file=sys.stderr)
        return 1
    if not (cached and argv == ["--quiet"]):
        print(f"Apache Kafka {KAFKA_VERSION}: {len(jars)} jars in {jars[0].parent}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
