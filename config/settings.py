"""Typed, frozen settings: one dataclass per section of the `knowledge:` block.

Each field's metadata carries its help text; docs/configuration.md documents every one and a test
keeps the two in step. Only config/loader.py builds these from YAML and the environment.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

MAX_TOP_K = 20
RERANK_SHAPES = ("auto", "tei", "cohere")
"""The request shapes knowledge.rerank.shape names (query/reranker.py speaks them)."""
FORMAT_NAMES = ("markdown", "text", "html", "mdx", "rst", "asciidoc", "org", "ipynb", "pdf", "docx")
"""The formats knowledge.formats may name (pipeline/formats is their registry; a test keeps them in step)."""
CHECKPOINTS = ("sqlite", "litestream")
"""Who checkpoints the store's WAL (knowledge.checkpoints): the writer's SQLite, or Litestream alone."""


def _help(text: str) -> dict[str, str]:
    return {"help": text}


@dataclass(frozen=True)
class EmbeddingsSettings:
    """The OpenAI-compatible embeddings server that turns on the vector tier."""

    base_url: str = field(metadata=_help("Base URL; knowledge POSTs to <base_url>/embeddings."))
    model: str = field(metadata=_help("Model name sent with every request and pinned in the index."))
    api_key_env: str | None = field(
        default=None, metadata=_help("Name of the environment variable holding the API key.")
    )
    timeout: float = field(default=30.0, metadata=_help("Request timeout in seconds (`30s` works too)."))
    query_timeout: float = field(
        default=0.5, metadata=_help("Timeout of a search's query embedding (at most `timeout`); past it, and one "
                                    "quick retry, search answers lexical only and says so.")
    )
    query_prefix: str = field(
        default="", metadata=_help("Text prepended to every query (its first 8,192 bytes) before embedding.")
    )
    document_prefix: str = field(
        default="", metadata=_help("Text prepended to every chunk's embedded text; `{title}` places its breadcrumb.")
    )
    batch_size: int = field(default=64, metadata=_help("Inputs per embeddings request."))
    concurrency: int = field(default=2, metadata=_help("Embedding requests in flight at once."))
    max_pending: int = field(
        default=2048,
        metadata=_help("Chunks read but not yet embedded (and documents not yet written) per run before ingest waits."),
    )


@dataclass(frozen=True)
class RerankSettings:
    """A `/rerank` endpoint that re-orders the head of a search's fused ranking (query/rank/rerank.py)."""

    url: str = field(metadata=_help("The endpoint knowledge POSTs to, e.g. http://127.0.0.1:8082/rerank or "
                                    "http://127.0.0.1:7997/v1/rerank."))
    shape: str = field(
        default="auto", metadata=_help("What the endpoint speaks: `tei` ({query, texts} -> [{index, score}]), "
                                       "`cohere` ({model, query, documents, top_n} -> {results}), or `auto`.")
    )
    model: str = field(
        default="", metadata=_help("Model name sent with the cohere shape (and shown in the tier line).")
    )
    api_key_env: str | None = field(
        default=None, metadata=_help("Name of the environment variable holding the API key.")
    )
    top_n: int = field(default=30, metadata=_help("How many of the fused ranking's best hits are re-ordered."))
    budget_ms: int = field(
        default=800, metadata=_help("Milliseconds the stage may take; past it the hits keep the fused order.")
    )


@dataclass(frozen=True)
class BrokerSettings:
    """The Redis broker of the distributed deployment; absent means the in-process default."""

    url: str = field(metadata=_help("redis://host:port/db of the broker."))


@dataclass(frozen=True)
class CitationSettings:
    """One citation rule as written in the file (validated by config.citations)."""

    pattern: str = field(metadata=_help("Regular expression matched against the stored path."))
    replace: str = field(metadata=_help("Replacement with $1, $name, ${name}, $$ and ordinal/heading/anchor."))


