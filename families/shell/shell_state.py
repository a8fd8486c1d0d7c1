"""Shell domains: the response is a bash script run over the task's files; the end state is checked.

Task fields: prompt, `files` (path -> text, shown to the policy), `expect` (path -> the text the
file must hold, or null: must not exist), optional `hidden_variants` ([{files, expect}], other
files for the same instruction: a script that hard-codes the visible answer fails there), `exact`
(compare bytes; default ignores trailing whitespace), `only_listed` (no files beyond `expect`).
"""

from __future__ import annotations

import json
import random
import re
import shlex
import string
from pathlib import Path

from flywheel.domains.episodes import SOLVED, SUBMITTED, EpisodeDomain, Step
from flywheel.domains.domain import SandboxNeeds
from flywheel.domains.registry import register_domain
from flywheel.domains.report_channel import harness_report
from flywheel.domains.tools import RUN_SHELL, SUBMIT, WRITE_FILE

HARNESS = (Path(__file__).resolve().parent / "harnesses" / "shell.py").read_text()
SHELL_SAFE = re.compile(r"[A-Za-z0-9_./-]+")  # written as '{path}', as before; anything else shlex-quoted
REPORT_MARKER = "FLYWHEEL-SHELL "  # starts the harness's report line; the verifier looks for it
_BLOCK = re.compile(r"```(?:bash|sh|shell)?[ \t]*\n(.*?)```", re.S | re.I)


def _norm(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.rstrip().splitlines())


def check(entry: dict | None, want: str | None, exact: bool) -> bool:
    if want is None:
        return entry is None
    if entry is None or entry.get("type") != "file" or entry.get("truncated"):
        return False
    return entry["content"] == want if exact else _norm(entry["content"]) == _norm(want)


def script_of(response: str) -> str:
    blocks = _BLOCK.findall(response)
    return (blocks[-1] if blocks else response).strip() + "\n"


def _files_problems(entry: dict, where: str) -> list[str]:
    """Problems of one variant's `files` ({path: text}) and `expect` ({path: text or null})."""
    problems = []
    files, expect = entry.get("files"), entry.get("expect")
    if not (isinstance(files, dict) and all(isinstance(v, str) for v in files.values())):
        problems.append(f"field `{where}files` must be an object of path: text")
    if not (isinstance(expect, dict) and expect
            and all(v is None or isinstance(v, str) for v in expect.values())):
        problems.append(f"field `{where}expect` must be a non-empty object of path: text or null")
    return problems


class ShellDomain(EpisodeDomain):
    """Multi-turn (--max-turns N): each `run_shell` command runs over the files the earlier ones
    left (the episode's state), and the model reads its output. The episode's answer is all its
    commands as one script, scored as a single response is: from the task's files, hidden
    variants included."""

    verifier = "shell_state"
    report_marker = REPORT_MARKER
    sandbox = SandboxNeeds(language="bash", files=("harness.py", "script.sh"))
    tools = (RUN_SHELL, WRITE_FILE, SUBMIT)
    plain_tool = RUN_SHELL.name
    log_bytes = 2000
    required_fields = ("task_id", "prompt", "files", "expect")
    max_new_tokens = 32

    def validate_task(self, task: dict) -> list[str]:
        """A user's row: `files` {path: text}, `expect` {path: text or null}, `hidden_variants` a
        list of {files, expect} of the same shape, `exact` true or false."""
        problems = super().validate_task(task)
        if problems:
            return problems
        problems += _files_problems(task, "")
        variants = task.get("hidden_variants", [])
        if not isinstance(variants, list):
            return problems + ["field `hidden_variants` must be a list of {files, expect}"]
        for i, variant in enumerate(variants):
            if not isinstance(variant, dict):
                problems.append(f"field `hidden_variants[{i}]` must be an object {{files, expect}}")
            else:
                problems += _files_problems(variant, f"hidden_variants[{i}].")
        if "exact" in task and not isinstance(task["exact"], bool):
            problems.append("field `exact` must be true or false")
        return problems

    def program(self, task: dict, response: str, marker: str = REPORT_MARKER) -> dict:
        variants = [task["files"], *(v["files"] for v in task.get("hidden_variants", []))]
        plan = {"script": script_of(response), "variants": variants,
                "budget_s": self.sandbox.timeout_s - 0.6, "marker": marker}
        return {"files": {"harness.py": HARNESS}, "command": ["python", "harness.py"],
                "stdin": json.dumps(plan), "limits": self.sandbox.limits()}

    def demonstration(self, task: dict, rng: random.Random) -> str:
        return f"```bash\n{task['reference_script']}\n```"

    def start_state(self, task: dict) -> dict:
        return {"files": dict(task["files"]), "answer": ""}

    def tool_program(self, task: dict, state: dict, call, marker: str = REPORT_MARKER) -> dict | None:
        if call.name == WRITE_FILE.name:
            return None  # changes the state only; the answer script gets the same write
        plan = {"script": call.arguments["command"] + "\n", "variants": [state["files"]],
                "budget_s": self.sandbox.timeout_s - 0.6, "marker": marker,
                "log_bytes": self.log_bytes}
        return {"files": {"harness.py": HARNESS}, "command": ["python", "harness.py"],
                "stdin": json.dumps(plan), "limits": self.sandbox.limits()}

    def observe(self, task: dict, state: dict, call, result) -> Step:
        if call.name == WRITE_FILE.name:
            path, content = call.arguments["path"], call.arguments["content"]
            delimiter = f"FLYWHEEL_EOF_{len(state['answer'])}"
            while delimiter in content:
                delimiter += "_"
            quoted = f"'{path}'" if SHELL_SAFE.fullmatch(path) else shlex.quote(path)
            line = (f"mkdir -p \"$(dirname {quoted})\" && cat > {quoted} <<'{delimiter}'\n"
                    f"{content}\n{delimiter}\n")
            return Step(f"wrote {path}", {"files": {**state["files"], path: content + "\n"},
                                          "answer": state["answer"] + line})
        report, problem, _ = harness_report(result, REPORT_MARKER)
        if report is None or not report.get("variants"):
            return Step(f"the command did not run: {problem}", state, None, 0.0)
        end = report["variants"][0]
        files = {path: e["content"] for path, e in (end.get("files") or {}).items()
                 if e.get("type") == "file" and not e.get("truncated")}
        script = state["answer"] + call.arguments["command"] + "\n"
        exact = bool(task.get("exact"))
        done = [check(end["files"].get(p), want, exact) for p, want in task["expect"].items()]
        status = "timed out" if end.get("timed_out") else f"exit {end.get('exit_code')}"
        text = (end.get("log") or "") + ("" if end.get("exit_code") == 0 else f"[{status}]")
        return Step(text, {"files": files, "answer": script},
                    SOLVED if all(done) else None, sum(done) / len(done) if done else None)

    def submit(self, state: dict, call) -> Step:
        return Step("submitted", state, SUBMITTED)  # the answer: the commands run so far


