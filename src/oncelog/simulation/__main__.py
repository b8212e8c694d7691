"""``python -m oncelog.simulation``: run simulated clusters under seeds, or replay one.

    python -m oncelog.simulation --seed 1234 -v      # replay one seed, with its event log
    python -m oncelog.simulation --seeds 0-999       # a range; failing seeds are listed

Exit status 0 when every seed kept every invariant, 1 otherwise (each failure printed with
the command that replays it). Runs under ``PYTHONHASHSEED=0`` (it re-executes itself so), so
a seed replays the same way in any process.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time

from .cluster import InvariantBroken, Simulation


def _seeds(text: str) -> range:
    first, _, last = text.partition("-")
    try:
        seeds = range(int(first), int(last or first) + 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected FIRST-LAST (whole numbers), got {text!r}"
                                         ) from None
    if not seeds:
        raise argparse.ArgumentTypeError(f"{text!r} is an empty range: FIRST must not be "
                                         "above LAST")
    return seeds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m oncelog.simulation",
                                     description=__doc__.split("\n\n")[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--seed", type=int, help="one seed (replay)")
    group.add_argument("--seeds", type=_seeds, metavar="FIRST-LAST",
                       help="a range of seeds, FIRST-LAST")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="print the run's event log and the brokers' log lines")
    options = parser.parse_args(argv)
    if options.verbose:
        logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    else:
        logging.disable(logging.CRITICAL)
    seeds = range(options.seed, options.seed + 1) if options.seed is not None else options.seeds
    failed = []
    started = time.monotonic()
    for seed in seeds:
        simulation = Simulation(seed)
        try:
            world = simulation.run()
        except InvariantBroken as error:
            failed.append(seed)
            print(error, flush=True)
            continue
        if options.verbose:
            print("\n".join(world.log))
    elapsed = time.monotonic() - started
    print(f"{len(seeds)} seed{'s' if len(seeds) != 1 else ''}, {len(failed)} failed "
          f"{failed[:20]}, {elapsed:.1f} s ({len(seeds) / elapsed * 60:.0f} seeds per minute)")
    return 1 if failed else 0


if __name__ == "__main__":
    if os.environ.get("PYTHONHASHSEED") != "0":  # the same set orders in every process
        os.execve(sys.executable, [sys.executable, "-m", "oncelog.simulation", *sys.argv[1:]],
                  {**os.environ, "PYTHONHASHSEED": "0"})
    sys.exit(main())
