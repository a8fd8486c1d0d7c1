"""`flywheel sft --processes N`: the command run again in N data-parallel processes (torchrun on
this machine, gloo on the CPU), for real: the checkpoint equals one process's within rounding,
rank 0 alone evaluates, prints and writes it; a bad count is refused before anything starts."""

import subprocess
import sys

import pytest
import torch.distributed as dist

from flywheel.cli.main import main
from flywheel.policy.checkpoint import load_checkpoint

SFT = ["sft", "--policy", "tiny", "--domain", "reverse", "--n", "16", "--epochs", "2",
       "--lr", "1e-3", "--batch-tokens", "64", "--seed", "0"]


def test_a_bad_process_count_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:  # refused where parsed (cli/arg_types.py)
        main([*SFT, "--out", str(tmp_path / "x"), "--processes", "0"])
    assert stop.value.code == 2
    assert "--processes: must be at least 1, got '0'" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


@pytest.mark.slow  # a torchrun launch of two ranks
@pytest.mark.skipif(not (dist.is_available() and dist.is_gloo_available()),
                    reason="this torch build has no torch.distributed with gloo")
def test_two_processes_write_the_checkpoint_one_process_writes(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    assert main([*SFT, "--out", str(one), "--eval-domain", "reverse", "--eval-tasks", "4"]) == 0
    out = subprocess.run([sys.executable, "-m", "flywheel.cli.main", *SFT, "--out", str(two),
                          "--eval-domain", "reverse", "--eval-tasks", "4", "--processes", "2"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    assert "training in 2 data-parallel processes" in out.stdout
    assert out.stdout.count("wrote ") == 1 and out.stdout.count("epoch 0: held-out") == 1  # rank 0
    a, b = load_checkpoint(str(one)), load_checkpoint(str(two))
    wa, wb = a.policy.module.state_dict(), b.policy.module.state_dict()
    assert max((wa[k].float() - wb[k].float()).abs().max().item() for k in wa) <= 1e-5
    assert b.meta["sft"]["processes"] == 2 and a.meta["sft"]["processes"] == 1
    for x, y in zip(a.meta["sft"]["epochs"], b.meta["sft"]["epochs"]):
        assert x["loss"] == pytest.approx(y["loss"], rel=1e-4) and x["steps"] == y["steps"] > 1
    assert [h["epoch"] for h in b.meta["sft"]["heldout"]] == [0, 1, 2]
