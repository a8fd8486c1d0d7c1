"""A local run or evaluation refuses to start when a domain's attempts cannot run here
(loop/preflight.py): a missing or unreachable render environment is named up front, not
found after the rollout as one environment error row per attempt."""
from __future__ import annotations

import os

import pytest

from flywheel.cli.main import main
from flywheel.settings.config import RunConfig
from flywheel.loop.preflight import setup_problems
from tests.domains.conftest import environments_root


def config(*domains: str) -> RunConfig:
    return RunConfig.from_dict({"rollout": {"domains": list(domains)}})


def test_a_missing_render_environment_is_named_with_its_fix(tmp_path):
    with environments_root(str(tmp_path)):
        problems = setup_problems(config("reverse", "chart_to_code", "scene"), "DirectRunner")
    assert [p.split(":")[0] for p in problems] == ["domain chart_to_code", "domain scene"]
    assert "flywheel env build render" in problems[0] and str(tmp_path) in problems[0]


def test_remote_workers_are_not_this_machine(tmp_path):
    with environments_root(str(tmp_path)):
        assert setup_problems(config("chart_to_code"), "DataflowRunner") == []


@pytest.mark.skipif(os.geteuid() != 0, reason="only root's runs lease another uid")
def test_an_environment_the_leased_uid_cannot_reach_is_refused(tmp_path):
    hidden = tmp_path / "private"
    (hidden / "envs" / "render").mkdir(parents=True)
    hidden.chmod(0o700)
    with environments_root(str(hidden / "envs")):
        assert "cannot reach it" in setup_problems(config("chart_edit"), None)[0]
        docker = RunConfig.from_dict({"rollout": {"domains": ["chart_edit"], "sandbox": "docker"}})
        assert setup_problems(docker, None) == []  # docker's daemon mounts it as root


def test_the_cli_stops_before_any_rollout(tmp_path, capsys):
    out = tmp_path / "eval"
    with environments_root(str(tmp_path / "none")):
        assert main(["eval", "--domains", "scene", "--n", "1", "--k", "1", "--out", str(out)]) == 2
        assert main(["run", "--domains", "scene", "--run-dir", str(tmp_path / "run")]) == 2
    said = capsys.readouterr().out
    assert said.count("domain scene: the render domains need environment 'render'") == 2
    assert not out.exists() and not (tmp_path / "run").exists()
