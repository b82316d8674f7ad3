"""Globs match as the include/exclude and path-filter docs say, in bounded time whatever the glob."""

from __future__ import annotations

import re
from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from config.errors import ConfigError
from pipeline.globs import MAX_DOUBLE_STARS, MAX_GLOB_CHARS, Glob, GlobError, Globs


def _regex_of(glob: str) -> re.Pattern[str]:
    """The backtracking translation globs had before (the oracle for every glob without `**` inside a name)."""
    body = glob.strip("/")
    out, i = [], 0
    while i < len(body):
        if body.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif body.startswith("/**", i) and i + 3 == len(body):
            out.append("(?:/.*)?")
            i += 3
        elif body.startswith("**", i):
            out.append(".*")
            i += 2
        elif body[i] in "*?":
            out.append("[^/]*" if body[i] == "*" else "[^/]")
            i += 1
        else:
            out.append(re.escape(body[i]))
            i += 1
    return re.compile(("" if "/" in body else "(?:.*/)?") + "".join(out) + r"\Z", re.S)


_NAMES = st.lists(st.sampled_from(["a", "b", "ab", "ba", "aab", "*", "?", "a*", "*b", "a?b", "*a*", "**"]),
                  min_size=1, max_size=5)
_PATHS = st.lists(st.sampled_from(["a", "b", "ab", "ba", "aab", "abab", "bb"]), min_size=1, max_size=6)


@settings(max_examples=600, deadline=None)
@given(_NAMES, _PATHS)
def test_a_glob_matches_exactly_what_its_regex_translation_matched(names: list[str], parts: list[str]) -> None:
    """Except `x/**/**`, which the regex read as `x/` and more while `x/**` also matched `x`; now both match `x`."""
    assume(all(a != "**" or b != "**" for a, b in pairwise(names)))
    glob, path = "/".join(names), "/".join(parts)
    assert Glob.compile(glob).matches(path) == bool(_regex_of(glob).match(path)), (glob, path)


@pytest.mark.parametrize(("glob", "path", "expected"), [
    ("docs/**/*.md", "docs/a/b/c.md", True), ("docs/**/*.md", "docs/c.md", True),
    ("docs/**/*.md", "docs/c.txt", False), ("**/generated/**", "a/generated", True),
    ("**/generated/**", "a/generated/x/y.md", True), ("vendor", "x/y/vendor", True),
    ("*.draft.md", "notes/a.draft.md", True), ("*.draft.md", "notes/a.md", False),
    ("docs/a?c.md", "docs/abc.md", True), ("docs/a?c.md", "docs/ac.md", False),
    ("docs/*", "docs/a/b.md", False), ("docs/**", "docs/a/b.md", True), ("a**b", "axxb", True),
    ("a**b", "ax/xb", False),  # `**` inside a name is a plain `*`
    ("https://host/**", "https://host/page.html", True), ("line\nbreak", "line\nbreak", True),
])
def test_globs_match_as_documented(glob: str, path: str, expected: bool) -> None:
    assert Glob.compile(glob).matches(path) is expected


@pytest.mark.timeout(20)
def test_a_hostile_glob_on_a_deep_tree_answers_at_once() -> None:
    """The regex translation ran for hours on this (55 characters, a tree 8 directories deep)."""
    glob = "**/*a*a*/**/*a*a*/**/*a*a*/**/*a*a*/**/*a*a*/**/*a*a*/b"
    assert len(glob) == 55
    deep = "/".join(["a" * 40] * 8 + ["c"])
    assert Glob.compile(glob).matches(deep) is False
    assert Glob.compile(glob).matches("/".join(["xaxax"] * 6 + ["b"])) is True
    excludes = Globs.of(exclude=[glob])
    assert all(excludes.excluded_by(deep, directory) is None for directory in (True, False))


def test_a_glob_past_its_bounds_is_refused_naming_the_bound() -> None:
    with pytest.raises(GlobError, match=f"at most {MAX_GLOB_CHARS} characters"):
        Glob.compile("a" * (MAX_GLOB_CHARS + 1))
    with pytest.raises(GlobError, match=f"at most {MAX_DOUBLE_STARS} `\\*\\*` steps"):
        Glob.compile("/".join(["**", "a"] * (MAX_DOUBLE_STARS + 1)))
    assert Glob.compile("/".join(["**", "a"] * MAX_DOUBLE_STARS)).matches("a/" * (MAX_DOUBLE_STARS - 1) + "a")
    with pytest.raises(ConfigError, match=r"knowledge\.exclude\[1\]: a glob is at most"):
        Globs.of(exclude=["vendor", "x" * (MAX_GLOB_CHARS + 1)])


def test_a_config_with_a_glob_past_the_bounds_fails_the_index_run_naming_the_entry(workdir: Path, run_cli) -> None:
    (workdir / "docs").mkdir()
    (workdir / "docs/a.md").write_text("# A\n\nalpha\n", encoding="utf-8")
    globs = ", ".join(["'" + "/".join(["**", "x"] * (MAX_DOUBLE_STARS + 1)) + "'"])
    (workdir / "knowledge.yaml").write_text(f"knowledge:\n  paths: [docs]\n  include: [{globs}]\n", encoding="utf-8")
    code, _, err = run_cli("index")
    assert code == 2 and "knowledge.include[0]" in err and "Traceback" not in err
