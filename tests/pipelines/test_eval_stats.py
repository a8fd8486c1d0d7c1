"""Evaluation statistics: pass@k against brute force, the summaries of hand-built rows, their
table and metrics rows, and DuckDB's pass@k over a real Parquet file agreeing with `summarize`."""

import itertools
import random

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from rich.console import Console

from flywheel.pipelines.eval_stats import (pass_at_k, pass_at_k_sql, render_table, summarize,
                                         to_metrics_rows)
from flywheel.schemas import read_table, rows_to_file_table, validate_table


def brute_force(n, c, k):
    outcomes = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(outcomes, k))
    return sum(any(s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("n, c, k, expected", [
    (4, 1, 1, 0.25), (4, 1, 2, 0.5), (5, 2, 2, 0.7), (10, 0, 3, 0.0), (7, 7, 3, 1.0),
    (4, 2, 2, 5 / 6), (1, 1, 1, 1.0), (1, 0, 1, 0.0)])
def test_pass_at_k_hand_computed(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


def test_pass_at_k_equals_brute_force_over_all_subsets():
    for n in range(1, 9):
        for c in range(n + 1):
            for k in range(1, n + 1):
                assert pass_at_k(n, c, k) == pytest.approx(brute_force(n, c, k), abs=1e-12), (n, c, k)


def test_pass_at_k_is_stable_for_large_n():
    assert 0.0 < pass_at_k(10_000, 1, 1) == pytest.approx(1e-4)
    assert pass_at_k(10_000, 5_000, 100) == pytest.approx(1.0)


@pytest.mark.parametrize("n, c, k", [(4, 1, 5), (4, 1, 0), (4, 5, 1), (-1, 0, 1), (4, -1, 1), (0, 0, 1)])
def test_pass_at_k_rejects_impossible_arguments(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


def row(domain, task, i, verdict, greedy=False, key=None, visible=None, self_score=None):
    return {"domain": domain, "task_id": task, "sample_index": i, "verdict": verdict,
            "reward_raw": {"pass": 1.0, "fail": 0.0}.get(verdict), "greedy": greedy,
            "answer_key": key, "visible_score": visible, "self_score": self_score}


def eval_rows():
    """math: 3 tasks x 4 samples, answer keys and self scores; code: 5 and 3 samples, visible
    scores; only_greedy: one greedy row. Comments give what each selector picks."""
    return [
        # m1: keys 3,4,4,3 tie 2-2 -> "3" (seen first) -> row 0 fails; self tie 0.9 -> row 1 passes
        row("math", "m1", 0, "fail", key="3", self_score=0.2),
        row("math", "m1", 1, "pass", key="4", self_score=0.9),
        row("math", "m1", 2, "pass", key="4", self_score=0.9),
        row("math", "m1", 3, "fail", key="3", self_score=0.1),
        row("math", "m1", 100, "pass", greedy=True, key="4"),
        # m2: one unkeyed sample, "5" wins -> row 2 passes; no self score -> row 0 fails; an error
        row("math", "m2", 0, "fail"),
        row("math", "m2", 1, "fail", key="7"),
        row("math", "m2", 2, "pass", key="5"),
        row("math", "m2", 3, "pass", key="5"),
        row("math", "m2", 4, "error"),
        row("math", "m2", 100, "fail", greedy=True, key="7"),
        # m3: no keys -> first sample (passes); self picks row 1 (fails); greedy errored
        row("math", "m3", 0, "pass"),
        row("math", "m3", 1, "fail", self_score=0.5),
        row("math", "m3", 2, "fail"),
        row("math", "m3", 3, "fail"),
        row("math", "m3", 100, "error", greedy=True),
        # c1: 5 samples (n differs); first 3 visible 0.5, 1.0, 1.0 -> row 1 fails
        row("code", "c1", 0, "fail", visible=0.5),
        row("code", "c1", 1, "fail", visible=1.0),
        row("code", "c1", 2, "pass", visible=1.0),
        row("code", "c1", 3, "fail"),
        row("code", "c1", 4, "pass", visible=0.0),
        # c2: 3 failing samples without scores, a passing greedy row
        row("code", "c2", 0, "fail"),
        row("code", "c2", 1, "fail"),
        row("code", "c2", 2, "fail"),
        row("code", "c2", 100, "pass", greedy=True),
        row("only_greedy", "g1", 0, "pass", greedy=True),
    ]


def by_domain(summaries):
    return {s["domain"]: s for s in summaries}


def test_summary_of_a_domain_with_keys_ties_errors_and_greedy_rows():
    math = by_domain(summarize(eval_rows(), ks=(1, 2, 4, 16)))["math"]
    assert math == pytest.approx({
        "domain": "math", "tasks": 3, "n": 4, "n_max": 4, "errors": 2,
        "pass@1": (2 / 4 + 2 / 4 + 1 / 4) / 3, "pass@2": (5 / 6 + 5 / 6 + 0.5) / 3, "pass@4": 1.0,
        "greedy_pass@1": 0.5, "maj@4": 2 / 3, "best_of_4_visible": None,
        "best_of_4_self": 1 / 3, "oracle_best_of_4": 1.0})


def test_summary_of_a_domain_whose_tasks_differ_in_n():
    code = by_domain(summarize(eval_rows(), ks=(1, 2, 4, 16)))["code"]
    assert code == pytest.approx({
        "domain": "code", "tasks": 2, "n": 3, "n_max": 5, "errors": 0,
        "pass@1": (2 / 5 + 0) / 2, "pass@2": (0.7 + 0) / 2, "greedy_pass@1": 1.0,
        "maj@3": None, "best_of_3_visible": 0.0, "best_of_3_self": None,
        "oracle_best_of_3": 0.5})


def test_summary_of_all_domains_weights_tasks_equally():
    summaries = summarize(eval_rows(), ks=(1, 2, 4, 16))
    assert [s["domain"] for s in summaries] == ["code", "math", "only_greedy", "all"]
    assert summaries[-1] == pytest.approx({
        "domain": "all", "tasks": 6, "n": 3, "n_max": 5, "errors": 2,
        "pass@1": (0.5 + 0.5 + 0.25 + 0.4 + 0) / 5,
        "pass@2": (5 / 6 + 5 / 6 + 0.5 + 0.7 + 0) / 5,
        "greedy_pass@1": 0.75,
        # first 3 samples: m1 "4" passes, m2 tie 7/5 -> "7" fails, m3 first passes, c1 c2 first fail
        "maj@3": 2 / 5,
        "best_of_3_visible": 1 / 5,      # only m3's first sample passes among the fallbacks
        "best_of_3_self": 1 / 5,         # m1 row 1
        "oracle_best_of_3": 4 / 5})


def test_a_greedy_only_domain_has_no_sampled_metrics():
    only = by_domain(summarize(eval_rows()))["only_greedy"]
    assert only == {"domain": "only_greedy", "tasks": 1, "n": 0, "n_max": 0, "errors": 0,
                    "greedy_pass@1": 1.0}


def test_summaries_do_not_depend_on_row_order():
    rows = eval_rows()
    random.Random(0).shuffle(rows)
    assert summarize(rows) == summarize(eval_rows())


def test_without_greedy_rows_greedy_pass_is_none_and_errors_stay_out_of_n():
    rows = [row("d", "t", i, v) for i, v in enumerate(["pass", "error", "fail", "error"])]
    d, _ = summarize(rows)
    assert (d["n"], d["errors"], d["greedy_pass@1"], d["pass@1"]) == (2, 2, None, 0.5)


def test_bad_input_is_refused():
    assert summarize([]) == []
    with pytest.raises(ValueError, match="verdict"):
        summarize([{**row("d", "t", 0, "pass"), "verdict": "ok"}])
    with pytest.raises(ValueError):
        summarize([row("d", "t", 0, "pass")], ks=(0,))


def test_render_table_shows_every_domain_and_number():
    console = Console(record=True, width=300)
    console.print(render_table(summarize(eval_rows(), ks=(1, 2))))
    text = console.export_text()
    for expected in ("math", "code", "only_greedy", "all", "3..5", "pass@1", "pass@2", "maj@4",
                     "maj@3", "best_of_3_visible", "oracle_best_of_4", "0.417", "0.200", "0.750",
                     "0.667", "n/a"):
        assert expected in text, expected
    header = next(line for line in text.splitlines() if "domain" in line)
    assert header.index("pass@1") < header.index("pass@2") < header.index("greedy_pass@1") \
        < header.index("maj@3") < header.index("maj@4") < header.index("oracle_best_of_3")


def test_metrics_rows_round_trip_through_the_metrics_table(tmp_path):
    rows = to_metrics_rows(summarize(eval_rows(), ks=(1, 4)), run_id="r1", iteration=3)
    path = tmp_path / "tables/metrics/iteration=3/part-00000.parquet"
    path.parent.mkdir(parents=True)
    pq.write_table(rows_to_file_table("metrics", rows), path)
    table = read_table(str(tmp_path / "tables/metrics"), "metrics")
    validate_table("metrics", table)
    back = {(r["domain"], r["name"]): r["value"] for r in table.to_pylist()}
    assert back[("math", "eval/pass@1")] == pytest.approx(5 / 12)
    assert back[("*", "eval/greedy_pass@1")] == 0.75
    assert back[("code", "eval/n_max")] == 5.0
    assert ("math", "eval/best_of_4_visible") not in back       # None values are left out
    assert {r["iteration"] for r in table.to_pylist()} == {3}
    assert {r["policy_version"] for r in rows} == {3}
    assert all(r["name"].startswith("eval/") for r in rows)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_duckdb_pass_at_k_matches_summarize(tmp_path, k):
    rows = eval_rows() + [row("big", f"b{t}", i, "pass" if (i * 7 + t) % 5 == 0 else "fail")
                          for t in range(4) for i in range(40)]
    path = tmp_path / "eval.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    con = duckdb.connect()
    got = con.execute(pass_at_k_sql(f"read_parquet('{path}')", k)).fetchall()
    want = [(s["domain"], s[f"pass@{k}"]) for s in summarize(rows, ks=(k,)) if f"pass@{k}" in s]
    assert [d for d, _, _ in got] == [d for d, _ in want]
    for (_, _, value), (_, expected) in zip(got, want):
        assert value == pytest.approx(expected, abs=1e-9)


def test_duckdb_pass_at_k_with_another_filter_of_sampled_rows(tmp_path):
    rows = [{**r, "sampling_temperature": 0.0 if r["greedy"] else 1.0} for r in eval_rows()]
    for r in rows:
        del r["greedy"]
    path = tmp_path / "trajectories.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    sql = pass_at_k_sql(f"(SELECT * FROM read_parquet('{path}'))", 1, sampled="sampling_temperature > 0")
    got = {d: v for d, _, v in duckdb.connect().execute(sql).fetchall()}
    assert got == pytest.approx({"code": 0.2, "math": 5 / 12, "all": 0.33})
    with pytest.raises(ValueError):
        pass_at_k_sql("t", 0)
