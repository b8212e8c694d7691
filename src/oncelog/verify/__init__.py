"""The verifier: workloads, faults (the nemesis) and the checker. ``proxy`` is its network
fault: a Kafka-aware TCP proxy that drops acknowledgements, delays or cuts connections."""

from .proxy import FaultProxy, FaultRules, ProxyStats, ProxyThread

__all__ = ["FaultProxy", "FaultRules", "ProxyStats", "ProxyThread"]
