"""Spark Connect clients and oncelog's source: one fix to PySpark's client (SPARK-59135).

Spark's Python Data Source planner workers (``pyspark.sql.worker.utils.worker_run``) always
register the Python profiler's accumulators, so every command that reads ``format("oncelog")``
sends their (empty) updates back to the client as observed metrics named
``__python_accumulator__``, together with execution metrics. Ordinary queries handle both.
``SparkConnectClient.execute_command_as_iterator`` - the long-lived command streams of
``spark-pipelines`` (pipeline events) and of ``StreamingQueryListener`` (listener events) -
accepts only result dictionaries in PySpark 4.3.0 (pinned here) and raises
``UNKNOWN_RESPONSE: Plan observed(__python_accumulator__=...)``: ``spark-pipelines run``
dies once the pipeline's first flow has run (the server then cancels the run with the
closed session).

Apache Spark fixed it in the client (apache/spark#58435, SPARK-59135: the stream yields every
response and its consumers skip metrics). ``tolerate_metrics_in_command_streams()`` does the
same here, once per process, only when the installed client still raises on them:
metrics are skipped, every other unexpected response still raises ``UNKNOWN_RESPONSE``.
``oncelog.spark.register`` calls it for a Spark Connect session, so a pipeline definition
that registers the format gets it before ``spark-pipelines`` reads its events.
"""

from __future__ import annotations

import inspect
import logging

log = logging.getLogger(__name__)

_PATCHED = "_oncelog_tolerates_metrics"


def is_connect_session(spark) -> bool:
    """True for a Spark Connect client session (``SparkSession.builder.remote(...)``)."""
    try:
        from pyspark.sql.connect.session import SparkSession as ConnectSession
    except ImportError:  # PySpark without the Connect client's dependencies
        return False
    return isinstance(spark, ConnectSession)


def tolerate_metrics_in_command_streams() -> bool:
    """Make command streams skip metrics responses; True if the client was changed now."""
    from pyspark.sql.connect.client.core import SparkConnectClient

    original = SparkConnectClient.execute_command_as_iterator
    if getattr(original, _PATCHED, False) or not _raises_on_metrics(original):
        return False

    from pyspark.errors import PySparkValueError
    from pyspark.sql.metrics import ObservedMetrics, PlanMetrics

    def execute_command_as_iterator(self, command, observations=None):
        request = self._execute_plan_request_with_metadata()
        self._set_command_in_plan(request.plan, command)
        for response in self._execute_and_fetch_as_iterator(request, observations or {}):
            if isinstance(response, dict):
                yield response
            elif not isinstance(response, (PlanMetrics, ObservedMetrics)):
                raise PySparkValueError(errorClass="UNKNOWN_RESPONSE",
                                        messageParameters={"response": str(response)})

    execute_command_as_iterator.__doc__ = original.__doc__
    execute_command_as_iterator.__wrapped__ = original  # type: ignore[attr-defined]  # PySpark's
    setattr(execute_command_as_iterator, _PATCHED, True)
    # a patch of PySpark's class, on purpose (SPARK-59135)
    SparkConnectClient.execute_command_as_iterator = execute_command_as_iterator  # type: ignore[method-assign]
    log.debug("Spark Connect command streams now skip metrics responses (SPARK-59135)")
    return True


def _raises_on_metrics(method) -> bool:
    """The 4.x shape: anything that is not a dict is UNKNOWN_RESPONSE (metrics included)."""
    try:
        source = inspect.getsource(method)
    except (OSError, TypeError):
        return False  # cannot tell: leave the client as it is
    return "UNKNOWN_RESPONSE" in source and "PlanMetrics" not in source \
        and "ObservedMetrics" not in source
