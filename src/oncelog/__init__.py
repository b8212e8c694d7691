"""oncelog: a Kafka-compatible streaming log with delivery guarantees you can choose and prove.

Packages, from the wire inwards and then outwards to the user (each package's docstring says
what its modules hold):

- ``protocol`` - wire codecs (kafka-python's schemas, pinned and wrapped), the record-batch
  header, error codes; no sockets, no asyncio.
- ``storage`` - the on-disk log of one partition: segments, indexes, recovery, retention,
  compaction, producer-state snapshots, the leader-epoch checkpoint.
- ``config`` - broker and topic configs under Kafka's names, read by every layer above.
- ``security`` - TLS contexts from Kafka's ``ssl.*`` settings, and the principal a client
  certificate maps to (``ssl.principal.mapping.rules``).
- ``net`` - a Kafka-protocol connection to another broker, for the requests brokers and
  oncelog's tools send themselves (a follower's fetches, transaction markers, metadata).
- ``partition`` - one replica's state (LEO, HW, LSO, leader epoch, ISR, producer state), its
  produce/fetch rules, and the replicas this broker hosts.
- ``coordinator`` - the group and transaction coordinators and their internal topics
  (``__consumer_offsets``, ``__transaction_state``).
- ``controller`` - the metadata store (a local file or ZooKeeper), elections, producer ids.
- ``replication`` - followers fetching from their leaders.
- ``membership`` - a broker's membership of a cluster: the metadata sync (only forward), ISR
  changes, the leadership lease, the controller role.
- ``broker`` - the broker process: listener, dispatch, one handler module per Kafka API,
  resource limits.
- ``client`` - guarantee presets over confluent-kafka: producers, consumers, a reader, the
  exactly-once consume-transform-produce loop, transactions as an administrator sees them.
- ``cluster`` - ZooKeeper and N brokers on one machine (``oncelog cluster``).
- ``spark`` - the PySpark source and the exactly-once sinks, and the example pipeline.
- ``verify`` - ``oncelog verify``: workloads, faults, the checker and its report.
- ``testing`` - the test kit for users' tests and its pytest plugin.
- ``simulation`` - the cluster's own code under one seed: virtual time, an in-memory
  ZooKeeper, a simulated network (``python -m oncelog.simulation``).
- ``cli`` - the ``oncelog`` command.

Modules: ``demo`` (``oncelog demo``), ``served_process`` (what the server processes oncelog
starts have in common), ``__main__`` (``python -m oncelog``).
"""

__version__ = "0.1.0"
