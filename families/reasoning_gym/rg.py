"""reasoning-gym: every dataset of the `reasoning-gym` package (0.1.25) as a domain `rg_<name>`.

Registering needs only the names below; the package itself (about 1 s to import) loads on the
first task or score. Tasks are entries of a fixed-seed dataset of RG_SIZE items; a task keeps the
dataset name, seed and index, so the verifier rebuilds the exact entry for `score_answer`.

A few generators (`HASH_DEPENDENT`) iterate over sets of strings, whose order follows the
process's hash seed: the same index would be another task in another process (a Beam worker, the
verifier's bounded worker). Their entries are built once per process in a child interpreter with
PYTHONHASHSEED=0 (in-process where the hash seed already is 0), so every process sees the same.
"""

from __future__ import annotations

import importlib.util
import os
import pickle
import random
import re
import subprocess
import sys
from functools import lru_cache

from flywheel.domains.domain import Domain, short_key
from flywheel.domains.registry import register_domain

RG_SIZE, RG_SEED = 2000, 20250101
MAX_ANSWER = 10_000  # characters of an answer a scorer sees
_OPEN, _CLOSE = re.compile("<answer>", re.I), re.compile("</answer>", re.I)
INSTRUCTION = "\n\nGive your final answer inside <answer></answer> tags."
DATASETS = (
    "ab acre advanced_geometry aiw arc_1d arc_agi base_conversion basic_arithmetic bf "
    "binary_alternation binary_matrix bitwise_arithmetic boxnet caesar_cipher calendar_arithmetic "
    "chain_sum circuit_logic codeio coin_flip color_cube_rotation complex_arithmetic count_bits "
    "count_primes countdown course_schedule cryptarithm decimal_arithmetic decimal_chain_sum dice "
    "emoji_mystery family_relationships figlet_font fraction_simplification futoshiki game_of_life "
    "game_of_life_halting gcd graph_color group_anagrams gsm_symbolic intermediate_integration "
    "isomorphic_strings jugs kakurasu knight_swap knights_knaves largest_island lcm leg_counting "
    "letter_counting letter_jumble list_functions mahjong_puzzle manipulate_matrix maze mini_sudoku "
    "modulo_grid n_queens needle_haystack number_filtering number_format number_sequence "
    "number_sorting palindrome_generation palindrome_partitioning path_star polynomial_equations "
    "polynomial_multiplication pool_matrix power_function prime_factorization products "
    "propositional_logic puzzle24 quantum_lock ransom_note rearc rectangle_count rotate_matrix "
    "rotten_oranges rubiks_cube rush_hour self_reference sentence_reordering shortest_path "
    "simple_equations simple_geometry simple_integration sokoban spell_backward spiral_matrix "
    "string_insertion string_manipulation string_splitting string_synthesis sudoku survo syllogism "
    "time_intervals tower_of_hanoi tsumego word_ladder word_sequence_reversal word_sorting "
    "zebra_puzzles").split()
"""All of `reasoning_gym.factory.DATASETS` except `composite` (it needs a config of others)."""


def tagged_answers(response: str) -> list[str]:
    """Every <answer>...</answer> of the response, stripped, in order: what
    re.findall("<answer>(.*?)</answer>", re.S | re.I) finds, in one pass (that pattern rescans the
    rest of the text from every unclosed <answer>)."""
    found, pos = [], 0
    while (start := _OPEN.search(response, pos)) and (end := _CLOSE.search(response, start.end())):
        found.append(response[start.end():end.start()].strip())
        pos = end.end()
    return found


def final_answer(response: str) -> tuple[str, list[str]]:
    """(the answer a scorer sees: the last tagged one, else the whole response; every tagged one)."""
    tagged = tagged_answers(response)
    return (tagged[-1] if tagged else response.strip())[:MAX_ANSWER], tagged


HASH_DEPENDENT = frozenset({"isomorphic_strings", "knight_swap", "list_functions",
                            "polynomial_multiplication", "ransom_note", "word_ladder"})
