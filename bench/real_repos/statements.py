"""The problem statements of the suite's rows, written from each release's notes: what users saw
go wrong or asked for, never how it was fixed (SWE-bench's problem_statement)."""

STATEMENTS = {
    "pyparsing__pyparsing-3.0.7": """\
delimited_list changes its expression in place; WordStart/WordEnd, White and QuotedString bugs

- `delimited_list(expr)` modifies `expr` in place (it streamlines it), so using the same
  expression elsewhere afterwards behaves differently (#345).
- `WordStart`/`WordEnd` given a string of word characters ignore it and use the default (#346).
- `White` expressions can fail to match because of unintended whitespace skipping, e.g.
  `White(' \t')("indent") + Word(alphas)("word")` on "    test" (#350).
- The regular expression `Word` generates for its characters is not compact: runs of
  consecutive characters should become ranges (`[A-EMNX-Z]+`, `[!-~]+`), and two adjacent
  characters such as "ab" should stay "ab", not "a-b".
- `QuotedString` with regex-significant characters (., *, ?, [, ]) in its quote characters does
  not match correctly (#355).
- `ParserElement.run_tests` shows comments with line numbers when `with_line_numbers` is set.
- Please also add optional `min` and `max` arguments to `delimited_list`.
""",
    "pyparsing__pyparsing-3.0.8": """\
infix_notation suppresses custom lpar/rpar; slow import

- `infix_notation(..., lpar=..., rpar=...)` suppresses the given parenthesis expressions even
  when they are parse expressions the user wants in the results: given expressions (not plain
  strings) must not be suppressed.
- Importing pyparsing is slow because regex patterns are compiled at import (#362).
- Arithmetic and logical operator methods of `ParserElement` lack type hints, and catching regex
  compile errors relies on the deprecated `sre_constants` module.
""",
    "more-itertools__more-itertools-10.0.0": """\
batched should yield tuples; new combinatorics and polynomial functions; iterate and StopIteration

- `batched` and `matmul` yield lists; they should yield tuples, as `itertools.batched` does (on
  Python 3.12+ `batched` should be that function, without a DeprecationWarning).
- `iterate(func, start)` should stop when `func` raises StopIteration instead of propagating it.
- Please add `combination_with_replacement_index`, `nth_combination_with_replacement`,
  `polynomial_eval`, `polynomial_derivative` and `sum_of_squares`, and a `relative_seek` method
  on `seekable`.
""",
    "more-itertools__more-itertools-10.1.0": """\
New functions takewhile_inclusive and outer_product; zip_broadcast improvements

Please add `takewhile_inclusive(predicate, iterable)` (like takewhile, but also yields the first
element for which the predicate is false) and `outer_product(func, xs, ys, *args, **kwargs)`
(a table of func applied to each pair). `zip_broadcast` should handle its edge cases (e.g.
strings and bytes treated as scalars, the `strict` argument, all-scalar input).
""",
    "pallets__click-8.1.3": """\
An option with multiple=True and is_flag=True is accepted silently

Declaring `@click.option("--verbose", is_flag=True, multiple=True)` is accepted, but the
combination does not work as users expect (each use of the flag is not counted, and the value
is confusing). Creating such an option should fail at definition time with a TypeError that
explains the combination is not valid and that `count=True` is the way to count repeated flags
(#2246). Also, `@click.command` and `@click.group` should annotate their callable arguments
fully (`Callable[..., Any]`) so that strict type checkers accept them (#2255).
""",
    "pyparsing__pyparsing-3.0.9": """\
Add a Unicode set for the Basic Multilingual Plane

pyparsing.unicode has sets for many scripts, but none for "most language characters without the
emojis and other symbols above U+FFFF". Please add `pyparsing.unicode.BasicMultilingualPlane`
(also reachable as `pyparsing.unicode.BMP`) covering code points up to 65535, usable like the
other sets (`.printables`, `.alphas`, `.nums`, `.alphanums`, ...).

Also, mypy confuses `pyparsing.Optional` with `typing.Optional` in pyparsing's own annotations
(`error: "_SpecialForm" not callable`); the annotations should use the typing module's names.
""",
    "pyparsing__pyparsing-3.1.1": """\
Regressions in 3.1.0: Word(min=...), SkipTo with ignored expressions, Forward error messages

After upgrading to 3.1.0:
- `Word(..., min=N)` no longer enforces its minimum length correctly (issue #502);
- `SkipTo(target)` no longer checks the expressions registered with `.ignore()` while it scans
  for the target, so a target inside an ignored expression (e.g. a quoted string or comment) is
  matched (issue #500);
- exceptions raised through a `Forward` carry unhelpful messages (#493);
- the type annotation of `ParserElement.enable_packrat` is wrong (#498).
""",
    "pyparsing__pyparsing-3.1.2": """\
Empty or unhelpful ParseException messages; add common.ieee_float

Since 3.1 many ParseExceptions have empty or uninformative messages (e.g. "Expected , found ..."
with nothing said about what was expected), which makes parsers hard to debug (#534). Exception
messages should again name the expected expression, and `pyparsing.testing`'s
`assertRaisesParseException` should be able to check the expected message.

Also requested: an `ieee_float` expression in `pyparsing.common` that parses float values
including "NaN", "Inf" and "Infinity" (#538), and PEP8 synonym wrappers (e.g. `parse_string` vs
`parseString`) that type checkers understand (#507).
""",
    "pyparsing__pyparsing-3.1.3": """\
Add a Tag element for metadata; PEP8 static method names fail on instances; set_name(None)

1. Please add a `Tag` ParserElement that matches nothing but inserts a named value into the
   parsed results (default value True, optional `value=`), e.g.
   `end_punc = "." | ("!" + Tag("enthusiastic"))` gives `result.enthusiastic == True` for
   "Hello World!".
2. The PEP8 compatibility names of `ParserElement`'s static methods (such as
   `set_default_whitespace_chars`, `enable_packrat`, `inline_literals_using`) are not static
   methods: called on an instance they raise TypeError (#548).
3. RDFLib assigns `expr.name = "..."`: the `name` property needs a setter that behaves as
   `set_name`; and `set_name(None)` should clear a defined name and its custom error message.
4. `trace_parse_action` output should include the exception type.
5. `copy.deepcopy` of a `ParseResults` does not copy its nested results correctly.
""",
    "pyparsing__pyparsing-3.2.1": """\
Missing type annotations on helper functions; regex-based common expressions are slow

`match_only_at_col`, `replace_with`, `remove_quotes`, `with_attribute` and `with_class` have no
type annotations (#585), so type checkers cannot check code using them. Also, the expressions
`cpp_style_comment`, `c_style_comment`, `common.fnumber` and `common.ieee_float` are slow on long
inputs; their results must stay the same. The expressions `infix_notation` generates internally
get names that are hard to read in `str()`, error messages and diagrams (for instance
"Forward: + | - term" for an operator level): they should be named after the operand and the
operators they handle, and `delimited_list` of such an expression should show that name.
""",
    "pyparsing__pyparsing-3.2.2": """\
rest_of_line loops forever at end of input; nested_expr strips whitespace; one_of with regex chars

- `Regex` patterns that can match an empty string (".*", "[A-Z]*"), and so `rest_of_line`, do not
  raise ParseException at or beyond the end of the input string, which can make a parser loop
  forever when `rest_of_line` is used at the end of the input (#593).
- `nested_expr` strips whitespace from nested contents even when the default whitespace
  characters were cleared; its PEP8 and legacy argument names are not resolved correctly.
- `one_of()` does not escape characters that are regex markers ('*', '+', '?', ...) when it
  builds its internal regex, so such alternatives are mis-parsed.
- The message of `MatchFirst` and `Or` exceptions shows only the first alternative; it should
  list all of them (#592).
- `pyparsing.util.make_compressed_re` does not escape characters like "." and "*" and does not
  validate its input.
""",
    "pyparsing__pyparsing-3.2.3": """\
nested_expr overwrites parse actions and truncates nested lists (regression in 3.2.2)

Since 3.2.2, `nested_expr` can overwrite the parse actions of the content expression the user
passes in, and can truncate the list of items within a nested list (issue #600): a nested
expression like "(a (b c) d)" with a content expression that has its own parse action returns
fewer items than it should, and the action is lost.
""",
    "more-itertools__more-itertools-10.2.0": """\
New functions iter_suppress, filter_map, classify_unique, totient, reshape; batched(strict=)

Please add:
- `iter_suppress(iterable, *exceptions)`: yield from the iterable, stopping silently when one of
  the given exceptions is raised;
- `filter_map(func, iterable)`: apply func to each item and yield the results that are not None;
- `classify_unique(iterable, key=None)`: yield (element, unique_justseen, unique_everseen) triples;
- `totient(n)` (Euler's totient function) and `reshape(matrix, cols)` from the itertools docs'
  recipes.
Also: `batched(iterable, n)` should accept `strict=True` (raise ValueError when the last batch is
short), and `factor`, `iter_index`, `sieve` and `unique_justseen` should behave as the current
itertools recipes do.
""",
    "more-itertools__more-itertools-10.3.0": """\
New functions powerset_of_sets, dft, idft, join_mappings, doublestarmap, unique; all_equal(key=)

Please add `powerset_of_sets` (the powerset of an iterable as frozensets, duplicates removed),
`dft`/`idft` (the discrete Fourier transform and its inverse), `join_mappings` (join several
mappings by key into a dict of dicts), `doublestarmap` (like starmap, calling func(**item)) and
`unique` (the sorted distinct items, with key and reverse). `all_equal` should accept a `key`
argument. `collapse`, `chunked_even`, `ichunked`, `padded`, `windowed` and `roundrobin` have edge
cases to fix while they are improved (e.g. `windowed` with a step larger than the window).
""",
    "more-itertools__more-itertools-10.4.0": """\
distinct_permutations fails on non-comparable items; new parameters for several functions

- `distinct_permutations` raises TypeError for iterables whose items cannot be compared
  (e.g. a mix of types, or unorderable objects); it should work with any hashable items.
- `circular_shifts` should accept a `steps` parameter; `sample` should accept `counts` and
  `strict`; `set_partitions` should accept `min_size` and `max_size`; `sort_together` should
  accept `strict`.
- `seekable.relative_seek` should remember previous relative seeks.
""",
    "more-itertools__more-itertools-10.6.0": """\
New functions is_prime, nth_prime and loops; factor, spy, polynomial_from_roots, is_sorted issues

Please add `is_prime(n)` (correct for large n), `nth_prime(n)` and `loops(n)` (yield None n
times). Also: `factor` fails or uses too much memory on large inputs; nested calls of `spy` do
not work; `polynomial_from_roots` is recursive and fails with many roots; `is_sorted` should
rely only on less-than comparisons (items that define only `__lt__` must work).
""",
    "pallets__click-8.1.4": """\
Several regressions: multiple flags, reusable decorators, completion and empty help

- A flag option with `multiple=True` fails unless `default=()` is set (#2246, #2292, #2295).
- The decorators returned by `@click.argument()`/`@click.option()` with a `cls=` cannot be reused
  on a second function (#2294).
- `@group.command` fails when the group was created with a custom `command_class` (#2416).
- Shell completion fails for a program name containing a dot (#2166), and when an argument has
  `expose_value=False` (#2336).
- A command whose help text is empty shows empty lines in `--help` (#2368).
- With `standalone_mode=False`, EOFError and KeyboardInterrupt tracebacks are suppressed (#2380).
- Writing filenames to streams with strict error handling fails on undecodable bytes; invalid
  bytes should become the replacement character (#2395).
- `echo()` fails when no streams are attached (pythonw on Windows) (#2415).
- `shell_completion.add_completion_class` returns the wrong value (#2421).
""",
    "pallets__click-8.1.8": """\
Default values and error messages shown wrong

- An option whose default is the empty string "" does not show it in `--help` with
  `show_default=True` (#2500).
- A flag's default from `default_map` is displayed incorrectly in help (#2632).
- The error message for an invalid `click.Path` is split over several lines (#2697).
- Exceptions raised during a command ignore the context's `color` setting when displayed (#2193).
- Defining an option with an invalid name gives an unhelpful error; it should say what is wrong
  (#2452).
- The help option generated from `help_option_names` does not respect its eagerness (#2811).
- `CliRunner` does not restore its patch of ANSI stripping after invoking (#2732), and strips
  colours inconsistently.
""",
    "pallets__jinja2-3.1.3": """\
xmlattr accepts keys with spaces; compiler error with required blocks; trans nesting messages

- The `xmlattr` filter accepts keys containing spaces, which allows injecting extra attributes
  into the rendered HTML (GHSA-h5c8-rqwp-cp95). Such keys must be rejected with ValueError.
- Checking whether required blocks in parent templates are empty raises a compiler error
  (#1858).
- Invalid nesting of `{% trans %}` blocks gives unhelpful error messages (#1916).
""",
    "pallets__jinja2-3.1.4": """\
xmlattr accepts keys with "/", ">" or "=" characters

The `xmlattr` filter rejects keys with spaces, but keys containing "/", ">" or "=" are still
accepted, which again allows injecting attributes or markup into the rendered HTML
(GHSA-h75v-3vvj-5mfj). Such keys must be rejected with ValueError.
""",
    "pallets__jinja2-3.1.5": """\
Sandbox escape through indirect str.format calls; several runtime and compiler bugs

- The sandboxed environment does not catch indirect calls to `str.format`, e.g. through a
  stored reference to the method (GHSA-q2x7-8rv6-6q7h); it must raise SecurityError as direct
  calls do. The sandbox should also refuse `clear` and `pop` on known mutable sequences.
- Calling the sync `render` of an async template fails inside a running event loop or leaves a
  loop behind.
- `{% set a, b = ... %}` assigning to a namespace attribute fails; `{% set %}` in all branches of
  an `{% if %}` block leaves the variable undefined.
- `{% set %}` of unpacked loop or block variables compiles to code whose order is not
  deterministic; importing an undefined name with curly braces in it gives a bad error; the
  `int` filter fails on huge float strings such as "1e10000" instead of returning the default.
- Copying or pickling the internal `missing` object, `Environment.overlay(enable_async=...)`,
  the FileSystemLoader/PackageLoader error messages, `urlize` adding "mailto:" to values like
  "@a@b", and tests decorated with `@pass_context` in `|select` misbehave.
""",
    "pallets__markupsafe-2.1.5": """\
striptags does not collapse spaces

`Markup("<em>a</em>   <b>b</b>").striptags()` should collapse runs of whitespace into single
spaces, as documented, but in 2.1.4 spaces left where tags or comments were removed are not
collapsed (#417).
""",
    "jquast__wcwidth-0.2.13": """\
Wrong widths for Hangul Jamo vowels and some CJK characters

`wcwidth` returns 2 (wide) for Hangul Jungseong (vowel) jamo such as U+1161 and U+1160, which
combine with a preceding Choseong (consonant); `wcswidth("\\u1100\\u1161")` should be 2, with
the vowel counted as 0. Some characters are also listed both as wide and as zero width (e.g.
U+302A..U+302D with unicode_version='4.1.0'): zero width should apply to them.
""",
}
