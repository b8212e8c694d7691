"""The broker process: connections, requests, listeners and what one client may cost.

- ``broker`` - ``Broker``: owns the state holders (partitions, both coordinators, the
  metadata store and, in cluster mode, its membership) and runs the listener and the
  background tasks (flusher, coordinator timers, log maintenance).
- ``services`` - ``BrokerServices``: the state owners a handler may use, named (node id,
  config, partitions, flusher, producer ids, the internal topics, both coordinators, the
  live brokers, ``ClusterIdentity``); ``build_services`` wires them for a ``Broker`` and for
  a simulated broker alike. Handlers never see the ``Broker`` itself.
- ``server`` - the listener: frames in, requests run as they arrive, responses out in
  request order per connection; ``writable`` waits on a full socket for ``os.sendfile``.
- ``dispatch`` - routes a decoded request to its module in ``handlers`` (one per Kafka API)
  and turns every failure into a Kafka error code; ``context`` is what a handler receives
  (``RequestContext``: the request's header facts and the broker's ``services``).
- ``listeners`` - ``parse_listeners``: ``listeners``, ``advertised.listeners``,
  ``listener.security.protocol.map`` and ``inter.broker.listener.name`` as Kafka reads them
  (each listener's TLS and SASL are ``oncelog.security``'s). The configs themselves
  (``BrokerConfig``, topic configs, describing them) are in ``oncelog.config``, below the
  packages that read them.
- ``limits`` - memory, connection, idle-time and log-line bounds per client
  (``queued.max.request.bytes``, ``max.connections``, ...); ``allocator`` - the C
  allocator's settings for a broker process.
- ``users`` - ``ScramUsers``: SCRAM users as DescribeUserScramCredentials and
  AlterUserScramCredentials see them, in the metadata store, with Kafka's rules.
- ``acls`` - ``BrokerAcls``: the ACLs in force (``oncelog.security.acl``'s authorizer, made
  from ``authorizer.class.name``) and CreateAcls, DescribeAcls and DeleteAcls over the store.
- ``process`` - ``BrokerProcess``: a broker as a child process, for ``oncelog demo``, tests
  and benchmarks.

Importing this package imports nothing: ``oncelog.broker.process`` is used by light callers
(the test kit) that must not pull in the server.
"""
