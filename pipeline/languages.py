"""Which language a text is in: language tags, the script of a text, and short stop-word lists per language.

No model: a text in a script only one language (or one family) writes is that language (kana: ja,
hangul: ko, han alone: zh, Cyrillic: ru or uk by its letters, ...); a Latin-script text is the
language whose stop words it uses most. The lists are short and hand-written, and a word two lists
share (`de` is Spanish, Portuguese and French) counts for none. A text that does not tell (too few
words, a tie) is None: the caller falls back on the tree's default language.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

# ISO 639-1 codes of the languages documentation trees are commonly translated into.
CODES = frozenset("""
af am ar az be bg bn bs ca cs cy da de el en eo es et eu fa fi fr ga gl gu he hi hr hu hy id is it ja ka kk km
kn ko ku ky lo lt lv mk ml mn mr ms my nb ne nl nn no pa pl ps pt ro ru si sk sl sq sr sv sw ta te th tl tr uk
ur uz vi yo zh zu
""".split())
# A tag: a code, then region or script subtags (`zh-cn`, `zh-hant`, `pt_BR`).
TAG = re.compile(r"[a-z]{2,3}(?:[-_](?:[a-z]{2}|[0-9]{3}|[a-z]{4}))*", re.IGNORECASE)
TEXT_SAMPLE = 5_000  # characters of a document read to tell its language
MIN_TEXT_WORDS = 3  # stop words a document's text needs before its language is taken from them
SCRIPT_SHARE = 0.15  # share of a text's letters in one non-Latin script that makes the text that script's

_STOP_WORDS: dict[str, str] = {
    "en": "the and of to is are was were be been this that these those with for from how what which when where "
          "why who do does did can could should would will not it its you your my we our they their there have "
          "has had an by or if then than into about after before use using i",
    "de": "der die das und ist sind nicht ein eine einen einem einer mit für auf auch wie was wir sie ich du "
          "es dem den des zu von bei oder wenn dann kann können wird werden hat haben sich noch nur so aus "
          "über unter mein meine dein ihr ihre",
    "fr": "le la les et est sont une un des du au aux pour avec dans sur pas ne que qui quoi comment vous nous "
          "il elle ils ce cette ces mon ma mes votre être avoir fait peut",
    "es": "el los las y es son una un del al para con por en que cómo qué cuál no se su sus lo este esta "
          "estos mi mis usted ustedes puede hacer",
    "pt": "o os as e é são uma um do da dos das ao para com por em que como não se seu sua isso este esta "
          "meu minha você vocês pode fazer",
    "it": "il lo gli e è sono una uno del della dei delle per con su che come non si suo sua questo questa "
          "mio mia voi può fare",
    "nl": "de het een en is zijn van voor met op niet dat die wat hoe wij jij ik hij zij ook aan bij naar",
    "tr": "ve bir bu ile için de da ne nasıl mi mı mu mü ben sen biz siz olarak olan gibi daha çok",
    "pl": "i w z na do nie się jest są to jak co że czy ten ta dla od po przez",
    "sv": "och att det som en ett är på för med av inte jag du vi hur vad kan har",
    "id": "dan yang di ke dari untuk dengan ini itu tidak ada adalah bagaimana apa saya kami anda",
    "vi": "và của là có không được cho với một các những này trong khi làm thế nào",
}


def _word_table(lists: Mapping[str, str]) -> dict[str, str]:
    """Each stop word with the one language it belongs to; a word of two lists belongs to none."""
    seen: Counter[str] = Counter(w for words in lists.values() for w in set(words.split()))
    return {w: lang for lang, words in lists.items() for w in words.split() if seen[w] == 1}


STOP_WORDS = _word_table(_STOP_WORDS)
_WORD = re.compile(r"[^\W\d_]+")
_WORD_CHARS = re.compile(r"[^\W\d_]")


def tag(name: str, extra: Iterable[str] = ()) -> str | None:
    """The language tag a name is (lower case, `_` as `-`), None when it is not one: its code must be known
    (CODES, or one of extra: a convention's configured codes)."""
    if not TAG.fullmatch(name):
        return None
    found = name.lower().replace("_", "-")
    primary = found.split("-", 1)[0]
    return found if primary in CODES or found in extra or primary in extra else None


def primary(language: str) -> str:
    """A tag's language without its region or script (`zh-hant` -> `zh`)."""
    return language.split("-", 1)[0]


def same_language(a: str, b: str) -> bool:
    """Whether two tags name one language (`zh`, `zh-cn` and `zh-hant` do)."""
    return bool(a) and bool(b) and primary(a) == primary(b)


_SCRIPTS = {name: re.compile(f"[{ranges}]") for name, ranges in (
    ("kana", "\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9d"),
    ("hangul", "\uac00-\ud7af\u1100-\u11ff\u3130-\u318f"),
    ("han", "\u4e00-\u9fff\u3400-\u4dbf\uf900-\ufaff"),
    ("cyrillic", "\u0400-\u04ff"), ("greek", "\u0370-\u03ff"), ("arabic", "\u0600-\u06ff"),
    ("hebrew", "\u0590-\u05ff"), ("devanagari", "\u0900-\u097f"), ("thai", "\u0e00-\u0e7f"),
    ("bengali", "\u0980-\u09ff"), ("tamil", "\u0b80-\u0bff"), ("georgian", "\u10a0-\u10ff"),
    ("armenian", "\u0530-\u058f"),
)}
_SCRIPT_LANGUAGE = {"greek": "el", "hebrew": "he", "devanagari": "hi", "thai": "th", "bengali": "bn",
                    "tamil": "ta", "georgian": "ka", "armenian": "hy"}


def _by_script(text: str, share: float) -> str | None:
    """The language a text's non-Latin script tells, when at least `share` of its letters are in one
    (each script counted by one regular expression: no loop over the characters in Python)."""
    if text.isascii():
        return None
    letters = len(_WORD_CHARS.findall(text))
    if not letters:
        return None
    counts = {name: len(pattern.findall(text)) for name, pattern in _SCRIPTS.items()}
    if counts["kana"] and (counts["kana"] + counts["han"]) >= share * letters:
        return "ja"
    best = max(counts, key=lambda name: (counts[name], name))
    if not counts[best] or counts[best] < share * letters:
        return None
    return _script_language(best, text)


def _script_language(script: str, text: str) -> str:
    """The language of a script, telling apart the languages sharing Cyrillic or Arabic by their letters."""
    if script == "han":
        return "zh"
    if script == "hangul":
        return "ko"
    if script == "cyrillic":
        return "uk" if any(c in text for c in "іїєґІЇЄҐ") else "ru"
    if script == "arabic":
        return "fa" if any(c in text for c in "پچژگ") else "ar"
    return _SCRIPT_LANGUAGE[script]


def _by_stop_words(text: str, least: int) -> str | None:
    """The language whose stop words the text uses most (at least `least` of them, and more than any other)."""
    counts: Counter[str] = Counter()
    for word in _WORD.findall(text.lower()):
        lang = STOP_WORDS.get(word)
        if lang is not None:
            counts[lang] += 1
    ranked = counts.most_common(2)
    if not ranked or ranked[0][1] < least or (len(ranked) > 1 and ranked[1][1] == ranked[0][1]):
        return None
    return ranked[0][0]


def detect_text(text: str) -> str | None:
    """The language of a document's text (its first TEXT_SAMPLE characters), None when the text does not tell."""
    sample = text[:TEXT_SAMPLE]
    return _by_script(sample, SCRIPT_SHARE) or _by_stop_words(sample, MIN_TEXT_WORDS)


def detect_query(text: str) -> str | None:
    """The language of a query: any kana, hangul or han (a query is short: one such character tells), else
    a non-Latin script, else its stop words (one is enough, when no other language has as many); None when
    it does not tell (`websockets`, `CORSMiddleware`)."""
    return _by_script(text, 0.0001) or _by_stop_words(text, 1)


def front_matter_language(fields: Mapping[str, Any]) -> str | None:
    """The language a document's front matter declares (`lang`, else `language`), as a tag; None without one."""
    for key in ("lang", "language"):
        value = fields.get(key)
        if isinstance(value, str) and (found := tag(value.strip())) is not None:
            return found
    return None


def document_hint(fields: Mapping[str, Any], title: str | None, bodies: Iterable[str]) -> tuple[str, str]:
    """(language, how it was told: "front matter" or "text") of one document before its path is weighed;
    ("", "") when neither tells."""
    declared = front_matter_language(fields)
    if declared is not None:
        return declared, "front matter"
    parts: list[str] = [title or ""]
    size = 0
    for body in bodies:
        parts.append(body)
        size += len(body)
        if size >= TEXT_SAMPLE:
            break
    found = detect_text("\n".join(parts))
    return (found, "text") if found else ("", "")
