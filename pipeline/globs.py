"""knowledge.include / knowledge.exclude: which walked paths a tree's owner wants indexed.

Globs are matched against a path relative to the walked root, with forward slashes: `*` and `?`
stay within one name, `**` spans directories (`**/generated/**`, `docs/**/*.md`), a glob without a
slash matches a name at any depth (`vendor`, `*.draft.md`), and a trailing slash matches directories
only (`build/`). An excluded directory is skipped whole, reported once with the glob that excluded
it; with include globs, a file is indexed only when one of them matches it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass


def translate(glob: str) -> tuple[re.Pattern[str], bool]:
    """(regex of glob, directories only); also the path globs of query filters (query/filters.py)."""
    dir_only = glob.endswith("/")
    body = glob.strip("/")
    out: list[str] = []
    i = 0
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
        elif body[i] == "*":
            out.append("[^/]*")
            i += 1
        elif body[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(body[i]))
            i += 1
    anchored = "/" in body
    return re.compile(("" if anchored else "(?:.*/)?") + "".join(out) + "$"), dir_only


@dataclass(frozen=True)
class Globs:
    """Compiled include and exclude globs (both empty: everything eligible is indexed)."""

    include: tuple[tuple[str, re.Pattern[str], bool], ...] = ()
    exclude: tuple[tuple[str, re.Pattern[str], bool], ...] = ()

    @classmethod
    def of(cls, include: Sequence[str] = (), exclude: Sequence[str] = ()) -> Globs:
        """Compile the globs as written in the config."""
        return cls(tuple((g, *translate(g)) for g in include if g.strip("/")),
                   tuple((g, *translate(g)) for g in exclude if g.strip("/")))

    def excluded_by(self, relative: str, directory: bool) -> str | None:
        """The exclude glob matching a path relative to its root, or None."""
        for glob, pattern, dir_only in self.exclude:
            if (directory or not dir_only) and pattern.match(relative):
                return glob
        return None

    def included(self, relative: str) -> bool:
        """True when there are no include globs or one matches a file's path relative to its root."""
        return not self.include or any(p.match(relative) for _, p, dir_only in self.include if not dir_only)
