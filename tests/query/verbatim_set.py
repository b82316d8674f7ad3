"""A small query set of identifiers, error strings and quoted phrases, each held verbatim by one section.

Each verbatim section mentions its identifier once inside prose about something else, and two
decoys per query use the identifier's parts as plain words, so both tiers have a reason to rank
other sections first. The hashed bag-of-words vectors of tests/embedserver.py see an identifier
as one rare token (ERR_CONN_RESET) or as unrelated fragments (kube-proxy), a realistic adversary.
`placements` measures, per query and verbatim section, its rank in lexical, in plain RRF and in
the shipped hybrid ranking.
"""

from __future__ import annotations

from dataclasses import dataclass

from config.settings import Settings
from query.fusion import rrf
from query.reader import Reader
from query.search import HYBRID, LEXICAL, VECTOR, search_deep
from query.terms import verbatim_phrases
from query.verbatim import verbatim_ids

# (query, the identifier as the verbatim section writes it, its parts as the decoys write them)
CASES = [
    ("ERR_CONN_RESET", "ERR_CONN_RESET", "the err code when a conn gets a reset"),
    ('"connection reset by peer"', "connection reset by peer", "a peer saw its connection reset"),
    ("kube-proxy", "kube-proxy", "the proxy in front of each kube node"),
    ("max_retry_count", "max_retry_count", "the max count of each retry"),
    ("std::vector", "std::vector", "a vector type from the std library"),
    ("`sha256sum`", "sha256sum", "the sum of a file checked daily"),
    ("config.yaml", "config.yaml", "the config file written in yaml"),
    ("HTTP_429", "HTTP_429", "the http status when too many calls arrive, 429 of them"),
    ("`E1102` timeout", "E1102", "a timeout error on the line"),
    ("TestClient", "TestClient", "a client to test with"),
    ('"disk quota exceeded"', "disk quota exceeded", "the quota of a disk was exceeded twice"),
]
TOPICS = ["garden", "harbour", "orchestra", "bakery", "library", "railway", "glacier", "market", "theatre", "vineyard",
          "lighthouse"]


def documents() -> dict[str, str]:
    """The corpus: per case one verbatim section and two decoys, plus neutral filler."""
    docs: dict[str, str] = {}
    for i, (_, ident, parts) in enumerate(CASES):
        topic = TOPICS[i]
        docs[f"docs/v{i:02d}.md"] = (
            f"# The {topic} notes\n\nThe {topic} opens at dawn and the staff walk the {topic} twice. "
            f"Visitors of the {topic} rarely notice the rules of the {topic}. "
            f"When the till prints {ident} the {topic} staff call the office, then carry on with the {topic} day.\n")
        docs[f"docs/d{i:02d}a.md"] = f"# About {parts}\n\nThis page is about {parts}, and again {parts}.\n"
        docs[f"docs/d{i:02d}b.md"] = f"# More on {parts}\n\n{parts.capitalize()}: see {parts} here.\n"
    for j in range(20):
        docs[f"docs/f{j:02d}.md"] = f"# Filler {j}\n\nA short note on {TOPICS[j % 10]} and {TOPICS[(j * 3) % 10]}.\n"
    return docs


@dataclass(frozen=True)
class Placement:
    """Where one verbatim section ranks for one query (1-based; None when not in the list)."""

    query: str
    chunk_id: int
    lexical: int | None
    plain_rrf: int | None
    hybrid: int | None


def placements(settings: Settings, reader: Reader, queries: list[str] | None = None,
               depth: int = 100) -> list[Placement]:
    """For every query (default: those of CASES), each lexical candidate holding one of its verbatim phrases."""
    found: list[Placement] = []
    for query in queries if queries is not None else [q for q, _, _ in CASES]:
        lexical = [h.chunk_id for h in search_deep(settings, reader, query, depth, LEXICAL).hits]
        nearest = [h.chunk_id for h in search_deep(settings, reader, query, depth, VECTOR).hits]
        plain = [cid for cid, _ in rrf([lexical, nearest])]
        hybrid = [h.chunk_id for h in search_deep(settings, reader, query, depth, HYBRID).hits]
        for cid in sorted(verbatim_ids(reader.conn, verbatim_phrases(query), lexical), key=lexical.index):
            found.append(Placement(query, cid, _rank(lexical, cid), _rank(plain, cid), _rank(hybrid, cid)))
    return found


def _rank(ids: list[int], cid: int) -> int | None:
    return ids.index(cid) + 1 if cid in ids else None
