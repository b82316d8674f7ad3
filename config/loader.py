"""Build Settings from knowledge.yaml and KNOWLEDGE_* environment variables.

This is the only module that reads os.environ for configuration. Every error names the key, its
position in the file (`knowledge.yaml:4:3`) and what was expected.
"""

from __future__ import annotations

import dataclasses
import os
import re
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from config.errors import ConfigError
from config.settings import (
    CHECKPOINTS,
    FORMAT_NAMES,
    RERANK_SHAPES,
    BrokerSettings,
    EmbeddingsSettings,
    McpExposure,
    RerankSettings,
    Settings,
)
from config.urls import base_url_problem, broker_url_problem, normalize_url

ENV_CONFIG = "KNOWLEDGE_CONFIG"
ENV_STORE_DIR = "KNOWLEDGE_STORE_DIR"
ENV_BROKER_URL = "KNOWLEDGE_BROKER_URL"
ENV_NAME = "KNOWLEDGE_NAME"
DEFAULT_FILE = "knowledge.yaml"

MIN_EXTRACTION_MIB = 128  # below this the reading process cannot start Python and a format's library

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m)?\s*$")


def find_config(explicit: str | None, environ: Mapping[str, str]) -> Path | None:
    """The config file to read: --config, then $KNOWLEDGE_CONFIG, then ./knowledge.yaml if present."""
    chosen = explicit or environ.get(ENV_CONFIG)
    if chosen:
        path = Path(chosen)
        if not path.is_file():
            raise ConfigError(f"config file {chosen} does not exist; fix --config or ${ENV_CONFIG}")
        return path
    default = Path(DEFAULT_FILE)
    return default if default.is_file() else None


