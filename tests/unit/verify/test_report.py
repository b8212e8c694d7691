"""Reports: the terminal table, the JSON document (a run's record: seed, schedule, counts,
sample ids) and the PNG chart."""

from __future__ import annotations

import json
import subprocess
import sys

from rich.console import Console

from oncelog.verify.checker import check
from oncelog.verify.report import print_report, render_table, write_chart, write_json
from oncelog.verify.schedule import FaultSchedule

from .histories import Run, clean_run

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def three_results():
    """at-most-once lost 25 (allowed), at-least-once duplicated 2 (allowed), exactly-once
    reordered 2 and lost 1 (both violations)."""
    lossy = Run()
    ids = [lossy.send("p0") for _ in range(100)]
    lossy.deliver(*ids[25:])
    duplicating, ids = clean_run({"p0": 50, "p1": 50}, partitions=3)
    duplicating.deliver(ids[3], ids[60])
    broken = Run()
    ids = [broken.send("p0") for _ in range(100)]
    broken.deliver(*ids[:10], ids[12], ids[10], ids[11], *ids[13:99])
    return [check(lossy.history, "at-most-once"), check(duplicating.history, "at-least-once"),
            check(broken.history, "exactly-once")]


def table_rows(results, **kwargs) -> tuple[list[str], dict[str, list[str]]]:
    console = Console(record=True, width=160, color_system=None)
    console.print(render_table(results, **kwargs))
    lines = console.export_text().splitlines()
    header = next(line.split() for line in lines if line.startswith("semantics"))
    rows = {line.split()[0]: line.split()[1:] for line in lines if line.startswith(
        ("at-most-once", "at-least-once", "exactly-once"))}
    return header, rows


def test_the_table_has_a_row_per_semantics_and_a_verdict():
    header, rows = table_rows(three_results(), seed=99)
    assert header == ["semantics", "produced", "acked", "delivered", "lost", "duplicated",
                      "reordered", "contract"]
    assert rows == {"at-most-once": ["100", "100", "75", "25", "0", "0", "✔"],
                    "at-least-once": ["100", "100", "100", "0", "2", "0", "✔"],
                    "exactly-once": ["100", "100", "99", "1", "0", "2", "✘"]}


def test_the_table_shows_unexpected_records_and_extra_copies_when_there_are_any():
    run, ids = clean_run({"p0": 4})
    run.deliver(ids[0], ids[0], ids[1], "ghost-000000")
    header, rows = table_rows([check(run.history, "at-least-once")])
    assert header[-2:] == ["unexpected", "contract"]
    assert rows == {"at-least-once": ["4", "4", "4", "0", "2", "(+3)", "0", "1", "✘"]}


def test_the_table_fits_80_columns():
    console = Console(record=True, width=80, color_system=None)
    console.print(render_table(three_results(), seed=99))
    assert "…" not in console.export_text()


def test_print_report_names_the_broken_promises_with_ids():
    console = Console(record=True, width=160, color_system=None)
    schedule = FaultSchedule.generate(99, ["kill-broker"], 60, "all")
    print_report(three_results(), console=console, seed=99, schedule=schedule)
    text = console.export_text()
    assert "✘ exactly-once: 1 acknowledged record(s) lost: p0-000099" in text
    assert ("✘ exactly-once: 2 record(s) delivered after a later record: "
            "p0-000010, p0-000011") in text
    assert "at-most-once:" not in text.split("└")[-1].split("seed")[0]  # nothing it forbids
    assert "replay with --seed 99" in text
    first = schedule.faults[0]
    assert f"kill-broker {first.at_s:g}-{first.heal_at_s:g} s" in text


def test_json_document_records_seed_schedule_counts_and_samples(tmp_path):
    schedule = FaultSchedule.generate(99, ["kill-broker", "drop-acks"], 60, "all")
    path = write_json(three_results(), schedule, 99, tmp_path / "out" / "result.json",
                      sample_size=10)
    document = json.loads(path.read_text())
    assert document["seed"] == 99 and document["contracts_kept"] is False
    assert FaultSchedule.from_dict(document["schedule"]) == schedule
    results = document["results"]
    assert list(results) == ["at_most_once", "at_least_once", "exactly_once"]
    at_most_once = results["at_most_once"]
    assert at_most_once["counts"]["lost"] == 25 and at_most_once["contract_kept"] is True
    assert at_most_once["samples"]["lost"] == [f"p0-{seq:06d}" for seq in range(10)]
    assert results["at_least_once"]["samples"]["duplicated"] == [
        {"id": "p0-000003", "copies": 2}, {"id": "p1-000010", "copies": 2}]
    exactly_once = results["exactly_once"]
    assert exactly_once["violations"] == ["1 acknowledged record(s) lost",
                                          "2 record(s) delivered after a later record"]
    assert exactly_once["samples"]["reordered"] == [
        {"id": "p0-000010", "after": "p0-000012", "topic": "verify", "partition": 0},
        {"id": "p0-000011", "after": "p0-000012", "topic": "verify", "partition": 0}]


def test_the_chart_is_a_png(tmp_path):
    path = write_chart(three_results(), tmp_path / "chart.png", seed=99)
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    assert len(data) > 10_000           # axes, bars, labels: far more than an empty image
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert width >= 600 and height >= 400


def test_the_chart_handles_a_single_clean_result(tmp_path):
    run, _ = clean_run({"p0": 3})
    data = write_chart([check(run.history, "exactly-once")], tmp_path / "one.png").read_bytes()
    assert data[:8] == PNG_MAGIC


def test_importing_the_verifier_does_not_import_matplotlib():
    code = ("import sys, oncelog.verify, oncelog.verify.report\n"
            "assert 'matplotlib' not in sys.modules, 'matplotlib imported eagerly'\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_a_transactional_result_adds_the_read_columns_and_its_transactions():
    from .test_checker_transactional import transactional_run
    run, txns = transactional_run()
    run.deliver(txns["aborted"][0])
    results = [check(run.history, "transactional"), three_results()[1]]
    console = Console(record=True, width=160, color_system=None)
    print_report(results, console=console)
    text = console.export_text()
    lines = text.splitlines()
    row = next(line.split() for line in lines if line.startswith("transactional"))
    assert row == ["transactional", "14", "5", "6", "0", "0", "0", "1", "0", "✘"]
    other = next(line.split() for line in lines if line.startswith("at-least-once"))
    assert other[-3:] == ["-", "-", "✔"]   # not a transactional run: nothing to say
    assert "transactions 2 committed, 1 aborted (3 records), 1 unknown outcome" in text
    assert "1 record(s) of aborted transactions delivered" in text
