"""Package template: a calendar and scheduler: clock, dates, slots."""

from __future__ import annotations

import random

from flywheel.families.repository.repo_templates.base import Package, Site, check, fill, modules_with_init  # noqa: F401


CAL_CLOCK = """\
\"\"\"Times of day as minutes after midnight.\"\"\"


def parse_time(text):
    \"\"\"'09:30' -> 570.\"\"\"
    hours, minutes = text.split(":")
    return int(hours) * 60 + int(minutes)


def fmt_time(minutes):
    \"\"\"570 -> '09:30'.\"\"\"
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def fmt_duration(minutes):
    \"\"\"90 -> '1h30m'.\"\"\"
    return f"{minutes // 60}h{minutes % 60:02d}m"


def add_minutes(time, minutes):
    \"\"\"`time` plus `minutes`, wrapping past midnight.\"\"\"
    return (time + minutes) % 1440
"""

CAL_DATES = """\
\"\"\"Calendar arithmetic.\"\"\"

DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]


def is_leap(year):
    \"\"\"Gregorian leap year: every 4th year, except centuries not divisible by 400.\"\"\"
    if year % 400 == 0:
        return True
    if year % 100 == 0:
        return False
    return year % 4 == 0


def days_in_month(year, month):
    \"\"\"Days in `month` (1-12) of `year`.\"\"\"
    if month == 2 and is_leap(year):
        return 29
    return DAYS[month - 1]


def day_of_year(year, month, day):
    \"\"\"1 for January 1st.\"\"\"
    return sum(days_in_month(year, m) for m in range(1, month)) + day
"""

CAL_SLOTS = """\
\"\"\"Meetings are (start, end) minute pairs.\"\"\"

from . import clock
from .clock import fmt_time

SLOT_MINUTES = @SLOT@


def overlaps(a, b):
    \"\"\"Whether meetings a and b overlap; one ending as the other starts does not.\"\"\"
    return a[0] < b[1] and b[0] < a[1]


def free_slots(busy, day_start, day_end, length=SLOT_MINUTES):
    \"\"\"Start times of free `length`-minute slots from day_start, stepping by `length`.\"\"\"
    out = []
    t = day_start
    while t + length <= day_end:
        if not any(overlaps((t, t + length), b) for b in busy):
            out.append(t)
        t += length
    return out


def labels(meetings):
    \"\"\"'HH:MM-HH:MM' for each meeting.\"\"\"
    return [f"{fmt_time(a)}-{fmt_time(b)}" for a, b in meetings]


def end_time(start, minutes):
    \"\"\"'HH:MM' at which a meeting of `minutes` starting at `start` ends.\"\"\"
    return clock.fmt_time(clock.add_minutes(start, minutes))
"""


