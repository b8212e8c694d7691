"""Workloads: the processes that write records and deliver them, recording a history.

- ``producer`` — a producer process: tags every record with a unique id, writes
  ``Produced`` before each send and ``Acknowledged``/``Failed`` from the delivery callback.
- ``consumer`` — a consumer-group member (the at-most-once / at-least-once presets) that
  "processes" a record by committing it to the sink.
- ``pipeline`` — the Spark copy job (exactly-once into a ``TransactionalSink``).
- ``transform`` — the exactly-once consume-transform-produce worker (Kafka transactions).
- ``reader`` — reads a topic without a group at a chosen ``isolation.level`` into the sink,
  its positions stored with the rows (the transactional run, the transform's output).
- ``delivery`` — ``ConsumerStage`` / ``ReaderStage`` / ``TransformStage`` /
  ``PipelineStage``: start, kill (where it hurts), restart and stop the delivery process of
  one semantics.
- ``sinks`` — the sinks (a SQLite file per semantics by default, or ``--sink``'s database),
  read back at the end as ``Delivered`` records.

Workloads only record; faults live in ``oncelog.verify.faults`` and judging in ``checker``.
The worker modules run as ``python -m``, so this package imports none of them.
"""
