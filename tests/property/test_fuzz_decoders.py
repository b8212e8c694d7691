"""A short coverage-guided run of the decoder fuzzer (fuzz/fuzz_decoders.py, atheris).

Every request decoder and the record-batch validator, from the corpus of real clients'
requests in fuzz/corpus/, for a few seconds: any exception other than KafkaError, any input
taking over 5 s or the process passing 2 GiB fails the run. ``make fuzz`` runs it for long.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytest.importorskip("atheris")


@pytest.mark.slow
def test_short_fuzz_run_of_every_decoder_finds_nothing(tmp_path):
    corpus = ROOT / "fuzz" / "corpus"
    (tmp_path / "new").mkdir()
    result = subprocess.run(
        [sys.executable, str(ROOT / "fuzz" / "fuzz_decoders.py"), str(tmp_path / "new"),
         str(corpus / "requests"), str(corpus / "batches"), "-max_total_time=5",
         "-timeout=5", "-rss_limit_mb=2048", f"-artifact_prefix={tmp_path}/",
         "-print_final_stats=1"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "Done" in result.stderr
