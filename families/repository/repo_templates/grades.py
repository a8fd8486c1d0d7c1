"""Package template: a grade book: stats, grades, curve, report."""

from __future__ import annotations

import math
import random

from flywheel.families.repository.repo_templates.base import Package, Site, check, fill, modules_with_init  # noqa: F401


GRADE_STATS = """\
\"\"\"Statistics over lists of numbers.\"\"\"


def mean(values):
    \"\"\"Arithmetic mean; 0.0 for no values.\"\"\"
    if not values:
        return 0.0
    return sum(values) / len(values)


def median(values):
    \"\"\"Middle value; the mean of the two middle values for an even count.\"\"\"
    s = sorted(values)
    mid = len(s) // 2
    if len(s) % 2:
        return s[mid]
    return (s[mid - 1] + s[mid]) / 2


def spread(values):
    \"\"\"Largest minus smallest value.\"\"\"
    return max(values) - min(values)
"""

GRADE_GRADES = """\
\"\"\"Letter grades from scores.\"\"\"

CUTOFFS = [(@A@, "A"), (@B@, "B"), (@C@, "C"), (@D@, "D")]


def letter(score):
    \"\"\"Letter grade for `score`; None (not handed in) gives 'I' for incomplete.\"\"\"
    if score is None:
        return "I"
    for cutoff, grade in CUTOFFS:
        if score >= cutoff:
            return grade
    return "F"


def letter_counts(scores):
    \"\"\"letter -> how many scores earned it.\"\"\"
    counts = {}
    for score in scores:
        grade = letter(score)
        counts[grade] = counts.get(grade, 0) + 1
    return counts
"""

GRADE_CURVE = """\
\"\"\"Curving: shift scores so the class mean hits a target.\"\"\"

import math

from .stats import mean

TARGET_MEAN = @TARGET@


def curve(scores, cap=100):
    \"\"\"Scores shifted so their mean is TARGET_MEAN, rounded half up, at most `cap`.\"\"\"
    shift = TARGET_MEAN - mean(scores)
    return [min(math.floor(s + shift + 0.5), cap) for s in scores]
"""

GRADE_REPORT = """\
\"\"\"Class reports.\"\"\"

from . import stats
from .stats import mean


def class_average(scores):
    \"\"\"Mean score rounded to 2 places.\"\"\"
    return round(mean(scores), 2)


def score_range(scores):
    \"\"\"Best minus worst score.\"\"\"
    return stats.spread(scores)
"""


