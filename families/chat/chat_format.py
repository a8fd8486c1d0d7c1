"""`chat_format`: instructions about the shape of a reply, each checked by a program
(`format_rules` verifier): an exact word count, a JSON object with given keys, a bulleted list
of N items, all lower case, a word repeated N times, a one-word answer from a category, yes or
no only, at most N words.

    "Write one sentence about rivers that is exactly 7 words long. Reply with the sentence only."
    rules: [{"rule": "word_count", "n": 7}, {"rule": "contains", "words": ["rivers"]}]

Rules that an empty or evasive reply could meet are paired with one that needs the task's own
content (its topic word, distinct items, non-empty values), so saying nothing never scores.
"""

from __future__ import annotations

import json
import random

from flywheel.domains.domain import Domain
from flywheel.domains.registry import register_domain

TOPICS = ["rivers", "coffee", "winter", "bicycles", "libraries", "music", "gardens", "bread",
          "mountains", "robots", "trains", "oceans"]
PAD = "is something many people enjoy seeing on a calm sunny day".split()
JSON_THINGS = {
    "a book": ["title", "author", "genre", "setting", "language"],
    "a city": ["name", "country", "landmark", "river", "climate"],
    "a meal": ["dish", "main_ingredient", "cuisine", "course", "drink"],
    "a pet": ["name", "species", "color", "favorite_toy", "owner"],
    "a trip": ["destination", "transport", "season", "companion", "purpose"],
}
CATEGORIES = {  # the first six are drawn for references; all count as right answers
    "colors": ["red", "blue", "green", "yellow", "purple", "orange", "pink", "black", "white",
               "brown", "gray", "grey", "violet", "gold", "silver", "cyan", "magenta"],
    "fruits": ["apple", "banana", "cherry", "mango", "pear", "plum", "orange", "grape", "lemon",
               "peach", "kiwi", "strawberry", "pineapple", "watermelon", "lime", "apricot"],
    "animals": ["cat", "dog", "horse", "rabbit", "eagle", "whale", "lion", "tiger", "elephant",
                "cow", "bear", "wolf", "fox", "giraffe", "monkey", "zebra", "mouse", "bird"],
    "countries": ["France", "Japan", "Brazil", "Kenya", "Canada", "India", "China", "Germany",
                  "Italy", "Spain", "Mexico", "Egypt", "Australia", "Russia", "Peru", "USA"],
    "musical instruments": ["piano", "violin", "guitar", "flute", "drum", "cello", "trumpet",
                            "harp", "saxophone", "clarinet", "drums", "bass", "ukulele"],
}
SINGULAR = {"colors": "color", "fruits": "fruit", "animals": "animal", "countries": "country",
            "musical instruments": "musical instrument"}
OBJECTS = ["kettle", "ladder", "compass", "umbrella", "lantern", "stapler", "telescope", "hammock",
           "bicycle", "candle", "blanket", "microscope", "wallet", "toaster", "anchor", "helmet",
           "mirror", "pillow", "backpack", "calculator", "thermometer", "whistle", "shovel", "clock"]
WORDS = ["yes", "blue", "hello", "maple", "echo", "ping", "star", "coffee"]


def _a(noun: str) -> str:
    return ("an " if noun[0].lower() in "aeiou" else "a ") + noun


def _word_count(rng):
    topic, n = rng.choice(TOPICS), rng.randint(5, 12)
    reference = " ".join([topic.capitalize(), *PAD[:n - 1]]) + "."
    return (f"Write one sentence about {topic} that is exactly {n} words long. Reply with the "
            "sentence only.", [{"rule": "word_count", "n": n}, {"rule": "contains", "words": [topic]}],
            reference)


def _json_keys(rng):
    thing = rng.choice(sorted(JSON_THINGS))
    keys = rng.sample(JSON_THINGS[thing], rng.randint(2, 4))
    reference = json.dumps({k: f"some {k.replace('_', ' ')}" for k in keys})
    return (f"Describe {thing} as a JSON object with exactly these keys: {', '.join(keys)}. Every "
            "value is a short string. Reply with the JSON only.",
            [{"rule": "json_keys", "keys": keys}], reference)


def _bullets(rng):
    category, n = rng.choice(sorted(CATEGORIES)), rng.randint(3, 5)
    reference = "\n".join(f"- {x}" for x in rng.sample(CATEGORIES[category][:6], n))
    return (f"List exactly {n} {category}, one per line, each line starting with \"- \". Reply "
            "with the list only.", [{"rule": "bullet_lines", "n": n, "prefix": "- "}], reference)


def _lowercase(rng):
    thing = rng.choice(OBJECTS)
    return (f"In one short sentence written entirely in lowercase letters, tell me what {_a(thing)} "
            "is.", [{"rule": "lowercase"}, {"rule": "contains", "words": [thing]}],
            f"{_a(thing)} is a thing people use at home or outdoors.")


def _repeat(rng):
    word, n = rng.choice(WORDS), rng.randint(2, 6)
    return (f"Write the word \"{word}\" exactly {n} times, separated by commas, and nothing else.",
            [{"rule": "repeated", "word": word, "n": n, "sep": ", "}], ", ".join([word] * n))


def _one_word(rng):
    category = rng.choice(sorted(CATEGORIES))
    return (f"Name one {SINGULAR[category]}. Reply with a single word and nothing else.",
            [{"rule": "one_of", "options": CATEGORIES[category]}], rng.choice(CATEGORIES[category][:6]))


def _yes_no(rng):
    asked, drawn = rng.sample(sorted(CATEGORIES), 2)
    thing = rng.choice(CATEGORIES[rng.choice([asked, drawn])][:6])
    answer = "yes" if thing in CATEGORIES[asked] else "no"
    named = thing if thing[0].isupper() else _a(thing)  # "Is France ...", "Is a piano ..."
    return (f"Is {named} {_a(SINGULAR[asked])}? Answer with only yes or no.",
            [{"rule": "one_of", "options": [answer]}], answer)


def _short(rng):
    topic, n = rng.choice(TOPICS), rng.randint(8, 15)
    return (f"In at most {n} words, say one thing about {topic}.",
            [{"rule": "max_words", "n": n}, {"rule": "contains", "words": [topic]}],
            f"{topic.capitalize()} {' '.join(PAD[:n - 2])}.")


# The last three are within reach of a 135M-parameter instruct model; the first five mostly not.
KINDS = (_word_count, _json_keys, _bullets, _lowercase, _repeat, _one_word, _yes_no, _short)


@register_domain
class ChatFormat(Domain):
    name = "chat_format"
    verifier = "format_rules"
    description = "format instructions (word counts, JSON keys, N bullets, lowercase, one word, yes/no), checked by program"
    max_new_tokens = 48
    required_fields = ("task_id", "prompt", "rules")

    def sample_task(self, rng: random.Random) -> dict:
        prompt, rules, reference = rng.choice(KINDS)(rng)
        return {"prompt": prompt, "rules": rules, "answer": reference}

    def demonstration(self, task: dict, rng: random.Random) -> str:
        return task["answer"]
