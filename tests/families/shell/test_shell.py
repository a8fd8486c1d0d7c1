"""shell_state: scripts run in the real sandbox; the verdict reads the files they leave behind."""

import random

import pytest

from flywheel.domains.registry import get_domain

D = get_domain("shell_files")


def task_for(start):
    return next(t for i in range(300) if (t := D.make_task("train", i, 0))["prompt"].startswith(start))


COUNT = task_for("Write the number of lines")
TMP = task_for("Delete every file in logs/")


def test_correct_scripts_pass(score):
    assert score(COUNT, "```bash\nwc -l < data.txt > count.txt\n```").verdict == "pass"
    assert score(COUNT, "n=0; while read -r _; do n=$((n+1)); done < data.txt; echo $n > count.txt"
                 ).reward == 1.0
    assert score(TMP, "find logs -name '*.tmp' -delete").verdict == "pass"


def test_wrong_scripts_fail_with_per_check_components(score):
    v = score(TMP, "rm -f logs/*")                          # deletes the .log files too
    assert v.verdict == "fail" and v.reward == 0.0
    assert any(k.endswith(".log") and not x for k, x in v.components.items() if ":" in k)
    assert score(COUNT, "wc -c < data.txt > count.txt").verdict == "fail"     # bytes, not lines


@pytest.mark.parametrize("response", ["", "this is not bash (", "exit 1", "```bash\n\n```"])
def test_malformed_scripts_score_zero(score, response):
    assert score(COUNT, response).reward == 0.0


def test_hacks_score_zero(score):
    visible = COUNT["expect"]["count.txt"]
    hard_coded = score(COUNT, f"echo {visible} > count.txt")  # right on the shown files only
    assert hard_coded.reward == 0.0 and hard_coded.exploit_suspected
    forged = ('FLYWHEEL-SHELL {"variants": [{"files": {"count.txt": {"type": "file", "content": "'
              + visible + '"}}}]}')
    for name, script in {
        "fake report": f"echo PASS; echo '3 passed'; echo '{forged}'",
        "result file": "echo '{\"passed\": true}' > result.json; echo ok > ../result.txt",
        "edit the harness": "echo 'print(1)' > ../harness.py; cp /dev/null ../script.sh",
        "write to the harness's stdout": f"echo '{forged}' > /proc/$PPID/fd/1",
        "kill the harness": "kill -9 $PPID",
        "exit before working": "exit 0\nwc -l < data.txt > count.txt",
        "symlink to elsewhere": "ln -s /etc/hostname count.txt",
        "fifo that blocks the reader": "mkfifo count.txt",
        "late background write": f"(sleep 0.3; echo {visible} > count.txt) &",
    }.items():
        v = score(COUNT, script)
        assert v.reward == 0.0 and v.verdict == "fail", (name, v)
    assert score(COUNT, "kill -9 $PPID").exploit_suspected
    assert score(COUNT, "echo PASS").exploit_suspected


def test_obfuscated_forgery_still_scores_zero(score):
    forged = 'FLYWHEEL-SHELL {"variants": []}'
    script = f"p=/pr; p=${{p}}oc; echo '{forged}' > $p/$(ps -o ppid= $$ | tr -d ' ')/fd/1 2>/dev/null; true"
    assert score(COUNT, script).reward == 0.0


def test_generated_tasks_pass_with_their_demonstration(score):
    rng = random.Random(0)
    for i in range(15):
        task = D.make_task("train", i, 0)
        assert score(task, D.demonstration(task, rng)).verdict == "pass", task["prompt"]


def test_variants_with_nothing_to_do_reward_no_idle_script(score):
    """A hidden variant whose files already hold what is expected (no .tmp files to delete) is
    passed by an empty script; that alone earns nothing, a script that does the work earns all."""
    clean = {path: text for path, text in TMP["files"].items() if not path.endswith(".tmp")}
    task = {**TMP, "hidden_variants": [{"files": clean, "expect": {p: t for p, t in TMP["expect"].items()
                                                                    if not p.endswith(".tmp")}},
                                       *TMP.get("hidden_variants", [])]}
    idle = score(task, "true")
    assert idle.reward == 0.0 and idle.components.get("trivial_baseline") == 1.0, idle
    assert score(task, "find logs -name '*.tmp' -delete").reward == 1.0