def grades(rng: random.Random) -> Package:
    name = rng.choice(["gradebook", "marks", "classroom"])
    a = rng.choice([90, 88, 85])
    step = rng.choice([10, 8, 5])
    cut = [a, a - step, a - 2 * step, a - 3 * step]
    target = rng.choice([70, 72, 75, 78])
    subs = dict(A=cut[0], B=cut[1], C=cut[2], D=cut[3], TARGET=target)
    mods = {"stats": GRADE_STATS, "grades": GRADE_GRADES, "curve": GRADE_CURVE, "report": GRADE_REPORT}
    mods = modules_with_init(name, "A grade book: statistics, letter grades, curving, reports.",
                             {k: fill(v, **subs) for k, v in mods.items()})

    def curve(scores: list[int], cap: int = 100) -> list[int]:
        shift = target - sum(scores) / len(scores)
        return [min(math.floor(s + shift + 0.5), cap) for s in scores]

    readme = (f"# {name}\n\nGrades: A from {cut[0]}, B from {cut[1]}, C from {cut[2]}, "
              f"D from {cut[3]}, else F. Curving targets a mean of {target}.\n")
    tests = [
        ("stats", "mean", "mean", "mean([1, 2, 3, 6]) == 3"),
        ("stats", "median_even", "median", "median([4, 1, 3, 2]) == 2.5"),
        ("grades", "letter_a", "letter", f"letter({cut[0] + 1}) == 'A'"),
        ("grades", "letter_at_cutoff", "letter", f"letter({cut[1]}) == 'B'"),
        ("curve", "curve", "curve", f"curve([{target - 10}, {target + 10}]) == {curve([target - 10, target + 10])}"),
        ("report", "average", "class_average", "class_average([70, 80, 90, 100]) == 85.0"),
    ]
    regression = [
        check("stats", "median([5, 1, 9])", 5, "stats.median"),
        check("stats", "spread([3, 11, 7])", 8, "stats.spread"),
        check("grades", "letter(0)", "F", "grades.letter"),
        check("grades", f"letter_counts([{cut[0] + 5}, 1, 2])", {"A": 1, "F": 2},
              "grades.letter", "grades.letter_counts"),
        check("report", "score_range([60, 95, 71])", 35, "report.score_range", "stats.spread"),
        check("curve", "curve([50, 60, 70], 200)", curve([50, 60, 70], 200), "curve.curve", "stats.mean"),
        check("report", "class_average([90, 91])", 90.5, "report.class_average", "stats.mean"),
    ]
    big = [target + 20, target + 30, target - 50]
    sites = [
        Site("wrong_operator", "grades", "grades.letter",
             (("        if score >= cutoff:", "        if score > cutoff:"),),
             "A score exactly on a grade boundary gets the lower letter from letter(); "
             "reaching a cutoff should earn that grade.",
             (check("grades", f"letter({cut[0]})", "A"), check("grades", f"letter({cut[3]})", "D")),
             ("grades", "letter_on_boundary", "letter", f"letter({cut[2]}) == 'C'")),
        Site("off_by_one", "stats", "stats.median",
             (("(s[mid - 1] + s[mid]) / 2", "(s[mid] + s[mid + 1]) / 2"),),
             "median() gives wrong results (or IndexError) for an even number of values; it "
             "should average the two middle values.",
             (check("stats", "median([10, 20, 30, 40, 50, 60])", 35.0),
              check("stats", "median([7, 3])", 5.0)),
             ("stats", "median_pair", "median", "median([1, 2, 3, 10]) == 2.5")),
        Site("missing_case", "grades", "grades.letter",
             (('    if score is None:\n        return "I"\n    for cutoff', "    for cutoff"),),
             "letter(None) for a student who has not handed in raises TypeError; it should be "
             "graded 'I' (incomplete).",
             (check("grades", "letter(None)", "I"),
              check("grades", "letter_counts([None, 0])", {"I": 1, "F": 1})),
             ("grades", "letter_incomplete", "letter", "letter(None) == 'I'")),
        Site("wrong_import", "report", "report.class_average",
             (("from .stats import mean\n", "from .stats import median\n"),
              ("round(mean(scores), 2)", "round(median(scores), 2)")),
             "class_average() reports the middle score rather than the average of the scores.",
             (check("report", "class_average([50, 60, 100])", 70.0),
              check("report", "class_average([1, 2, 3, 10])", 4.0)),
             ("report", "average_skewed", "class_average", "class_average([10, 20, 90]) == 40.0"),
             ("stats",)),
        Site("renamed_api", "report", "report.score_range",
             (("stats.spread(scores)", "stats.value_range(scores)"),),
             "score_range() crashes with AttributeError instead of returning the best minus "
             "the worst score.",
             (check("report", "score_range([60, 95, 71])", 35), check("report", "score_range([5])", 0)),
             ("report", "range", "score_range", "score_range([1, 9]) == 8"), ("stats",)),
        Site("wrong_default", "curve", "curve.curve",
             (("def curve(scores, cap=100):", "def curve(scores, cap=99):"),),
             "Curved scores top out at 99 when curve() is called without a cap; the cap "
             "should be 100 by default.",
             (check("curve", f"curve({big})", curve(big)),
              check("curve", f"curve([{target + 40}, {target - 40}])", curve([target + 40, target - 40]))),
             ("curve", "curve_default_cap", "curve", f"curve([{target + 30}, {target - 30}])[0] == 100")),
        Site("broken_edge_case", "stats", "stats.mean",
             (("    if not values:\n        return 0.0\n    return sum", "    return sum"),),
             "mean([]) raises ZeroDivisionError, so class_average of an empty class crashes; "
             "the mean of no values should be 0.0.",
             (check("stats", "mean([])", 0.0), check("report", "class_average([])", 0.0)),
             ("stats", "mean_empty", "mean", "mean([]) == 0.0")),
    ]
    return Package(name, mods, readme, tests, regression, sites)
