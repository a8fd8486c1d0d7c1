"""KEY=VALUE options whose values hold commas: quoted ("..." JSON, '...' literal) in
--policy-options and --sandbox-options, through the flags, the printed config and the sandbox CLI;
a malformed item is refused by name."""
import argparse

import pytest

from flywheel.settings.option_items import parse_options, split_items


@pytest.mark.parametrize("text, items, options", [
    ("runtime=runsc,warm=false,n=3", ("runtime=runsc", "warm=false", "n=3"),
     {"runtime": "runsc", "warm": False, "n": 3}),
    ('stop="</a>,</b>",top_p=0.9', ('stop="</a>,</b>"', "top_p=0.9"),
     {"stop": "</a>,</b>", "top_p": "0.9"}),
    ("k='a, b',x=don't", ("k='a, b'", "x=don't"), {"k": "a, b", "x": "don't"}),
    (r'p="say \"hi, you\"\n",q="true",r="3"', (r'p="say \"hi, you\"\n"', 'q="true"', 'r="3"'),
     {"p": 'say "hi, you"\n', "q": "true", "r": "3"}),  # quoted values stay strings
    ("a=,,b=''", ("a=", "b=''"), {"a": "", "b": ""}),
])
def test_quoted_values_keep_their_commas(text, items, options):
    assert split_items(text) == items
    assert parse_options(items) == options


@pytest.mark.parametrize("text, message", [
    ('a=1,b="x, y', "'b=\"x, y': the quote \" is never closed"),
    ("b='x", "\"b='x\": the quote ' is never closed"),
    ('a="x" y,b=1', "'a=\"x\" y': text after the closing quote"),
    ("sys=a, b", "' b' is not KEY=VALUE"),  # an unquoted comma still separates
    (r'a="\q"', "not one JSON string"),
])
def test_a_malformed_item_is_named(text, message):
    with pytest.raises(ValueError) as refused:
        parse_options(split_items(text, "--policy-options"), "--policy-options")
    assert str(refused.value).startswith("--policy-options item ") and message in str(refused.value)


def test_policy_options_with_commas_reach_the_hf_options_and_the_printed_config(capsys):
    from flywheel.cli.main import main
    from flywheel.cli.run import run_settings
    from flywheel.policy.backends.hf.options import HFOptions
    argv = ["--policy", "hf", "--policy-options",
            'system_prompt="You are terse, exact, and kind.",stop="</a>,</b>",top_p=0.9']
    _, config, _, _ = run_settings(argv)
    options = HFOptions.from_dict(config.policy.parsed_options())
    assert options.system_prompt == "You are terse, exact, and kind."
    assert options.stop_strings == ("</a>,</b>",) and options.top_p == 0.9
    assert main(["run", "--print-config", *argv]) == 0
    assert "You are terse, exact, and kind." in capsys.readouterr().out

    assert main(["run", "--policy", "hf", "--policy-options", 'system_prompt="open, never closed',
                 "--print-config"]) == 2
    assert "--policy-options item" in " ".join(capsys.readouterr().out.split())


def test_sandbox_cli_takes_quoted_options():
    from flywheel.cli import sandbox as sandbox_cli
    p = argparse.ArgumentParser()
    sandbox_cli.add_parser(p.add_subparsers(dest="command"))
    args = p.parse_args(["sandbox", "exec", "--backend", "unsafe-subprocess", "--sandbox-options",
                         'note="a, b",warm=false', "prog.py"])
    options = sandbox_cli.backend_options(args)
    assert options["note"] == "a, b" and options["warm"] is False
