"""People as the verifier, end to end: attempts of open_ended tasks are queued pending, labels
written to the `reviews` table become rewards in the next update, the rows show the source."""

import dataclasses
import datetime as dt
import json
import uuid

import pytest

from flywheel.settings.config import ReviewSettings
from flywheel.loop.driver import run_iterations
from flywheel.settings.layout import RunLayout
from flywheel.feedback.review_queue import audited, observation_text
from flywheel.feedback.review_rewards import reviewed_groups, scores_by_attempt
from flywheel.reports.sql import query
from flywheel.schemas.write import write_partitioned
from flywheel.policy.checkpoint import recorded_digest

from tests.run_configs import tiny_config

NOW = dt.datetime(2026, 12, 6, tzinfo=dt.timezone.utc)


def label(queue_row: dict, score: float, reviewer="ana", at=NOW) -> dict:
    keys = ("run_id", "iteration", "attempt_id", "domain", "task_id", "group_id", "sample_index",
            "response_digest")
    return {**{k: queue_row[k] for k in keys}, "review_id": uuid.uuid4().hex, "reviewer": reviewer,
            "score": score, "label": None, "comment": None, "created_at": at}


def open_ended_tasks(path, n=3):
    with open(path, "w") as f:
        for i in range(n):
            f.write(json.dumps({"domain": "open_ended", "task_id": f"oe{i}",
                                "prompt": f"Say something kind about the number {i}.",
                                "rubric": "kind"}) + "\n")
    return str(path)


@pytest.mark.slow
def test_labels_become_rewards_of_the_next_update(tmp_path):
    tasks = open_ended_tasks(tmp_path / "tasks.jsonl")
    base = tiny_config()
    config = dataclasses.replace(
        base, iterations=1,
        rollout=dataclasses.replace(base.rollout, domains=("add",), task_files=(tasks,)),
        review=ReviewSettings(audit_share=0.25, max_wait=2))
    run = str(tmp_path / "run")
    run_iterations(run, config)
    layout = RunLayout(run)
    _, rows = query(run, "SELECT domain, verdict, filter_reason, reward_source, count(*) FROM "
                         "trajectories WHERE domain = 'open_ended' GROUP BY ALL")
    assert rows == [("open_ended", "pending", "awaiting_review", "review_pending", 12)]
    queue = layout.read_table("review_queue").to_pylist()
    unverified = [q for q in queue if q["reason"] == "unverified"]
    audit = [q for q in queue if q["reason"] == "audit"]
    assert len(unverified) == 12 and audit  # 3 tasks x 4 samples; an audit share of `add`'s
    assert all(q["domain"] == "add" and q["verifier_reward"] is not None for q in audit)
    assert all(q["domain"] == "open_ended" and q["verifier_reward"] is None for q in unverified)

    # a reviewer labels one whole group (2 pass, 2 fail) and half of another (which waits)
    groups = sorted({q["group_id"] for q in unverified})
    whole = sorted((q for q in unverified if q["group_id"] == groups[0]),
                   key=lambda q: q["sample_index"])
    half = [q for q in unverified if q["group_id"] == groups[1]][:2]
    labels = [label(q, s) for q, s in zip(whole, (1.0, 0.0, 1.0, 0.0))]
    labels += [label(q, 1.0) for q in half]
    labels.append(label(whole[0], 0.0, at=NOW - dt.timedelta(hours=1)))  # older: overridden
    stale = dict(label(whole[1], 1.0, reviewer="bo"), response_digest="0" * 64)  # other text
    labels.append(label(audit[0], 0.0 if audit[0]["verifier_reward"] >= 0.5 else 1.0))  # overrules
    write_partitioned(run, "reviews", [*labels, stale], prefix="review")

    run_iterations(run, dataclasses.replace(config, iterations=2))
    _, rows = query(run, "SELECT reward_source, reward_raw, verdict, filtered, policy_version, "
                         "advantage FROM trajectories WHERE iteration = 1 AND "
                         "reward_source = 'review' ORDER BY sample_index")
    assert [r[1] for r in rows] == [1.0, 0.0, 1.0, 0.0]  # the newest label of each, one reviewer
    assert [r[2] for r in rows] == ["pass", "fail", "pass", "fail"]
    assert all(not r[3] and r[4] == 0 for r in rows)  # trained on; sampled by version 0
    assert rows[0][5] > 0 > rows[1][5]
    _, metrics = query(run, "SELECT name, value FROM metrics WHERE iteration = 1 AND "
                            "name LIKE 'review/%' ORDER BY 1")
    values = dict(metrics)
    assert values["review/ready_groups"] == 1 and values["review/rows"] == 4
    assert values["review/audit_labeled"] == 1 and values["review/audit_disagree"] == 1.0
    from flywheel.reports.html import render_report
    page, _ = render_report(run)
    from flywheel.reports.run_status import run_status, status_lines
    assert any(line.startswith("review: ") and "await a label" in line
               for line in status_lines(run_status(run)))
    assert "People's labels" in page and "people overrule the verifier in 1.000 of 1 labels" in page
    # waiting: iteration 0's half-labelled and unlabelled groups, iteration 1's three
    assert values["review/pending_groups"] == 5 and values["review/queued_unverified"] == 12
    _, train = query(run, "SELECT name, value FROM metrics WHERE iteration = 1 AND "
                          "name IN ('train/n_sequences', 'train/stale_rows')")
    train = dict(train)
    assert train["train/n_sequences"] == 4  # the update trained on the reviewed rows
    moved = recorded_digest(layout.checkpoint(0)) != recorded_digest(layout.checkpoint(None))
    assert train["train/stale_rows"] == (4 if moved else 0)  # a version behind: corrected for