def calendar(rng: random.Random) -> Package:
    name = rng.choice(["planner", "agenda", "cronlite"])
    slot = rng.choice([15, 20, 30, 45])
    mods = {"clock": CAL_CLOCK, "dates": CAL_DATES, "slots": CAL_SLOTS}
    mods = modules_with_init(name, "A day planner: clock times, dates and meeting slots.",
                             {k: fill(v, SLOT=slot) for k, v in mods.items()})
    readme = f"# {name}\n\nTimes are minutes after midnight. Free slots are {slot} minutes long.\n"
    year = rng.choice([2021, 2022, 2023, 2025])
    leap = rng.choice([2024, 2028, 2000])

    def hm(m: int) -> str:
        return f"{m // 60:02d}:{m % 60:02d}"

    tests = [
        ("clock", "parse", "parse_time", "parse_time('09:30') == 570"),
        ("clock", "fmt", "fmt_time", "fmt_time(65) == '01:05'"),
        ("dates", "leap", "is_leap", f"is_leap({leap}) and not is_leap({year})"),
        ("dates", "doy", "day_of_year", f"day_of_year({year}, 1, 5) == 5"),
        ("slots", "overlap", "overlaps", "overlaps((60, 120), (90, 150))"),
        ("slots", "labels", "labels", "labels([(540, 600)]) == ['09:00-10:00']"),
    ]
    regression = [
        check("clock", "parse_time('23:59')", 1439, "clock.parse_time"),
        check("clock", "fmt_duration(135)", "2h15m", "clock.fmt_duration"),
        check("dates", f"days_in_month({year}, 4)", 30, "dates.days_in_month"),
        check("slots", "overlaps((0, 30), (100, 200))", False, "slots.overlaps"),
        check("slots", "labels([(0, 90)])", ["00:00-01:30"], "slots.labels"),
        check("dates", f"is_leap({leap})", True, "dates.is_leap"),
    ]
    day_start = 540
    sites = [
        Site("wrong_operator", "slots", "slots.overlaps",
             (("    return a[0] < b[1] and b[0] < a[1]", "    return a[0] <= b[1] and b[0] <= a[1]"),),
             "overlaps() reports back-to-back meetings (one ends as the next starts) as "
             "overlapping; they do not overlap.",
             (check("slots", "overlaps((600, 660), (660, 700))", False),
              check("slots", f"free_slots([(0, {day_start})], {day_start}, {day_start + slot})", [day_start])),
             ("slots", "back_to_back", "overlaps", "not overlaps((60, 120), (0, 60))")),
        Site("off_by_one", "dates", "dates.day_of_year",
             (("for m in range(1, month))", "for m in range(1, month + 1))"),),
             "day_of_year gives dates after January a number a whole month too large; "
             "January 1st is day 1.",
             (check("dates", f"day_of_year({year}, 2, 1)", 32),
              check("dates", f"day_of_year({year}, 12, 31)", 365)),
             ("dates", "doy_march", "day_of_year", f"day_of_year({year}, 3, 1) == 60")),
        Site("missing_case", "dates", "dates.is_leap",
             (("    if year % 100 == 0:\n        return False\n    return year", "    return year"),),
             "is_leap treats century years such as 1900 as leap years; only centuries "
             "divisible by 400 are.",
             (check("dates", "is_leap(2100)", False), check("dates", "days_in_month(1800, 2)", 28)),
             ("dates", "century", "is_leap", "not is_leap(1900)")),
        Site("wrong_import", "slots", "slots.labels",
             (("from .clock import fmt_time\n", "from .clock import fmt_duration\n"),
              ('f"{fmt_time(a)}-{fmt_time(b)}"', 'f"{fmt_duration(a)}-{fmt_duration(b)}"')),
             "labels() prints meetings as durations like '9h00m-10h00m' instead of clock "
             "times like '09:00-10:00'.",
             (check("slots", "labels([(615, 700)])", [f"{hm(615)}-{hm(700)}"]),
              check("slots", "labels([(0, 5), (60, 61)])", ["00:00-00:05", "01:00-01:01"])),
             ("slots", "labels_clock", "labels", "labels([(480, 500)]) == ['08:00-08:20']"), ("clock",)),
        Site("renamed_api", "slots", "slots.end_time",
             (("    return clock.fmt_time(clock.add_minutes", "    return clock.format_time(clock.add_minutes"),),
             "end_time() raises AttributeError instead of returning the clock time at which "
             "a meeting ends.",
             (check("slots", "end_time(600, 45)", "10:45"), check("slots", "end_time(0, 1)", "00:01")),
             ("slots", "end_time", "end_time", "end_time(540, 30) == '09:30'"), ("clock",)),
        Site("wrong_default", "slots", "slots.free_slots",
             (("day_end, length=SLOT_MINUTES):", "day_end, length=60):"),),
             f"free_slots without a length should list {slot}-minute slots, as the README says, "
             f"but the slots come out an hour long.",
             (check("slots", f"free_slots([], 600, {600 + 2 * slot})", [600, 600 + slot]),
              check("slots", f"len(free_slots([], 0, {slot * 4}))", 4)),
             ("slots", "free_default", "free_slots", f"free_slots([], 0, {slot}) == [0]")),
        Site("broken_edge_case", "clock", "clock.add_minutes",
             (("    return (time + minutes) % 1440", "    return time + minutes"),),
             "Adding minutes past midnight gives times such as '24:10' (end_time, add_minutes); "
             "times should wrap round to the next day.",
             (check("clock", "add_minutes(1430, 20)", 10), check("slots", "end_time(1380, 90)", "00:30")),
             ("clock", "wrap_midnight", "add_minutes", "add_minutes(1439, 2) == 1")),
    ]
    return Package(name, mods, readme, tests, regression, sites)
