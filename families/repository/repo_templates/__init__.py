"""Package templates for repo_suite: small packages written in their FIXED form, with defect sites.

A template is a function rng -> Package. It picks the package name and a few constants, then
returns the modules' fixed text, visible tests, regression checks and its defect sites (one or
more per kind). Expected values are computed here by mirroring the package's own arithmetic,
and tests/families/repository/test_repo_suite.py runs every check against the real generated code.

One module per template (shop, text, grades, geometry, bank, calendar); base.py holds what they
share.
"""

from __future__ import annotations

import random
from typing import Callable

from flywheel.families.repository.repo_templates.bank import bank
from flywheel.families.repository.repo_templates.base import KINDS, Check, Package, Site  # noqa: F401
from flywheel.families.repository.repo_templates.calendar import calendar
from flywheel.families.repository.repo_templates.geometry import geometry
from flywheel.families.repository.repo_templates.grades import grades
from flywheel.families.repository.repo_templates.shop import shop
from flywheel.families.repository.repo_templates.text import text

TEMPLATES: list[Callable[[random.Random], Package]] = [shop, text, grades, geometry, bank, calendar]
