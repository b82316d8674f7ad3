"""A Jupyter notebook (.ipynb, nbformat 4) read with the standard json module.

Markdown cells are markdown (their headings are the sections); a code cell is fenced code in the
notebook's language under the current heading; a cell's text outputs (stream, text/plain results)
are kept as a fenced `output` block when short. Images, HTML, widgets, errors and every other
output are never indexed, nor are `data:` URIs inside markdown cells.
"""

from __future__ import annotations

import json
import re
from typing import Any

from config.errors import FileSkipped
from pipeline.formats.outline import Extracted, Outline

MAX_OUTPUT_CHARS = 2000  # a text output longer than this is left out (logs, dumps)
_DATA_URI = re.compile(r"data:[\w/+.-]+;base64,[A-Za-z0-9+/=\s]*")


def _text(value: Any) -> str:
    """A notebook string field: a string, or a list of lines."""
    if isinstance(value, list):
        return "".join(v for v in value if isinstance(v, str))
    return value if isinstance(value, str) else ""


def _language(notebook: dict[str, Any]) -> str:
    found = notebook.get("metadata")
    metadata: dict[str, Any] = found if isinstance(found, dict) else {}
    for key in ("language_info", "kernelspec"):
        section = metadata.get(key)
        if isinstance(section, dict) and isinstance(section.get("name" if key == "language_info" else "language"), str):
            return str(section.get("name" if key == "language_info" else "language"))
    return ""


def _outputs(cell: dict[str, Any]) -> list[str]:
    """The short text outputs of a code cell."""
    kept: list[str] = []
    for output in cell.get("outputs") or []:
        if not isinstance(output, dict):
            continue
        kind = output.get("output_type")
        if kind == "stream":
            text = _text(output.get("text"))
        elif kind in ("execute_result", "display_data") and isinstance(output.get("data"), dict):
            text = _text(output["data"].get("text/plain"))
        else:
            continue
        if text.strip() and len(text) <= MAX_OUTPUT_CHARS:
            kept.append(text)
    return kept


def extract(data: bytes) -> Extracted:
    """The outline of a notebook under the rules in the module docstring."""
    try:
        notebook = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise FileSkipped(f"not a notebook (invalid JSON: {str(exc)[:100]})") from exc
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        raise FileSkipped("not a notebook in nbformat 4 (no list of cells)")
    language = _language(notebook)
    out = Outline()
    for cell in notebook["cells"]:
        if not isinstance(cell, dict):
            continue
        source = _text(cell.get("source"))
        if cell.get("cell_type") == "markdown":
            out.markdown(_DATA_URI.sub("", source))
        elif cell.get("cell_type") == "code":
            out.code(source, language)
            for text in _outputs(cell):
                out.code(text, "output")
    metadata = notebook.get("metadata")
    title = metadata.get("title") if isinstance(metadata, dict) and isinstance(metadata.get("title"), str) else None
    return out.result(title)
