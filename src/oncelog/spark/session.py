"""A SparkSession set up the way PySpark's Python workers need it on one machine.

Without ``PYSPARK_PYTHON`` pointing at the running interpreter, executors start whatever
``python3`` is on the PATH (without oncelog installed), and without ``SPARK_LOCAL_IP``
on a machine whose host name does not resolve to loopback, workers fail to connect back
("Python worker failed to connect back"). ``local_session`` sets both, keeps the web UI
and shuffle partitions small, registers the ``oncelog`` format, and quietens Spark's log.
With ``master`` it connects to a cluster instead (``oncelog.spark.standalone`` starts one on
this machine).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

_LOG_CONFIG = Path(__file__).with_name("log4j2.properties")


def prepare_environment() -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def local_session(app_name: str = "oncelog", *, cores: int = 2,
                  config: dict[str, str] | None = None, master: str | None = None):
    """Get or create a SparkSession with the ``oncelog`` format registered.

    ``local[cores]`` unless ``master`` names another (``spark://HOST:PORT`` for a standalone
    cluster, see ``standalone``): then executors run on the cluster's workers, each with
    ``spark.executor.memory`` 512m unless ``config`` says otherwise.
    """
    prepare_environment()
    from pyspark.sql import SparkSession

    from . import register

    config = dict(config or {})
    if master and not master.startswith("local"):
        config.setdefault("spark.executor.memory", "512m")
        # executors on this machine's workers log as quietly as the driver (a remote
        # worker without this file falls back to Spark's defaults)
        config.setdefault("spark.executor.extraJavaOptions",
                          f"-Dlog4j2.configurationFile={_LOG_CONFIG}")
    builder = (SparkSession.builder.master(master or f"local[{cores}]").appName(app_name)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", str(cores))
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               # Arrow batches between the JVM and Python workers, and quieter shutdowns
               .config("spark.sql.execution.arrow.pyspark.enabled", "true")
               .config("spark.python.worker.reuse", "true")
               .config("spark.driver.extraJavaOptions",
                       f"-Dlog4j2.configurationFile={_LOG_CONFIG}"))
    for name, value in config.items():
        builder = builder.config(name, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark
