"""The names of Apache Kafka's own configs (3.9), so that a setting oncelog does not use can
be told apart from a misspelt one.

A stock ``server.properties`` names configs oncelog has no use for (``num.network.threads``,
``socket.send.buffer.bytes``...): those are accepted and listed as ignored, as Kafka itself
carries on past an unused name. A name that is neither oncelog's nor Kafka's
(``log.flush.polcy``) is a mistake whose cost is silent: the broker would run with the default
of the setting meant. ``config.BrokerConfig`` refuses it, naming the closest known name.

The topic-level names and the security names (``ssl.*``, ``sasl.*``) are the string constants
of kafka-clients 3.9.1 (``TopicConfig``, ``SslConfigs``, ``SaslConfigs``,
``BrokerSecurityConfigs``); the broker-level names are those of Kafka's broker configuration
reference (ZooKeeper and KRaft modes). Names under a prefix of ``OPEN_PREFIXES`` are
per-listener or plugin settings whose suffixes Kafka does not fix.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

_SECURITY = """
ssl.protocol ssl.provider ssl.cipher.suites ssl.enabled.protocols ssl.keystore.type
ssl.keystore.key ssl.keystore.certificate.chain ssl.truststore.certificates
ssl.keystore.location ssl.keystore.password ssl.key.password ssl.truststore.type
ssl.truststore.location ssl.truststore.password ssl.keymanager.algorithm
ssl.trustmanager.algorithm ssl.endpoint.identification.algorithm
ssl.secure.random.implementation ssl.engine.factory.class ssl.client.auth
ssl.principal.mapping.rules ssl.allow.dn.changes ssl.allow.san.changes
sasl.client.callback.handler.class sasl.jaas.config sasl.kerberos.kinit.cmd
sasl.kerberos.min.time.before.relogin sasl.kerberos.service.name
sasl.kerberos.ticket.renew.jitter sasl.kerberos.ticket.renew.window.factor
sasl.kerberos.principal.to.local.rules sasl.login.callback.handler.class sasl.login.class
sasl.login.connect.timeout.ms sasl.login.read.timeout.ms sasl.login.refresh.buffer.seconds
sasl.login.refresh.min.period.seconds sasl.login.refresh.window.factor
sasl.login.refresh.window.jitter sasl.login.retry.backoff.max.ms sasl.login.retry.backoff.ms
sasl.mechanism sasl.oauthbearer.clock.skew.seconds sasl.oauthbearer.expected.audience
sasl.oauthbearer.expected.issuer sasl.oauthbearer.header.urlencode
sasl.oauthbearer.jwks.endpoint.refresh.ms sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms
sasl.oauthbearer.jwks.endpoint.retry.backoff.ms sasl.oauthbearer.jwks.endpoint.url
sasl.oauthbearer.scope.claim.name sasl.oauthbearer.sub.claim.name
sasl.oauthbearer.token.endpoint.url sasl.enabled.mechanisms sasl.server.callback.handler.class
sasl.server.max.receive.size sasl.mechanism.inter.broker.protocol
sasl.mechanism.controller.protocol principal.builder.class connections.max.reauth.ms
security.inter.broker.protocol security.providers
"""

_BROKER = """
advertised.listeners alter.config.policy.class.name
alter.log.dirs.replication.quota.window.num alter.log.dirs.replication.quota.window.size.seconds
authorizer.class.name allow.everyone.if.no.acl.found super.users auto.create.topics.enable
auto.include.jmx.reporter auto.leader.rebalance.enable background.threads
broker.heartbeat.interval.ms broker.id broker.id.generation.enable broker.rack
broker.session.timeout.ms client.quota.callback.class compression.type compression.gzip.level
compression.lz4.level compression.zstd.level connection.failed.authentication.delay.ms
connections.max.idle.ms control.plane.listener.name controlled.shutdown.enable
controlled.shutdown.max.retries controlled.shutdown.retry.backoff.ms controller.listener.names
controller.quorum.append.linger.ms controller.quorum.bootstrap.servers
controller.quorum.election.backoff.max.ms controller.quorum.election.timeout.ms
controller.quorum.fetch.timeout.ms controller.quorum.request.timeout.ms
controller.quorum.retry.backoff.ms controller.quorum.voters controller.quota.window.num
controller.quota.window.size.seconds controller.socket.timeout.ms
create.topic.policy.class.name default.replication.factor
delegation.token.expiry.check.interval.ms delegation.token.expiry.time.ms
delegation.token.master.key delegation.token.max.lifetime.ms delegation.token.secret.key
delete.records.purgatory.purge.interval.requests delete.topic.enable early.start.listeners
eligible.leader.replicas.enable fetch.max.bytes fetch.purgatory.purge.interval.requests
group.consumer.assignors group.consumer.heartbeat.interval.ms
group.consumer.max.heartbeat.interval.ms group.consumer.max.session.timeout.ms
group.consumer.max.size group.consumer.migration.policy group.consumer.min.heartbeat.interval.ms
group.consumer.min.session.timeout.ms group.consumer.session.timeout.ms
group.coordinator.append.linger.ms group.coordinator.new.enable
group.coordinator.rebalance.protocols group.coordinator.threads
group.initial.rebalance.delay.ms group.max.session.timeout.ms group.max.size
group.min.session.timeout.ms group.share.delivery.count.limit group.share.enable
group.share.heartbeat.interval.ms group.share.max.groups group.share.max.size
group.share.record.lock.duration.ms group.share.session.timeout.ms
initial.broker.registration.timeout.ms inter.broker.listener.name inter.broker.protocol.version
kafka.metrics.polling.interval.secs kafka.metrics.reporters
leader.imbalance.check.interval.seconds leader.imbalance.per.broker.percentage
listener.security.protocol.map listeners log.cleaner.backoff.ms log.cleaner.dedupe.buffer.size
log.cleaner.delete.retention.ms log.cleaner.enable log.cleaner.io.buffer.load.factor
log.cleaner.io.buffer.size log.cleaner.io.max.bytes.per.second
log.cleaner.max.compaction.lag.ms log.cleaner.min.cleanable.ratio
log.cleaner.min.compaction.lag.ms log.cleaner.threads log.cleanup.policy log.dir
log.dir.failure.timeout.ms log.dirs log.flush.interval.messages log.flush.interval.ms
log.flush.offset.checkpoint.interval.ms log.flush.scheduler.interval.ms
log.flush.start.offset.checkpoint.interval.ms log.index.interval.bytes
log.index.size.max.bytes log.initial.task.delay.ms log.local.retention.bytes
log.local.retention.ms log.message.downconversion.enable log.message.format.version
log.message.timestamp.after.max.ms log.message.timestamp.before.max.ms
log.message.timestamp.difference.max.ms log.message.timestamp.type log.preallocate
log.retention.bytes log.retention.check.interval.ms log.retention.hours log.retention.minutes
log.retention.ms log.roll.hours log.roll.jitter.hours log.roll.jitter.ms log.roll.ms
log.segment.bytes log.segment.delete.delay.ms max.connection.creation.rate max.connections
max.connections.per.ip max.connections.per.ip.overrides
max.incremental.fetch.session.cache.slots max.request.partition.size.limit message.max.bytes
metadata.log.dir metadata.log.max.record.bytes.between.snapshots
metadata.log.max.snapshot.interval.ms metadata.log.segment.bytes metadata.log.segment.ms
metadata.max.idle.interval.ms metadata.max.retention.bytes metadata.max.retention.ms
metric.reporters metrics.num.samples metrics.recording.level metrics.sample.window.ms
min.insync.replicas node.id num.io.threads num.network.threads num.partitions
num.recovery.threads.per.data.dir num.replica.alter.log.dirs.threads num.replica.fetchers
offset.metadata.max.bytes offsets.commit.required.acks offsets.commit.timeout.ms
offsets.load.buffer.size offsets.retention.check.interval.ms offsets.retention.minutes
offsets.topic.compression.codec offsets.topic.num.partitions offsets.topic.replication.factor
offsets.topic.segment.bytes password.encoder.cipher.algorithm password.encoder.iterations
password.encoder.key.length password.encoder.keyfactory.algorithm password.encoder.old.secret
password.encoder.secret process.roles producer.id.expiration.check.interval.ms
producer.id.expiration.ms producer.purgatory.purge.interval.requests queued.max.request.bytes
queued.max.requests quota.window.num quota.window.size.seconds remote.fetch.max.wait.ms
remote.log.index.file.cache.total.size.bytes remote.log.storage.system.enable
replica.fetch.backoff.ms replica.fetch.max.bytes replica.fetch.min.bytes
replica.fetch.response.max.bytes replica.fetch.wait.max.ms
replica.high.watermark.checkpoint.interval.ms replica.lag.time.max.ms replica.selector.class
replica.socket.receive.buffer.bytes replica.socket.timeout.ms replication.quota.window.num
replication.quota.window.size.seconds request.timeout.ms reserved.broker.max.id
server.max.startup.time.ms socket.connection.setup.timeout.max.ms
socket.connection.setup.timeout.ms socket.listen.backlog.size socket.receive.buffer.bytes
socket.request.max.bytes socket.send.buffer.bytes telemetry.max.bytes
transaction.abort.timed.out.transaction.cleanup.interval.ms transaction.max.timeout.ms
transaction.partition.verification.enable
transaction.remove.expired.transaction.cleanup.interval.ms
transaction.state.log.load.buffer.size transaction.state.log.min.isr
transaction.state.log.num.partitions transaction.state.log.replication.factor
transaction.state.log.segment.bytes transactional.id.expiration.ms
unclean.leader.election.enable unstable.api.versions.enable zookeeper.clientCnxnSocket
zookeeper.connect zookeeper.connection.timeout.ms zookeeper.max.in.flight.requests
zookeeper.metadata.migration.enable zookeeper.metadata.migration.min.batch.size
zookeeper.session.timeout.ms zookeeper.set.acl zookeeper.ssl.cipher.suites
zookeeper.ssl.client.enable zookeeper.ssl.crl.enable zookeeper.ssl.enabled.protocols
zookeeper.ssl.endpoint.identification.algorithm zookeeper.ssl.keystore.location
zookeeper.ssl.keystore.password zookeeper.ssl.keystore.type zookeeper.ssl.ocsp.enable
zookeeper.ssl.protocol zookeeper.ssl.truststore.location zookeeper.ssl.truststore.password
zookeeper.ssl.truststore.type
"""

_TOPIC = """
segment.bytes segment.ms segment.jitter.ms segment.index.bytes flush.messages flush.ms
retention.bytes retention.ms remote.storage.enable local.retention.ms local.retention.bytes
remote.log.copy.disable remote.log.delete.on.disable max.message.bytes index.interval.bytes
file.delete.delay.ms delete.retention.ms min.compaction.lag.ms max.compaction.lag.ms
min.cleanable.dirty.ratio cleanup.policy unclean.leader.election.enable min.insync.replicas
compression.type compression.gzip.level compression.lz4.level compression.zstd.level
preallocate message.format.version message.timestamp.type message.timestamp.difference.max.ms
message.timestamp.before.max.ms message.timestamp.after.max.ms message.downconversion.enable
leader.replication.throttled.replicas follower.replication.throttled.replicas
"""

KAFKA_BROKER_CONFIGS = frozenset((_BROKER + _SECURITY).split())
KAFKA_TOPIC_CONFIGS = frozenset(_TOPIC.split())

# Per-listener overrides (listener.name.internal.ssl.keystore.location) and the settings of
# remote-storage plugins, whose names the plugin chooses.
OPEN_PREFIXES = ("listener.name.", "remote.log.manager.", "remote.log.metadata.",
                 "remote.log.reader.", "remote.log.storage.", "rlmm.config.", "rsm.config.")


def is_kafka_broker_config(name: str) -> bool:
    return name in KAFKA_BROKER_CONFIGS or name.startswith(OPEN_PREFIXES)


def closest(name: str, known: Iterable[str]) -> str | None:
    """The known name nearest to ``name`` by spelling, if any is near enough to suggest."""
    matches = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.75)
    return matches[0] if matches else None
