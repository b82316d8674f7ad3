"""The staged ranking of a search: the query parsed once, each tier's candidates, stages, one hydration.

parsed.py reads the text once (ParsedQuery); tiers.py gathers the lexical and vector candidates with
every score turned "higher is better"; stages.py holds the stages `Ranked -> Ranked` in order
(fusion, the optional reranker of rerank.py, verbatim protection, document diversity); pipeline.py
runs them, cuts the answer at k, hydrates it once and, for --explain, reads the trace the stages
left (query/explain.py).
"""
