"""The importer of logged interactions: every shape read, outcomes classified, bad lines kept as
errors with their line numbers, recorder folders joined to their feedback with exact token ids,
personal data gone before anything is stored. Real files in, real Parquet read back."""

import datetime as dt
import gzip
import json

import pytest

from flywheel.feedback.interaction_formats import FormatProblem, parse_record, parse_score
from flywheel.feedback.interaction_import import ImportOptions, import_interactions
from flywheel.feedback.interaction_privacy import drop_fields, redact
from flywheel.schemas import read_table
from flywheel.schemas.write import write_partitioned

T0 = dt.datetime(2026, 12, 1, 12, tzinfo=dt.timezone.utc)
TOOL_CALL = {"id": "call_1", "type": "function",
             "function": {"name": "add", "arguments": "{\"a\": 2, \"b\": 2}"}}


def write_jsonl(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return str(path)


def tables(out):
    return {t: read_table(f"{out}/tables/{t}", t).to_pylist()
            for t in ("sft_examples", "preference_pairs", "errors")}


def test_each_shape_is_read_and_tool_messages_are_kept():
    tools = parse_record({"messages": [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": "4"},
        {"role": "assistant", "content": "It is 4."}]})
    assert (tools.source, tools.curated, tools.prompt, tools.response) == ("openai", True, "2+2?", "It is 4.")
    assert tools.messages[1]["tool_calls"] == [TOOL_CALL] and tools.messages[2]["role"] == "tool"

    request = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    reply = {"id": "c1", "created": 1_700_000_000,
             "choices": [{"message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}]}
    logged = parse_record({"request": request, "response": reply, "metadata": {"thumbs": "up"}})
    assert (logged.response, logged.score, logged.record_id) == ("hello", 1.0, "c1")
    assert logged.created_at == dt.datetime.fromtimestamp(1_700_000_000, dt.timezone.utc)
    batch = parse_record({"custom_id": "r7", "body": request, "response": {"body": reply}, "ci": "fail"})
    assert (batch.response, batch.score, batch.record_id) == ("hello", 0.0, "r7")
    called = parse_record({"request": request, "response": {"choices": [
        {"message": {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL]}}]}})
    assert json.loads(called.response) == [TOOL_CALL]

    dpo = parse_record({"input": {"messages": [{"role": "user", "content": "q"}]},
                        "preferred_output": [{"role": "assistant", "content": "good"}],
                        "non_preferred_output": [{"role": "assistant", "content": "bad"}]})
    assert (dpo.chosen, dpo.rejected, dpo.response) == ("good", "bad", None)
    plain = parse_record({"prompt": "p", "response": "r", "feedback": "down", "correction": "c",
                          "domain": "chat_arith"})
    assert (plain.source, plain.score, plain.correction, plain.domain) == ("plain", 0.0, "c", "chat_arith")


@pytest.mark.parametrize("obj, kind", [
    ({"messages": [{"role": "user", "content": "no reply"}]}, "missing_response"),
    ({"request": {"messages": []}, "response": {"choices": []}}, "missing_response"),
    ({"custom_id": "x", "body": {"messages": []}, "response": {"error": "quota"}}, "missing_response"),
    ({"prompt": "p", "chosen": "only one"}, "missing_response"),
    ({"prompt": "p", "response": "r", "rating": 7}, "bad_rating"),
    ({"messages": "not a list"}, "unknown_shape"),
    ({"text": "?"}, "unknown_shape"),
])
def test_unreadable_shapes_say_what_was_expected(obj, kind):
    with pytest.raises(FormatProblem) as e:
        parse_record(obj)
    assert e.value.kind == kind and "expected" in str(e.value)


def test_signals_become_one_score():
    assert [parse_score(v) for v in ("up", "Thumbs Down", "+1", "-1", True, False, 0.8, "0.25",
                                     {"status": "passed"})] == [1, 0, 1, 0, 1, 0, 0.8, 0.25, 1]
    for bad in ("meh", 3, -0.5, float("nan"), None):
        with pytest.raises(FormatProblem):
            parse_score(bad)
    # a failed CI outweighs a thumbs up
    assert parse_record({"prompt": "p", "response": "r", "thumbs": "up", "metadata": {"ci": "fail"}}).score == 0


def test_every_bad_line_is_an_error_row_with_its_line_number(tmp_path):
    path = tmp_path / "bad.jsonl"
    good = json.dumps({"prompt": "p", "response": "r", "feedback": "up"})
    path.write_bytes(b"\n".join([
        good.encode(),                                     # 1
        b"{not json",                                      # 2
        b"",                                               # 3 (blank: skipped, still counted)
        b"[1, 2]",                                         # 4
        json.dumps({"foo": 1}).encode(),                   # 5
        json.dumps({"prompt": "p"}).encode(),              # 6
        json.dumps({"prompt": "p", "response": "r", "rating": "great"}).encode(),  # 7
        b'{"prompt": "' + b"x" * 5000 + b'"}',             # 8: over the limit
        b'{"prompt": "\xff\xfe"}',                        # 9
        good.encode(),                                     # 10
    ]) + b"\n")
    summary = import_interactions([str(path)], str(tmp_path / "out"),
                                  ImportOptions(max_line_bytes=1000))
    errors = {int(r["message"].split(":")[1]): r for r in tables(tmp_path / "out")["errors"]}
    assert {n: r["error_type"] for n, r in errors.items()} == {
        2: "invalid_json", 4: "not_an_object", 5: "unknown_shape", 6: "missing_response",
        7: "bad_rating", 8: "line_too_long", 9: "not_utf8"}
    assert all(r["message"].startswith(f"{path}:{n}: ") and r["stage"] == "import"
               and r["kind"] == "input" and r["iteration"] == 0 for n, r in errors.items())
    assert len(errors[8]["payload"]) == 2000 and "5,0" in errors[8]["message"]
    assert summary.lines == 9 and summary.counts["sft_examples"] == 2
    assert sum(summary.errors.values()) == 7


def test_hostile_nesting_is_an_error_not_a_crash(tmp_path):
    path = write_jsonl(tmp_path / "deep.jsonl", ["[" * 50_000 + "]" * 50_000,
                                                 '{"prompt": "p", "response": "r", "rating": '
                                                 + '{"rating": ' * 900 + '"meh"' + "}" * 901])
    summary = import_interactions([path], str(tmp_path / "out"), ImportOptions())
    assert sum(summary.errors.values()) == 2 and summary.first_errors[0].startswith(f"{path}:1: ")


def test_gzip_and_globs_and_chunked_files(tmp_path):
    rows = [{"prompt": f"p{i}", "response": f"r{i}", "rating": 1} for i in range(5)]
    (tmp_path / "a.jsonl.gz").write_bytes(gzip.compress(
        "".join(json.dumps(r) + "\n" for r in rows[:3]).encode()))
    write_jsonl(tmp_path / "b.jsonl", rows[3:])
    out = tmp_path / "out"
    summary = import_interactions([str(tmp_path / "*.jsonl*")], str(out), ImportOptions(chunk_rows=2))
    sft = tables(out)["sft_examples"]
    assert sorted(r["response"] for r in sft) == [f"r{i}" for i in range(5)]
    assert {(r["source_uri"].rsplit("/", 1)[1], r["source_line"]) for r in sft} == {
        ("a.jsonl.gz", 1), ("a.jsonl.gz", 2), ("a.jsonl.gz", 3), ("b.jsonl", 1), ("b.jsonl", 2)}
    assert len(list((out / "tables" / "sft_examples").glob("*.parquet"))) == 3
    assert summary.errors == {}


def interaction(iid, response, ids, messages=None, digest="sha256:aaa", minutes=0):
    messages = messages or [{"role": "user", "content": "What is 6*7?"}]
    return {"recorder_id": "rec", "interaction_id": iid, "day": "2026-12-01",
            "created_at": T0 + dt.timedelta(minutes=minutes), "model": "m",
            "checkpoint_digest": digest, "client": "alice", "messages": json.dumps(messages),
            "prompt": messages[-1]["content"], "prompt_token_ids": [1, 2, 3],
            "response": response, "response_token_ids": ids}


def feedback(fid, iid, minutes, rating=None, label=None, correction=None):
    return {"recorder_id": "rec", "feedback_id": fid, "interaction_id": iid, "day": "2026-12-01",
            "created_at": T0 + dt.timedelta(minutes=minutes), "rating": rating, "label": label,
            "correction": correction}


def recorder(root):
    write_partitioned(str(root), "interactions", [
        interaction("a", "42", [9, 9]), interaction("b", "41", [8, 8], minutes=1),
        interaction("c", "Call me: bob@example.com", [7], minutes=2,
                    messages=[{"role": "user", "content": "mail? I am +44 20 7946 0958"}])])
    write_partitioned(str(root), "feedback", [
        feedback("f1", "a", 5, rating=-1), feedback("f2", "a", 9, label="up"),  # latest wins
        feedback("f3", "b", 5, rating=1.0), feedback("f4", "b", 6, rating=0.0, correction="42"),
        feedback("f5", "c", 5, label="spam")])  # a label that is no rating
    return str(root)


def test_a_recorder_folder_carries_exact_token_ids(tmp_path):
    out = tmp_path / "out"
    summary = import_interactions([recorder(tmp_path / "rec")], str(out), ImportOptions())
    got = tables(out)
    sft = {(r["response"], r["source"]) for r in got["sft_examples"]}
    assert sft == {("42", "interactions")}  # a's response (up wins) and b's correction, same text
    by_ids = {tuple(r["response_token_ids"] or ()): r for r in got["sft_examples"]}
    assert by_ids[(9, 9)]["token_source"] == "sha256:aaa" and by_ids[(9, 9)]["prompt_token_ids"] == [1, 2, 3]
    assert () in by_ids  # the correction's ids are unknown
    pairs = {(p["reason"], p["chosen"], p["rejected"]): p for p in got["preference_pairs"]}
    assert set(pairs) == {("correction", "42", "41"), ("rating", "42", "41")}
    assert pairs[("correction", "42", "41")]["rejected_token_ids"] == [8, 8]
    rating = pairs[("rating", "42", "41")]
    assert rating["margin"] == 1.0 and rating["chosen_token_ids"] == [9, 9]
    assert summary.counts["no outcome"] == 1 and summary.errors == {}


def test_personal_data_is_gone_before_anything_is_stored(tmp_path):
    path = write_jsonl(tmp_path / "pii.jsonl", [
        {"messages": [{"role": "user", "content": "I am ann@corp.io, call 415-555-0100",
                       "name": "ann"}, {"role": "assistant", "content": "Noted, ann@corp.io."}],
         "user": "ann", "metadata": {"user_email": "ann@corp.io", "expected": "2024-01-15"}},
        "{bad json with ann@corp.io"])
    out = tmp_path / "out"
    import_interactions([path, recorder(tmp_path / "rec")], str(out), ImportOptions(
        drop_fields=("user", "name", "metadata.user_email"), redact=frozenset({"email", "phone"})))
    got = tables(out)
    text = " ".join(str(v) for rows in got.values() for row in rows for v in row.values())
    assert "ann@corp.io" not in text and "555-0100" not in text and "bob@example.com" not in text
    assert '"name"' not in text and "user_email" not in text
    assert got["errors"][0]["payload"] is None  # no JSON: the dropped fields cannot be found
    first = next(r for r in got["sft_examples"] if r["source"] == "openai")
    assert first["prompt"] == "I am [EMAIL], call [PHONE]" and first["response"] == "Noted, [EMAIL]."
    # redacted texts lose their token ids; untouched ones keep them
    carried = {r["response"]: r for r in got["sft_examples"] if r["source"] == "interactions"}
    assert carried["42"]["prompt_token_ids"] == [1, 2, 3]


def test_redaction_leaves_numbers_and_dates_alone():
    kinds = frozenset({"email", "phone"})
    assert redact("6*7 = 42; 1234567890; 2024-01-15; v1.2.3; x@y", kinds) == (
        "6*7 = 42; 1234567890; 2024-01-15; v1.2.3; x@y", False)
    assert redact({"a": ["(415) 555-0100", "+4915112345678"]}, kinds) == (
        {"a": ["[PHONE]", "[PHONE]"]}, True)
    row = {"user": 1, "metadata": {"email": "e"}, "request": {"messages": [{"role": "u", "user": 2}]}}
    assert drop_fields(row, ("user", "metadata.email")) == {
        "metadata": {}, "request": {"messages": [{"role": "u"}]}}


def test_recorder_tokens_of_redacted_text_are_dropped(tmp_path):
    out = tmp_path / "out"
    root = tmp_path / "rec"
    write_partitioned(str(root), "interactions", [
        interaction("c", "mail bob@example.com", [7], minutes=2,
                    messages=[{"role": "user", "content": "I am +44 20 7946 0958"}])])
    write_partitioned(str(root), "feedback", [feedback("f", "c", 5, rating=1)])
    import_interactions([str(root)], str(out), ImportOptions(redact=frozenset({"email", "phone"})))
    (row,) = tables(out)["sft_examples"]
    assert (row["prompt"], row["response"]) == ("I am [PHONE]", "mail [EMAIL]")
    assert row["prompt_token_ids"] is None and row["response_token_ids"] is None


def test_a_task_field_takes_the_first_source_a_line_has(tmp_path):
    log = tmp_path / "log.jsonl"
    log.write_text("\n".join(json.dumps(r) for r in [
        {"prompt": "Maya has 3 marbles and buys 4 more. How many marbles does Maya have now?",
         "response": "7", "feedback": "up"},
        {"prompt": "Omar had 12 stickers and gave 2 of them to a friend. How many are left?",
         "response": "9", "feedback": "down", "correction": "10"},
        {"prompt": "A box holds 3 pens. Jun fills 2 boxes. How many pens is that?",
         "response": "5", "feedback": "down"}]) + "\n")
    out = tmp_path / "out"
    summary = import_interactions([str(log)], str(out), ImportOptions(
        outputs=frozenset({"tasks"}), domain="chat_arith", fields=(("answer", "correction|response"),)))
    tasks = [json.loads(line) for line in (out / "tasks.jsonl").read_text().splitlines()]
    assert [t["answer"] for t in tasks] == ["7", "10"]
    assert summary.errors["bad_task"] == 1  # the third: wrong, and nobody said what is right


def test_feedback_judges_the_choice_it_names(tmp_path):
    root = tmp_path / "rec"
    write_partitioned(str(root), "interactions", [
        {**interaction("n2", "42", [9, 9]), "choice_index": 0},
        {**interaction("n2", "41", [8, 8]), "choice_index": 1}])
    write_partitioned(str(root), "feedback", [
        {**feedback("f1", "n2", 5, rating=1), "choice_index": 0},
        {**feedback("f2", "n2", 6, rating=-1), "choice_index": 1}])
    out = tmp_path / "out"
    import_interactions([str(root)], str(out), ImportOptions())
    got = tables(out)
    assert [r["response"] for r in got["sft_examples"]] == ["42"]
    (pair,) = got["preference_pairs"]
    assert (pair["reason"], pair["chosen"], pair["rejected"]) == ("rating", "42", "41")
