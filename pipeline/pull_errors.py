"""What goes wrong in a pull, in words: the errors of pipeline/pull.py and the sentence for each reply a primary gives.

Every sentence names the fix where there is one the operator can make (a token, an allowed Host, the
URL). A primary's own words (`note`) are quoted cut short; whoever prints a sentence escapes it.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import httpx

from config.errors import ConfigError, KnowledgeError
from pipeline import publish as snapshots

TOKEN_SETTING = "knowledge.expose.mcp.token_env"
FILE_ROUTE_SHOWN = snapshots.file_route(0).replace("/0/", "/<N>/")


class PullError(KnowledgeError):
    """The primary could not be asked, or answered something a replica cannot use."""


class PullRefused(PullError):
    """A generation that failed verification (or cannot be read by this knowledge); not tried again."""

    def __init__(self, message: str, generation: int) -> None:
        super().__init__(message)
        self.generation = generation


def checked_url(url: str) -> str:
    """The primary's base URL without a trailing slash; ConfigError naming --pull-from when it is unusable."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise ConfigError(f"--pull-from {url!r} is not an http(s) URL of a `knowledge serve`; give the primary's "
                          "address, e.g. http://primary:8080")
    return url.strip().rstrip("/")


def manifest_from(data: object) -> snapshots.Manifest:
    """A Manifest from the JSON the primary sent, every field type-checked; PullRefused (of that generation,
    when its number is sound) or PullError naming what is wrong."""
    try:
        return snapshots.Manifest.from_json(data)
    except snapshots.SnapshotRefused as exc:
        number = data.get("generation") if isinstance(data, dict) else None
        if isinstance(number, int) and not isinstance(number, bool) and number > 0:
            raise PullRefused(f"generation {number} from the primary is refused: {exc}", number) from exc
        raise PullError(f"the primary's manifest is malformed: {exc}") from exc


def file_problem(reply: httpx.Response, url: str, base: str, token_env: str | None) -> str:
    """The sentence for a reply to a generation's file that is not the bytes asked for."""
    data = json_or_none(reply)
    if reply.status_code == 404 and isinstance(data, dict) and data.get("status") == "not_found":
        return (f"{url} is no longer on the primary (pruned by newer publishes while it downloaded); the next "
                "poll takes the newest")
    if reply.status_code == 206:
        return f"{url} answered a range that does not start where the partial file ended; starting it again"
    return http_problem(reply, FILE_ROUTE_SHOWN, base, token_env)


def http_problem(reply: httpx.Response, route: str, base: str, token_env: str | None) -> str:
    """The sentence for a reply of the primary at base to route that a replica cannot use, with its fix."""
    code = reply.status_code
    where = f"the primary at {base}"
    if code == 401:
        if token_env:
            return (f"{where} refused the token in ${token_env} (401); set it to the primary's token "
                    f"({TOKEN_SETTING})")
        return f"{where} requires a bearer token (401); name the variable holding it in {TOKEN_SETTING}"
    if code == 421:
        host = urlsplit(base).hostname
        return (f"{where} refused the Host header {host!r} (421); add it to the primary's "
                "knowledge.expose.mcp.allowed_hosts")
    if code == 403:
        return f"{where} refused the request (403): {_note(reply)}"
    if code == 404:
        return (f"{where} has no {route} (404): is it a `knowledge serve` of this version or newer? fix "
                "--pull-from")
    return f"{where} answered {code} to {route}: {_note(reply)}"


def json_or_none(reply: httpx.Response) -> Any:
    """The reply's JSON, or None when its body is not JSON."""
    try:
        return reply.json()
    except ValueError:
        return None


def _note(reply: httpx.Response) -> str:
    data = json_or_none(reply)
    if isinstance(data, dict) and isinstance(data.get("note"), str):
        return str(data["note"])[:300]
    return reply.reason_phrase or "no explanation"
