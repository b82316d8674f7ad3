"""promtool on what deploy/ ships: the Prometheus config (as shipped and as the loopback copy the
dashboard test runs), the alert rules, and `promtool test rules` over series written for each alert."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from tests.deploy.prom import DEPLOY, loopback_config, require

TESTS = Path(__file__).resolve().parent / "alerts.test.yml"


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    """Run promtool ARGS to completion."""
    return subprocess.run([require("promtool"), *args], capture_output=True, text=True, timeout=60)


def test_the_shipped_prometheus_config_and_the_rules_it_loads_pass_promtool() -> None:
    result = promtool("check", "config", str(DEPLOY / "prometheus.yml"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 rule files found" in result.stdout + result.stderr


def test_the_loopback_copy_of_the_config_passes_promtool(tmp_path: Path) -> None:
    copy = tmp_path / "prometheus.yml"
    copy.write_text(yaml.safe_dump(loopback_config(8080, 9464, [9465, 9466])), encoding="utf-8")
    result = promtool("check", "config", str(copy))
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_alert_rules_pass_promtool_check_rules() -> None:
    result = promtool("check", "rules", str(DEPLOY / "alerts.yml"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 7 rules found" in result.stdout


def test_every_alert_fires_on_its_series_and_stays_silent_where_it_should() -> None:
    rules = yaml.safe_load((DEPLOY / "alerts.yml").read_text(encoding="utf-8"))
    alerts = {rule["alert"] for group in rules["groups"] for rule in group["rules"]}
    cases = yaml.safe_load(TESTS.read_text(encoding="utf-8"))["tests"]
    for name in alerts:  # each alert has a case where it fires and one where it does not
        evaluations = [e for case in cases for e in case["alert_rule_test"] if e["alertname"] == name]
        assert any(e["exp_alerts"] for e in evaluations) and any(not e["exp_alerts"] for e in evaluations), name
    result = promtool("test", "rules", str(TESTS))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_a_missing_promtool_skips_naming_it_and_fails_under_ci_where_apt_get_is(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # neither promtool nor apt-get
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.skip.Exception, match="needs Debian's promtool"):
        require("promtool")
    apt_get = tmp_path / "apt-get"
    apt_get.write_text("#!/bin/sh\nexit 1\n")
    apt_get.chmod(0o755)
    with pytest.raises(pytest.fail.Exception, match=r"needs Debian's promtool .* although apt-get is here"):
        require("promtool")
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="needs Debian's promtool"):
        require("promtool")
