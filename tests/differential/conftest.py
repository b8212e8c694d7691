"""The two brokers the conversations are replayed against: the plugin's session-wide Apache
Kafka and oncelog broker (imported here as tests/testing_kit does, so they are the same
fixtures whether or not the installed plugin is loaded)."""

from oncelog.testing.plugin import (oncelog_apache_kafka_session,  # noqa: F401
                                    oncelog_broker_session)