@dataclass(frozen=True)
class McpExposure:
    """What `knowledge mcp` and `knowledge serve` may serve, and where."""

    builtins: tuple[str, ...] = field(
        default=(), metadata=_help("Agent tools to serve: knowledge_search, knowledge_enumerate, knowledge_read.")
    )
    host: str = field(default="127.0.0.1", metadata=_help("Address `knowledge serve` binds."))
    port: int = field(default=8080, metadata=_help("Port `knowledge serve` binds."))
    token_env: str | None = field(
        default=None, metadata=_help("Environment variable holding a bearer token the server requires.")
    )
    allowed_hosts: tuple[str, ...] = field(
        default=(), metadata=_help("Extra Host header values accepted besides loopback names.")
    )
    allowed_origins: tuple[str, ...] = field(
        default=(), metadata=_help("Origins accepted from browsers; none by default.")
    )
    header_timeout: float = field(
        default=10.0, metadata=_help("Seconds a `serve` connection has to send a request's headers; then it is closed.")
    )
    keepalive_timeout: float = field(
        default=5.0, metadata=_help("Seconds `serve` keeps an idle connection open after a response.")
    )
    max_connections: int = field(
        default=256, metadata=_help("Connections `serve` holds open at once; past it the oldest idle one is closed.")
    )
    session_lifetime: float = field(
        default=43200.0, metadata=_help("Seconds a sign-in of the search page lasts (12 h).")
    )


@dataclass(frozen=True)
class ExposeSettings:
    """Serving configuration."""

    mcp: McpExposure = field(default_factory=McpExposure, metadata=_help("MCP and HTTP serving."))


@dataclass(frozen=True)
class PublishSettings:
    """Published snapshots of the store (`knowledge publish`) and the replicas that serve them."""

    directory: str = field(
        default="", metadata=_help("Where `knowledge publish` writes generations and `serve --snapshots` reads them; "
                                   "relative is under the config file's directory (default: <store>/published).")
    )
    keep: int = field(default=3, metadata=_help("Complete generations `knowledge publish` keeps (the newest)."))
    poll_interval: float = field(
        default=2.0, metadata=_help("Seconds between a replica's looks for a newer generation, in DIR and "
                                    "(with --pull-from) at the primary (`2s` works too).")
    )
    after_index: bool = field(
        default=False, metadata=_help("Publish a generation after every index run that changed something "
                                      "(as `index --publish` does).")
    )


@dataclass(frozen=True)
class LanguageSettings:
    """How a tree's documents get their language and translation groups (pipeline/translations.py)."""

    default: str = field(default="", metadata=_help(
        "The language of a query too short to tell and of a document nothing tells (default: the tree's most "
        "common language)."))
    directories: tuple[str, ...] = field(default=(), metadata=_help(
        "Directories (stored spelling) whose subdirectories are language directories (`docs` for docs/de/...), "
        "without needing a second language directory beside them."))
    suffixes: bool = field(default=False, metadata=_help(
        "Read `page.de.md` as German even when no `page.md` or other translation is beside it."))
    codes: tuple[str, ...] = field(default=(), metadata=_help(
        "Language codes beyond the built-in ISO 639-1 list that directory or suffix names may be."))


@dataclass(frozen=True)
class ExtractionSettings:
    """The bound on reading one file or fetched page: a deadline and a memory limit (pipeline/extraction.py)."""

    timeout: float = field(default=10.0, metadata=_help(
        "Seconds of CPU one file's extraction may take at least (`10s` works too); past its deadline the file "
        "is skipped as `took longer than N s` and the rest of the run lands."))
    timeout_per_mib: float = field(default=4.0, metadata=_help(
        "Seconds added to the deadline per MiB of the file (a 16 MiB PDF gets 64 s; the deadline is the larger "
        "of the two)."))
    memory: int = field(default=1024, metadata=_help(
        "MiB of address space the process reading a file may use; past it the file is skipped as "
        "`needed more than N MiB`."))


