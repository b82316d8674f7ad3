"""The search page's HTML: small string templates over values that are escaped where they are printed.

Everything a document, a query or the configuration supplies reaches the page through `text()` (or
`attr()` for an attribute), which drops control characters and lone surrogates and escapes `<`, `>`,
`&` and quotes; links to sections are percent-encoded paths of this server; a mapped citation is
a link only when it is an http(s) URL. Styles and script come from /static (never inline), so the
Content-Security-Policy can forbid every inline script. The form renders whatever FILTER_FIELDS and
TOGGLES name, and a result shows any field of the hit's JSON beyond the ones it lays out (SHOWN).
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from pipeline.text import without_controls
from query.highlight import Segment
from query.serve.page_markdown import render

MODES = {"search": "Rank the sections that answer", "match": "Which documents contain"}
_SURROGATE = re.compile("[\ud800-\udfff]")
# The hit fields a result lays out itself; any other field of hit_json is shown as a detail.
SHOWN = frozenset({"citation", "index_ref", "ref", "path", "section", "content", "score", "translations"})


@dataclass(frozen=True)
class FilterField:
    """A text input of the search form, passed by name to the functions of the modes it applies to."""

    name: str
    label: str
    hint: str = ""
    modes: tuple[str, ...] = ("search", "match")


@dataclass(frozen=True)
class Toggle:
    """A checkbox of the search form, passed by name (True when ticked) to the functions of its modes."""

    name: str
    label: str
    modes: tuple[str, ...] = ("search",)


# The filter inputs and toggles the form shows; each entry is passed to search/match as a keyword.
FILTER_FIELDS: tuple[FilterField, ...] = (
    FilterField("path", "Path", "a prefix (docs/api) or a glob (docs/api/**)"),
    FilterField("root", "Root", "an indexed root"),
    FilterField("where", "Front matter", "key=value, e.g. tags=security"),
    FilterField("lang", "Language", "a code (en, de, ja); any: every language, each translation apart"),
)
TOGGLES: tuple[Toggle, ...] = (Toggle("explain", "Explain the ranking"),)


@dataclass
class FormState:
    """What the search form holds: the query, the mode, the result count and each filter and toggle."""

    q: str = ""
    mode: str = "search"
    top_k: int | None = None
    filters: dict[str, str] = field(default_factory=dict)
    toggles: dict[str, bool] = field(default_factory=dict)

    def keywords(self) -> dict[str, Any]:
        """The filters (non-empty) and toggles (ticked) that apply to this mode, as keyword arguments."""
        found: dict[str, Any] = {}
        for spec in FILTER_FIELDS:
            if self.mode in spec.modes and self.filters.get(spec.name):
                found[spec.name] = self.filters[spec.name]
        for toggle in TOGGLES:
            if self.mode in toggle.modes and self.toggles.get(toggle.name):
                found[toggle.name] = True
        return found


def text(value: object) -> str:
    """value as HTML text: control characters and lone surrogates dropped, markup escaped."""
    return html.escape(_SURROGATE.sub("\ufffd", without_controls(str(value))), quote=True)


def attr(value: object) -> str:
    """value as a double-quoted attribute's content."""
    return text(value)


def section_href(ref: str) -> str:
    """This server's link to a section token or document path: /show/ and the percent-encoded ref."""
    try:
        raw = ref.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raw = ref.encode("utf-8", "replace")
    return "/show/" + quote(raw, safe="/")


def external(citation: str | None) -> bool:
    """Whether a mapped citation is an http(s) URL, the only kind printed as a link."""
    if not citation:
        return False
    try:
        return urlsplit(citation).scheme.lower() in ("http", "https")
    except ValueError:
        return False


def marked(segments: Iterable[Segment]) -> str:
    """Segments as HTML: each piece escaped, the matched ones inside <mark>."""
    return "".join(f"<mark>{text(s.text)}</mark>" if s.marked else text(s.text) for s in segments)


def generation_footer(generation: int | None) -> str:
    """A replica's footer: the generation the page was answered from (or that none is served yet)."""
    said = f"generation {generation}" if generation is not None else "no generation yet"
    return f'<footer class="generation"><p>Answered from published {said}.</p></footer>'


