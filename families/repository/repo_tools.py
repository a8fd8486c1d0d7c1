"""The tools of repository episodes, as JSON Schema contracts (families/repository/harnesses/repo.py runs them).

Paths are relative to the repository's root, with no `..` part; every call's observation is
bounded and says what happened, errors included. `submit_changes` takes nothing: the answer is the diff
of the tree from the snapshot. `run_shell` and `write_file` are the shared contracts
(domains/tools.py), described here for a repository; the two whose contracts differ from the
shared ones have names of their own: `run_visible_tests` (test files, not code) and
`submit_changes` (no answer: the tree is the answer; it ends the episode as `submit` does).
"""

from __future__ import annotations

from flywheel.domains.domain import ToolSpec
from flywheel.domains.tools import RUN_SHELL, WRITE_FILE, described

PATH = {"type": "string", "maxLength": 300,
        "pattern": r"^(?!/)(?!.*(^|/)\.\.(/|$))[^\x00]+$"}  # relative, no `..` part
LINE = {"type": "integer", "minimum": 1, "maximum": 10_000_000}
TEXT = {"type": "string", "maxLength": 100_000}


def _tool(name: str, description: str, required: list[str], **properties) -> ToolSpec:
    return ToolSpec(name, description, {"type": "object", "required": required,
                                        "additionalProperties": False, "properties": properties})


LIST_FILES = _tool("list_files", "List the repository's files matching a glob (default: all).", [],
                   pattern={"type": "string", "maxLength": 200})
READ_FILE = _tool("read_file", "Show a file with line numbers, or lines start..end of it.",
                  ["path"], path=PATH, start=LINE, end=LINE)
SEARCH = _tool("search", "Search the files (or those matching `path`, a glob or folder) for a "
               "Python regular expression; shows path:line: text for each match.",
               ["pattern"], pattern={"type": "string", "maxLength": 500},
               path={"type": "string", "maxLength": 300})
EDIT_FILE = _tool("edit_file", "Replace the exact text `old` (it must occur exactly once) with "
                  "`new` in a file.", ["path", "old", "new"], path=PATH, old=TEXT, new=TEXT)
APPLY_PATCH = _tool("apply_patch", "Apply a unified diff (git diff format) to the repository.",
                    ["patch"], patch={"type": "string", "maxLength": 200_000})
WRITE_FILE = described(WRITE_FILE, "Create or overwrite a file.")
RUN_SHELL = described(RUN_SHELL, "Run a bash command in the repository's root; shows its output "
                      "and exit status. Files it changes in the repository stay changed; $HOME and "
                      "$TMPDIR are scratch space; writing anywhere else outside the repository "
                      "forfeits the episode.")
RUN_VISIBLE_TESTS = _tool("run_visible_tests", "Run the visible tests (or the given visible test files); shows "
                  "each test's result and the failures' errors.", [],
                  paths={"type": "array", "items": PATH, "maxItems": 50})
SUBMIT_CHANGES = _tool("submit_changes", "Submit the repository as it is now; the episode ends and the change is "
               "scored by tests you have not seen.", [])

REPO_TOOLS = (LIST_FILES, READ_FILE, SEARCH, EDIT_FILE, APPLY_PATCH, WRITE_FILE, RUN_SHELL,
              RUN_VISIBLE_TESTS, SUBMIT_CHANGES)
