"""The producer side of the partition tests: a thread that sends unique values at a steady
rate and records, for each, when it was sent and what the broker acknowledged; and the
unavailability each fault aimed at a leader caused, from those records."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from confluent_kafka import Producer

from .nemesis import CLIENT, Schedule


@dataclass
class Ack:
    partition: int
    offset: int
    sent_at: float
    acked_at: float


@dataclass
class ProducerRun:
    """Sends ``b"<prefix>-<n>"`` to ``topic`` (keyed by n, so spread over its partitions) at
    about ``rate`` records a second until ``stop``; ``acked`` maps each acknowledged value to
    where it was written, ``failed`` holds the values whose delivery failed, with the error."""
    bootstrap: str
    topic: str
    config: dict
    prefix: str = "r"
    rate: float = 200.0
    acked: dict[bytes, Ack] = field(default_factory=dict)
    failed: dict[bytes, str] = field(default_factory=dict)
    sent: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    _sent_at: dict[bytes, float] = field(default_factory=dict)
    _thread: threading.Thread | None = None
    _error: BaseException | None = None

    def start(self) -> ProducerRun:
        self._thread = threading.Thread(target=self._run, name=f"producer-{self.topic}",
                                        daemon=True)
        self._thread.start()
        return self

    def finish(self, flush_timeout_s: float = 90.0) -> None:
        """Stop sending, wait for every outstanding answer (or its failure)."""
        self.stop.set()
        assert self._thread is not None
        self._thread.join(flush_timeout_s + 30)
        if self._error is not None:
            raise self._error

    def _on_delivery(self, error, message) -> None:
        value = message.value()
        if error is not None:
            self.failed[value] = error.str()
        else:
            self.acked[value] = Ack(message.partition(), message.offset(),
                                    self._sent_at[value], time.monotonic())

    def _run(self) -> None:
        try:
            producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5,
                                 **CLIENT, **self.config})
            interval = 1.0 / self.rate
            next_at = time.monotonic()
            while not self.stop.is_set():
                value = b"%s-%d" % (self.prefix.encode(), self.sent)
                self._sent_at[value] = time.monotonic()
                try:
                    producer.produce(self.topic, value, key=str(self.sent).encode(),
                                     on_delivery=self._on_delivery)
                except BufferError:
                    producer.poll(0.1)
                    continue
                self.sent += 1
                next_at += interval
                producer.poll(max(next_at - time.monotonic(), 0))
            remaining = producer.flush(90)
            assert remaining == 0, f"{remaining} records neither acknowledged nor failed"
        except BaseException as error:  # reaches the test through finish()
            self._error = error


def unavailability(schedule: Schedule, acks: list[Ack], partition: int) -> list[tuple[str, float]]:
    """For each fault aimed at the partition's leader: its caption and the longest time
    without an acknowledgement on the partition from the fault to the next fault (or the
    end), in seconds."""
    times = sorted(a.acked_at for a in acks if a.partition == partition)
    figures = []
    events = schedule.events
    for index, event in enumerate(events):
        if not event.target_leader:
            continue
        start = schedule.started + event.at_s
        end = (schedule.started + events[index + 2].at_s if index + 2 < len(events)
               else time.monotonic())
        inside = [t for t in times if start <= t <= end]
        points = [start, *inside]
        gap = max((b - a for a, b in zip(points, points[1:], strict=False)), default=end - start)
        if not inside:
            gap = end - start
        figures.append((event.caption, round(gap, 2)))
    return figures
