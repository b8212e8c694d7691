"""Network faults: the producers' fault proxy drops acknowledgements for a window."""

from __future__ import annotations

from ..proxy import FaultRules, ProxyGroup, ProxyThread
from ..schedule import ScheduledFault

__all__ = ["DropAcks"]


class DropAcks:
    """For the fault's window, the proxy in front of the broker (on a cluster, the proxy in
    front of each broker) drops the responses to a ``rate`` of Produce requests after the
    broker handled them (``mode`` close: and cuts the connection, so the producer retries at
    once; ``request``, the reordered control's: the request itself is swallowed, never written,
    while later ones are, and the client sends it again after its request timeout). Under
    ``acks=0`` there are no responses to drop, and the fault does nothing, which the event's
    ``dropped`` count shows."""

    name = "drop-acks"

    def __init__(self, proxy: ProxyThread | ProxyGroup, *, mode: str | None = None,
                 note: str | None = None) -> None:
        self.proxy = proxy
        self.mode = mode    # overrides the schedule's (the reordered control: "request")
        self.note = note
        self._dropped_before = 0

    def ready(self) -> bool:
        return True

    def inject(self, scheduled: ScheduledFault) -> dict:
        params = scheduled.params
        self._dropped_before = self.proxy.stats.dropped_responses
        mode = self.mode or params.get("mode", "close")
        self.proxy.set_rules(FaultRules(drop_response_rate=float(params.get("rate", 0.5)),
                                        drop_mode=mode, seed=int(params.get("seed", 0))))
        detail = {"rate": params.get("rate"), "mode": mode}
        if self.note:
            detail["note"] = self.note
        return detail

    def heal(self) -> dict:
        self.proxy.set_rules(FaultRules())
        return {"dropped": self.proxy.stats.dropped_responses - self._dropped_before}
