"""The one error tree of knowledge.

Every library error is translated into one of these at the boundary where it happens, and the CLI
turns any of them into a one-line message and the exit code carried by the class.
"""

from __future__ import annotations

EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_BUSY = 75


class KnowledgeError(Exception):
    """Root of every error knowledge raises on purpose."""

    exit_code: int = EXIT_FAILURE


class ConfigError(KnowledgeError):
    """The configuration file or environment is invalid; the message names the key and the fix."""

    exit_code = EXIT_USAGE


class UsageError(KnowledgeError):
    """A command was called with arguments it cannot act on."""

    exit_code = EXIT_USAGE


class StoreError(KnowledgeError):
    """The SQLite store cannot be opened, read or written."""


class IndexNotBuilt(StoreError):
    """No index exists yet at the store location."""

    @classmethod
    def at(cls, where: object) -> IndexNotBuilt:
        """The error for a store location that holds no index yet, naming the fix."""
        return cls(f"no index at {where}; run `knowledge index` first")


class StoreFormatError(StoreError):
    """The store file was written by another format version of knowledge."""


class UnsafePathError(StoreError):
    """A store path is a symlink or has unsafe permissions."""


class StoreDamaged(StoreError):
    """The store file or one of its indexes is damaged; `knowledge check` says where, `knowledge rebuild` repairs."""


class StoreReadOnly(StoreError):
    """The store's directory is on a read-only file system: reads work, writes cannot."""


class StoreFull(StoreError):
    """The store's file system has no room left for a write; the run stops at the first one."""


class StoreBusy(StoreError):
    """Another process holds the store's write lock."""

    exit_code = EXIT_BUSY


class RunInProgress(KnowledgeError):
    """Another index run is in progress for the same store."""

    exit_code = EXIT_BUSY


class PipelineError(KnowledgeError):
    """A step of the indexing pipeline failed."""


class FileSkipped(PipelineError):
    """A file is not eligible (binary, not UTF-8, too large); recorded as skipped, not failed."""


class FetchError(PipelineError):
    """A web page could not be fetched: HTTP error status, timeout, refused connection, bad redirect."""


class EmbeddingError(PipelineError):
    """The embeddings server could not produce vectors.

    `kind` names the step that failed, never read from the message: `timeout` (a deadline passed,
    which wins over any other step, a hung server being both), `refused` (no connection), `http_status`
    (an error status), `malformed` (a body that is not a valid answer), or `error`.
    """

    kind = "error"

    def __init__(self, message: str, kind: str | None = None) -> None:
        super().__init__(message)
        if kind is not None:
            self.kind = kind


class EmbeddingUnavailable(EmbeddingError):
    """Transient: the embeddings server is unreachable, timed out, throttled or erred (5xx)."""


class EmbeddingRejected(EmbeddingError):
    """Permanent: the embeddings server refused the input or answered with a malformed body."""


class VectorIdentityMismatch(EmbeddingError):
    """The index was built with another model, dimension or prefix; `--reindex` is the way out."""

    exit_code = EXIT_FAILURE


class RerankError(KnowledgeError):
    """The reranking endpoint gave no usable scores; search keeps the fused order and says why.

    `kind` names the step that failed: `timeout` (the stage's budget ran out), `refused` (no
    connection), `http_status` (an error status), `malformed` (an answer that is not one score per
    text), or `config` (the API key's variable is unset). `status` is the HTTP status, if any.
    """

    def __init__(self, message: str, kind: str, status: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status


class BrokerError(KnowledgeError):
    """The message broker (Redis) is unreachable or failed mid-run."""


class QueryError(KnowledgeError):
    """A query cannot be answered as written; the message says what to write instead."""

    exit_code = EXIT_USAGE
