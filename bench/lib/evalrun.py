"""The document rankings of one checkout's lexical search over judged collections, with stages left out.

Run as a file by bench/bench_eval.py with a checkout first on the path (bench.lib.checkout.tree_python):
`python -P bench/lib/evalrun.py SPEC.json OUT.json`. It imports only the standard library at the top, so
every project import is the checkout's. SPEC is

    {"collections": [{"name", "store", "queries": {qid: text}}], "depth": 100,
     "variants": [[label, [stage names left out], {"module.NAME": value set for the variant}], ...]}

and OUT gets {label: {collection: {qid: [stored path, ...]}}}: each query's hits from search_deep's
lexical ranking `depth` sections deep, mapped to their documents' paths, each path once at its best
rank. A variant leaving stages out ranks by query.rank.stages.without(...) set as the module's
STAGES (a checkout without it cannot run one); one setting a module's constant
(`query.rank.evidence.DOCUMENT_WEIGHT`: 0.1) runs with it set. Both are put back after.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def _without(names: list[str]) -> Iterator[None]:
    """The checkout's stages with `names` left out (query.rank.stages.without), for the duration."""
    if not names:
        yield
        return
    from query.rank import stages

    shipped = stages.STAGES
    stages.STAGES = stages.without(*names)  # type: ignore[attr-defined,unused-ignore]  # an older checkout has none
    try:
        yield
    finally:
        stages.STAGES = shipped


@contextlib.contextmanager
def _set(constants: dict[str, Any]) -> Iterator[None]:
    """The checkout's module constants {"module.NAME": value} set, for the duration."""
    import importlib

    kept: list[tuple[Any, str, Any]] = []
    try:
        for dotted, value in constants.items():
            module_name, name = dotted.rsplit(".", 1)
            module = importlib.import_module(module_name)
            kept.append((module, name, getattr(module, name)))
            setattr(module, name, value)
        yield
    finally:
        for module, name, value in reversed(kept):
            setattr(module, name, value)


def rankings(spec: dict[str, Any]) -> dict[str, dict[str, dict[str, list[str]]]]:
    """Every variant's document rankings of every collection's queries."""
    import query
    from config.loader import settings_from_mapping
    from query.reader import Reader
    from query.search import search_deep

    print(f"query package from {Path(query.__path__[0]).resolve()}", file=sys.stderr)
    out: dict[str, dict[str, dict[str, list[str]]]] = {}
    tiers = spec.get("tiers", ["lexical"])
    for label, left_out, constants in spec["variants"]:
        with _without(left_out), _set(constants):
            for tier in tiers if label == "lexical" else ["lexical"]:  # the ablations rank lexical only
                key = label if tier == "lexical" else tier
                out[key] = {}
                for collection in spec["collections"]:
                    block = {"directory": collection["store"], **({"embeddings": collection["embeddings"]}
                                                                   if collection.get("embeddings") else {})}
                    settings = settings_from_mapping(block)
                    runs: dict[str, list[str]] = {}
                    with Reader(settings) as reader:
                        for qid, text in collection["queries"].items():
                            hits = search_deep(settings, reader, text, spec["depth"], tier).hits
                            runs[qid] = list(dict.fromkeys(h.path for h in hits))
                    out[key][collection["name"]] = runs
        print(f"{label}: done", file=sys.stderr)
    return out


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    Path(argv[2]).write_text(json.dumps(rankings(spec)), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
