"""The language stage: the query's language first, and each translation group once, as its best member.

The query's language is the one asked for (`--lang de`, the tools' `lang`), else the one its text
tells (pipeline/languages.detect_query: script, then stop words), else the default (configured
knowledge.languages.default, else the tree's most common language: a query too short to tell,
`websockets`, takes it). `--lang any` turns the stage off.

Over the fused ranking the stage then

1. shows each translation group (pipeline/translations.py) once: as its member in the query's
   language, else in the default language, else its best-ranked member. That member's first section
   takes the place of the group's best-ranked section (whichever member it was, with its score: the
   evidence is the page's, in any language); the other members' sections leave the ranking, and the
   hit lists them as `translations`;
2. moves the sections in other languages after those in the query's language, each in its order.

Both only reorder and fold: what a tier never found is not added. --explain names the language of
each hit and what the stage did to it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from config.settings import Settings
from pipeline import schema
from pipeline.db import Connection
from pipeline.languages import detect_query, primary, same_language
from pipeline.translations import languages_present
from query.filters import Allowed, allowed_documents
from query.lexical.frequency import without_common
from query.rank.parsed import ParsedQuery, QueryLanguage
from query.rank.ranked import Ranked
from query.rank.tiers import Scored, lexical_tier
from query.reader import Hit, Reader, Translation

if TYPE_CHECKING:
    from query.explain import Note

ANY = "any"  # the `lang` that turns the stage off
LANGUAGE = "language"  # the stage's name in --explain


def query_language(settings: Settings, reader: Reader, text: str, asked: str | None) -> QueryLanguage | None:
    """The query's language (None: `any`, the stage is off)."""
    if asked is not None and asked.strip().lower() == ANY:
        return None
    default = settings.languages.default.lower() or reader.meta.get(schema.COMMON_LANGUAGE_KEY, "")
    if asked:
        return QueryLanguage(asked.strip().lower().replace("_", "-"), "asked", default)
    found = detect_query(text)
    return QueryLanguage(found, "detected", default) if found else QueryLanguage(default, "default", default)


_OWN = "(lang = ? OR lang LIKE ? || '-%' OR lang = '')"  # a document in the query's language, or in none


def widened(reader: Reader, query: ParsedQuery, lexical: tuple[Scored, ...], fanout: int, allowed: Allowed | None,
            excluded: set[int], wanted: QueryLanguage | None) -> tuple[Scored, ...]:
    """The lexical candidates, followed (in a tree of several languages) by the best `fanout` of the query's
    language that they lack: translations must not crowd the query's own language out of the candidates.

    The second look runs the query the first ran (its common terms dropped alike, query/frequency.py)
    over the documents in the query's language (or in none), within the filter."""
    if wanted is None or not wanted.lang or not lexical:
        return lexical
    within = " AND id IN (SELECT value FROM json_each(?))" if allowed is not None else ""
    args = (primary(wanted.lang), primary(wanted.lang), *(() if allowed is None else (allowed.documents,)))
    conn = reader.conn
    if _all_own(conn, primary(wanted.lang)) or conn.execute(
            f"SELECT NOT EXISTS (SELECT 1 FROM documents WHERE NOT {_OWN}{within})", args).fetchone()[0]:
        return lexical  # every document is in the query's language: the candidates are its already
    own, count = conn.execute(f"SELECT json_group_array(id), count(*) FROM documents WHERE {_OWN}{within}",
                              args).fetchone()
    pruned = ParsedQuery(query.text, without_common(conn, query.lexical, fanout, reader.lexical))
    seen = {cid for cid, _ in lexical}
    more = lexical_tier(reader, pruned, fanout, allowed_documents(conn, str(own), int(count)), excluded).found
    return (*lexical, *(e for e in more if e[0] not in seen))


def _all_own(conn: Connection, lang: str) -> bool:
    """Whether the last language pass left every document in lang (or in none), as the writer recorded it;
    False when it cannot tell (a document written since): the caller asks the documents."""
    present = languages_present(conn)
    return present is not None and all(not tag or tag == lang or tag.startswith(f"{lang}-") for tag in present)


