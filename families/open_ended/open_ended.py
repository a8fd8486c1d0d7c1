"""`open_ended`: your tasks that no program can verify (a summary, an e-mail, advice); people
label the attempts (`flywheel review serve`) and the labels are their rewards.

    {"domain": "open_ended", "task_id": "t1", "prompt": "Write a two-line apology ...",
     "rubric": "polite, names the delay, offers a date"}

Fields besides the prompt (a `rubric`, a `reference`) are kept with the task and never shown to
the policy; the review page shows the prompt, the response and the execution's output. Any other
domain's task can be sent to review too: `"review": true` on its row, or the run's
`[review] domains`.
"""

from __future__ import annotations

from typing import Any

from flywheel.domains.domain import Domain
from flywheel.domains.registry import register_domain


@register_domain
class OpenEnded(Domain):
    name = "open_ended"
    verifier = "human_review"
    description = "your tasks without a verifier (--tasks FILE: prompt, rubric): people label them"
    max_new_tokens = 256
    required_fields = ("task_id", "prompt")

    def task_count(self) -> int | None:
        return 0

    def normalize_task(self, row: dict[str, Any]) -> dict[str, Any]:
        return {**row, "review": True}
