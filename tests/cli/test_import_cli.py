"""`flywheel import` end to end: a file in every format in, tasks a domain accepts, SFT examples
and preference pairs out; bad lines reported with their line numbers; a recorder folder; personal
data dropped and redacted; every flag docs/IMPORT.md names is real."""

import datetime as dt
import gzip
import json
import re
from pathlib import Path

from flywheel.cli.main import main, parser
from flywheel.schemas import read_table
from flywheel.schemas.write import write_partitioned

DOC = Path(__file__).resolve().parents[2] / "docs" / "IMPORT.md"
USER = {"role": "user", "content": "Maya has 14 marbles and buys 27 more. How many now?"}
REPLY = {"choices": [{"message": {"role": "assistant", "content": "41"}, "finish_reason": "stop"}]}
EXPECTED = {"expected": "41"}


def jsonl(path, *rows):
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    path.write_bytes(gzip.compress(data) if path.name.endswith(".gz") else data)
    return str(path)


def every_format(tmp_path):
    return [
        jsonl(tmp_path / "finetune.jsonl", {"messages": [
            USER, {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function",
                   "function": {"name": "calc", "arguments": "{\"x\": \"14+27\"}"}}]},
            {"role": "tool", "tool_call_id": "c", "content": "41"},
            {"role": "assistant", "content": "41"}], "metadata": EXPECTED}),
        jsonl(tmp_path / "requests.jsonl", {"request": {"model": "m", "messages": [USER]},
                                            "response": REPLY, "feedback": "up", "metadata": EXPECTED}),
        jsonl(tmp_path / "batch.jsonl.gz", {"custom_id": "b1", "body": {"messages": [USER]},
                                            "response": {"body": REPLY}, "ci": "pass",
                                            "metadata": EXPECTED}),
        jsonl(tmp_path / "dpo.jsonl", {"input": {"messages": [USER]}, "metadata": EXPECTED,
                                       "preferred_output": [{"role": "assistant", "content": "41"}],
                                       "non_preferred_output": [{"role": "assistant", "content": "40"}]}),
        jsonl(tmp_path / "plain.jsonl",
              {"prompt": USER["content"], "response": "40", "feedback": "down", "correction": "41",
               "metadata": EXPECTED},
              {"prompt": USER["content"], "chosen": "41", "rejected": "42", "metadata": EXPECTED}),
    ]


def read(out, table):
    return read_table(f"{out}/tables/{table}", table).to_pylist()


def test_every_format_becomes_tasks_sft_examples_and_pairs(tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["import", *every_format(tmp_path), "--out", str(out), "--as", "tasks,sft,pairs",
            "--domain", "chat_arith", "--field", "answer=metadata.expected"]
    assert main(argv) == 0, capsys.readouterr().out
    tasks = [json.loads(line) for line in (out / "tasks.jsonl").read_text().splitlines()]
    assert len(tasks) == 6 == len({t["task_id"] for t in tasks})
    assert {(t["domain"], t["prompt"], t["answer"]) for t in tasks} == {
        ("chat_arith", USER["content"], "41")}
    sft = read(out, "sft_examples")
    assert sorted((r["source"], Path(r["source_uri"]).name, r["source_line"], r["response"])
                  for r in sft) == [("openai", "batch.jsonl.gz", 1, "41"),
                                    ("openai", "finetune.jsonl", 1, "41"),
                                    ("openai", "requests.jsonl", 1, "41"),
                                    ("plain", "plain.jsonl", 1, "41")]
    finetune = next(r for r in sft if r["source_uri"].endswith("finetune.jsonl"))
    assert [m["role"] for m in json.loads(finetune["messages"])] == ["user", "assistant", "tool"]
    pairs = sorted((p["reason"], p["chosen"], p["rejected"]) for p in read(out, "preference_pairs"))
    # requests and batch (41, rated good) and plain (40, thumbs down) answer one conversation
    assert pairs == [("choice", "41", "40"), ("choice", "41", "42"), ("correction", "41", "40"),
                     ("rating", "41", "40")]
    assert read(out, "errors") == []
    assert main(["tasks", "validate", str(out / "tasks.jsonl")]) == 0
    # the same input gives the same ids
    again = tmp_path / "again"
    assert main([*argv[:-8], "--out", str(again), *argv[-6:]]) == 0
    assert (again / "tasks.jsonl").read_text() == (out / "tasks.jsonl").read_text()
    assert "sft_examples" in capsys.readouterr().out


def test_a_task_field_from_the_correction_and_tasks_that_do_not_validate(tmp_path, capsys):
    path = jsonl(tmp_path / "plain.jsonl",
                 {"prompt": "6*7?", "response": "41", "feedback": "down", "correction": "42"},
                 {"prompt": "6*8?", "response": "48", "feedback": "up"})
    out = tmp_path / "out"
    assert main(["import", path, "--out", str(out), "--as", "tasks", "--domain", "chat_arith",
                 "--field", "answer=correction"]) == 1
    (task,) = [json.loads(line) for line in (out / "tasks.jsonl").read_text().splitlines()]
    assert (task["prompt"], task["answer"]) == ("6*7?", "42")
    (error,) = read(out, "errors")
    assert error["error_type"] == "bad_task" and error["message"].endswith(
        "plain.jsonl:2: task field `answer`: the line has no correction")
    assert "plain.jsonl:2:" in capsys.readouterr().out


def test_a_malformed_file_reports_every_bad_line(tmp_path, capsys):
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join([
        json.dumps({"prompt": "p", "response": "r", "feedback": "up"}),
        "{oops",
        json.dumps({"messages": [USER]}),
        json.dumps({"prompt": "p", "response": "r", "rating": "meh"}),
        json.dumps({"hello": "world"}),
        "42",
    ]) + "\n")
    out = tmp_path / "out"
    assert main(["import", str(path), "--out", str(out)]) == 1
    printed = capsys.readouterr().out
    kinds = {2: "invalid_json", 3: "missing_response", 4: "bad_rating", 5: "unknown_shape",
             6: "not_an_object"}
    for line, kind in kinds.items():
        assert f"bad.jsonl:{line}: " in printed and f"errors: {kind}" in printed
    rows = read(out, "errors")
    assert sorted((int(r["message"].split(":")[1]), r["error_type"]) for r in rows) == sorted(kinds.items())
    assert next(r for r in rows if r["error_type"] == "invalid_json")["payload"] == "{oops"
    assert [r["response"] for r in read(out, "sft_examples")] == ["r"]


