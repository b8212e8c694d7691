"""oncelog: a Kafka-compatible streaming log with delivery guarantees you can choose and prove.

Packages, from the wire inwards and then outwards to the user (each package's docstring says
what its modules hold):

- ``protocol`` - wire codecs (kafka-python's schemas, pinned and wrapped), the record-batch
  header, error codes; no sockets, no asyncio.
- ``storage`` - the on-disk log of one partition: segments, indexes, recovery, retention,
  compaction, producer-state snapshots, the leader-epoch checkpoint.
- ``partition`` - one replica's state (LEO, HW, LSO, leader epoch, ISR, producer state), its
  produce/fetch rules, and the replicas this broker hosts.
- ``coordinator`` - the group and transaction coordinators and their internal topics
  (``__consumer_offsets``, ``__transaction_state``).
- ``controller`` - the metadata store (a local file or ZooKeeper), elections, producer ids,
  and a broker's membership of a cluster.
- ``replication`` - followers fetching from their leaders.
- ``broker`` - the broker process: listener, dispatch, one handler module per Kafka API,
  configuration and resource limits.
- ``client`` - guarantee presets over confluent-kafka: producers, consumers, a reader, the
  exactly-once consume-transform-produce loop, transactions as an administrator sees them.
- ``cluster`` - ZooKeeper and N brokers on one machine (``oncelog cluster``).
- ``spark`` - the PySpark source and the exactly-once sinks, and the example pipeline.
- ``verify`` - ``oncelog verify``: workloads, faults, the checker and its report.
- ``testing`` - the test kit for users' tests and its pytest plugin.
- ``simulation`` - the world in memory for seeded in-process simulations of a cluster: a
  ZooKeeper (sessions, ephemerals, watches, zxids) and a kazoo client on it.
- ``cli`` - the ``oncelog`` command.

Modules: ``demo`` (``oncelog demo``), ``served_process`` (what the server processes oncelog
starts have in common), ``__main__`` (``python -m oncelog``).
"""

__version__ = "0.1.0"
