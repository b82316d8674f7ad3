"""Helpers shared by the benchmarks: paths, processes, statistics, queries, stores, embeddings, Cranfield."""
