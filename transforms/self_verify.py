"""Self-verification: the policy judges its own candidates, through the same sampler (`flywheel eval`).

Each scored candidate becomes a judge attempt: a prompt that shows the task and the candidate's
answer and asks for one word, yes or no, sampled greedily by the run's own model handler (so the
same engine and weights). Its score is the probability the policy put on saying "correct": the
first sampled token's probability when it said yes, one minus it when it said no, 0 when it said
neither. Best-of-N by self-verification picks the candidate with the highest score; the hidden
verifier still decides whether that pick is right. Counters: judgments_yes, judgments_no,
judgments_unreadable.
"""

from __future__ import annotations

import math
import re

import apache_beam as beam

from flywheel.records.attempt import Attempt
from flywheel.transforms.errors import count
from flywheel.transforms.generate import Generate

JUDGE_PROMPT = ("Below are a task and an answer to it. Is the answer correct? Reply with one word: "
                "yes or no.\n\n### Task\n{task}\n\n### Answer\n{answer}\n\n### Is the answer correct?")
SHOWN_CHARS = 6000  # of the task and of the answer each: the judge's prompt stays bounded
JUDGE_TOKENS = 4
_WORD = re.compile(r"\W*(yes|no)\b", re.IGNORECASE)


def shown(text: str) -> str:
    """`text`, its middle cut when long (the judge prompt's bound)."""
    if len(text) <= SHOWN_CHARS:
        return text
    half = SHOWN_CHARS // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters cut ...]\n{text[-half:]}"


def judge_attempt(candidate: Attempt) -> Attempt:
    """The attempt that asks the policy whether `candidate`'s answer is right: greedy, short."""
    prompt = JUDGE_PROMPT.format(task=shown(candidate.prompt), answer=shown(candidate.response or ""))
    return Attempt(run_id=candidate.run_id, iteration=candidate.iteration,
                   policy_version=candidate.policy_version, mode=candidate.mode,
                   domain=candidate.domain, task_id=candidate.task_id,
                   group_id=candidate.group_id, sample_index=candidate.sample_index,
                   prompt=prompt, task=candidate.task, sampling_temperature=0.0,
                   max_new_tokens=JUDGE_TOKENS, seed=candidate.seed)


def judgment(text: str, logprobs: list[float]) -> tuple[float, str]:
    """(P(the policy says correct), the word it said: yes, no or unreadable)."""
    said = _WORD.match(text or "")
    if said is None:
        count("judgments_unreadable")
        return 0.0, "unreadable"
    word = said.group(1).lower()
    first = math.exp(logprobs[0]) if logprobs else 1.0
    count(f"judgments_{word}")
    return (first if word == "yes" else 1.0 - first), word


def key(attempt: Attempt) -> tuple:
    return attempt.task_id, attempt.mode, attempt.sample_index


class SelfVerify(beam.PTransform):
    """Scored candidates in; ((task_id, mode, sample_index), (self_score, self_judgment)) out."""

    def __init__(self, handler):
        super().__init__()
        self.handler = handler

    def expand(self, candidates):
        return (candidates
                | "JudgePrompts" >> beam.Map(judge_attempt)
                | "Judge" >> Generate(self.handler)
                | "Judgments" >> beam.Map(lambda j: (key(j), judgment(j.response, j.response_logprobs))))
