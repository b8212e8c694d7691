"""Reporting check results: a table for the terminal, a JSON document and a PNG chart.

The JSON document (``write_json``) is the run's record: the seed and the fault schedule
(``FaultSchedule.from_dict(document["schedule"])`` restores it, and the seed alone
regenerates it), then per semantics every count, the verdict (kept, broken or inconclusive)
and why, what each fault did (``fault_outcomes``), the delivery processes that exited
unplanned (``unplanned_exits``: a finding of their own, printed in red after the broken
promises), and up to ``sample_size`` ids of each anomaly. The table's verdict is ✔ only
for a run that kept its contract *and* proved something (``CheckResult.verdict``); its
caption lists the faults that happened, per semantics, each under the name of what it hit
(a ``kill-driver`` without a Spark driver killed a consumer), and each semantics' workload
length (the schedule's duration, plus its shift when a target was slow to recover: never
one semantics' length as the whole run's).
matplotlib is imported only by ``write_chart`` (the ``verify`` extra), and only through its
object-oriented API with the Agg canvas: no pyplot, no global backend switch, no display
needed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .checker import CONTRACTS, CheckResult
from .landing import SPARK_DRIVER, describe_window
from .schedule import FaultSchedule

__all__ = ["ChartUnavailable", "print_report", "render_table", "results_document",
           "write_chart", "write_json"]

FORMAT_VERSION = 1
CHART_BARS = ("delivered", "lost", "duplicated", "reordered", "unexpected")
_COLOURS = {"delivered": "#4c78a8", "lost": "#e45756", "duplicated": "#f58518",
            "reordered": "#b279a2", "unexpected": "#222222"}


_CHART_VERDICTS = {"kept": "contract kept", "broken": "CONTRACT BROKEN",
                   "inconclusive": "inconclusive"}


class ChartUnavailable(RuntimeError):
    """matplotlib is not installed."""


def prose(semantics: str) -> str:
    return semantics.replace("_", "-")


_HEADERS = {"aborted_reads": "aborted\nreads", "uncommitted_reads": "uncommitted\nreads"}


def _anomaly_cell(result: CheckResult, anomaly: str) -> str:
    if anomaly not in CONTRACTS[result.semantics] and anomaly.endswith("_reads"):
        return "[dim]-[/dim]"  # not a transactional run: nothing to say
    count = result.count(anomaly)
    text = str(count)
    if anomaly == "duplicated" and result.duplicate_copies != count:
        text += f" (+{result.duplicate_copies})"  # extra copies, when not one per id
    if count == 0:
        return f"[dim]{text}[/dim]"
    breaks = anomaly in CONTRACTS[result.semantics]
    return f"[bold red]{text}[/bold red]" if breaks else f"[yellow]{text}[/yellow]"


def render_table(results: Sequence[CheckResult], *, seed: int | None = None,
                 schedule: FaultSchedule | None = None,
                 workload_s: Mapping[str, float] | None = None) -> Table:
    """One row per semantics. An anomaly is red when it breaks that row's contract, yellow
    when the semantics allows it. ``workload_s``: per semantics, how long its workload
    really ran (the schedule's duration plus any shift while a target recovered)."""
    title = "oncelog verify" + (f" — seed {seed}" if seed is not None else "")
    # Fits 80 columns (a CI log): no outer edge, "acked" for acknowledged, and the
    # unexpected column only when something unexpected turned up.
    anomalies = ["lost", "duplicated", "reordered"]
    if any(result.unexpected for result in results):
        anomalies.append("unexpected")
    if any(result.semantics == "transactional" for result in results):
        anomalies += ["aborted_reads", "uncommitted_reads"]
    table = Table(title=title, caption=_caption(results, schedule, workload_s or {}),
                  caption_justify="left",
                  box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
    table.add_column("semantics", no_wrap=True)
    for column in ("produced", "acked", "delivered", *anomalies):
        table.add_column(_HEADERS.get(column, column), justify="right", no_wrap=True)
    table.add_column("contract", justify="center", no_wrap=True)
    for result in results:
        verdict = _VERDICT_CELLS[result.verdict]
        table.add_row(prose(result.semantics), str(result.produced), str(result.acknowledged),
                      str(result.delivered),
                      *(_anomaly_cell(result, anomaly) for anomaly in anomalies), verdict)
    return table


_VERDICT_CELLS = {"kept": "[green]✔[/green]", "broken": "[bold red]✘[/bold red]",
                  "inconclusive": "[yellow]inconclusive[/yellow]"}


def _caption(results: Sequence[CheckResult], schedule: FaultSchedule | None,
             workload_s: Mapping[str, float]) -> str | None:
    """The faults that happened, per semantics (what landed, and what did not); the planned
    schedule only for results that do not say what their faults did.

    The semantics run one after another, each with the whole schedule, so the schedule's
    duration is each one's workload, not the run's: the caption says so, and gives a
    semantics its own length when its schedule shifted (a target slow to recover)."""
    planned = (f"{schedule.duration_s:g} s of workload per semantics" if schedule is not None
               else None)
    if results and all(result.fault_outcomes is not None for result in results):
        if not any(result.fault_outcomes for result in results):
            return "; ".join(filter(None, [planned, "no faults requested (--faults none): "
                                                    "a plain run"]))
        lines = ["; ".join(filter(None, [planned, "faults that happened:"]))]
        for result in results:
            landed = ", ".join(_short(outcome) for outcome in result.faults_landed)
            missed = ", ".join(f"{_name(outcome)} {_at(outcome)}"
                               for outcome in result.fault_outcomes or () if not outcome.landed)
            line = (f"{prose(result.semantics)}"
                    f"{_own_length(result.semantics, schedule, workload_s)}: "
                    f"{landed or 'none landed'}")
            lines.append(line + (f"; did not land: {missed}" if missed else ""))
        return "\n".join(lines)
    if schedule is None:
        return None
    if not schedule.faults:
        return f"{planned}; no faults"
    faults = ", ".join(f"{fault.name} {fault.at_s:g}-{fault.heal_at_s:g} s"
                       for fault in schedule.faults)
    return f"{planned}; faults planned: {faults}"


def _own_length(semantics: str, schedule: FaultSchedule | None,
                workload_s: Mapping[str, float]) -> str:
    """`` (52.3 s: its schedule shifted 40.3 s)`` when this semantics' workload ran longer
    than planned, else nothing."""
    length = workload_s.get(semantics)
    if length is None or schedule is None or length - schedule.duration_s < 0.05:
        return ""
    return f" ({length:.1f} s: its schedule shifted {length - schedule.duration_s:.1f} s)"


def _name(outcome) -> str:
    """The fault's name, and what it killed instead when the name does not say it: a
    ``kill-driver`` in a stage without a Spark driver kills its consumer (or reader)."""
    target = outcome.detail.get("target")
    if outcome.name == "kill-driver" and target and target != SPARK_DRIVER:
        return f"kill-driver (no Spark driver here: the {target})"
    return outcome.name


def _at(outcome) -> str:
    """When it happened (shift included), or when it was planned if it never did."""
    if outcome.elapsed_s is None:
        return f"{outcome.at_s:g} s (planned)"
    return f"{outcome.elapsed_s:.1f} s"


def _short(outcome) -> str:
    """``kill-consumer 5.1 s (pid 123, down 1.4 s)``, ``drop-acks 9 s (37 dropped)``."""
    detail = outcome.detail
    if outcome.name == "drop-acks":
        facts = [f"{detail.get('dropped')} dropped"]
    elif "caption" in detail:  # a network partition
        facts = [detail["caption"]]
        if detail.get("cut_s") is not None:
            facts.append(f"cut {detail['cut_s']:.1f} s")
    elif outcome.name == "kill-executor":
        facts = [f"pid {detail.get('pid')}", f"executor {detail.get('executor_id')}"]
        if detail.get("batch") is not None:
            facts.append(f"batch {detail['batch']}, {detail.get('running_tasks') or 0} "
                         "task(s) running")
        if detail.get("replaced_by"):
            facts.append(f"replaced by {', '.join(detail['replaced_by'])} in "
                         f"{detail.get('replacement_s'):.1f} s")
        elif "replaced_by" in detail:
            facts.append("not replaced")
    else:
        facts = [f"pid {detail.get('pid')}"]
        for key, label in (("down_s", "down"), ("paused_s", "paused")):
            if detail.get(key) is not None:
                facts.append(f"{label} {detail[key]:.1f} s")
        if detail.get("window"):
            facts.append(describe_window(detail["window"]))
    return f"{_name(outcome)} {_at(outcome)} ({', '.join(fact for fact in facts if fact)})"


def print_report(results: Sequence[CheckResult], *, console: Console | None = None,
                 seed: int | None = None, schedule: FaultSchedule | None = None,
                 sample_size: int = 5, workload_s: Mapping[str, float] | None = None) -> None:
    """The table, then per semantics its broken promises with a few ids, and its warnings."""
    if console is None:
        console = Console()
        if not console.is_terminal:  # a log file or CI: rich would assume 80 columns
            console = Console(width=max(console.width, 100))
    console.print(render_table(results, seed=seed, schedule=schedule, workload_s=workload_s))
    for result in results:
        name = prose(result.semantics)
        samples = result.to_dict(sample_size)["samples"]
        for anomaly, sentence in zip(result.broken_by, result.violations):
            ids = [item if isinstance(item, str) else item["id"] for item in samples[anomaly]]
            more = ", ..." if result.count(anomaly) > len(ids) else ""
            console.print(f"[bold red]✘[/bold red] {name}: {sentence}: {', '.join(ids)}{more}")
        for finding in result.unplanned_exit_findings:   # a pipeline that stopped by itself
            console.print(f"[bold red]![/bold red] {name}: {escape(finding)}", highlight=False)
        if result.verdict == "inconclusive":
            console.print(f"[yellow]?[/yellow] {name}: inconclusive, proved nothing: "
                          f"{result.inconclusive_because}", highlight=False)
        if result.control is not None:
            caught = result.count(result.control)
            anomaly = result.control.replace("_", " ")
            console.print(f"  {name}: negative control {anomaly}: "
                          + (f"caught, {caught} {anomaly} record(s)" if caught else
                             "[bold red]NOT caught[/bold red]"), highlight=False)
        for outcome in result.fault_outcomes or ():
            mark = "landed" if outcome.landed else "[yellow]did not land[/yellow]"
            console.print(f"  {name}: {outcome.name} at {_at(outcome)} {mark}: "
                          f"{outcome.effect}", highlight=False)
        if result.transactions:
            counts = result.transactions
            console.print(f"  {name}: transactions {counts['committed']} committed, "
                          f"{counts['aborted']} aborted ({result.aborted_records} records), "
                          f"{counts['unknown']} unknown outcome", highlight=False)
        for warning in result.warnings:
            console.print(f"[yellow]![/yellow] {name}: {warning}")
    if seed is not None:
        console.print(f"seed {seed} (replay with --seed {seed})")


def results_document(results: Sequence[CheckResult], schedule: FaultSchedule | None,
                     seed: int | None, *, sample_size: int = 20) -> dict[str, Any]:
    return {
        "format_version": FORMAT_VERSION,
        "seed": seed,
        "schedule": schedule.to_dict() if schedule is not None else None,
        "contracts_kept": all(result.contract_kept for result in results),
        "verdicts": {result.semantics: result.verdict for result in results},
        "results": {result.semantics: result.to_dict(sample_size) for result in results},
    }


def write_json(results: Sequence[CheckResult], schedule: FaultSchedule | None,
               seed: int | None, path: str | os.PathLike, *, sample_size: int = 20) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    document = results_document(results, schedule, seed, sample_size=sample_size)
    path.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    return path


def write_chart(results: Sequence[CheckResult], path: str | os.PathLike, *,
                seed: int | None = None) -> Path:
    """Grouped bars per semantics (delivered, lost, duplicated, reordered, unexpected) on a
    symmetric-log scale, each bar annotated with its count, so a handful of lost records
    shows next to thousands delivered, and a zero reads as "0", not as a missing bar. Bars
    that break their semantics' contract are outlined in black."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise ChartUnavailable("writing the chart needs matplotlib: "
                               "pip install 'oncelog[verify]'") from None
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure = Figure(figsize=(max(6.0, 2.6 * len(results) + 2), 4.8), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    width = 0.8 / len(CHART_BARS)
    highest = 1
    for index, bar in enumerate(CHART_BARS):
        values = [result.delivered if bar == "delivered" else result.count(bar)
                  for result in results]
        highest = max([highest, *values])
        xs = [group + (index - (len(CHART_BARS) - 1) / 2) * width
              for group in range(len(results))]
        breaks = [bar in result.broken_by for result in results]  # outlined in black
        axes.bar(xs, values, width, label=bar, color=_COLOURS[bar],
                 edgecolor=["black" if b else _COLOURS[bar] for b in breaks],
                 linewidth=[2.0 if b else 0.0 for b in breaks])
        for x, value in zip(xs, values):
            axes.annotate(str(value), (x, value), xytext=(0, 2), textcoords="offset points",
                          ha="center", va="bottom", fontsize=8)
    axes.set_yscale("symlog", linthresh=1)
    axes.set_ylim(0, highest * 4)
    axes.set_xticks(range(len(results)),
                    [f"{prose(result.semantics)}\n{_CHART_VERDICTS[result.verdict]}"
                     for result in results])
    for label, result in zip(axes.get_xticklabels(), results):
        label.set_color({"kept": "#2a7f3f", "broken": "#c0392b",
                         "inconclusive": "#b8860b"}[result.verdict])
    axes.set_ylabel("records (symlog scale)")
    axes.set_title("oncelog verify" + (f" — seed {seed}" if seed is not None else ""))
    axes.legend(ncols=len(CHART_BARS), fontsize=8, loc="upper center",
                bbox_to_anchor=(0.5, -0.15), frameon=False)
    figure.tight_layout()
    figure.savefig(path, format="png")
    return path
