"""knowledge.include / knowledge.exclude: which walked paths a tree's owner wants indexed.

Globs are matched against a path relative to the walked root, with forward slashes: `*` and `?`
stay within one name, `**` spans directories (`**/generated/**`, `docs/**/*.md`), a glob without a
slash matches a name at any depth (`vendor`, `*.draft.md`), and a trailing slash matches directories
only (`build/`). An excluded directory is skipped whole, reported once with the glob that excluded
it; with include globs, a file is indexed only when one of them matches it. `**` inside a name
(`a**b`) is a plain `*`.

Matching never backtracks: a glob is split into names and `**` steps, the path's names are run
through the steps as a set of positions (at most one per step), and a name is matched by its
star-separated pieces, each found leftmost. So a match costs at most (steps x names x name length),
whatever the glob; and a glob is bounded (MAX_GLOB_CHARS, MAX_DOUBLE_STARS), since a query filter is
written by anyone who can reach `/v1/search`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from config.errors import ConfigError

MAX_GLOB_CHARS = 512
MAX_DOUBLE_STARS = 8


class GlobError(ValueError):
    """A glob too long or with too many `**` steps (the message names the bound)."""


Piece = str | re.Pattern[str]


@dataclass(frozen=True)
class _Name:
    """One name of a glob: star-separated pieces (a literal, or a pattern with `?`), each with its width."""

    pieces: tuple[tuple[Piece, int], ...]

    @classmethod
    def of(cls, text: str) -> _Name:
        """A name with `*` and `?` (`**` in it reads as `*`)."""
        pieces: list[tuple[Piece, int]] = []
        for piece in re.sub(r"\*+", "*", text).split("*"):
            if "?" in piece:
                pieces.append((re.compile("".join("[^/]" if c == "?" else re.escape(c) for c in piece)), len(piece)))
            else:
                pieces.append((piece, len(piece)))
        return cls(tuple(pieces))

    def matches(self, name: str) -> bool:
        """Whether the name matches: the first piece at the start, the last at the end, the rest leftmost between."""
        (first, head), (last, tail) = self.pieces[0], self.pieces[-1]
        if len(self.pieces) == 1:
            return head == len(name) and _at(first, name, 0)
        end = len(name) - tail
        if end < head or not _at(first, name, 0) or not _at(last, name, end):
            return False
        pos = head
        for piece, width in self.pieces[1:-1]:
            found = _find(piece, name, pos, end)
            if found < 0:
                return False
            pos = found + width
        return True


def _at(piece: Piece, name: str, pos: int) -> bool:
    if isinstance(piece, str):
        return name.startswith(piece, pos)
    return piece.match(name, pos) is not None


def _find(piece: Piece, name: str, pos: int, end: int) -> int:
    if isinstance(piece, str):
        return name.find(piece, pos, end)
    found = piece.search(name, pos, end)
    return -1 if found is None else found.start()


_ANY = None  # a `**` step: any number of names, none included


@dataclass(frozen=True)
class Glob:
    """A compiled glob: its steps (names, or `**`), and whether it matches directories only."""

    text: str
    steps: tuple[_Name | None, ...]
    dir_only: bool

    @classmethod
    def compile(cls, glob: str) -> Glob:
        """The glob as written; GlobError past MAX_GLOB_CHARS characters or MAX_DOUBLE_STARS `**` steps."""
        if len(glob) > MAX_GLOB_CHARS:
            raise GlobError(f"a glob is at most {MAX_GLOB_CHARS} characters, this one has {len(glob)}")
        body = glob.strip("/")
        parts = body.split("/")
        stars = sum(1 for p in parts if p == "**")
        if "/" not in body:
            parts = ["**", *parts]  # a bare name matches at any depth
        if stars > MAX_DOUBLE_STARS:
            raise GlobError(f"a glob holds at most {MAX_DOUBLE_STARS} `**` steps, this one has {stars}")
        steps: list[_Name | None] = []
        for part in parts:
            if part == "**":
                if not steps or steps[-1] is not _ANY:  # `**/**` is one step
                    steps.append(_ANY)
            else:
                steps.append(_Name.of(part))
        return cls(glob, tuple(steps), glob.endswith("/"))

    @property
    def bare(self) -> bool:
        """Whether the glob is one name matched at any depth (written without a slash: `*.md`)."""
        return len(self.steps) == 2 and self.steps[0] is _ANY and self.steps[1] is not _ANY

    def matches_last_name(self, path: str) -> bool:
        """For a bare glob, what matches(path) answers, from the path's last name alone (a third of the work)."""
        step = self.steps[-1]
        return step is not None and step.matches(path.rsplit("/", 1)[-1])

    def matches(self, path: str) -> bool:
        """Whether the whole path (names split on `/`) matches."""
        steps = self.steps
        done = len(steps)
        states = self._closure({0})
        for name in path.split("/"):
            following: set[int] = set()
            for i in states:
                if i == done:
                    continue
                step = steps[i]
                if step is _ANY:
                    following.add(i)
                elif step.matches(name):
                    following.add(i + 1)
            if not following:
                return False
            states = self._closure(following)
        return done in states

    def _closure(self, states: set[int]) -> set[int]:
        """The positions reachable without reading a name: past every `**` step (it may match none)."""
        out = set(states)
        for i in sorted(states):
            while i < len(self.steps) and self.steps[i] is _ANY:
                i += 1
                out.add(i)
        return out


def _compiled(key: str, globs: Sequence[str]) -> tuple[Glob, ...]:
    out: list[Glob] = []
    for i, glob in enumerate(globs):
        if glob.strip("/"):
            try:
                out.append(Glob.compile(glob))
            except GlobError as exc:
                raise ConfigError(f"knowledge.{key}[{i}]: {exc}; write a shorter glob") from None
    return tuple(out)


@dataclass(frozen=True)
class Globs:
    """Compiled include and exclude globs (both empty: everything eligible is indexed)."""

    include: tuple[Glob, ...] = ()
    exclude: tuple[Glob, ...] = ()

    @classmethod
    def of(cls, include: Sequence[str] = (), exclude: Sequence[str] = ()) -> Globs:
        """Compile the globs as written in the config (ConfigError naming the entry for one past the bounds)."""
        return cls(_compiled("include", include), _compiled("exclude", exclude))

    def excluded_by(self, relative: str, directory: bool) -> str | None:
        """The exclude glob matching a path relative to its root, or None."""
        for glob in self.exclude:
            if (directory or not glob.dir_only) and glob.matches(relative):
                return glob.text
        return None

    def included(self, relative: str) -> bool:
        """True when there are no include globs or one matches a file's path relative to its root."""
        return not self.include or any(g.matches(relative) for g in self.include if not g.dir_only)
