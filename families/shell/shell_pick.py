"""Copy the file you must first find: a multi-turn shell domain the tiny policy can learn.

    prompt:  "cp non-a file to b:"    files: a (a word), q3 (another word; its name is random)
    turn 1:  "ls"                       -> "a\\nq3\\n"
    turn 2:  "cp q3 b"                  -> solved: b holds q3's text, a is untouched

The name of the file to copy is not in the prompt: the policy has to look (or find a glob that
does it in one command, which is also right). Scored by `shell_state` on the end state.
"""

from __future__ import annotations

import random
import string

from flywheel.domains.registry import register_domain
from flywheel.families.shell.shell_state import ShellDomain

_LETTERS = string.ascii_lowercase.replace("a", "").replace("b", "")


@register_domain
class ShellPick(ShellDomain):
    name = "shell_pick"
    description = "cp non-a file to b: -> find the other file's name (run_shell ls), copy it"
    max_turns = 3
    max_new_tokens = 10

    def sample_task(self, rng: random.Random) -> dict:
        name = rng.choice(_LETTERS) + rng.choice(string.digits)
        keep, copy = ("".join(rng.choice(string.ascii_lowercase) for _ in range(4)) for _ in range(2))
        # the name is part of the prompt only through the split hash: the prompt itself is fixed
        return {"prompt": "cp non-a file to b:", "files": {"a": keep + "\n", name: copy + "\n"},
                "expect": {"b": copy, "a": keep, name: copy}, "reference_script": f"cp {name} b",
                "answer": "", "only_listed": True}

    def split_of(self, prompt: str) -> str:
        return "train"  # one prompt for all tasks: held-out tasks differ by their files

    def make_task(self, split: str, index: int, seed: int) -> dict:
        rng = random.Random(f"{seed}:{self.name}:{split}:{index}")
        task = self.sample_task(rng)
        task.update(task_id=f"{self.name}-{split}-{index:06d}", domain=self.name, split=split)
        return task

    def demonstration(self, task: dict, rng: random.Random) -> str:
        return task["reference_script"]

    def demonstration_turns(self, task: dict, rng: random.Random) -> list[tuple[str, str | None]]:
        listing = "".join(f"{name}\n" for name in sorted(task["files"]))
        return [("ls", listing), (task["reference_script"], None)]