def test_a_group_waits_for_all_its_labels_then_goes_with_what_it_has():
    queue = [{"attempt_id": f"0/train/t/{i}", "group_id": "0/train/t", "iteration": 0,
              "reason": "unverified", "response_digest": "d"} for i in range(3)]
    reviews = [{"attempt_id": "0/train/t/0", "reviewer": "a", "score": 1.0, "created_at": NOW,
                "review_id": "r1", "response_digest": "d"},
               {"attempt_id": "0/train/t/1", "reviewer": "a", "score": 0.0, "created_at": NOW,
                "review_id": "r2", "response_digest": "d"}]
    scores = scores_by_attempt(queue, reviews)
    ready, counts = reviewed_groups(queue, scores, set(), iteration=1, max_wait=2)
    assert not ready and counts["pending_groups"] == 1
    ready, counts = reviewed_groups(queue, scores, set(), iteration=2, max_wait=2)  # last chance
    assert len(ready["0/train/t"]) == 2
    ready, counts = reviewed_groups(queue, scores, set(), iteration=3, max_wait=2)
    assert not ready and counts["expired_groups"] == 1
    ready, _ = reviewed_groups(queue, scores, {"0/train/t"}, iteration=2, max_wait=2)
    assert not ready  # a group joins one update only


def test_two_reviewers_scores_are_averaged_and_a_label_names_its_text():
    queue = [{"attempt_id": "a", "response_digest": "d1"}]
    reviews = [{"attempt_id": "a", "reviewer": r, "score": s, "created_at": NOW,
                "review_id": r, "response_digest": d}
               for r, s, d in (("x", 1.0, "d1"), ("y", 0.5, "d1"), ("z", 0.0, "other"))]
    assert scores_by_attempt(queue, reviews) == {"a": (0.75, 2)}


def test_audit_draws_are_seeded_and_near_the_share():
    ids = [f"0/train/t{i}/0" for i in range(4000)]
    drawn = [audited(i, 7, 0.1) for i in ids]
    assert drawn == [audited(i, 7, 0.1) for i in ids]
    assert 0.08 < sum(drawn) / len(ids) < 0.12
    assert not any(audited(i, 7, 0.0) for i in ids)


def test_observations_are_cut_in_the_middle():
    text = observation_text([{"observation": "a" * 3000}, {"observation": "b" * 3000}], 1000)
    assert text.startswith("a" * 500) and text.endswith("b" * 500) and "cut" in text
    assert observation_text(None, 10) == ""


@pytest.mark.slow
def test_labels_join_an_overlapped_update(tmp_path):
    """--max-staleness 1: the trainer lane admits reviewed rows sampled max_staleness + max_wait
    versions back; the rows say reward_source = 'review'."""
    from flywheel.settings.config import OverlapSettings
    tasks = open_ended_tasks(tmp_path / "tasks.jsonl", n=1)
    base = tiny_config()
    config = dataclasses.replace(
        base, iterations=1, review=ReviewSettings(max_wait=1),
        overlap=OverlapSettings(max_staleness=1),
        rollout=dataclasses.replace(base.rollout, domains=("add",), task_files=(tasks,),
                                    n_samples=2))
    run = str(tmp_path / "run")
    run_iterations(run, config)
    queue = RunLayout(run).read_table("review_queue").to_pylist()
    write_partitioned(run, "reviews", [label(q, float(q["sample_index"] == 0)) for q in queue],
                      prefix="review")
    run_iterations(run, dataclasses.replace(config, iterations=2))
    _, rows = query(run, "SELECT sample_index, reward_raw, filtered FROM trajectories WHERE "
                         "iteration = 1 AND reward_source = 'review' ORDER BY 1")
    assert rows == [(0, 1.0, False), (1, 0.0, False)]
    _, trained = query(run, "SELECT value FROM metrics WHERE iteration = 1 AND "
                            "name = 'train/n_sequences'")
    assert trained[0][0] >= 2



@pytest.mark.slow
def test_an_update_waits_for_labels_given_while_it_waits(tmp_path):
    """--review-wait-seconds: labels given during the wait join the same iteration's update."""
    import threading
    import time
    tasks = open_ended_tasks(tmp_path / "tasks.jsonl", n=1)
    base = tiny_config()
    config = dataclasses.replace(
        base, iterations=1, review=ReviewSettings(wait_seconds=60),
        rollout=dataclasses.replace(base.rollout, domains=("add",), task_files=(tasks,),
                                    n_samples=2))
    run = str(tmp_path / "run")
    layout = RunLayout(run)
    events = []

    def reviewer():  # a person who labels the queue as soon as it appears
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            queue = layout.read_table("review_queue").to_pylist()
            if queue:
                time.sleep(1.0)  # after the wait began
                write_partitioned(run, "reviews", [label(q, float(q["sample_index"] == 0))
                                                   for q in queue], prefix="review")
                return
            time.sleep(0.2)

    person = threading.Thread(target=reviewer)
    person.start()
    run_iterations(run, config, event=lambda name, data: events.append((name, data)))
    person.join()
    waits = [d for n, d in events if n == "review_wait"]
    assert waits and waits[0]["missing"] == 2  # it waited for both
    end = [d for n, d in events if n == "review_end"][0]
    assert end["rows"] == 2 and end["unlabelled_at_update"] == 0
    _, rows = query(run, "SELECT sample_index, reward_raw FROM trajectories WHERE iteration = 0 "
                         "AND reward_source = 'review' ORDER BY 1")
    assert rows == [(0, 1.0), (1, 0.0)]
