"""The chart's recording rules, checked and tested by the real promtool (``make tools`` builds it).

``recording-rules.test.yaml`` feeds synthetic DCGM exporter series and our allocation series
(with a leader change in the middle) to the rule file the chart ships, and states the GPU-hours,
the utilisation by workload and the idle allocations they must record.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from pkg.devcluster.cluster import default_bin_dir

HERE = Path(__file__).resolve().parent
RULES = HERE.parents[2] / "charts" / "gpu-control-plane" / "files" / "prometheus" / "recording-rules.yaml"


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    promtool = default_bin_dir() / "promtool"
    assert promtool.is_file(), f"{promtool} is missing: run `make tools`"
    return subprocess.run(
        [str(promtool), *args], capture_output=True, text=True, check=False, cwd=HERE, timeout=60
    )


def test_the_rule_file_is_valid() -> None:
    done = _promtool("check", "rules", str(RULES))
    assert done.returncode == 0, done.stdout + done.stderr


def test_recording_rules_on_synthetic_dcgm_series() -> None:
    done = _promtool("test", "rules", "recording-rules.test.yaml")
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_wrong_expectation_fails(tmp_path: Path) -> None:
    """The test file is not vacuous: the same inputs with another GPU-hours value fail."""
    wrong = (HERE / "recording-rules.test.yaml").read_text().replace("value: 2", "value: 3")
    wrong = wrong.replace("../../../charts", str(RULES.parents[4] / "charts"))
    path = tmp_path / "wrong.test.yaml"
    path.write_text(wrong)
    done = _promtool("test", "rules", str(path))
    assert done.returncode != 0
    assert "gpu_hours" in done.stdout + done.stderr