def layout(title: str, body: str, signed_in: bool = False, current: str = "", footer: str = "") -> str:
    """A whole page: head with the packaged stylesheet and script, a nav, the body inside <main>, then footer
    (trusted HTML: a replica's generation line)."""
    links = [("/", "Search"), ("/sources", "Sources"), ("/stats", "Stats")]
    here = ' aria-current="page"'
    items = "".join(
        f'<li><a href="{href}"{here if href == current else ""}>{label}</a></li>' for href, label in links
    )
    logout = (
        '<form class="logout" method="post" action="/logout"><button type="submit">Sign out</button></form>'
        if signed_in else ""
    )
    closing = f"{footer}\n" if footer else ""
    return (
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="color-scheme" content="light dark">\n'
        f"<title>{text(title)} · knowledge</title>\n"
        '<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">\n'
        '<link rel="stylesheet" href="/static/page.css">\n'
        '<script src="/static/page.js" defer></script>\n</head>\n<body>\n'
        '<a class="skip" href="#main">Skip to content</a>\n'
        f'<header><nav aria-label="Main"><ul>{items}</ul></nav>{logout}</header>\n'
        f'<main id="main">\n{body}\n</main>\n{closing}</body>\n</html>\n'
    )


def search_form(state: FormState) -> str:
    """The search form: query box, mode, result count, and the configured filters and toggles."""
    modes = "".join(
        f'<label><input type="radio" name="mode" value="{name}"{" checked" if state.mode == name else ""}> '
        f"{label}</label>"
        for name, label in MODES.items()
    )
    filters = "".join(
        f'<p class="filter"><label for="f-{spec.name}">{text(spec.label)}</label> '
        f'<input type="text" id="f-{spec.name}" name="{spec.name}" value="{attr(state.filters.get(spec.name, ""))}"'
        + (f' aria-describedby="f-{spec.name}-hint"> <small id="f-{spec.name}-hint">{text(spec.hint)}</small>'
           if spec.hint else ">")
        + "</p>"
        for spec in FILTER_FIELDS
    )
    toggles = "".join(
        f'<p class="toggle"><label><input type="checkbox" name="{t.name}" value="1"'
        f'{" checked" if state.toggles.get(t.name) else ""}> {text(t.label)}</label></p>'
        for t in TOGGLES
    )
    top_k = "" if state.top_k is None else str(state.top_k)
    chosen = sum(1 for v in state.filters.values() if v) + sum(1 for v in state.toggles.values() if v) + (
        state.top_k is not None)
    summary = "Filters and options" + (f" ({chosen} set)" if chosen else "")
    return (
        '<form class="search" role="search" method="get" action="/">\n'
        '<p><label for="q">Search the documentation</label>\n'
        f'<input type="search" id="q" name="q" value="{attr(state.q)}" autocomplete="off" '
        'aria-describedby="q-hint"> <button type="submit">Search</button></p>\n'
        f'<fieldset class="modes"><legend class="visually-hidden">Mode</legend>{modes}</fieldset>\n'
        # Folded away (closed even when set, the summary counts them) so the results come first.
        f'<details class="options"><summary>{summary}</summary>\n'
        '<p id="q-hint" class="hint">Words in any form; "a phrase"; -word leaves out sections holding it. '
        "Which documents contain also takes heading:word and body:word.</p>\n"
        f'<p><label for="top_k">Results</label> <input type="number" id="top_k" name="top_k" min="0" '
        f'value="{top_k}" inputmode="numeric"></p>\n'
        f"{filters}{toggles}</details></form>"
    )


def notes(tier: str | None, note: str | None, status: str | None = None) -> str:
    """The tier line, the answer's note and a status other than ok, each as a paragraph."""
    out = f'<p class="tier">{text(tier)}</p>' if tier else ""
    if status and status != "ok":
        out += f'<p class="status">status: <code>{text(status)}</code></p>'
    if note:
        out += f'<p class="note" role="note">{text(note)}</p>'
    return out


def citation_line(citation: str, raw: str) -> str:
    """How to cite a result: the mapped citation as a link (an http(s) one), else the raw token as code."""
    if citation != raw and external(citation):
        return f'<p class="cite">Cite: <a class="mapped" href="{attr(citation)}">{text(citation)}</a></p>'
    return f'<p class="cite">Cite: <code>{text(citation)}</code></p>'


