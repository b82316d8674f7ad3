"""Wall time and peak RSS of each format reader on the hostile files of issue 33, one child process a case.

Each case builds its file (tests/faults/hostile_files.py, at the issue's size), then times
`BY_NAME[format].extract(data)` alone (for markdown, `chunk_text`) in a fresh interpreter under
/usr/bin/time -v (peak RSS, building the file included); a case still running at --limit seconds is
killed and reported as such. Usage:

    .venv/bin/python -m bench.bench_hostile_formats [--limit 120] [--only NAME ...] [--json]

`--html-pages DIR` instead measures the HTML choice on ordinary pages (every --every-th .html under
DIR): the conversion without the pass and with it (pipeline.html_text, outputs compared), the pass
alone, and the two parsers alone with handlers that do nothing: html.parser and lxml's HTML parser
through a target parser (the same start/end/data events); then the hostile `<a<a<a` page.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

CASES: dict[str, tuple[str, str]] = {  # name -> (format, builder call in tests.faults.hostile_files)
    "adoc heading, 4,000 spaces": ("asciidoc", "adoc_heading(4000)"),
    "html <a<a<a, 400 KB": ("html", "html_open_tags(200_000)"),
    "org drawers, 250,000 :a: lines": ("org", "org_drawers(250_000)"),
    "org heading, 64,000 spaces": ("org", "org_heading(64_000)"),
    "mdx 174,000 code spans": ("mdx", "mdx_code_spans(174_000)"),
    "docx 10 M empty paragraphs": ("docx", "docx_paragraphs(10_000_000)"),
    "docx table of 3.3 M empty cells": ("docx", "docx_paragraphs(0, cells=3_300_000)"),
    "pdf 100,000 pages": ("pdf", "pdf_pages(100_000)"),
    "pdf 5,000 pages, one blank stream": ("pdf", "pdf_pages(5000, blank_stream(200_000), 'pdflast')"),
    "rst simple table, 150,000 rows": ("rst", "rst_table(150_000)"),
    "rst line of 20,000 characters": ("rst", "rst_long_line(20_000)"),
    "markdown heading, 500,000 spaces": ("markdown", "markdown_heading(500_000)"),
}

_CHILD = """
import sys, time
from config.errors import FileSkipped
from pipeline.chunker import chunk_text
from pipeline.formats import BY_NAME
from tests.faults import hostile_files as h
data = eval(sys.argv[2], vars(h))
start = time.perf_counter()
try:
    if sys.argv[1] == "markdown":  # read as the chunker reads it (markdown's extraction is its body as written)
        outcome = f"{len(chunk_text(data.decode()).chunks)} chunks"
    else:
        outcome = f"{len(BY_NAME[sys.argv[1]].extract(data).text)} chars of text"
except FileSkipped as exc:
    outcome = f"skipped: {exc}"
print(f"{len(data)}\\t{time.perf_counter() - start:.3f}\\t{outcome}")
"""


def run_case(fmt: str, call: str, limit: float) -> dict[str, Any]:
    """One case in a child: file bytes, extraction wall seconds, the child's peak RSS (MiB, /usr/bin/time -v,
    building the file included) and the outcome."""
    command = ["/usr/bin/time", "-v", sys.executable, "-c", _CHILD, fmt, call]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
    try:
        out, err = child.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.communicate()
        return {"wall": None, "rss_mib": None, "outcome": f"killed at {limit:.0f} s", "bytes": None}
    rss = next((int(line.split(":")[1]) for line in err.splitlines() if "Maximum resident" in line), 0)
    if child.returncode != 0 or not out.strip():
        return {"wall": None, "rss_mib": None, "outcome": f"error: {err[-300:]}", "bytes": None}
    size, wall, outcome = out.strip().split("\t", 2)
    return {"bytes": int(size), "wall": float(wall), "rss_mib": round(rss / 1024), "outcome": outcome}


def _html_runs() -> dict[str, Any]:
    """The conversions and parsers html_pages times, by name."""
    from html.parser import HTMLParser

    import lxml.html  # type: ignore[import-untyped]  # python-docx's dependency, in the test extra

    from pipeline import html_text
    from pipeline.html_unclosed import defuse

    def without_pass(page: str) -> html_text.PageText:
        converter = html_text._Converter()
        converter.feed(html_text.strip_controls(page))
        converter.close()
        return converter.result()

    class _Events:
        def start(self, tag: str, attrib: dict[str, str]) -> None: ...
        def end(self, tag: str) -> None: ...
        def data(self, data: str) -> None: ...
        def close(self) -> None: ...

    def stdlib_events(page: str) -> None:
        parser = HTMLParser(convert_charrefs=True)
        parser.feed(page)
        parser.close()

    def lxml_events(page: str) -> None:
        parser = lxml.html.HTMLParser(target=_Events())
        parser.feed(page)
        parser.close()

    return {"without the pass": without_pass, "with the pass": html_text.html_to_text,
            "the pass alone": lambda p: defuse(html_text.strip_controls(p)),
            "html.parser alone": stdlib_events, "lxml target parser": lxml_events}


def html_pages(directory: str, every: int) -> None:
    """Print the HTML parsers' wall time on ordinary pages and on the hostile one, and how many outputs differ."""
    import glob

    from tests.faults import hostile_files

    pages = []
    for name in sorted(glob.glob(f"{directory}/**/*.html", recursive=True))[::every]:
        with open(name, encoding="utf-8", errors="replace") as handle:
            pages.append(handle.read())
    runs = _html_runs()
    outputs: dict[str, list[Any]] = {}
    megabytes = sum(len(p) for p in pages) / 1e6
    for name, run in runs.items():
        start = time.perf_counter()
        outputs[name] = [run(page) for page in pages]
        print(f"{name:20} {len(pages)} pages, {megabytes:.1f} MB: {time.perf_counter() - start:.2f} s", flush=True)
    differ = sum(a != b for a, b in zip(outputs["without the pass"], outputs["with the pass"]))
    print(f"outputs that differ with the pass: {differ}")
    hostile = hostile_files.html_open_tags(200_000).decode()
    for name in ("with the pass", "html.parser alone", "lxml target parser"):
        start = time.perf_counter()
        runs[name](hostile)
        print(f"{name:20} <a<a<a 400 KB: {time.perf_counter() - start:.2f} s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--limit", type=float, default=120.0)
    parser.add_argument("--only", nargs="*", default=None, help="substrings of the case names to run")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--html-pages", default=None, help="a directory of ordinary .html pages")
    parser.add_argument("--every", type=int, default=7)
    args = parser.parse_args()
    if args.html_pages:
        html_pages(args.html_pages, args.every)
        return
    rows = []
    for name, (fmt, call) in CASES.items():
        if args.only and not any(part in name for part in args.only):
            continue
        row = {"case": name, **run_case(fmt, call, args.limit)}
        rows.append(row)
        if not args.json:
            wall = "-" if row["wall"] is None else f"{row['wall']:.2f} s"
            rss = "-" if row["rss_mib"] is None else f"{row['rss_mib']} MiB"
            print(f"{name:38} {row['bytes'] or '-':>10} B  {wall:>10}  {rss:>9}  {row['outcome'][:90]}", flush=True)
    if args.json:
        print(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
