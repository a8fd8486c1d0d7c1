"""The per-domain watch (loop/domain_watch.py): each `watch/*` metric of a real trajectories
table against figures worked out by hand, on a local run directory and on gs://; and the
warnings on metric histories made up to diverge, to collapse, or to stay quiet."""

import pyarrow as pa
import pytest

from flywheel.loop.domain_watch import domain_rows, warning_rows, warnings
from flywheel.schemas import TABLES
from flywheel.schemas.write import write_rows


def trajectory(domain, logprobs, verdict, filtered, advantage, mask=None, segments=None):
    row = dict.fromkeys(TABLES["trajectories"].names)
    row.update(run_id="r", iteration=0, domain=domain, task_id=f"{domain}-{len(logprobs)}",
               group_id="g", sample_index=0, policy_version=0, prompt="q", response="a",
               response_token_ids=list(range(len(logprobs))), response_logprobs=logprobs,
               response_mask=mask, segments=segments, verdict=verdict, filtered=filtered,
               filter_reason="zero_variance" if filtered else None, advantage=advantage)
    return row


def segment(logprobs, mask):
    return {"prompt_token_ids": [1], "response_token_ids": list(range(len(logprobs))),
            "response_logprobs": logprobs, "response_mask": mask, "first_turn": 0,
            "context": "cut", "summary": None}


# add (one turn, no mask):  surprisal 2 + 1 + 6 = 9 over 6 tokens; kept |adv| x tokens 2 + 0.5
# repo (episodes, masked): 0.2 + 0.4 + a segment's 1.0 = 1.6 over 3 tokens (update 2 x 3 = 6),
#                          and 0.1 over 1 token of a filtered error (no update)
ROWS = {
    "add": [trajectory("add", [-0.5, -1.5], "pass", False, 1.0),
            trajectory("add", [-1.0], "fail", False, -0.5),
            trajectory("add", [-2.0, -2.0, -2.0], "fail", True, 0.0)],
    "repo": [trajectory("repo", [-0.2, -3.0, -0.4], "pass", False, 2.0, mask=[1, 0, 1],
                        segments=[segment([-1.0, -5.0], [1, 0])]),
             trajectory("repo", [-0.1], "error", True, None, mask=[1])],
}
EXPECTED = {
    "add": {"watch/success": 1 / 3, "watch/kept_frac": 2 / 3, "watch/attempt_share": 3 / 5,
            "watch/update_share": 2.5 / 8.5, "watch/entropy": 9 / 6},
    "repo": {"watch/success": 1 / 2, "watch/kept_frac": 1 / 2, "watch/attempt_share": 2 / 5,
             "watch/update_share": 6 / 8.5, "watch/entropy": 1.7 / 4},
    "*": {"watch/success": 2 / 5, "watch/kept_frac": 3 / 5, "watch/attempt_share": 1.0,
          "watch/update_share": 1.0, "watch/entropy": 10.7 / 10},
}


def write_trajectories(root: str) -> None:
    for domain, rows in ROWS.items():
        write_rows(f"{root}/tables/trajectories/iteration=0/domain={domain}/part-00000.parquet",
                      "trajectories", rows)
    # another iteration's rows are not this one's
    write_rows(f"{root}/tables/trajectories/iteration=1/domain=add/part-00000.parquet",
                  "trajectories", [{**trajectory("add", [-9.0], "pass", False, 5.0), "iteration": 1}])


def as_values(rows) -> dict:
    out = {}
    for row in rows:
        assert (row["run_id"], row["iteration"], row["policy_version"]) == ("r", 0, 0)
        assert set(row) == set(TABLES["metrics"].names) - {"schema_version"}
        out.setdefault(row["domain"], {})[row["name"]] = row["value"]
    return out


def test_each_watch_metric_matches_the_hand_computed_figure(tmp_path):
    write_trajectories(str(tmp_path))
    values = as_values(domain_rows(str(tmp_path), 0, "r"))
    assert values == {d: pytest.approx(v) for d, v in EXPECTED.items()}


def test_the_rows_are_valid_metrics_rows(tmp_path):
    write_trajectories(str(tmp_path))
    rows = domain_rows(str(tmp_path), 0, "r")
    write_rows(str(tmp_path / "watch.parquet"), "metrics", rows)  # validates every type
    assert [(r["domain"], r["name"]) for r in rows] == sorted((r["domain"], r["name"]) for r in rows)


def test_an_iteration_without_trajectories_has_no_rows(tmp_path):
    assert domain_rows(str(tmp_path), 3, "r") == []


def test_nothing_trained_gives_every_update_share_zero(tmp_path):
    write_rows(f"{tmp_path}/tables/trajectories/iteration=0/domain=add/part-00000.parquet",
                  "trajectories", [trajectory("add", [-1.0], "fail", True, 0.0)])
    values = as_values(domain_rows(str(tmp_path), 0, "r"))
    assert values["add"]["watch/update_share"] == values["*"]["watch/update_share"] == 0.0
    assert values["add"]["watch/kept_frac"] == 0.0


def test_a_gs_run_directory_reads_like_a_local_one(gcs_emulator, monkeypatch):
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_emulator)
    from flywheel.transforms.gcs_credentials import anonymous_for_emulator
    anonymous_for_emulator()
    write_trajectories("gs://runs/watch")
    values = as_values(domain_rows("gs://runs/watch", 0, "r"))
    assert values == {d: pytest.approx(v) for d, v in EXPECTED.items()}


# -- warnings on made-up histories -----------------------------------------------------------------

