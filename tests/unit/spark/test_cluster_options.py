"""``oncelog pipeline run --master/--conf`` refusals, and the zip of oncelog for executors."""

from __future__ import annotations

import socket
import zipfile

from click.testing import CliRunner

from oncelog.cli import main
from oncelog.spark.ship import package_zip


def run(*arguments: str):
    return CliRunner().invoke(main, ["pipeline", "run", *arguments])


def test_an_unreachable_standalone_master_is_one_sentence_before_anything_starts(tmp_path):
    with socket.socket() as closed:          # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    result = run("--master", f"spark://127.0.0.1:{port}", "--work-dir", str(tmp_path))
    assert result.exit_code == 1
    assert f"cannot reach the Spark master at spark://127.0.0.1:{port}" in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "broker-data").exists()       # no broker started for nothing


def test_a_conf_without_equals_is_refused():
    result = run("--conf", "spark.executor.memory", "--master", "local[1]")
    assert result.exit_code == 2
    assert "is not KEY=VALUE" in result.output


def test_the_zip_holds_the_package_importable_from_its_root(tmp_path):
    archive = package_zip(tmp_path / "out" / "oncelog.zip")
    names = zipfile.ZipFile(archive).namelist()
    assert "oncelog/__init__.py" in names and "oncelog/spark/source.py" in names
    assert not [name for name in names if "__pycache__" in name or name.endswith(".pyc")]
