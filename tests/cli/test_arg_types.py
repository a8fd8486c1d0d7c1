"""Counts and sizes out of range are refused where they are parsed, naming the flag (exit 2, as
argparse does), for every command that takes one."""

import pytest

from flywheel.cli.main import main

REFUSED = [
    (["tasks", "validate", "t.jsonl", "--workers", "0"], "--workers", "at least 1"),
    (["verify", "--tasks", "t.jsonl", "--responses", "r.jsonl", "--workers", "-2"], "--workers", "at least 1"),
    (["verify", "--tasks", "t.jsonl", "--responses", "r.jsonl", "--verify-deadline", "0"],
     "--verify-deadline", "at least"),
    (["sandbox", "serve", "--capacity", "0"], "--capacity", "at least 1"),
    (["sandbox", "serve", "--port", "-1"], "--port", "at least 0"),
    (["sandbox", "exec", "--timeout", "nan", "x.py"], "--timeout", "at least"),
    (["serve", "--max-batch", "0"], "--max-batch", "at least 1"),
    (["review", "serve", "--run-dir", "r", "--port", "many"], "--port", "expected an integer"),
    (["sft", "--out", "o", "--epochs", "0"], "--epochs", "at least 1"),
    (["sft", "--out", "o", "--micro-tokens", "-5"], "--micro-tokens", "at least 0"),
]


@pytest.mark.parametrize("argv,flag,says", REFUSED, ids=[" ".join(a[:2]) + " " + f for a, f, _ in REFUSED])
def test_an_out_of_range_count_is_refused_naming_its_flag(argv, flag, says, capsys):
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert flag in err and says in err, err


def test_eval_refuses_a_sample_count_of_zero(capsys):
    from flywheel.cli.eval import eval_parser
    with pytest.raises(SystemExit):
        eval_parser().parse_args(["--n", "0"])
    assert "--n" in capsys.readouterr().err
    assert eval_parser().parse_args(["--iteration", "0", "--n", "4"]).n == 4
