"""The cores called as tests call them, with a Reader lent by a ReadIndex of their own when none is passed.

The cores (query/search.py search, query/enumerate.py enumerate_documents, query/words.py list_words)
take the Reader they are lent and never open one; QueryService lends them one in the product. These
keep the tests' calls short: without a reader, a ReadIndex of the settings lends one for the call (and
lets its caches go after); a store never built answers through QueryService, the door that answers it.
"""

from __future__ import annotations

from typing import Any

from config.settings import Settings
from query.enumerate import EnumerateResult
from query.enumerate import enumerate_documents as enumerate_core
from query.read_index import ReadIndex
from query.reader import Reader
from query.requests import MatchRequest, SearchRequest, WordsRequest
from query.search import SearchResponse
from query.search import search as search_core
from query.service import QueryService
from query.words import WordsResult
from query.words import list_words as list_words_core


def search(settings: Settings, text: str, top_k: int | None = None, reader: Reader | None = None,
           **options: Any) -> SearchResponse:
    """query.search.search on reader, else on one a ReadIndex lends."""
    if reader is not None:
        return search_core(settings, text, top_k, reader, **options)
    index = ReadIndex(settings)
    try:
        with index.reader() as lent:
            if lent is not None:
                return search_core(settings, text, top_k, lent, **options)
        return QueryService(settings, index).search(SearchRequest(text)).response
    finally:
        index.close()


def enumerate_documents(settings: Settings, text: str, limit: int | None = None, sort: str = "matches",
                        reader: Reader | None = None, **options: Any) -> EnumerateResult:
    """query.enumerate.enumerate_documents on reader, else on one a ReadIndex lends."""
    if reader is not None:
        return enumerate_core(settings, text, limit, sort, reader=reader, **options)
    index = ReadIndex(settings)
    try:
        with index.reader() as lent:
            if lent is not None:
                return enumerate_core(settings, text, limit, sort, reader=lent, **options)
        return QueryService(settings, index).enumerate(MatchRequest(text)).result
    finally:
        index.close()


def list_words(settings: Settings, pattern: str | None = None, counts: bool | None = None,
               reader: Reader | None = None, **options: Any) -> WordsResult:
    """query.words.list_words on reader, else on one a ReadIndex lends."""
    if reader is not None:
        return list_words_core(settings, pattern, counts, reader=reader, **options)
    index = ReadIndex(settings)
    try:
        with index.reader() as lent:
            if lent is not None:
                return list_words_core(settings, pattern, counts, reader=lent, **options)
        return QueryService(settings, index).words(WordsRequest(pattern))
    finally:
        index.close()