_ENTRIES = ("import pickle, sys, reasoning_gym; name, seed, size, start, stop = sys.argv[1], "
            "int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]); "
            "ds = reasoning_gym.create_dataset(name, size=size, seed=seed); "
            "sys.stdout.buffer.write(pickle.dumps([ds[i] for i in range(start, stop)]))")
CHUNK = 8  # entries built per child interpreter (~1.5 s to start; knight_swap entries ~0.3 s each)


class StableEntries:
    """A dataset whose entries are built under PYTHONHASHSEED=0, CHUNK at a time, in a child
    interpreter (our own, running a fixed program: only the hash seed differs); scoring is the
    dataset's own."""

    def __init__(self, ds, name: str, seed: int):
        self._ds, self._name, self._seed, self._chunks = ds, name, seed, {}

    def __getitem__(self, index: int):
        chunk = index // CHUNK
        if chunk not in self._chunks:
            # only the chunks asked for: some generators take 0.3 s an entry (knight_swap)
            start, stop = chunk * CHUNK, min(RG_SIZE, (chunk + 1) * CHUNK)
            done = subprocess.run(
                [sys.executable, "-c", _ENTRIES, self._name, str(self._seed), str(RG_SIZE),
                 str(start), str(stop)],
                capture_output=True, timeout=600, check=True, env={**os.environ, "PYTHONHASHSEED": "0"})
            entries = pickle.loads(done.stdout)
            for at in range(start, stop, CHUNK):
                self._chunks[at // CHUNK] = entries[at - start:at - start + CHUNK]
        return self._chunks[chunk][index % CHUNK]

    def __len__(self) -> int:
        return RG_SIZE

    def __getattr__(self, name: str):
        return getattr(self._ds, name)


@lru_cache(maxsize=None)
def scoring_dataset(name: str, seed: int = RG_SEED):
    """The dataset as reasoning-gym builds it in this process: its `score_answer`, and its
    entries where they do not depend on the hash seed."""
    import reasoning_gym
    return reasoning_gym.create_dataset(name, size=RG_SIZE, seed=seed)


@lru_cache(maxsize=None)
def dataset(name: str, seed: int = RG_SEED):
    """The dataset whose entries are the same in every process (see the module)."""
    ds = scoring_dataset(name, seed)
    if name not in HASH_DEPENDENT or not sys.flags.hash_randomization:
        return ds
    return StableEntries(ds, name, seed)


class ReasoningGymDomain(Domain):
    verifier = "reasoning_gym"
    tier = 2
    max_new_tokens = 32
    dataset_name = ""
    required_fields = ("task_id", "prompt", "rg_dataset", "rg_index")

    def sample_task(self, rng: random.Random) -> dict:
        index = rng.randrange(RG_SIZE)
        entry = dataset(self.dataset_name)[index]
        answer = entry.get("answer")
        task = {"prompt": entry["question"] + INSTRUCTION, "answer": "" if answer is None else str(answer),
                "rg_dataset": self.dataset_name, "rg_seed": RG_SEED, "rg_index": index}
        if self.dataset_name in HASH_DEPENDENT:  # the verifier's worker need not rebuild it
            task["rg_entry"] = entry
        return task

    def demonstration(self, task: dict, rng: random.Random) -> str:
        return f"<answer>{task['answer']}</answer>"

    def answer_key(self, task: dict, response: str) -> str | None:
        """The answer the scorer sees, whitespace-normalized ("[1, 2]" and " [1,  2] " alike, not
        "[1,2]"); None for none, or for several different tagged answers (hedging, which the
        verifier fails). Scorers that forgive more (case, order) still split their votes."""
        answer, tagged = final_answer(response)
        if len(set(tagged)) > 1:
            return None
        return short_key(" ".join(answer.split()))


if importlib.util.find_spec("reasoning_gym") is not None:
    for _name in DATASETS:
        register_domain(type(f"RG_{_name}", (ReasoningGymDomain,), {
            "name": f"rg_{_name}", "dataset_name": _name,
            "description": f"reasoning-gym `{_name}`, scored by its own score_answer"}))
