"""Rich progress for `flywheel run`: a bar over iterations, the current stage, one line per step.

Every line shown also goes to the run's log (run_log.py), with the stage timings the screen omits;
a domain's warning (loop/domain_watch.py) is a `warning:` line in both.
"""

from __future__ import annotations

import time

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from flywheel.reports.sql import query


LONG_EPISODE_S = 10.0  # an episode this long gets its line on screen, not only in the run log


class RunProgress:
    def __init__(self, console: Console, run_dir: str, log=None):
        self.console, self.run_dir, self.log = console, run_dir, log
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), console=console, transient=False)
        self.task = None
        self.started = time.time()

    def __enter__(self):
        self.progress.__enter__()
        return self

    def __exit__(self, *exc):
        return self.progress.__exit__(*exc)

    def _print(self, text: str) -> None:
        self.progress.console.print(text)
        if self.log:
            self.log.print(text)

    def _note(self, text: str) -> None:
        if self.log:
            self.log.note(text)

    def event(self, name: str, data: dict) -> None:
        if name == "run_begin":
            verb = "resuming at" if data["resumed"] else "starting at"
            self._print(f"run_id {data['run_id']}: {verb} iteration {data['first']} "
                        f"of {data['iterations']}")
            self.task = self.progress.add_task("iterations", total=data["iterations"],
                                               completed=data["first"])
        elif name == "warm_start_begin":
            self.progress.update(self.task, description="warm start (supervised)")
        elif name == "warm_start_step":
            rates = " ".join(f"{k}={v:.2f}" for k, v in data.items() if k not in ("step", "loss"))
            self._print(f"  warm start {data['step']:5d}  loss {data['loss']:.3f}  "
                        f"val pass@1 {rates}")
        elif name == "warm_start_end":
            self._print(f"  warm start done: {data['steps']} steps in {data['seconds']:.0f} s")
        elif name == "rollout_begin":
            self.progress.update(self.task, description=f"iteration {data['iteration']}: rollout")
            self._note(f"iteration {data['iteration']}: rollout begins")
        elif name == "episode_end":  # loop/episode_watch.py: an episode ended (and is journaled)
            self.progress.update(self.task, description=f"iteration {data['iteration']}: rollout, "
                                                        f"{data['ended']} episodes ended")
            line = (f"  episode {data['ended']}: {escape(str(data['domain']))} "
                    f"{escape(str(data['task_id']))} #{data['sample_index']} ({data['mode']}): "
                    f"{data['turns']} turns, {escape(str(data['end']))}, {data['seconds']:.1f} s"
                    + (f", {data['errors']} errors" if data.get("errors") else ""))
            if data["seconds"] >= LONG_EPISODE_S:  # one a person waits for: on screen too
                self._print(line)
            else:
                self._note(line.strip())
        elif name == "eval_begin":
            self.progress.update(self.task, description=f"iteration {data['iteration']}: evaluation")
            self._note(f"iteration {data['iteration']}: evaluation begins")
        elif name == "eval_end":
            every = [s for s in data["summaries"] if s["domain"] == "all"]
            shown = " ".join(f"{k} {v:.3f}" for k, v in (every[0] if every else {}).items()
                             if (k.startswith("pass@") or k.startswith("greedy")) and v is not None)
            self._print(f"  evaluation of policy {data['iteration']}: {shown}")
        elif name == "top_up_begin":  # loop/top_up.py
            self.progress.update(self.task, description=f"iteration {data['iteration']}: top-up "
                                                        f"{data['round']}")
            self._note(f"iteration {data['iteration']}: top-up {data['round']} of {data['tasks']} "
                       f"tasks ({data['signal']} of {data['target']} groups with signal)")
        elif name == "top_up_end":
            self._print(f"  top-up: {data['top_up_rounds']} rounds, {data['top_up_attempts']} "
                        f"attempts (x{data['top_up_attempt_ratio']:.2f} the batch); groups with "
                        f"signal {data['signal_groups_before']} -> {data['signal_groups_after']} "
                        f"of {data['signal_groups_target']} wanted"
                        + ("" if data["top_up_filled"] else " [yellow](not filled)[/]"))
        elif name == "domain_warning":  # domain_watch.warnings: its message names the domain
            self._print(f"[bold yellow]warning:[/] iteration {data['iteration']}, "
                        f"{escape(data['kind'])}: {escape(data['message'])}")
        elif name == "review_wait":  # feedback/review_rewards.py
            self.progress.update(self.task, description=f"iteration {data['iteration']}: waiting "
                                 f"for {data['missing']} labels ({data['seconds_left']} s left)")
        elif name == "review_end" and (data.get("queued_unverified") or data.get("rows")):
            self._print(f"  review: {data['queued_unverified']} attempts queued for labels, "
                        f"{data['queued_audit']} for audit; {data['rows']} reviewed attempts join "
                        f"this update ({data['ready_groups']} groups), {data['pending_groups']} "
                        f"groups wait, {data['expired_groups']} expired")
        elif name == "train_begin":
            self.progress.update(self.task, description=f"iteration {data['iteration']}: train")
            self._note(f"iteration {data['iteration']}: train begins")
        elif name == "iteration_end":
            k = data["iteration"]
            _, rows = query(self.run_dir, "SELECT domain, value FROM metrics WHERE iteration = "
                                          f"{k} AND name = 'heldout_pass@1' ORDER BY domain")
            rates = " ".join(f"{'all' if d == '*' else d} {v:.3f}" for d, v in rows)
            c = data["counters"]
            errors = sum(v for n, v in c.items() if n.startswith("errors_"))
            self._print(f"iteration {k}  held-out pass@1 {rates}  "
                        f"({data['rollout_seconds'] + data['train_seconds']:.0f} s"
                        + (f", {errors} errors" if errors else "") + ")")
            self._note(f"timing iteration {k}: rollout {data['rollout_seconds']:.1f} s, "
                       f"train {data['train_seconds']:.1f} s; counters "
                       + " ".join(f"{n}={v}" for n, v in sorted(c.items())))
            self.progress.update(self.task, advance=1, description="iterations")
