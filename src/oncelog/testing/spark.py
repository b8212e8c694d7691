"""A local SparkSession for a user's tests, with the ``oncelog`` source registered.

``local_spark_session()`` is ``oncelog.spark.session.local_session`` (``local[2]``, web UI
off, the worker Python set to this interpreter, loopback addresses) under a name of its
own; the plugin's ``oncelog_spark`` fixture keeps one for the whole session, because a JVM
takes seconds to start. Point ``kafka.bootstrap.servers`` at ``oncelog_broker.bootstrap``
so wire faults reach the job too.

PySpark comes with the ``spark`` extra (``pip install 'oncelog[spark]'``); without it the
fixture fails with one line saying so.
"""

from __future__ import annotations

__all__ = ["SparkUnavailable", "local_spark_session"]


class SparkUnavailable(RuntimeError):
    """PySpark is not installed."""


def local_spark_session(app_name: str = "oncelog-tests", *, cores: int = 2,
                        config: dict[str, str] | None = None):
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise SparkUnavailable("the oncelog_spark fixture needs PySpark: "
                               "pip install 'oncelog[spark]'") from None
    from ..spark.session import local_session
    return local_session(app_name, cores=cores, config=config)
