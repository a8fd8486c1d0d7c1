"""Registry fields of #5: defaults keep the built-in domains as they were; file-backed domains;
sandbox needs and tools; preparing user rows."""

import dataclasses

import pytest

from flywheel.domains.domain import SandboxNeeds
from flywheel.domains.registry import DEFAULT_DOMAINS, all_domains, get_domain, prepare_task
from flywheel.sandbox import Limits
from flywheel.verifiers import available_verifiers


@pytest.mark.parametrize("name", DEFAULT_DOMAINS)
def test_defaults_keep_the_builtin_domains_working(name):
    d = get_domain(name)
    row = d.describe()
    assert row["tasks"] == "generated" and row["tier"] == 1 and d.tools == ()
    assert d.render_prompt({"prompt": "x"}) == "x"
    assert not d.validate_task(d.make_task("train", 0, 0))


def test_every_domain_names_a_known_verifier_and_valid_limits():
    limit_fields = {f.name for f in dataclasses.fields(Limits)}
    for name, d in all_domains().items():
        assert d.verifier in available_verifiers(), name
        if d.sandbox:
            assert set(d.sandbox.limits()) <= limit_fields
            assert d.uses_sandbox, name
    assert SandboxNeeds().limits() == {"timeout_s": 2.0, "memory_mb": 256}


def test_sandboxed_programs_carry_their_limits():
    for name in ("py_functions", "sql_shop", "shell_files"):
        d = get_domain(name)
        task = d.make_task("train", 0, 0)
        spec = d.program(task, "")
        assert Limits(**spec["limits"]).timeout_s == d.sandbox.timeout_s
        assert set(spec["files"]) == set(d.sandbox.files) - {"script.sh"}


def test_dataset_domains_are_seeded_split_and_cycle():
    d = get_domain("py_mbpp")
    assert d.task_count() == 8 and len(d.tasks("train")) + len(d.tasks("heldout")) == 8
    first = [d.make_task("train", i, 0)["task_id"] for i in range(len(d.tasks("train")))]
    assert sorted(first) == sorted(t["task_id"] for t in d.tasks("train"))
    assert d.make_task("train", len(first), 0) == d.make_task("train", 0, 0)      # cycles
    assert [d.make_task("train", i, 1)["task_id"] for i in range(len(first))] != first  # seeded order
    assert {t["task_id"] for t in d.tasks("train")}.isdisjoint(t["task_id"] for t in d.tasks("heldout"))


def test_prepare_task_normalizes_mbpp_rows_and_names_problems():
    row = {"task_id": "m", "text": "Add two numbers.", "test_list": ["assert add(1, 2) == 3"]}
    task, problems = prepare_task(row, "python_tests")
    assert not problems and task["prompt"].startswith("Add two numbers.") and task["split"] == "train"
    assert prepare_task({"task_id": "x"})[1] == ["field `domain` missing"]
    assert prepare_task({**row, "split": "dev"}, "python_tests")[1] == [
        "field `split` must be one of train, heldout, got 'dev'"]