def history(name: str, by_domain: dict[str, list[float]]) -> list[dict]:
    return [{"iteration": k, "domain": d, "name": name, "value": v}
            for d, values in by_domain.items() for k, v in enumerate(values)]


QUIET = (history("watch/success", {"a": [0.3, 0.35, 0.32, 0.4], "b": [0.5, 0.45, 0.5, 0.48],
                                   "*": [0.4, 0.4, 0.41, 0.44]})
         + history("watch/entropy", {"a": [1.2, 1.0, 0.9, 0.8], "b": [0.9, 0.9, 0.85, 0.8],
                                     "*": [1.0, 0.95, 0.87, 0.8]})
         + history("heldout_pass@1", {"a": [0.2, 0.2, 0.25, 0.25], "b": [0.4, 0.4, 0.4, 0.35]})
         + history("train_pass_rate", {"a": [0.0, 0.0, 0.9, 0.9], "b": [0.9, 0.9, 0.0, 0.0]}))


def test_a_quiet_history_warns_of_nothing():
    assert all(warnings(QUIET, k) == [] for k in range(4))
    assert warnings([]) == []


def test_a_domain_rising_while_the_others_fall_is_diverging():
    rows = history("watch/success", {"a": [0.2, 0.3, 0.4, 0.5], "b": [0.6, 0.55, 0.45, 0.4],
                                     "c": [0.5, 0.45, 0.4, 0.3], "*": [0.4, 0.4, 0.4, 0.4]})
    found = warnings(rows)  # iteration 3: a +0.2 over 1..3, the others -0.15 and -0.15
    assert [(w["iteration"], w["domain"], w["kind"], w["metric"]) for w in found] == \
        [(3, "a", "diverging", "watch/success")]
    assert "rose by 0.200 over iterations 1..3" in found[0]["message"]
    assert "fell by 0.150" in found[0]["message"]
    assert warnings(rows, 1) == []                # +0.1 is not more than delta
    assert warnings(rows, window=2) == []         # 2..3: a +0.1
    assert warnings(rows, delta=0.16) == []       # the others fell by 0.15 only
    assert warnings([r for r in rows if r["domain"] in ("a", "*")]) == []  # no other domain


def test_held_out_pass_at_1_diverges_on_its_own():
    rows = history("heldout_pass@1", {"x": [0.1, 0.1, 0.5], "y": [0.6, 0.5, 0.3]})
    found = warnings(rows)
    assert [(w["domain"], w["metric"]) for w in found] == [("x", "heldout_pass@1")]


def test_entropy_collapse_relative_to_the_start_or_below_the_floor():
    rows = history("watch/entropy", {"a": [2.0, 1.5, 0.5, 0.39], "b": [0.3, 0.2, 0.1, 0.04],
                                     "c": [1.0, 1.0, 1.0, 1.0], "*": [1.1, 0.9, 0.5, 0.5]})
    found = warnings(rows)
    assert [(w["iteration"], w["domain"], w["kind"]) for w in found] == \
        [(3, "a", "entropy_collapse"), (3, "b", "entropy_collapse")]
    assert "below 20% of its 2.000 at iteration 0" in found[0]["message"]
    assert "below the floor of 0.05 nats/token" in found[1]["message"]
    assert [w["domain"] for w in warnings(rows, entropy_fraction=0.1)] == ["b"]
    assert [w["domain"] for w in warnings(rows, entropy_floor=0.6)] == ["*", "a", "b"]
    assert warnings(rows, 2) == []


def test_rows_after_the_iteration_and_a_pyarrow_table_read_the_same():
    rows = history("watch/entropy", {"a": [2.0, 0.3, 2.0]})
    table = pa.Table.from_pylist(rows)
    assert warnings(rows, 1) == warnings(table, 1) != []
    assert warnings(table) == []


def test_warnings_become_one_metrics_row_per_domain_and_kind(tmp_path):
    found = [{"iteration": 3, "domain": "a", "kind": "diverging", "metric": m, "message": ""}
             for m in ("watch/success", "heldout_pass@1")]
    found.append({"iteration": 3, "domain": "*", "kind": "entropy_collapse",
                  "metric": "watch/entropy", "message": ""})
    rows = warning_rows(found, "r")
    assert [(r["iteration"], r["domain"], r["name"], r["value"]) for r in rows] == \
        [(3, "*", "watch/warning_entropy_collapse", 1.0), (3, "a", "watch/warning_diverging", 1.0)]
    write_rows(str(tmp_path / "w.parquet"), "metrics", rows)


def test_a_domain_warning_event_is_a_warning_line_on_screen_and_in_run_log(tmp_path):
    import io

    from rich.console import Console

    from flywheel.cli.progress import RunProgress
    from flywheel.cli.run_log import RunLog
    rows = history("watch/entropy", {"a": [1.0, 0.01]})
    [found] = warnings(rows)
    screen = io.StringIO()
    with RunLog(str(tmp_path)) as log, RunProgress(Console(file=screen, width=300), str(tmp_path),
                                                   log) as progress:
        progress.event("domain_warning", {k: found[k] for k in ("iteration", "domain", "kind",
                                                                "message")})
    line = ("warning: iteration 1, entropy_collapse: entropy of a is 0.010 nats/token, below the "
            "floor of 0.05 nats/token: the policy samples nearly one answer there")
    assert line in screen.getvalue().splitlines()
    assert any(entry.endswith(line) for entry in (tmp_path / "run.log").read_text().splitlines())