def also_in(hit: Mapping[str, Any]) -> str:
    """The same page in other languages: each language linked to its section here."""
    found = hit.get("translations") or []
    if not found:
        return ""
    links = ", ".join(f'<a href="{attr(section_href(t["index_ref"]))}" hreflang="{attr(t["lang"])}">'
                      f'{text(t["lang"])}</a>' for t in found)
    return f'<p class="translations">Also in: {links}</p>'


def details(hit: Mapping[str, Any]) -> str:
    """Any field of a result beyond the laid-out ones (ranks and scores, say), as a description list."""
    rows = [(k, v) for k, v in hit.items() if k not in SHOWN and v is not None]
    if not rows:
        return ""
    items = "".join(f"<dt>{text(k)}</dt><dd>{text(_plain(v))}</dd>" for k, v in rows)
    return f'<dl class="details">{items}</dl>'


def _plain(value: object) -> str:
    if isinstance(value, Mapping):
        return ", ".join(f"{k}: {_plain(v)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return ", ".join(_plain(v) for v in value)
    return str(value)


def search_results(query: str, answer: Mapping[str, Any], snippets: Sequence[list[Segment]],
                   trails: Sequence[list[Segment]]) -> str:
    """The ranked sections: heading trail (query words marked) linked to the section, marked excerpt,
    citation, details."""
    hits: list[dict[str, Any]] = answer["results"]
    head = (f'<h2 id="results-heading">{len(hits)} {"section" if len(hits) == 1 else "sections"} '
            f"for “{text(query)}”</h2>")
    body = notes(answer.get("tier"), answer.get("note"), answer.get("status"))
    if not hits:
        return f'<section aria-labelledby="results-heading">{head}{body}</section>'
    items = []
    for hit, segments, trail in zip(hits, snippets, trails):
        heading = marked(trail) if hit["section"] else text(hit["path"])
        items.append(
            f'<li class="hit"><h3><a href="{attr(section_href(hit["index_ref"]))}">{heading}</a></h3>'
            f'<p class="path">{text(hit["path"])}</p>'
            f'<p class="snippet">{marked(segments)}</p>'
            f'{citation_line(hit["citation"], hit["index_ref"])}{also_in(hit)}{details(hit)}</li>'
        )
    return (f'<section aria-labelledby="results-heading">{head}{body}'
            f'<ol class="results">{"".join(items)}</ol></section>')


def match_results(query: str, answer: Mapping[str, Any], sections: Mapping[str, str]) -> str:
    """Every matching document: path linked to its first matching section, counts, citation."""
    docs: list[dict[str, Any]] = answer["documents"]
    matched = int(answer.get("matched", 0))
    head = (f'<h2 id="results-heading">{matched} {"document contains" if matched == 1 else "documents contain"} '
            f"“{text(query)}”</h2>")
    body = notes(None, answer.get("note"), answer.get("status"))
    if not docs:
        return f'<section aria-labelledby="results-heading">{head}{body}</section>'
    items = []
    for doc in docs:
        first = sections.get(doc["index_ref"]) or ""
        items.append(
            f'<li class="doc"><h3><a href="{attr(section_href(doc["index_ref"]))}">{text(doc["path"])}</a></h3>'
            f'<p class="counts">{doc["body_matches"]} matching in body, {doc["heading_matches"]} in headings'
            + (f"; first: {text(first)}" if first else "") + "</p>"
            f'{citation_line(doc["citation"], doc["path"])}</li>'
        )
    return (f'<section aria-labelledby="results-heading">{head}{body}'
            f'<ol class="results">{"".join(items)}</ol></section>')


def section_page(hit: Mapping[str, Any], previous: str | None, following: str | None) -> str:
    """One section: its trail as the heading, the citation, the text, and links to its neighbours."""
    trail = hit["section"] or hit["path"]
    nav = []
    if previous:
        nav.append(f'<li><a rel="prev" href="{attr(section_href(previous))}">Previous section</a></li>')
    nav.append(f'<li><a href="{attr(section_href(hit["path"]))}">Whole document</a></li>')
    if following:
        nav.append(f'<li><a rel="next" href="{attr(section_href(following))}">Next section</a></li>')
    return (
        f'<article><h1>{text(trail)}</h1><p class="path">{text(hit["index_ref"])}</p>'
        f'{citation_line(hit["citation"], hit["index_ref"])}'
        f'<div class="content">{render(hit["content"])}</div></article>'
        f'<nav aria-label="Neighbouring sections"><ul class="neighbours">{"".join(nav)}</ul></nav>'
    )


def document_page(path: str, hits: Sequence[Mapping[str, Any]]) -> str:
    """Every section of a document, each under its trail, linked to its own page."""
    parts = [f"<h1>{text(path)}</h1>"]
    for hit in hits:
        parts.append(
            f'<section><h2><a href="{attr(section_href(hit["index_ref"]))}">{text(hit["section"] or path)}</a></h2>'
            f'<div class="content">{render(hit["content"])}</div></section>'
        )
    return "<article>" + "".join(parts) + "</article>"


def table(caption: str, columns: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A table of already-rendered cells under a caption with column headers."""
    head = "".join(f'<th scope="col">{text(c)}</th>' for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><caption>{text(caption)}</caption><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


SOURCES_PAGE = 100  # documents a /sources page lists


def sources_page(answer: Mapping[str, Any], path: str = "") -> str:
    """The `sources` view, a page at a time: a path box, the page's documents (sections, time of indexing,
    mapped citation) and links to the previous and next pages."""
    docs: list[dict[str, Any]] = answer.get("documents", [])
    rows = [
        (
            f'<a href="{attr(section_href(d["path"]))}">{text(d["path"])}</a>',
            text(d["chunks"]),
            text(d["indexed_at"]),
            (f'<a href="{attr(d["mapped"])}">{text(d["mapped"])}</a>' if external(d.get("mapped"))
             else text(d.get("mapped") or "")),
        )
        for d in docs
    ]
    offset, total = int(answer.get("offset", 0)), int(answer.get("total", len(docs)))
    under = f" under {path}" if path else ""
    caption = (f"Documents {offset + 1:,}-{offset + len(docs):,} of {total:,} indexed{under}" if docs
               else f"No documents{under} past {offset:,} ({total:,} in all)")
    form = ('<form class="sources" method="get" action="/sources"><p><label for="path">Path</label> '
            f'<input type="search" id="path" name="path" value="{attr(path)}" placeholder="docs/api or docs/**/*.md"> '
            '<button type="submit">List</button></p></form>')
    return ("<h1>Sources</h1>" + notes(None, answer.get("note"), answer.get("status")) + form
            + table(caption, ("Path", "Sections", "Last indexed", "Mapped"), rows)
            + _pages(path, offset, answer.get("next_offset")))


def _pages(path: str, offset: int, following: int | None) -> str:
    """The links to the previous and next pages of /sources (none where there is none)."""
    def href(start: int) -> str:
        return "/sources?" + urlencode({**({"path": path} if path else {}), "offset": start})

    links = []
    if offset > 0:
        links.append(f'<a rel="prev" href="{attr(href(max(0, offset - SOURCES_PAGE)))}">Previous page</a>')
    if following is not None:
        links.append(f'<a rel="next" href="{attr(href(int(following)))}">Next page</a>')
    return f'<nav aria-label="Pages" class="pages"><p>{" · ".join(links)}</p></nav>' if links else ""


def stats_page(answer: Mapping[str, Any]) -> str:
    """The `stats` view: one row per fact."""
    rows = [(text(k), text(v)) for k, v in answer.items() if k not in ("status", "note", "tier")]
    return ("<h1>Stats</h1>" + notes(answer.get("tier"), answer.get("note"), answer.get("status"))
            + table("Facts about the index", ("Fact", "Value"), rows))


def login_page(note: str | None = None, next_path: str = "/") -> str:
    """The sign-in form: the server's token, posted once and kept in an HttpOnly cookie."""
    message = f'<p class="note" role="alert">{text(note)}</p>' if note else ""
    return (
        "<h1>Sign in</h1>"
        "<p>This server needs its token. It is kept in a cookie this browser sends only to this server.</p>"
        f"{message}"
        '<form class="login" method="post" action="/login">'
        f'<input type="hidden" name="next" value="{attr(next_path)}">'
        '<p><label for="token">Token</label> '
        '<input type="password" id="token" name="token" autocomplete="current-password" required> '
        '<button type="submit">Sign in</button></p></form>'
    )


def message_page(heading: str, note: str) -> str:
    """A page that only says something: a missing section, a refused query."""
    return f'<h1>{text(heading)}</h1><p class="note" role="note">{text(note)}</p>'

