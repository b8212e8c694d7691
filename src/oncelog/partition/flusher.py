"""Group commit: fsync logs before acks=all is answered, when ``log.flush.policy=ack``.

Appends write to the page cache, which survives a process crash (kill -9) but not a power
loss. With the ``ack`` policy, an acks=all produce waits here until its log is fsynced.
Waiters that arrive while an fsync runs are served by the next one, so one fsync covers every
request that came in meanwhile, across connections and partitions (group commit).
The fsyncs run in a worker thread so the event loop keeps serving.

``request`` asks for a flush without waiting, with a callback run on the event loop once it
succeeded: under the ``ack`` policy every append asks, and the partition's high watermark
follows what was fsynced (``Partition.flush_requester``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from ..protocol.errors import ErrorCode, KafkaError
from ..storage import Log

log = logging.getLogger(__name__)

# a log to flush, the coroutines waiting for it, the callbacks to call once it is flushed
_Entry = tuple[Log, list["asyncio.Future[None]"], list[Callable[[], None]]]


class Flusher:
    def __init__(self) -> None:
        self._pending: dict[int, _Entry] = {}
        self._wakeup = asyncio.Event()

    async def wait_for_flush(self, partition_log: Log) -> None:
        waiter = asyncio.get_running_loop().create_future()
        self._entry(partition_log)[1].append(waiter)
        self._wakeup.set()
        await waiter

    def request(self, partition_log: Log, on_flushed: Callable[[], None]) -> None:
        """Flush ``partition_log`` soon; call ``on_flushed`` on the event loop when it did."""
        callbacks = self._entry(partition_log)[2]
        if on_flushed not in callbacks:
            callbacks.append(on_flushed)
        self._wakeup.set()

    def _entry(self, partition_log: Log) -> _Entry:
        return self._pending.setdefault(id(partition_log), (partition_log, [], []))

    async def run(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            pending, self._pending = self._pending, {}
            logs = [entry[0] for entry in pending.values()]
            try:
                await asyncio.to_thread(_flush_all, logs)
                error = None
            except OSError as failure:
                log.error("fsync failed: %s", failure)
                error = KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"fsync failed: {failure}")
            for _, waiters, callbacks in pending.values():
                if error is None:
                    for callback in callbacks:
                        try:
                            callback()
                        except Exception:  # one partition's trouble must not stop the rest
                            log.exception("after a flush")
                for waiter in waiters:
                    if waiter.done():
                        continue
                    if error is None:
                        waiter.set_result(None)
                    else:
                        waiter.set_exception(error)


def _flush_all(logs: list[Log]) -> None:
    for partition_log in logs:
        partition_log.flush()
