"""oncelog as a zip for executors whose Python lacks it:
``python -m oncelog.spark.ship oncelog.zip``.

On a cluster, the ``oncelog`` source's reader runs in the executors' Python workers, which
unpickle it by module name: they must import ``oncelog``. Either install it in the Python the
workers run (``PYSPARK_PYTHON``), or ship this zip with the job::

    spark = local_session(master="spark://HOST:7077",
                          config={"spark.submit.pyFiles": "oncelog.zip"})
    # or spark-submit --py-files oncelog.zip, or spark.sparkContext.addPyFile("oncelog.zip")

Spark copies it to every executor and puts it first on its Python workers' ``sys.path``.
Only oncelog's own pure-Python code is in it: its dependencies (confluent-kafka, a C
extension over librdkafka; pyarrow and pandas, which PySpark needs anyway) must be installed
in the workers' Python, because Python does not import extension modules from a zip.
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path


def package_zip(destination: str | Path) -> Path:
    """Write the ``oncelog`` package this interpreter imports into ``destination`` (a zip)."""
    import oncelog

    package = Path(oncelog.__file__).parent
    destination = Path(destination)
    destination.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(destination, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(package.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                archive.write(path, path.relative_to(package.parent))
    return destination


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else argv
    if len(arguments) != 1 or arguments[0].startswith("-"):
        print(__doc__.splitlines()[0], file=sys.stderr)
        return 2
    print(package_zip(arguments[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
