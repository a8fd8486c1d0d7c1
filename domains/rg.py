"""reasoning-gym: every dataset of the `reasoning-gym` package (0.1.25) as a domain `rg_<name>`.

Registering needs only the names below; the package itself (about 1 s to import) loads on the
first task or score. Tasks are entries of a fixed-seed dataset of RG_SIZE items; a task keeps the
dataset name, seed and index, so the verifier rebuilds the exact entry for `score_answer`.
"""

from __future__ import annotations

import importlib.util
import random
import re
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


@lru_cache(maxsize=None)
def dataset(name: str, seed: int = RG_SEED):
    import reasoning_gym
    return reasoning_gym.create_dataset(name, size=RG_SIZE, seed=seed)


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
        return {"prompt": entry["question"] + INSTRUCTION, "answer": "" if answer is None else str(answer),
                "rg_dataset": self.dataset_name, "rg_seed": RG_SEED, "rg_index": index}

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
