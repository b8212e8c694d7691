"""oncelog: a Kafka-compatible streaming log with delivery guarantees you can choose and prove.

Packages: ``protocol`` (wire codecs, no I/O), ``storage`` (the on-disk log), ``partition``
(one replica's state and its produce/fetch rules), ``broker`` (server, dispatch, one handler
module per Kafka API) and ``cli`` (the ``oncelog`` command).
"""

__version__ = "0.1.0"
