"""``oncelog transactions list|describe|abort``: Kafka's ``kafka-transactions.sh`` for any
Kafka-protocol broker (``client.transactions``).

``list`` asks every broker for the transactional ids it coordinates; ``describe`` shows one
id's state, producer id and epoch, timeout, start time and partitions; ``abort`` ends the
transaction open on one partition, which holds the partition's last stable offset (and
every read_committed consumer) back. If its coordinator has it Ongoing, the coordinator
aborts it on all its partitions and fences the producer; a *hanging* one - its coordinator
lost it, so nothing else would ever end it - gets an ABORT marker on that partition
(``client.transactions.abort_transaction`` says why both). Name the producer with
``--producer-id``/``--producer-epoch``, or give ``--start-offset`` and the open transaction
starting there is found with DescribeProducers.
"""

from __future__ import annotations

import time

import click

from . import main
from .common import Failure, bootstrap_option, client_settings


@main.group()
def transactions() -> None:
    """List, describe and abort transactions."""


def _admin(bootstrap: str):
    """A TransactionAdmin whose connections speak what ``--command-config`` says."""
    from ..client.bootstrap import connector_for
    from ..client.transactions import TransactionAdmin
    return TransactionAdmin(bootstrap, connector_for(client_settings()))


def _run(action, what: str):
    from ..client.bootstrap import describe_connection_error
    from ..client.transactions import TransactionAdminError
    try:
        return action()
    except TransactionAdminError as error:
        raise Failure(str(error)) from None
    except ConnectionError as error:
        raise Failure(f"{what}: {describe_connection_error(error)}") from None


@transactions.command("list")
@bootstrap_option
@click.option("--state", "states", multiple=True,
              type=click.Choice(["Empty", "Ongoing", "PrepareCommit", "PrepareAbort",
                                 "CompleteCommit", "CompleteAbort", "PrepareEpochFence", "Dead"],
                                case_sensitive=False),
              help="Only transactions in this state (Kafka's names); repeatable.")
@click.option("--min-duration-ms", type=int, default=-1,
              help="Only transactions open at least this long.")
def transactions_list(bootstrap, states, min_duration_ms) -> None:
    """List transactional ids: id, producer id, state, coordinator."""
    admin = _admin(bootstrap)
    listed = _run(lambda: admin.list_transactions(list(states), min_duration_ms),
                  f"cannot list transactions at {bootstrap}")
    click.echo("TRANSACTIONAL ID\tPRODUCER ID\tSTATE\tCOORDINATOR")
    for entry in listed:
        click.echo(f"{entry.transactional_id}\t{entry.producer_id}\t{entry.state}\t"
                   f"{entry.coordinator}")


@transactions.command("describe")
@bootstrap_option
@click.argument("transactional_id")
def transactions_describe(bootstrap, transactional_id) -> None:
    """Show TRANSACTIONAL_ID's state, producer, timeout and partitions."""
    admin = _admin(bootstrap)
    state, coordinator = _run(lambda: admin.describe_transaction(transactional_id),
                              f"cannot describe {transactional_id!r}")
    started = state.transaction_start_time_ms
    age = f" ({(time.time() * 1000 - started) / 1000:.1f} s ago)" if started >= 0 else ""
    click.echo(f"transactional id: {state.transactional_id}")
    click.echo(f"coordinator:      broker {coordinator}")
    click.echo(f"state:            {state.transaction_state}")
    click.echo(f"producer:         id {state.producer_id}, epoch {state.producer_epoch}")
    click.echo(f"timeout:          {state.transaction_timeout_ms} ms")
    click.echo(f"started:          {started if started >= 0 else '-'}{age}")
    partitions = [f"{t.topic}-{p}" for t in state.topics for p in t.partitions]
    click.echo(f"partitions:       {', '.join(partitions) if partitions else '-'}")


@transactions.command("abort")
@bootstrap_option
@click.option("--topic", required=True)
@click.option("--partition", type=int, required=True)
@click.option("--start-offset", type=int, default=None,
              help="The offset where the hanging transaction began (found with "
                   "DescribeProducers).")
@click.option("--producer-id", type=int, default=None)
@click.option("--producer-epoch", type=int, default=None)
def transactions_abort(bootstrap, topic, partition, start_offset, producer_id,
                       producer_epoch) -> None:
    """Abort a hanging transaction on one partition."""
    admin = _admin(bootstrap)
    coordinator_epoch = -1
    if start_offset is not None:
        found = [t for t in _run(lambda: admin.open_transactions(topic, partition),
                                 f"cannot describe {topic}-{partition}")
                 if t.start_offset == start_offset]
        if not found:
            raise Failure(f"no transaction open on {topic}-{partition} starts at offset "
                          f"{start_offset}")
        producer_id, producer_epoch = found[0].producer_id, found[0].producer_epoch
        coordinator_epoch = found[0].coordinator_epoch
    if producer_id is None or producer_epoch is None:
        raise Failure("give --start-offset, or --producer-id and --producer-epoch")
    done = _run(lambda: admin.abort_transaction(topic, partition, producer_id,
                                                producer_epoch, coordinator_epoch),
                f"cannot abort on {topic}-{partition}")
    if done.transactional_id is None:
        click.echo(f"aborted producer {producer_id} (epoch {producer_epoch})'s hanging "
                   f"transaction on {topic}-{partition}")
    else:
        click.echo(f"aborted the transaction of {done.transactional_id!r} (producer "
                   f"{producer_id}, epoch {producer_epoch}) on {', '.join(done.partitions)} "
                   f"through its coordinator: now {done.state}, the producer fenced by epoch "
                   f"{done.producer_epoch}")
