"""The cluster under one seed: oncelog's own code in a deterministic, simulated world.

- ``loop`` — ``SimulatedLoop``, an asyncio event loop on virtual time: timers cost no
  wall-clock time and every run of the same code makes the same calls in the same order.
"""