def load_settings(
    config: str | None = None,
    store_dir: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Read the config file (if any), apply environment overrides, validate; raise ConfigError."""
    env = os.environ if environ is None else environ
    path = find_config(config, env)
    values: dict[str, Any] = {}
    if path is not None:
        values = _parse_file(path)
    if env.get(ENV_NAME):
        values["name"] = env[ENV_NAME]
    if env.get(ENV_BROKER_URL):
        values["broker"] = BrokerSettings(url=env[ENV_BROKER_URL])
    base = store_dir or env.get(ENV_STORE_DIR)
    if base:
        named = "--store-dir" if store_dir else f"${ENV_STORE_DIR}"
        if Path(base).exists() and not Path(base).is_dir():
            raise ConfigError(f"{named} {base} is not a directory; name the directory stores are kept under")
    # A relative store directory lives beside the config file that names it, else in the working directory.
    values["store_base"] = Path(base).resolve() if base else (path.parent.resolve() if path else Path.cwd())
    values["config_path"] = path
    settings = _normalise(Settings(**values))
    _check_semantics(settings, path)
    return settings


def settings_from_mapping(data: Mapping[str, Any], **extra: Any) -> Settings:
    """Build Settings from an in-memory `knowledge:` block (tests and programmatic callers)."""
    text = yaml.safe_dump({"knowledge": dict(data)})
    node = yaml.compose(text)
    values = _convert_block(node, "<mapping>") if node is not None else {}
    values.update(extra)
    settings = _normalise(Settings(**values))
    _check_semantics(settings, None)
    return settings


def _normalise(settings: Settings) -> Settings:
    """Paths starting with ~ expanded to the home directory; tool names trimmed of blanks."""
    mcp = settings.expose.mcp
    return dataclasses.replace(
        settings,
        paths=tuple(os.path.expanduser(p) if p.startswith("~") else p for p in settings.paths),
        directory=os.path.expanduser(settings.directory) if settings.directory.startswith("~") else settings.directory,
        expose=dataclasses.replace(
            settings.expose, mcp=dataclasses.replace(mcp, builtins=tuple(name.strip() for name in mcp.builtins))
        ),
    )


def _parse_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from exc
    try:
        node = yaml.compose(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    if node is None:
        return {}
    return _convert_block(node, str(path))


def _convert_block(node: yaml.Node, source: str) -> dict[str, Any]:
    if not isinstance(node, yaml.MappingNode):
        raise ConfigError(f"{_where(source, node)}: the file must be a mapping with a `knowledge:` block")
    block = None
    for key_node, value_node in node.value:
        if key_node.value != "knowledge":
            raise ConfigError(
                f"{_where(source, key_node)}: unknown top-level key {key_node.value!r}; "
                "settings live under `knowledge:`"
            )
        block = value_node
    if block is None or (isinstance(block, yaml.ScalarNode) and block.value in ("", "null", "~")):
        return {}
    return _field_values(Settings, block, "knowledge", source)


_INTERNAL = {"store_base", "config_path"}


def _field_values(cls: type[Any], node: yaml.Node, key: str, source: str) -> dict[str, Any]:
    """The fields of a dataclass given in a mapping node, converted to their hinted types."""
    if not isinstance(node, yaml.MappingNode):
        raise ConfigError(f"{_where(source, node)}: {key} must be a mapping")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.name not in _INTERNAL}
    values: dict[str, Any] = {}
    for key_node, value_node in node.value:
        name = key_node.value
        if name not in fields:
            known = ", ".join(sorted(fields))
            raise ConfigError(f"{_where(source, key_node)}: unknown key {key}.{name} (known: {known})")
        values[name] = _convert(hints[name], value_node, f"{key}.{name}", source)
    return values


def _convert_dataclass(cls: type[Any], node: yaml.Node, key: str, source: str) -> object:
    values = _field_values(cls, node, key, source)
    missing = [
        f.name
        for f in dataclasses.fields(cls)
        if f.name not in values
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        raise ConfigError(f"{_where(source, node)}: {key} needs {', '.join(key + '.' + m for m in missing)}")
    return cls(**values)


def _convert(hint: Any, node: yaml.Node, key: str, source: str) -> Any:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if isinstance(node, yaml.ScalarNode) and node.tag.endswith(":null"):
            return None
        return _convert(args[0], node, key, source)
    if origin is tuple:
        item = typing.get_args(hint)[0]
        if not isinstance(node, yaml.SequenceNode):
            raise ConfigError(f"{_where(source, node)}: {key} must be a list")
        if item is str:
            for i, child in enumerate(node.value):
                _require_text(child, f"{key}[{i}]", source)
        return tuple(_convert(item, child, f"{key}[{i}]", source) for i, child in enumerate(node.value))
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _convert_dataclass(hint, node, key, source)
    if not isinstance(node, yaml.ScalarNode):
        raise ConfigError(f"{_where(source, node)}: {key} must be a single value, not a list or mapping")
    return _scalar(hint, node, key, source)


def _scalar(hint: Any, node: yaml.ScalarNode, key: str, source: str) -> Any:
    raw = node.value
    tag = node.tag.rsplit(":", 1)[-1]
    if hint is str:
        if tag in ("null",) and raw in ("", "~", "null"):
            return ""
        if tag not in ("str", "int", "float"):
            raise ConfigError(f"{_where(source, node)}: {key} must be text, got {raw!r}")
        return raw
    if hint is bool:
        if tag != "bool":
            raise ConfigError(f"{_where(source, node)}: {key} must be true or false, got {raw!r}")
        return raw.lower() in ("true", "yes", "on")
    if hint is int:
        if tag != "int":
            raise ConfigError(f"{_where(source, node)}: {key} must be a whole number, got {raw!r}")
        return int(raw)
    if hint is float:
        match = _DURATION.match(raw)
        if tag not in ("int", "float", "str") or match is None:
            raise ConfigError(f"{_where(source, node)}: {key} must be a number of seconds like 30 or 30s, got {raw!r}")
        scale = {"ms": 0.001, "s": 1.0, "m": 60.0, None: 1.0}[match.group(2)]
        return float(match.group(1)) * scale
    raise ConfigError(f"{_where(source, node)}: {key} has an unsupported type")  # pragma: no cover


def _require_text(node: yaml.Node, key: str, source: str) -> None:
    """A list of paths, URLs, hosts or tool names holds text only: no number, no empty entry."""
    if not isinstance(node, yaml.ScalarNode):
        return  # _convert names the mistake
    tag = node.tag.rsplit(":", 1)[-1]
    if tag == "null":
        raise ConfigError(
            f"{_where(source, node)}: {key} is empty (YAML reads a bare ~ as nothing); write the entry, "
            "quoted if it starts with ~ ('~/docs')"
        )
    if tag != "str":
        raise ConfigError(f"{_where(source, node)}: {key} must be text, got {node.value!r}; quote it if it is meant")


def _where(source: str, node: yaml.Node) -> str:
    mark = node.start_mark
    return f"{source}:{mark.line + 1}:{mark.column + 1}"


def _check_semantics(settings: Settings, path: Path | None) -> None:
    where = str(path) if path else "settings"
    if settings.citations:
        from config.citations import compile_rules  # the rule compiler only for a config that has rules

        compile_rules(settings.citations, where)
    _check_values(settings, where)
    for i, entry in enumerate(settings.paths):
        if not entry.strip():
            raise ConfigError(f"{where}: knowledge.paths[{i}] is empty; name a directory or file to index")
    _check_formats(settings.formats, where)
    if settings.checkpoints not in CHECKPOINTS:
        raise ConfigError(f"{where}: knowledge.checkpoints must be {' or '.join(CHECKPOINTS)}, got "
                          f"{settings.checkpoints!r}")
    _check_mcp(settings.expose.mcp, where)
    if settings.broker is not None:
        problem = broker_url_problem(settings.broker.url)
        if problem:
            raise ConfigError(f"{where}: knowledge.broker.url {problem}, got {settings.broker.url!r}")
    for key, emb in (("embeddings", settings.embeddings), ("embeddings_next", settings.embeddings_next)):
        if emb is not None:
            _check_embeddings(key, emb, where)
    if settings.rerank is not None:
        _check_rerank(settings.rerank, where)


def _check_values(settings: Settings, where: str) -> None:
    """The store's name, the URLs and the numbers of the knowledge block."""
    if not re.fullmatch(r"[A-Za-z0-9._-]+", settings.name) or settings.name in (".", ".."):
        raise ConfigError(f"{where}: knowledge.name {settings.name!r} must be letters, digits, '.', '_' or '-'")
    for i, url in enumerate(settings.urls):
        try:
            normalize_url(url)
        except ValueError as exc:
            raise ConfigError(f"{where}: knowledge.urls[{i}]: {exc}") from None
    if not 1 <= settings.top_k <= 20:
        raise ConfigError(f"{where}: knowledge.top_k must be between 1 and 20, got {settings.top_k}")
    if settings.max_injected_tokens < 1:
        raise ConfigError(f"{where}: knowledge.max_injected_tokens must be at least 1")
    if settings.publish.keep < 1 or settings.publish.poll_interval <= 0:
        raise ConfigError(f"{where}: knowledge.publish.keep must be at least 1 and knowledge.publish.poll_interval "
                          f"more than 0 s, got {settings.publish.keep} and {settings.publish.poll_interval:g}")
    if settings.fetch_timeout <= 0:
        raise ConfigError(f"{where}: knowledge.fetch_timeout must be more than 0 s, got {settings.fetch_timeout:g}")
    _check_extraction(settings, where)
    if not 0 <= settings.rm_max_percent <= 100:
        raise ConfigError(f"{where}: knowledge.rm_max_percent must be between 0 and 100, got {settings.rm_max_percent}")
    if settings.workers < 1 or settings.batch_files < 1:
        raise ConfigError(f"{where}: knowledge.workers and knowledge.batch_files must be at least 1")
    _check_languages(settings, where)


def _check_extraction(settings: Settings, where: str) -> None:
    """knowledge.extraction: a deadline above 0 s, a per-MiB share of at least 0 s, room for a reader to start."""
    bound = settings.extraction
    if bound.timeout <= 0 or bound.timeout_per_mib < 0 or bound.memory < MIN_EXTRACTION_MIB:
        raise ConfigError(f"{where}: knowledge.extraction.timeout must be more than 0 s, timeout_per_mib at least 0 s "
                          f"and memory at least {MIN_EXTRACTION_MIB} (MiB), got {bound.timeout:g}, "
                          f"{bound.timeout_per_mib:g} and {bound.memory}")


_LANGUAGE_TAG = r"[A-Za-z]{2,3}(?:[-_][A-Za-z0-9]{2,8})*"


def _check_languages(settings: Settings, where: str) -> None:
    """knowledge.languages: the default and the extra codes are language tags (`en`, `pt-br`, `zh-hant`)."""
    languages = settings.languages
    for key, value in (("default", languages.default), *(("codes", c) for c in languages.codes)):
        if value and not re.fullmatch(_LANGUAGE_TAG, value):
            raise ConfigError(f"{where}: knowledge.languages.{key} {value!r} is not a language tag; write a code "
                              "such as en, de, pt-br or zh-hant")


def _check_formats(formats: tuple[str, ...], where: str) -> None:
    unknown = [name for name in formats if name not in FORMAT_NAMES]
    if unknown:
        raise ConfigError(f"{where}: knowledge.formats names {', '.join(map(repr, unknown))}, which "
                          f"{'is not a format' if len(unknown) == 1 else 'are not formats'} knowledge reads "
                          f"(known: {', '.join(FORMAT_NAMES)})")


# The names expose.mcp.builtins accepts are the tools query/tools.py declares: cli/app.py checks them.
def _check_mcp(mcp: McpExposure, where: str) -> None:
    if not 0 <= mcp.port <= 65535:
        raise ConfigError(f"{where}: knowledge.expose.mcp.port must be between 0 and 65535, got {mcp.port}")
    if mcp.header_timeout <= 0 or mcp.keepalive_timeout <= 0 or mcp.session_lifetime <= 0:
        raise ConfigError(f"{where}: knowledge.expose.mcp header_timeout, keepalive_timeout and session_lifetime "
                          "must be more than 0 s")
    if mcp.max_connections < 16:
        raise ConfigError(f"{where}: knowledge.expose.mcp.max_connections must be at least 16, "
                          f"got {mcp.max_connections}")


def _check_embeddings(key: str, emb: EmbeddingsSettings, where: str) -> None:
    problem = base_url_problem(emb.base_url)
    if problem:
        raise ConfigError(f"{where}: knowledge.{key}.base_url {problem}, got {emb.base_url!r}")
    if not 1 <= emb.batch_size <= 2048 or emb.concurrency < 1 or emb.timeout <= 0 or emb.max_pending < 1 \
            or emb.query_timeout <= 0:
        raise ConfigError(
            f"{where}: knowledge.{key} batch_size (1-2048), concurrency (>=1), timeout and query_timeout (>0) "
            "and max_pending (>=1) are out of range"
        )


def _check_rerank(rerank: RerankSettings, where: str) -> None:
    problem = base_url_problem(rerank.url)
    if problem:
        raise ConfigError(f"{where}: knowledge.rerank.url {problem}, got {rerank.url!r}")
    if rerank.shape not in RERANK_SHAPES:
        raise ConfigError(f"{where}: knowledge.rerank.shape must be one of {', '.join(RERANK_SHAPES)}, "
                          f"got {rerank.shape!r}")
    if not 2 <= rerank.top_n <= 200:
        raise ConfigError(f"{where}: knowledge.rerank.top_n must be between 2 and 200, got {rerank.top_n}")
    if not 1 <= rerank.budget_ms <= 60_000:
        raise ConfigError(f"{where}: knowledge.rerank.budget_ms must be between 1 and 60000 (milliseconds), "
                          f"got {rerank.budget_ms}")


def read_secret(
    variable: str | None, setting: str = "knowledge.expose.mcp.token_env", environ: Mapping[str, str] | None = None
) -> str | None:
    """The value of the environment variable a setting names (a token), or None when none is named.

    Raise ConfigError when the variable is named but unset or empty, so a server configured to
    require a token never starts without one.
    """
    if not variable:
        return None
    env = os.environ if environ is None else environ
    value = env.get(variable, "").strip()
    if not value:
        raise ConfigError(f"{setting} names ${variable}, which is unset or empty; export it or remove {setting}")
    return value