@dataclass(frozen=True)
class _Doc:
    id: int
    lang: str
    group: str


def _documents(reader: Reader, ids: Sequence[int]) -> dict[int, _Doc]:
    """{chunk id: its document's id, language and translation group}, in one query."""
    rows = reader.conn.execute(
        "SELECT c.id, d.id, d.lang, d.translation_group FROM chunks c JOIN documents d ON d.id = c.document_id"
        " WHERE c.id IN (SELECT value FROM json_each(?))", (json.dumps(list(ids)),))
    return {int(cid): _Doc(int(doc), str(lang), str(group)) for cid, doc, lang, group in rows}


def _rank_of(doc: _Doc, wanted: QueryLanguage) -> int:
    """How well a member suits the query: its language exactly, the same language, the default, any other."""
    if doc.lang == wanted.lang:
        return 0
    if same_language(doc.lang, wanted.lang):
        return 1
    return 2 if same_language(doc.lang, wanted.default) else 3


def _shown_members(entries: Sequence[Scored], docs: dict[int, _Doc], wanted: QueryLanguage) -> dict[str, int]:
    """Each group's member shown: the best-suited member with a section in the ranking (ties: best-ranked)."""
    best: dict[str, tuple[int, int, int]] = {}
    for at, (cid, _) in enumerate(entries):
        doc = docs.get(cid)
        if doc is None or not doc.group:
            continue
        key = (_rank_of(doc, wanted), at, doc.id)
        if doc.group not in best or key < best[doc.group]:
            best[doc.group] = key
    return {group: doc_id for group, (_, _, doc_id) in best.items()}


def _folded(entries: Sequence[Scored], docs: dict[int, _Doc], shown: dict[str, int],
            notes: dict[int, Note]) -> list[Scored]:
    """The ranking with each group once: the shown member's first section at the group's best place."""
    first_of: dict[int, int] = {}
    for cid, _ in entries:
        doc = docs.get(cid)
        if doc is not None and doc.group and shown[doc.group] == doc.id:
            first_of.setdefault(doc.id, cid)
    placed: set[int] = set()
    out: list[Scored] = []
    for at, (cid, score) in enumerate(entries, start=1):
        doc = docs.get(cid)
        if doc is None or not doc.group:
            out.append((cid, score))
            continue
        member = shown[doc.group]
        lead = first_of[member]
        if lead not in placed:  # the group's best place: its shown member's first section goes here
            placed.add(lead)
            out.append((lead, score))
            if lead != cid:
                notes[lead] = f"in place of its {doc.lang or '?'} translation ranked #{at}"
        elif doc.id == member and cid not in placed:
            placed.add(cid)
            out.append((cid, score))
    return out


def language(ranked: Ranked) -> Ranked:
    """Show each translation group once, as its member in the query's language, and that language first."""
    wanted = ranked.context.language
    if wanted is None or not ranked.entries or _monolingual(ranked.context.reader.conn, wanted):
        return ranked
    docs = _documents(ranked.context.reader, [cid for cid, _ in ranked.entries])
    notes: dict[int, Note] = {}
    folded = _folded(ranked.entries, docs, _shown_members(ranked.entries, docs, wanted), notes)
    kept = {cid for cid, _ in folded}
    first = [e for e in folded if _suits(docs.get(e[0]), wanted)]
    later = [e for e in folded if not _suits(docs.get(e[0]), wanted)]
    if not later and len(folded) == len(ranked.entries) and not notes:
        return ranked  # one language and no translation among the candidates: nothing to do, nothing to say
    result = ranked.reordered((*first, *later), LANGUAGE, _said(folded, docs, wanted, notes))
    pins = tuple(p for p in ranked.pins if p in kept or p not in docs)
    return result if pins == ranked.pins else Ranked(result.context, result.entries, pins, result.notes,
                                                     result.depth)


