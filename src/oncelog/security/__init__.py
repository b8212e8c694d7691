"""What oncelog secures connections with, below everything that opens one: TLS contexts from
Kafka's ``ssl.*`` settings (``tls``), the principal a client certificate maps to
(``principal``, Kafka's ``ssl.principal.mapping.rules``), SCRAM credentials and exchanges
(``scram``, RFC 5802/7677), a connection's SASL authentication (``sasl``: PLAIN and SCRAM,
KIP-368 sessions) and the credentials a broker checks against (``credentials``); the login a
broker presents to other brokers (``login``: ``sasl.mechanism.inter.broker.protocol``, JAAS
``sasl.jaas.config``); the throwaway certificate authority of the test kit and ``oncelog
cluster start --secure`` (``certificates``); ACLs and Kafka's rules for applying them
(``acl``: bindings, filters, the ``Authorizer``).

It imports only ``config``, so the broker's listeners and the connections brokers open to
each other (``net``) read the same settings the same way.
"""
