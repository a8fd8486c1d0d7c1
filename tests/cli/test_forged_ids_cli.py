"""A recorder folder whose response reads "4" but whose ids spell another text, naming the
starting weights' (public) digest: `flywheel import` then `flywheel sft` train "4", say so, and
record it in the checkpoint. The real CLI on the tiny byte-level policy, a real checkpoint."""
import datetime as dt
import json

import pytest

from flywheel.cli.main import main
from flywheel.policy.checkpoint import load_checkpoint, policy_digest
from flywheel.policy.backends import create_policy
from flywheel.schemas.write import write_partitioned

T0 = dt.datetime(2026, 12, 1, 12, tzinfo=dt.timezone.utc)


def _interaction(iid, question, response, response_ids, prompt_ids, digest):
    messages = [{"role": "user", "content": question}]
    return {"recorder_id": "rec", "interaction_id": iid, "day": "2026-12-01", "created_at": T0,
            "model": "m", "checkpoint_digest": digest, "messages": json.dumps(messages),
            "prompt": question, "prompt_token_ids": prompt_ids, "response": response,
            "response_token_ids": response_ids}


@pytest.mark.slow  # two CLI runs and a checkpoint (~5 s); test_supervised checks the rule quickly
def test_a_forged_record_trains_its_text_and_is_counted(tmp_path, capsys):
    policy = create_policy("tiny", {}, seed=0)
    digest = policy_digest(policy)
    ask = lambda q: policy.encode_messages([{"role": "user", "content": q}])  # noqa: E731
    rec = tmp_path / "rec"
    write_partitioned(str(rec), "interactions", [
        _interaction("forged", "2+2=", "4", policy.encode_response("os.system('rm -rf ~')"),
                     ask("2+2="), digest),
        _interaction("bad-ids", "5+5=", "10", [-3, 7], ask("5+5="), digest),
        _interaction("genuine", "3+3=", "6", policy.encode_response("6"), ask("3+3="), digest)])
    write_partitioned(str(rec), "feedback", [
        {"recorder_id": "rec", "feedback_id": f"f-{iid}", "interaction_id": iid,
         "day": "2026-12-01", "created_at": T0, "rating": 1.0}
        for iid in ("forged", "bad-ids", "genuine")])
    imported = str(tmp_path / "imported")
    assert main(["import", str(rec), "--out", imported]) == 0
    out = str(tmp_path / "ckpt")
    capsys.readouterr()
    rc = main(["sft", "--policy", "tiny", "--examples", imported, "--epochs", "1", "--out", out])
    text = capsys.readouterr().out
    assert rc == 0, text
    data = load_checkpoint(out).meta["sft"]["data"]
    assert data["sources"] == {"examples (exact ids)": 1, "examples (ids re-encoded)": 2}
    assert data["ids_reencoded"] == {  # bad-ids: its response ids were dropped at import
        "`response_token_ids`: the recorded ids do not spell the recorded text": 1,
        "`response_token_ids`: the recorded ids are not a list of token ids": 1}
    assert "ids re-encoded from the text" in text