@register_domain
class UserShell(ShellDomain):
    name = "shell"
    description = "your own shell tasks (--tasks FILE: prompt, files, expect, hidden_variants)"

    def task_count(self) -> int | None:
        return 0


def _words(rng: random.Random, n: int) -> list[str]:
    return ["".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 6))) for _ in range(n)]


def _count_lines(rng):
    lines = _words(rng, rng.randint(2, 9))
    return {"data.txt": "\n".join(lines) + "\n"}, {"count.txt": str(len(lines))}


def _sort_unique(rng):
    names = _words(rng, rng.randint(3, 7))
    names += rng.sample(names, 2)
    rng.shuffle(names)
    return {"names.txt": "\n".join(names) + "\n"}, {"sorted.txt": "\n".join(sorted(set(names)))}


def _delete_tmp(rng):
    keep, drop = _words(rng, 2), _words(rng, rng.randint(1, 3))
    files = {f"logs/{w}.log": w for w in keep} | {f"logs/{w}.tmp": w for w in drop}
    return files, {f"logs/{w}.log": w for w in keep} | {f"logs/{w}.tmp": None for w in drop}


def _concat_csv(rng):
    parts = sorted(set(_words(rng, 3)))
    files = {f"parts/{p}.csv": f"{p},{rng.randint(1, 99)}\n" for p in parts}
    return files, {"all.csv": "".join(files[f"parts/{p}.csv"] for p in parts)}


def _replace(rng):
    old, new = _words(rng, 2)
    lines = [f"{k} = {rng.choice([old, 'x', old + 'y'])}" for k in _words(rng, 4)]
    text = "\n".join(lines) + "\n"
    return {"config.ini": text}, {"config.ini": text.replace(old, new)}, {"old": old, "new": new}


# (instruction, reference script, generator); {old}/{new} come from the generator's third value
TEMPLATES = [
    ("Write the number of lines of data.txt (just the number) into count.txt.",
     "wc -l < data.txt | tr -d ' ' > count.txt", _count_lines),
    ("Write the distinct lines of names.txt, sorted, into sorted.txt.",
     "sort -u names.txt > sorted.txt", _sort_unique),
    ("Delete every file in logs/ whose name ends in .tmp; keep the others.",
     "rm -f logs/*.tmp", _delete_tmp),
    ("Concatenate the .csv files of parts/, in name order, into all.csv.",
     "cat $(ls parts/*.csv | sort) > all.csv", _concat_csv),
    ("In config.ini, replace every occurrence of '{old}' with '{new}', in place.",
     "sed -i 's/{old}/{new}/g' config.ini", _replace),
]


@register_domain
class FileChores(ShellDomain):
    name = "shell_files"
    description = "file chores in bash (count, sort, delete, concatenate, replace), 2 hidden variants"

    def sample_task(self, rng: random.Random) -> dict:
        instruction, reference, generate = rng.choice(TEMPLATES)
        drawn = generate(rng)
        words = drawn[2] if len(drawn) == 3 else {}
        files, expect = drawn[0], drawn[1]
        hidden = []
        for _ in range(2):  # the same instruction over other files (same words, other contents)
            more = generate(rng)
            if words:
                more = _replace_with(rng, words)
            hidden.append({"files": more[0], "expect": more[1]})
        listing = "\n".join(f"--- {p}\n{t}" for p, t in sorted(files.items()))
        prompt = f"{instruction.format(**words)}\nFiles in the working directory:\n{listing}"
        return {"prompt": prompt, "files": files, "expect": expect, "hidden_variants": hidden,
                "reference_script": reference.format(**words), "answer": reference.format(**words)}


def _replace_with(rng, words):
    lines = [f"{k} = {rng.choice([words['old'], 'z', words['old'] + words['old']])}" for k in _words(rng, 5)]
    text = "\n".join(lines) + "\n"
    return {"config.ini": text}, {"config.ini": text.replace(words["old"], words["new"])}
