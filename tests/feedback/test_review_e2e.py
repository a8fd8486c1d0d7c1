"""Issue 26's acceptance for review, end to end: a real run queues its open_ended attempts, a
person labels three of them on the review page in headless Chromium, the labels land in
`reviews`, and the next iteration trains on them (its rows say reward_source = 'review').

FLYWHEEL_REVIEW_SCREENSHOT=path.png keeps a screenshot of the page after the labels."""

import dataclasses
import json
import os
import threading

import pytest

from flywheel.settings.config import ReviewSettings
from flywheel.loop.driver import run_iterations
from flywheel.settings.layout import RunLayout
from flywheel.feedback.review_page import ReviewServer
from flywheel.reports.sql import query

from tests.chromium import screenshot
from tests.run_configs import tiny_config

pytestmark = pytest.mark.slow


def test_three_labels_given_in_the_browser_train_the_next_iteration(tmp_path, browser):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"domain": "open_ended", "task_id": "kind-words",
                                 "prompt": "Say something kind about the number 7.",
                                 "rubric": "kind, mentions 7"}) + "\n")
    base = tiny_config()
    config = dataclasses.replace(
        base, iterations=1, review=ReviewSettings(),
        rollout=dataclasses.replace(base.rollout, domains=("add",), task_files=(str(tasks),),
                                    n_samples=3))
    run = str(tmp_path / "run")
    run_iterations(run, config)
    queue = sorted(RunLayout(run).read_table("review_queue").to_pylist(),
                   key=lambda q: q["sample_index"])
    assert [q["reason"] for q in queue] == ["unverified"] * 3

    server = ReviewServer(run, port=0, reviewers={"ana": "a-reviewers-token"})
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        browser.call("Page.enable")
        browser.call("Page.navigate", url=server.url)
        browser.wait_for("document.body && document.body.dataset.loaded === 'true'")
        assert browser.eval("document.getElementById('reviewer').textContent") == "ana"
        for q, button in zip(queue, ("pass", "fail", "pass")):
            browser.click(f'article[data-attempt-id="{q["attempt_id"]}"] button.{button}')
            browser.wait_for(f"document.querySelector('article[data-attempt-id=\"{q['attempt_id']}\"]')"
                             ".classList.contains('labeled')")
        assert browser.eval("document.getElementById('counts').textContent") == \
            "pending 0 / labeled by you 3 / total 3"
        if os.environ.get("FLYWHEEL_REVIEW_SCREENSHOT"):
            browser.eval("window.scrollTo(0, 0)")
            screenshot(browser, os.environ["FLYWHEEL_REVIEW_SCREENSHOT"])
    finally:
        server.shutdown()
        server.server_close()
    _, stored = query(run, "SELECT attempt_id, reviewer, score FROM reviews ORDER BY attempt_id")
    assert stored == [(q["attempt_id"], "ana", s) for q, s in zip(queue, (1.0, 0.0, 1.0))]

    run_iterations(run, dataclasses.replace(config, iterations=2))
    _, rows = query(run, "SELECT sample_index, reward_source, reward_raw, filtered, advantage "
                         "FROM trajectories WHERE iteration = 1 AND domain = 'open_ended' "
                         "AND reward_source = 'review' ORDER BY sample_index")
    assert [r[:4] for r in rows] == [(0, "review", 1.0, False), (1, "review", 0.0, False),
                                     (2, "review", 1.0, False)]
    assert rows[0][4] > 0 > rows[1][4]
    _, trained = query(run, "SELECT value FROM metrics WHERE iteration = 1 AND "
                            "name = 'train/n_sequences'")
    assert trained[0][0] >= 3
