"""Which web addresses may be indexed, and the one spelling each is stored under.

Shared by the loader (validating `knowledge.urls`) and the run planner (URLs named on the command
line): only http and https are accepted, credentials in a URL are refused (the URL is stored and
printed as the document's path), and the fragment is dropped so a citation `<url>#<ordinal>` has
exactly one `#`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import SplitResult, urlsplit, urlunsplit

WEB_SCHEMES = ("http", "https")

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")
_LOCAL_ONLY_SCHEMES = frozenset({"file", "data", "javascript", "mailto", "about", "blob"})


def looks_like_url(arg: str) -> bool:
    """True when a command-line argument is meant as a URL (`scheme://...` or `file:...`), not a path."""
    match = _SCHEME.match(arg)
    if match is None:
        return False
    return arg[match.end():].startswith("//") or match.group(1).lower() in _LOCAL_ONLY_SCHEMES


def is_web_path(path: str) -> bool:
    """True when a stored document path is a web page's URL (as normalize_url spells it)."""
    return path.startswith(("http://", "https://"))


def normalize_url(raw: str) -> str:
    """The stored form of an http(s) URL: scheme and host lower-cased, fragment dropped.

    Raise ValueError with the reason for anything else: another scheme (file:, ftp:), no host,
    credentials, whitespace or control characters.
    """
    text = raw.strip()
    if any(ord(ch) <= 0x20 or 0x7F <= ord(ch) <= 0x9F for ch in text):
        raise ValueError(f"{raw!r} contains whitespace or control characters")
    match = _SCHEME.match(text)
    if match is None:
        raise ValueError(f"{raw!r} is not a URL; expected http://host/... or https://host/...")
    if match.group(1).lower() not in WEB_SCHEMES:
        raise ValueError(f"{raw!r}: only http:// and https:// URLs are indexed, not {match.group(1).lower()}:")
    try:
        parts = urlsplit(text)
        host = parts.hostname
        parts.port  # noqa: B018 - raises ValueError for a port out of range or not a number
    except ValueError as exc:
        raise ValueError(f"{raw!r} is not a valid URL: {exc}") from None
    if not host:
        raise ValueError(f"{raw!r} has no host")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"{raw!r} carries credentials; they would be stored and printed with every citation")
    netloc = parts.netloc.lower()
    return urlunsplit((parts.scheme.lower(), netloc, parts.path or "/", parts.query, ""))


def normalize_urls(raws: Iterable[str]) -> list[str]:
    """normalize_url over raws, duplicates dropped, order kept; raise ValueError on the first bad one."""
    seen: dict[str, None] = {}
    for raw in raws:
        seen.setdefault(normalize_url(raw), None)
    return list(seen)


def _parts(raw: str) -> tuple[SplitResult | None, str | None]:
    """urlsplit of raw with its port checked, or the reason it does not parse."""
    try:
        parts = urlsplit(raw)
        parts.port  # noqa: B018 - raises ValueError for a port out of range or not a number
    except ValueError as exc:
        return None, f"is not a valid URL ({exc})"
    return parts, None


def base_url_problem(raw: str) -> str | None:
    """Why raw cannot be an embeddings server's base URL (http(s), a host, no credentials), or None."""
    if any(ord(ch) <= 0x20 or 0x7F <= ord(ch) <= 0x9F for ch in raw):
        return "contains whitespace or control characters"
    parts, problem = _parts(raw)
    if parts is None:
        return problem
    if parts.scheme.lower() not in WEB_SCHEMES:
        return "must be an http:// or https:// URL"
    if not parts.hostname:
        return "has no host"
    if parts.username is not None or parts.password is not None:
        return "carries credentials; put the key in the variable api_key_env names"
    return None


def broker_url_problem(raw: str) -> str | None:
    """Why raw cannot be a Redis broker URL (redis://host:port/db, rediss://, unix://), or None."""
    parts, problem = _parts(raw)
    if parts is None:
        return problem
    scheme = parts.scheme.lower()
    if scheme not in ("redis", "rediss", "unix"):
        return "must look like redis://host:port/db"
    if scheme == "unix" and not parts.path:
        return "names no socket; it must look like unix:///path/to/redis.sock"
    return None
