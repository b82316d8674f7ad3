"""Every status a read answer carries, defined once: a str enum, so each JSON value is the plain string.

An answer that could not be given for the caller's own reason (a not-built or empty store, a query
with no terms, a bad pattern, a missing section) still has a status and a note; a damaged store
raises (config.errors.StoreDamaged) and a surface turns it into ERROR where it must answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any


class Status(StrEnum):
    """The status of a read answer, as every surface prints it."""

    OK = "ok"
    INDEX_NOT_BUILT = "index_not_built"  # no store yet: run `knowledge index`
    INDEX_EMPTY = "index_empty"  # search: the store holds no documents
    CORPUS_EMPTY = "corpus_empty"  # match and words: the store holds no documents
    QUERY_EMPTY = "query_empty"  # match: the query has no term to match
    QUERY_ERROR = "query_error"  # the caller's input is not a valid request
    PATTERN_INVALID = "pattern_invalid"  # words: not a regular expression, or too slow to match
    NOT_FOUND = "not_found"  # read and show: no such section or document
    NOT_SERVED = "not_served"  # the operator has not exposed the tool
    ERROR = "error"  # the store could not answer (damaged, unreadable)


HTTP_CODES: dict[str, int] = {
    Status.QUERY_ERROR: 400,  # the caller's input: fix the request
    Status.PATTERN_INVALID: 400,
    Status.NOT_FOUND: 404,
    Status.NOT_SERVED: 404,
    Status.ERROR: 500,  # the store could not answer
}


def http_code(answer: Mapping[str, Any]) -> int:
    """The HTTP status every /v1 route answers with for an answer's status (200 for every other status)."""
    return HTTP_CODES.get(str(answer.get("status", "")), 200)