def _monolingual(conn: Connection, wanted: QueryLanguage) -> bool:
    """One language and no translation in the whole tree: the stage has nothing to do and nothing to say."""
    return _all_own(conn, primary(wanted.lang)) and not conn.execute(
        "SELECT EXISTS (SELECT 1 FROM documents WHERE translation_group != '')").fetchone()[0]


def _said(folded: list[Scored], docs: dict[int, _Doc], wanted: QueryLanguage,
          notes: dict[int, Note]) -> dict[int, Note]:
    """Each shown hit's note: its language against the query's, what folding it said, whether it comes after."""
    for cid, _ in folded:
        doc = docs.get(cid)
        said = f"{doc.lang or '?'} (query {wanted.lang or '?'}, {wanted.how})" if doc else ""
        if cid in notes:
            said += f"; {notes[cid]}"
        if doc is not None and not _suits(doc, wanted):
            said += f"; after the {wanted.lang} hits"
        notes[cid] = said
    return notes


def _suits(doc: _Doc | None, wanted: QueryLanguage) -> bool:
    """Whether a section is in the query's language (a document of no known language suits every query)."""
    return doc is None or not doc.lang or not wanted.lang or same_language(doc.lang, wanted.lang)


def with_translations(reader: Reader, ranked: Ranked, hits: list[Hit]) -> list[Hit]:
    """The hits with their language and their group's other members (each cited at its best-ranked section in
    the tiers' candidates, else its first), when the stage ran."""
    if ranked.context.language is None or not hits:
        return hits
    rows = reader.conn.execute(
        "SELECT h.path, h.lang, m.id, m.path, m.lang FROM documents h LEFT JOIN documents m"
        " ON m.translation_group = h.translation_group AND m.translation_group != '' AND m.id != h.id"
        " WHERE h.path IN (SELECT value FROM json_each(?)) ORDER BY m.lang, m.path",
        (json.dumps(sorted({h.path for h in hits})),)).fetchall()
    langs = {str(r[0]): str(r[1]) for r in rows}
    members: dict[str, list[tuple[int, str, str]]] = {}
    for path, _, doc_id, member_path, member_lang in rows:
        if doc_id is not None:
            members.setdefault(str(path), []).append((int(doc_id), str(member_path), str(member_lang)))
    best = _best_sections(reader, ranked, {m[0] for found in members.values() for m in found})
    return [replace(h, lang=langs.get(h.path, ""),
                    translations=tuple(Translation(lang, path, *best.get(doc_id, (0, "")))
                                       for doc_id, path, lang in members.get(h.path, ())))
            for h in hits]


def _best_sections(reader: Reader, ranked: Ranked, doc_ids: set[int]) -> dict[int, tuple[int, str]]:
    """{document id: (ordinal, heading) of its best-ranked section among the tiers' candidates, else its first}."""
    if not doc_ids:
        return {}
    tiers = ranked.context.tiers
    order = list(dict.fromkeys(cid for cid, _ in (*ranked.entries, *tiers.lexical, *tiers.vector)))
    best: dict[int, tuple[int, str]] = {}
    rows = reader.conn.execute("SELECT id, document_id, ordinal, heading_path FROM chunks"
                               " WHERE id IN (SELECT value FROM json_each(?))", (json.dumps(order),)).fetchall()
    found = {int(cid): (int(doc_id), int(ordinal), str(heading)) for cid, doc_id, ordinal, heading in rows}
    for cid in order:
        if cid in found and found[cid][0] in doc_ids:
            best.setdefault(found[cid][0], found[cid][1:])
    rest = sorted(doc_ids - best.keys())
    if rest:
        best.update((int(d), (0, str(h))) for d, h in reader.conn.execute(
            "SELECT document_id, heading_path FROM chunks WHERE ordinal = 0 AND document_id IN"
            " (SELECT value FROM json_each(?))", (json.dumps(rest),)))
    return best
