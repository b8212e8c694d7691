"""Replay conversations against Apache Kafka and oncelog; print every divergence.

    .venv/bin/python -m tests.differential.compare                 # all, brokers started here
    .venv/bin/python -m tests.differential.compare errors_produce  # some, by file name
    .venv/bin/python -m tests.differential.compare --all-differences   # the listed ones too
    .venv/bin/python -m tests.differential.compare --kafka H:P --oncelog H:P  # running brokers

Run from the repository's root (the test module does the same in ``make test``). Exit status
1 when a divergence is not in docs/compatibility.md's table.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator

from .allowed import Allowed, load_allowed
from .replay import Conversation, Difference, all_conversations, compare, replay


def differences(kafka: str, oncelog: str, conversation: Conversation) -> list[Difference]:
    names: dict[str, str] = {}
    expected = replay(kafka, conversation, names)
    got = replay(oncelog, conversation, names)
    return compare(conversation.name, expected, got)


@contextlib.contextmanager
def brokers(kafka: str | None, oncelog: str | None) -> Iterator[tuple[str, str]]:
    from oncelog.testing import apache_kafka, broker
    with contextlib.ExitStack() as stack:
        if kafka is None:
            kafka = stack.enter_context(apache_kafka(wire_faults=False)).direct_bootstrap
        if oncelog is None:
            oncelog = stack.enter_context(broker(wire_faults=False)).direct_bootstrap
        yield kafka, oncelog


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="conversation file names (default: all)")
    parser.add_argument("--kafka", help="a running Apache Kafka's bootstrap address")
    parser.add_argument("--oncelog", help="a running oncelog broker's bootstrap address")
    parser.add_argument("--all-differences", action="store_true",
                        help="print the divergences docs/compatibility.md lists as well")
    args = parser.parse_args(argv)
    conversations = [c for c in all_conversations() if not args.names or c.name in args.names]
    allowed: Allowed = load_allowed()
    unlisted = 0
    with brokers(args.kafka, args.oncelog) as (kafka, oncelog):
        for conversation in conversations:
            for difference in differences(kafka, oncelog, conversation):
                reason = allowed.reason(difference)
                if reason is None:
                    unlisted += 1
                    print(f"UNLISTED {difference.describe()}")
                elif args.all_differences:
                    print(f"listed   {difference.describe()}  [{reason}]")
    print(f"{len(conversations)} conversations, "
          f"{sum(len(c.steps) for c in conversations)} requests, {unlisted} unlisted "
          "divergences")
    return 1 if unlisted else 0


if __name__ == "__main__":
    sys.exit(main())