def test_usage_errors_exit_2(tmp_path, capsys):
    good = jsonl(tmp_path / "ok.jsonl", {"prompt": "p", "response": "r"})
    out = str(tmp_path / "out")
    for argv in (["import", str(tmp_path / "missing.jsonl"), "--out", out],
                 ["import", str(tmp_path), "--out", out],  # a folder that is no recorder
                 ["import", good, "--out", out, "--as", "tasks"],
                 ["import", good, "--out", out, "--as", "tasks", "--domain", "nope"],
                 ["import", good, "--out", out, "--as", "tasks", "--domain", "chat_arith",
                  "--field", "answer"],
                 ["import", good, "--out", out, "--as", "sft,movies"],
                 ["import", good, "--out", out, "--redact", "names"]):
        assert main(argv) == 2, argv
    printed = capsys.readouterr().out
    assert "missing.jsonl: no file matches" in printed and "--as tasks needs --domain" in printed


def recorder(root):
    t0 = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)
    messages = json.dumps([{"role": "user", "content": "Write to ann@corp.io: what is 6*7?"}])
    write_partitioned(str(root), "interactions", [
        {"recorder_id": "r", "interaction_id": iid, "day": "2026-12-01", "created_at": t0,
         "checkpoint_digest": "sha256:abc", "messages": messages, "prompt": "what is 6*7?",
         "prompt_token_ids": [5, 6], "response": text, "response_token_ids": ids,
         "client": "ann@corp.io"}
        for iid, text, ids in (("i1", "42", [4, 2]), ("i2", "41", [4, 1]))])
    write_partitioned(str(root), "feedback", [
        {"recorder_id": "r", "feedback_id": f"f-{iid}", "interaction_id": iid, "day": "2026-12-01",
         "created_at": t0, "rating": rating, "label": None, "correction": None}
        for iid, rating in (("i1", 1.0), ("i2", -1.0))])
    return str(root)


def test_a_recorder_folder_with_drop_field_and_redact(tmp_path):
    out = tmp_path / "out"
    assert main(["import", recorder(tmp_path / "rec"), "--out", str(out), "--as", "sft,pairs",
                 "--drop-field", "client", "--redact", "email,phone"]) == 0
    (sft,) = read(out, "sft_examples")
    assert (sft["source"], sft["response"], sft["token_source"]) == ("interactions", "42", "sha256:abc")
    assert sft["response_token_ids"] == [4, 2] and sft["prompt_token_ids"] is None  # prompt redacted
    assert "[EMAIL]" in sft["messages"] and "ann@corp.io" not in sft["messages"]
    (pair,) = read(out, "preference_pairs")
    assert (pair["reason"], pair["chosen"], pair["rejected"], pair["margin"]) == ("rating", "42", "41", 1.0)
    assert (pair["chosen_token_ids"], pair["rejected_token_ids"]) == ([4, 2], [4, 1])


def test_drop_field_and_redact_on_a_jsonl_file(tmp_path):
    path = jsonl(tmp_path / "pii.jsonl", {
        "prompt": "Call 415-555-0100 or mail ann@corp.io", "response": "Will do, ann@corp.io",
        "feedback": "up", "user": "ann", "metadata": {"user_email": "ann@corp.io", "team": "x"}})
    out = tmp_path / "out"
    assert main(["import", path, "--out", str(out), "--drop-field", "user",
                 "--drop-field", "metadata.user_email", "--redact", "email,phone"]) == 0
    (sft,) = read(out, "sft_examples")
    assert sft["prompt"] == "Call [PHONE] or mail [EMAIL]" and sft["response"] == "Will do, [EMAIL]"


def test_every_flag_the_doc_names_is_real():
    sub = next(a for a in parser()._actions if a.dest == "command")
    flags = set(sub.choices["import"]._option_string_actions)
    named = set(re.findall(r"`(--[a-z-]+)", DOC.read_text()))
    assert named and named <= flags, named - flags
    assert {f for f in flags if f not in ("-h", "--help")} <= named
