"""The routes a replica pulls generations from: GET /v1/snapshots/latest and GET /v1/snapshots/<N>/knowledge.db.

`knowledge serve` offers the generations of its published directory (knowledge.publish.directory on a
primary; DIR on a `serve --snapshots DIR` replica, so replicas can chain). /v1/snapshots/latest answers
the newest generation whose manifest parses, as `{status, generation, manifest, file}`, or a 404 whose
status is `not_found` while nothing is published. The file route streams a complete generation's file
in chunks (starlette's FileResponse: never read whole, `Range: bytes=N-` answered 206 so a download
resumes); a generation without a manifest (a publish in progress), a pruned one, or a symlink is 404.
Both sit behind the Guard like every /v1 route (Host, Origin, the bearer token). The server does not
hash the file: the replica verifies size and SHA-256 against the manifest before it uses anything.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import FileResponse, Response

from pipeline import publish as snapshots
from query.status import Status

LATEST_ROUTE = snapshots.LATEST_ROUTE  # publishing owns the layout and the route names
FILE_ROUTE = snapshots.FILE_ROUTE
MEDIA_TYPE = "application/vnd.sqlite3"
SHA256_HEADER = "X-Knowledge-SHA256"
file_path = snapshots.file_route


def _json(data: dict[str, Any], code: int = 200) -> Response:
    return Response(json.dumps(data, ensure_ascii=False), status_code=code, media_type="application/json")


class SnapshotRoutes:
    """The two GET handlers over one directory of generations."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def routes(self) -> list[tuple[str, Callable[[Request], Response]]]:
        """(path, handler) of each route."""
        return [(LATEST_ROUTE, self.latest), (FILE_ROUTE, self.file)]

    def newest(self) -> snapshots.Manifest | None:
        """The newest generation whose manifest parses (None when there is none)."""
        for number in snapshots.generations(self.directory):
            try:
                return snapshots.read_manifest(self.directory, number)
            except snapshots.SnapshotRefused:
                continue
        return None

    def latest(self, request: Request) -> Response:
        """The newest complete generation's manifest and the route of its file; 404 not_found before the first."""
        manifest = self.newest()
        if manifest is None:
            return _json({"status": Status.NOT_FOUND, "generation": None,
                          "note": "no generation has been published here yet; run `knowledge publish` on the primary"},
                         404)
        return _json({"status": Status.OK, "generation": manifest.generation, "manifest": manifest.to_json(),
                      "file": file_path(manifest.generation)})

    def file(self, request: Request) -> Response:
        """A complete generation's file, streamed, with Range honoured (206); 404 when it is not complete here."""
        generation = int(request.path_params["generation"])
        try:
            manifest = snapshots.read_manifest(self.directory, generation)
        except snapshots.SnapshotRefused:
            return self._missing(generation)
        folder = snapshots.generation_dir(self.directory, generation)
        path = folder / snapshots.DB_NAME
        if folder.is_symlink() or path.is_symlink() or not path.is_file():
            return self._missing(generation)
        headers = {SHA256_HEADER: manifest.sha256, "Cache-Control": "no-store"}
        return FileResponse(path, media_type=MEDIA_TYPE, headers=headers, filename=snapshots.DB_NAME)

    def _missing(self, generation: int) -> Response:
        return _json({"status": Status.NOT_FOUND, "generation": None,
                      "note": f"generation {generation} is not complete here (never published, being written, or "
                              f"pruned); ask {LATEST_ROUTE} for the newest"}, 404)
