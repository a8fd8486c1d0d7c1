"""Every reader of interaction files is total: a valid line of each format with one field (or
sub-field) replaced by a value of the wrong shape, or its bytes broken, never stops
`flywheel import`. No exception escapes; a line that cannot be read is one `errors` row naming
the file, the line and (where one is to blame) the field; the good lines around it survive.
Real files in, real Parquet read back; hypothesis draws the damage (a modest budget)."""

import json

from hypothesis import HealthCheck, given, settings, strategies as st

from flywheel.feedback.interaction_import import ImportOptions, import_interactions
from flywheel.schemas import read_table

Q = [{"role": "user", "content": "2+2="}]
ANSWER = {"role": "assistant", "content": [{"type": "text", "text": "4"}]}
VALID = [  # one line of every shape docs/IMPORT.md names
    {"messages": [*Q, ANSWER], "feedback": "up", "metadata": {"expected": "4"}, "id": "f1"},
    {"request": {"messages": Q, "metadata": {"rating": 1}},
     "response": {"id": "c1", "created": 1_700_000_000,
                  "choices": [{"message": {"role": "assistant", "content": "4"}}]}},
    {"custom_id": "b1", "body": {"messages": Q},
     "response": {"status_code": 200, "body": {"choices": [{"message": ANSWER}]}}, "ci": "pass"},
    {"input": {"messages": Q}, "preferred_output": [ANSWER],
     "non_preferred_output": [{"role": "assistant", "content": "5"}]},
    {"prompt": "2+2=", "response": "5", "feedback": "down", "correction": {"content": "4"},
     "chosen": "4", "rejected": "5", "created_at": "2026-01-01T00:00:00Z", "domain": "chat_arith"},
]
DEEP: list = ["deep"]
for _ in range(300):
    DEEP = [DEEP]
WRONG = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=False),
                  st.text(max_size=20), st.just("x" * 5000), st.just(DEEP), st.just(10**400),
                  st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=5),
                                                                       st.integers(), max_size=3))
FIELD_LESS = {"invalid_json", "not_an_object", "not_utf8", "line_too_long"}
OPTIONS = ImportOptions(outputs=frozenset({"sft", "pairs", "tasks"}), domain="chat_arith",
                        fields=(("answer", "correction|metadata.expected|response"),),
                        drop_fields=("metadata.user",), redact=frozenset({"email", "phone"}))


def _paths(value, path=()):
    """Every field and sub-field of a JSON value, as key/index paths."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, inner in items:
        yield (*path, key)
        yield from _paths(inner, (*path, key))


def _replaced(value, path, new):
    if not path:
        return new
    copy = dict(value) if isinstance(value, dict) else list(value)
    if new is _DROP and len(path) == 1:
        copy.pop(path[0])
    else:
        copy[path[0]] = _replaced(copy[path[0]], path[1:], new)
    return copy


_DROP = object()
DAMAGES = [(shape, path) for shape, row in enumerate(VALID) for path in _paths(row)]


@st.composite
def damaged_line(draw) -> bytes:
    shape, path = draw(st.sampled_from(DAMAGES))
    how = draw(st.sampled_from(["wrong", "wrong", "wrong", "drop", "bytes", "cut"]))
    line = json.dumps(VALID[shape]).encode()
    if how == "wrong":
        line = json.dumps(_replaced(VALID[shape], path, draw(WRONG))).encode()
    elif how == "drop":
        line = json.dumps(_replaced(VALID[shape], path, _DROP)).encode()
    elif how == "bytes":
        at = draw(st.integers(0, len(line)))
        line = line[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80"])) + line[at:]
    else:
        line = line[:draw(st.integers(1, len(line) - 1))]
    return line


@settings(max_examples=25, deadline=5000, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(bad=st.lists(damaged_line(), min_size=1, max_size=6))
def test_a_damaged_line_of_any_format_is_one_error_and_the_rest_is_read(tmp_path_factory, bad):
    folder = tmp_path_factory.mktemp("fuzz")
    good = json.dumps(VALID[4]).encode()
    lines = [line for b in bad for line in (b, good)]  # a good line after every bad one
    path = folder / "logs.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    summary = import_interactions([str(path)], str(folder / "out"), OPTIONS)  # never raises
    errors = read_table(f"{folder}/out/tables/errors", "errors").to_pylist()
    per_line = {}
    for e in errors:
        at, _, rest = e["message"].partition(": ")
        assert at.startswith(f"{path}:"), e["message"]
        per_line[int(at.rsplit(":", 1)[1])] = per_line.get(int(at.rsplit(":", 1)[1]), 0) + 1
        assert e["error_type"] in FIELD_LESS or "`" in rest, e["message"]  # the field is named
    assert all(n == 1 for n in per_line.values()), per_line
    assert summary.lines == len(lines)
    assert all(2 * k not in per_line for k in range(1, len(bad) + 1))  # every good line read
    sft = read_table(f"{folder}/out/tables/sft_examples", "sft_examples").to_pylist()
    assert {r["source_line"] for r in sft if r["response"] == "4"} >= {2 * k for k in range(1, len(bad) + 1)}


def test_a_text_part_that_is_a_number_names_its_field_and_the_next_line_is_read(tmp_path):
    bad = {"messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}, ANSWER]}
    path = tmp_path / "chat.jsonl"
    path.write_text(json.dumps(bad) + "\n" + json.dumps(VALID[0]) + "\n")
    summary = import_interactions([str(path)], str(tmp_path / "out"), ImportOptions())
    errors = read_table(f"{tmp_path}/out/tables/errors", "errors").to_pylist()
    assert [e["message"] for e in errors] == [
        f"{path}:1: `messages[0].content[0].text`: expected a string, got int"]
    assert summary.counts["sft_examples"] == 1