@dataclass(frozen=True)
class Settings:
    """The whole `knowledge:` block, with the store location resolved."""

    name: str = field(default="default", metadata=_help("Index name; the store is knowledge/<name>."))
    paths: tuple[str, ...] = field(default=(), metadata=_help("Roots `knowledge index` walks."))
    include: tuple[str, ...] = field(
        default=(), metadata=_help("Globs a walked file must match to be indexed (empty: every eligible file).")
    )
    exclude: tuple[str, ...] = field(default=(), metadata=_help("Globs of files and directories the walk skips."))
    formats: tuple[str, ...] = field(
        default=FORMAT_NAMES,
        metadata=_help("The file formats the walk indexes (default: every one; see docs/formats.md)."),
    )
    urls: tuple[str, ...] = field(
        default=(), metadata=_help("Web pages (http/https) `knowledge index` fetches, converts and indexes.")
    )
    fetch_timeout: float = field(
        default=30.0, metadata=_help("Deadline of one web page's whole fetch in seconds (`30s` works too).")
    )
    extraction: ExtractionSettings = field(default_factory=ExtractionSettings, metadata=_help(
        "The deadline and memory limit of reading one file (docs/formats.md#limits)."))
    directory: str = field(
        default="", metadata=_help("Store directory; absolute is used as is, relative is under the store base.")
    )
    root_directory: str = field(
        default="",
        metadata=_help("Base of stored paths: files under it are stored relative to it, others absolute "
                       "(default: the config file's directory, else the working directory)."),
    )
    top_k: int = field(default=5, metadata=_help(f"Results returned by search (at most {MAX_TOP_K})."))
    unproven_lexical: bool = field(
        default=True, metadata=_help("Whether the lexical tier may serve a top k it could not prove exact (an impact "
                                     "list older than the table, a shaped answer past its bound); false: FTS5's.")
    )
    max_injected_tokens: int = field(
        default=6000, metadata=_help("Tool text budget in tokens (x4 characters).")
    )
    rm_max_percent: int = field(
        default=50, metadata=_help("Largest share of the store's documents (percent) `knowledge rm` removes without "
                                   "--force; a whole root always needs --force.")
    )
    checkpoints: str = field(
        default="sqlite", metadata=_help("Who checkpoints the store's WAL: `sqlite` (the writer, every 1000 pages) or "
                                         "`litestream` (the writer never does; `litestream replicate` must run).")
    )
    workers: int = field(default=2, metadata=_help("Ingest worker threads of the in-process default."))
    batch_files: int = field(default=32, metadata=_help("Files carried by one ingest message."))
    broker: BrokerSettings | None = field(default=None, metadata=_help("Redis broker; absent = in-process."))
    embeddings: EmbeddingsSettings | None = field(
        default=None, metadata=_help("Embeddings server; absent = lexical only.")
    )
    embeddings_next: EmbeddingsSettings | None = field(
        default=None,
        metadata=_help("The model to switch to: `knowledge vectors switch` embeds every section with it "
                       "beside the serving vectors, then swaps them in one transaction."),
    )
    rerank: RerankSettings | None = field(
        default=None, metadata=_help("Reranking endpoint; absent = the fused order is the answer.")
    )
    citations: tuple[CitationSettings, ...] = field(
        default=(), metadata=_help("Rules rewriting citation paths, first match wins.")
    )
    expose: ExposeSettings = field(default_factory=ExposeSettings, metadata=_help("Serving."))
    publish: PublishSettings = field(default_factory=PublishSettings, metadata=_help("Published snapshots."))
    languages: LanguageSettings = field(default_factory=LanguageSettings, metadata=_help(
        "Document languages and translation groups (docs/ranking.md)."))
    store_base: Path = field(default_factory=Path.cwd, metadata=_help("Base of relative store dirs."))
    config_path: Path | None = field(default=None, metadata=_help("The file these came from."))

    @property
    def config_dir(self) -> Path:
        """Where relative paths written in the config resolve: its file's directory, else the working one."""
        return (self.config_path.parent if self.config_path else Path.cwd()).resolve()

    @property
    def path_base(self) -> Path:
        """The directory stored paths are relative to (knowledge.root_directory, else config_dir)."""
        if not self.root_directory:
            return self.config_dir
        return (self.config_dir / Path(self.root_directory).expanduser()).resolve()

    @property
    def store_dir(self) -> Path:
        """The directory holding knowledge.db."""
        if self.directory and Path(self.directory).is_absolute():
            return Path(self.directory)
        rel = self.directory or f"knowledge/{self.name}"
        return self.store_base / rel

    @property
    def db_path(self) -> Path:
        """The store's SQLite file."""
        return self.store_dir / "knowledge.db"

    @property
    def publish_dir(self) -> Path:
        """Where published generations live (knowledge.publish.directory, else <store>/published)."""
        if not self.publish.directory:
            return self.store_dir / "published"
        return self.config_dir / Path(self.publish.directory).expanduser()

    @property
    def store_key(self) -> str:
        """A short stable id of this store, used to namespace broker queues and ledger keys."""
        import hashlib  # OpenSSL is loaded only by the commands that reach a broker

        digest = hashlib.sha256(str(self.store_dir.resolve()).encode()).hexdigest()
        return f"{self.name}-{digest[:12]}"
