"""What oncelog secures connections with, below everything that opens one: TLS contexts from
Kafka's ``ssl.*`` settings (``tls``) and the principal a client certificate maps to
(``principal``, Kafka's ``ssl.principal.mapping.rules``).

It imports only ``config``, so the broker's listeners and the connections brokers open to
each other (``net``) read the same settings the same way.
"""
