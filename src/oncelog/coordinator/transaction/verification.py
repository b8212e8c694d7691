"""Transaction verification (KIP-890 part 1; Kafka's ``AddPartitionsToTxnManager``): before a
partition leader appends a producer's first transactional batch, it asks the transaction's
coordinator whether the partition is in that producer's ongoing transaction.

Why: a transactional write can arrive late - a retry of a batch whose transaction already
ended (its coordinator aborted it on timeout, or the producer ended it), or one that went to
a topic deleted and created again under the same name. Without the question it opens a
transaction here that no coordinator will ever end: the partition's last stable offset stops
there for good, and ``read_committed`` consumers with it (a "hanging transaction"; the
cluster simulation found it as seeds 2625 and 3144).

``TransactionVerifier.verify`` answers in the form the Produce handler sends it, as Kafka's
broker does for clients before Produce v12:

- when this broker coordinates the id, at once (``TransactionCoordinator.verify_partitions``);
- otherwise with AddPartitionsToTxn v5, ``verify_only``, to the leader of the id's partition
  of ``__transaction_state``: one request in flight per coordinator, the questions that come
  meanwhile batched into the next one (one entry per transactional id; a question from an
  older epoch of the same id is answered INVALID_PRODUCER_EPOCH at once, and one from a newer
  epoch fences the older question);
- what a client of Produce v3-v11 knows: PRODUCER_FENCED is INVALID_PRODUCER_EPOCH;
  TRANSACTION_ABORTABLE (not in the transaction) is INVALID_TXN_STATE; an answer that says
  "not now" (CONCURRENT_TRANSACTIONS, NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
  COORDINATOR_LOAD_IN_PROGRESS, a lost connection) is NOT_ENOUGH_REPLICAS, which every
  producer retries without refreshing its metadata;
- a coordinator that does not serve AddPartitionsToTxn v4+ is not asked (the batch goes in
  unverified, as Kafka does); neither is anyone under
  ``transaction.partition.verification.enable=false``.

What it uses is handed to it at construction, as the transaction markers' are: this broker's
node id, the partitions it knows (where ``__transaction_state``'s leaders are), the local
coordinator, a lookup of a broker's address, and a way to open a connection to one.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...protocol.errors import ErrorCode
from ...protocol.messages import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse
from ..record_codec import partition_for
from .markers import BrokerAddress, Connect, MarkerClient

if TYPE_CHECKING:
    from ...partition import PartitionManager
    from .coordinator import TransactionCoordinator

log = logging.getLogger(__name__)

TRANSACTION_STATE_TOPIC = "__transaction_state"
ADD_PARTITIONS_TO_TXN_VERSION = 5
# what a Produce v3-v11 client is answered for what the coordinator said
AS_PRODUCE_ANSWERS = {
    ErrorCode.PRODUCER_FENCED: ErrorCode.INVALID_PRODUCER_EPOCH,
    ErrorCode.TRANSACTION_ABORTABLE: ErrorCode.INVALID_TXN_STATE,
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: ErrorCode.INVALID_TXN_STATE,
    ErrorCode.CONCURRENT_TRANSACTIONS: ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NETWORK_EXCEPTION: ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE: ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_COORDINATOR: ErrorCode.NOT_ENOUGH_REPLICAS,
}

T = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction
Partition = tuple[str, int]


def as_produce_answers(code: ErrorCode) -> ErrorCode:
    return AS_PRODUCE_ANSWERS.get(code, code)


@dataclass(slots=True)
class _Question:
    """What one transactional id asks its coordinator in the next request."""
    producer_id: int
    producer_epoch: int
    partitions: dict[Partition, list[asyncio.Future[ErrorCode]]] = field(default_factory=dict)

    def answer(self, code_of: dict[Partition, ErrorCode] | ErrorCode) -> None:
        for partition, futures in self.partitions.items():
            code = code_of if isinstance(code_of, ErrorCode) else code_of.get(
                partition, ErrorCode.UNKNOWN_SERVER_ERROR)
            for future in futures:
                if not future.done():
                    future.set_result(as_produce_answers(code))


class TransactionVerifier:
    def __init__(self, node_id: int, partitions: PartitionManager,
                 coordinator: TransactionCoordinator, broker_address: BrokerAddress,
                 connect: Connect, enabled: bool = True) -> None:
        self.node_id = node_id
        self.partitions = partitions
        self.coordinator = coordinator
        self.enabled = enabled
        self._broker_address = broker_address
        self._connect = connect
        self._clients: dict[int, MarkerClient] = {}
        self._queued: dict[int, dict[str, _Question]] = {}  # coordinator -> id -> question
        self._senders: dict[int, asyncio.Task[None]] = {}

    def coordinator_of(self, transactional_id: str) -> int:
        """The broker that coordinates ``transactional_id`` as this broker knows it: the
        leader of its partition of ``__transaction_state`` (-1 when there is none yet)."""
        topic = self.partitions.topics.get(TRANSACTION_STATE_TOPIC)
        if topic is None or not topic.partition_count:
            return -1
        return topic.states[partition_for(transactional_id, topic.partition_count)].leader

    def verify_here(self, transactional_id: str, producer_id: int, producer_epoch: int,
                    partition: Partition) -> ErrorCode:
        """The answer when this broker coordinates the id (or verification is off)."""
        if not self.enabled:
            return ErrorCode.NONE
        codes = self.coordinator.verify_partitions(transactional_id, producer_id,
                                                   producer_epoch, [partition])
        return as_produce_answers(codes[partition])

    def is_local(self, transactional_id: str) -> bool:
        """Whether the answer can be had at once (here, or not asked at all)."""
        return not self.enabled or self.coordinator_of(transactional_id) == self.node_id

    def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
               partition: Partition) -> asyncio.Future[ErrorCode]:
        """Ask the coordinator, another broker; the future holds what Produce answers."""
        future: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()
        node = self.coordinator_of(transactional_id)
        if node < 0 or self._broker_address(node) is None:
            future.set_result(as_produce_answers(ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return future
        if node == self.node_id:
            future.set_result(self.verify_here(transactional_id, producer_id, producer_epoch,
                                               partition))
            return future
        queued = self._queued.setdefault(node, {})
        question = queued.get(transactional_id)
        if question is not None and (question.producer_id, question.producer_epoch) != (
                producer_id, producer_epoch):
            if question.producer_epoch > producer_epoch:
                future.set_result(ErrorCode.INVALID_PRODUCER_EPOCH)  # fenced already
                return future
            question.answer(ErrorCode.INVALID_PRODUCER_EPOCH)  # a newer epoch fences it
            question = None
        if question is None:
            question = queued[transactional_id] = _Question(producer_id, producer_epoch)
        question.partitions.setdefault(partition, []).append(future)
        if node not in self._senders:
            self._senders[node] = asyncio.get_running_loop().create_task(self._send(node))
        return future

    async def _send(self, node: int) -> None:
        """Requests to one coordinator, one at a time, while questions are queued for it."""
        try:
            while self._queued.get(node):
                questions = self._queued.pop(node)
                try:
                    answers = await self._ask(node, questions)
                except BaseException:  # cancelled as the broker stops, or a bug
                    for question in questions.values():
                        question.answer(ErrorCode.NETWORK_EXCEPTION)
                    raise
                for transactional_id, question in questions.items():
                    question.answer(answers.get(transactional_id, ErrorCode.UNKNOWN_SERVER_ERROR))
        finally:
            del self._senders[node]

    async def _ask(self, node: int, questions: dict[str, _Question]
                   ) -> dict[str, dict[Partition, ErrorCode] | ErrorCode]:
        address = self._broker_address(node)
        if address is None:
            return {t: ErrorCode.COORDINATOR_NOT_AVAILABLE for t in questions}
        client = self._clients.get(node)
        if client is None or (client.host, client.port) != address:
            if client is not None:
                client.close()
            client = self._clients[node] = self._connect(*address)
        request = AddPartitionsToTxnRequest(transactions=[
            T(transactional_id=transactional_id, producer_id=question.producer_id,
              producer_epoch=question.producer_epoch, verify_only=True,
              topics=[T.AddPartitionsToTxnTopic(name=topic, partitions=indexes)
                      for topic, indexes in _by_topic(question.partitions)])
            for transactional_id, question in questions.items()])
        try:
            response: AddPartitionsToTxnResponse = await client.request(
                request, ADD_PARTITIONS_TO_TXN_VERSION)
        except ConnectionError as error:
            log.info("verifying transactions with broker %d: %s", node, error)
            client.close()
            self._clients.pop(node, None)
            return {t: ErrorCode.NETWORK_EXCEPTION for t in questions}
        top = ErrorCode(response.error_code)
        if top is ErrorCode.UNSUPPORTED_VERSION:  # not asked: the batches go in unverified
            return {t: ErrorCode.NONE for t in questions}
        if top is not ErrorCode.NONE:
            return {t: top for t in questions}
        answers: dict[str, dict[Partition, ErrorCode] | ErrorCode] = {}
        for result in response.results_by_transaction:
            answers[result.transactional_id] = {
                (topic.name, entry.partition_index): ErrorCode(entry.partition_error_code)
                for topic in result.topic_results for entry in topic.results_by_partition}
        return answers

    def close(self) -> None:
        for task in list(self._senders.values()):
            task.cancel()
        for client in self._clients.values():
            client.close()
        self._clients.clear()


def _by_topic(partitions: dict[Partition, Any]) -> list[tuple[str, list[int]]]:
    topics: dict[str, list[int]] = {}
    for topic, index in sorted(partitions):
        topics.setdefault(topic, []).append(index)
    return sorted(topics.items())
