"""The run config file is read totally (issue 37, class 6): a value of any type at any key of any
table, or a key that is not a name, is one message naming the file, the line and the key, never
a traceback. In process (run_settings is what `flywheel run` and `flywheel eval` call first)."""

import json
import math

from hypothesis import HealthCheck, example, given, settings, strategies as st

from flywheel.cli.main import main
from flywheel.cli.run import run_settings
from flywheel.settings.config import RunConfig

KEYS = sorted(f"{table}.{key}" if isinstance(values, dict) else table
              for table, values in RunConfig().to_dict().items()
              for key in (values if isinstance(values, dict) else [None]))
KEYS = [k.removesuffix(".None") for k in KEYS] + ["run_dir", "beam.direct_num_workers"]


def toml(value) -> str:
    """`value` as TOML text (inline tables for dicts)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {toml(v)}" for k, v in value.items()) + "}"
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007F")  # TOML: no surrogate-pair escapes; DEL must be escaped


SCALARS = st.one_of(st.booleans(), st.integers(), st.sampled_from([2**63 - 1, -2**63]),
                    st.floats(), st.text(max_size=10), st.sampled_from(["", "y" * 10_000]))
VALUES = st.one_of(SCALARS, st.lists(SCALARS, max_size=3),
                   st.dictionaries(st.from_regex(r"[a-z]{1,4}", fullmatch=True), SCALARS, max_size=2),
                   st.lists(st.lists(SCALARS, max_size=2), max_size=2))


def told(path: str) -> str | None:
    """None when `path` is a usable config; else the message a user sees."""
    try:
        run_settings(["--config", path])
    except (KeyError, ValueError) as e:
        return str(e.args[0] if isinstance(e, KeyError) else e)
    return None


@settings(max_examples=40, deadline=5000, suppress_health_check=list(HealthCheck))
@given(key=st.sampled_from(KEYS), value=VALUES)
@example(key="beam.direct_num_workers", value="y" * 10_000)  # Beam's parser quoted it whole
def test_any_value_at_any_key_is_one_message_naming_file_line_and_key(tmp_path_factory, key, value):
    table, _, name = key.rpartition(".")
    text = (f"[{table}]\n" if table else "") + f"{name} = {toml(value)}\n"
    path = tmp_path_factory.mktemp("config") / "run.toml"
    path.write_text(text)
    message = told(str(path))
    if message is not None:
        line = 2 if table else 1
        assert message.startswith(f"{path}: "), message
        assert f"line {line}" in message and name in message, message
        assert len(message) < 1500 and "Traceback" not in message


def _laughs(levels: int = 9) -> str:
    """A YAML list whose aliases expand to 10**levels strings (a billion laughs, inline)."""
    value = "&l0 [" + ", ".join(["y"] * 10) + "]"
    for n in range(1, levels):
        value = f"&l{n} [{value}, " + ", ".join([f"*l{n - 1}"] * 9) + "]"
    return f"rollout:\n  domains: {value}\n"


BILLION_LAUGHS = _laughs()


def test_yaml_keys_and_values_of_any_shape_are_told(tmp_path):
    cases = {"rollout:\n  1: 2\n": "line 2: key 1 in [rollout] is not a name",
             "rollout: [1, 2]\n": "line 1: `rollout` must be a table",
             "? [a, b]\n: 1\n": "not valid YAML: while constructing a mapping",
             "? 7\n: 1\n": "line 1: key 7 is not a name",
             "rollout:\n  domains: &a [x, x, x, x, x, x, x, x]\n": None,
             BILLION_LAUGHS: "line 2: `rollout.domains` must be an array of a string, got [[",
             "episode:\n  max_turns: -1\n": "line 2: `episode.max_turns`: episode.max_turns must be >= 0"}
    for text, expected in cases.items():
        path = tmp_path / "run.yaml"
        path.write_text(text)
        message = told(str(path))
        if expected is None:
            assert message is not None and "unknown domain" in message or message is None
            continue
        assert message is not None and message.startswith(f"{path}: ") and expected in message, (text, message)
        assert len(message) < 1500


def test_run_and_eval_tell_a_bad_file_the_same_way(tmp_path, capsys):
    """What a user sees from both commands: one error line naming file, line and key (eval read
    --config not at all before: it ran on the defaults)."""
    path = tmp_path / "bad.toml"
    path.write_bytes(b"\xef\xbb\xbf[algorithm]\nloss = \"nope\"\n")  # a BOM is not a setting
    for command in ("run", "eval"):
        assert main([command, "--config", str(path)]) == 2
        out = capsys.readouterr()
        assert (out.out + out.err).splitlines() == [
            f"error: {path}: line 2: `algorithm.loss`: unknown loss 'nope'; known: dapo, dr_grpo, "
            "grpo, gspo"], command
    assert not (tmp_path / "evals").exists()
