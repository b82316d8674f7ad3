"""Settings from YAML and KNOWLEDGE_* variables: errors name the key and its position."""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

import pytest

from config import settings as settings_module
from config.errors import ConfigError
from config.loader import load_settings

ROOT = Path(__file__).resolve().parents[2]


def _write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "knowledge.yaml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_a_full_file_is_read_into_typed_settings(tmp_path: Path) -> None:
    config = _write(tmp_path, """
knowledge:
  name: team
  paths: [docs, notes]
  top_k: 7
  embeddings:
    base_url: http://127.0.0.1:1234/v1
    model: m
    timeout: 1500ms
  expose:
    mcp:
      builtins: [knowledge_search]
""")
    s = load_settings(config, environ={})
    assert (s.name, s.paths, s.top_k) == ("team", ("docs", "notes"), 7)
    assert s.embeddings is not None and s.embeddings.timeout == 1.5 and s.embeddings.batch_size == 64
    assert s.expose.mcp.builtins == ("knowledge_search",)
    assert s.broker is None


@pytest.mark.parametrize(("text", "message"), [
    ("knowledge:\n  pathz: [a]\n", "knowledge.yaml:2:3: unknown key knowledge.pathz"),
    ("knowledge:\n  paths: docs\n", "knowledge.yaml:2:10: knowledge.paths must be a list"),
    ("knowledge:\n  top_k: many\n", "knowledge.yaml:2:10: knowledge.top_k must be a whole number"),
    ("knowledge:\n  embeddings:\n    model: m\n", "knowledge.embeddings needs knowledge.embeddings.base_url"),
    ("knowledge:\n  embeddings:\n    base_url: http://x\n    model: m\n    timeout: soon\n",
     "knowledge.yaml:5:14: knowledge.embeddings.timeout must be a number of seconds"),
    ("other:\n  x: 1\n", "knowledge.yaml:1:1: unknown top-level key 'other'"),
    ("knowledge:\n  top_k: 99\n", "knowledge.top_k must be between 1 and 20"),
    ("knowledge:\n  broker:\n    url: http://x\n", "knowledge.broker.url must look like redis://"),
    ("knowledge: [\n", "not valid YAML"),
])
def test_bad_config_names_the_key_and_its_position(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(_write(tmp_path, text), environ={})
    assert message in str(info.value)
    assert info.value.exit_code == 2


def test_a_missing_explicit_config_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(str(tmp_path / "nope.yaml"), environ={})


def test_the_store_is_under_the_store_base_unless_the_directory_is_absolute(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert load_settings(environ={}).store_dir == tmp_path / "knowledge" / "default"
    base = tmp_path / "base"
    s = load_settings(environ={"KNOWLEDGE_STORE_DIR": str(base), "KNOWLEDGE_NAME": "team"})
    assert s.store_dir == base / "knowledge" / "team"
    assert load_settings(store_dir=str(base), environ={}).store_dir == base / "knowledge" / "default"
    config = _write(tmp_path, f"knowledge:\n  directory: {tmp_path / 'abs'}\n")
    assert load_settings(config, store_dir=str(base), environ={}).store_dir == tmp_path / "abs"
    config = _write(tmp_path, "knowledge:\n  directory: rel/store\n")
    assert load_settings(config, store_dir=str(base), environ={}).store_dir == base / "rel" / "store"


def test_knowledge_config_and_broker_url_come_from_the_environment(tmp_path: Path) -> None:
    config = _write(tmp_path, "knowledge:\n  paths: [docs]\n")
    s = load_settings(environ={"KNOWLEDGE_CONFIG": config, "KNOWLEDGE_BROKER_URL": "redis://127.0.0.1:6379/3"})
    assert s.paths == ("docs",) and s.broker is not None and s.broker.url.endswith("/3")


def _keys(cls: typing.Any, prefix: str) -> list[tuple[str, dataclasses.Field]]:
    out = []
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        if field.name in ("store_base", "config_path"):
            continue
        key = f"{prefix}.{field.name}"
        out.append((key, field))
        inner = hints[field.name]
        for arg in (inner, *typing.get_args(inner)):
            if dataclasses.is_dataclass(arg):
                sub = f"{key}[]" if typing.get_origin(inner) is tuple else key
                out += _keys(arg, sub)
    return out


def test_every_setting_has_help_and_is_documented() -> None:
    doc = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    for key, field in _keys(settings_module.Settings, "knowledge"):
        assert field.metadata.get("help"), f"{key} has no help text"
        assert f"`{key}`" in doc, f"{key} is not documented in docs/configuration.md"


# Through the real CLI: every refused setting is one line on stderr and exit 2, never a traceback.

def _refused(run_cli, *args: str) -> str:
    code, out, err = run_cli(*args)
    assert code == 2, out + err
    assert err.count("\n") == 1 and err.startswith("knowledge: error: ") and "Traceback" not in out + err
    return err


@pytest.mark.parametrize(("yaml_text", "expected"), [
    ("  expose:\n    mcp:\n      port: 99999\n", "knowledge.expose.mcp.port must be between 0 and 65535, got 99999"),
    ("  broker:\n    url: redis://127.0.0.1:99999/0\n", "knowledge.broker.url is not a valid URL (Port out of range"),
    ("  broker:\n    url: unix://\n", "knowledge.broker.url names no socket"),
    ("  paths: [1, 2]\n", "knowledge.paths[0] must be text, got '1'"),
    ("  paths: [~]\n", "knowledge.paths[0] is empty (YAML reads a bare ~ as nothing)"),
    ("  paths: ['']\n", "knowledge.paths[0] is empty"),
    ("  embeddings:\n    base_url: http://user:secret@127.0.0.1:1234/v1\n    model: m\n",
     "knowledge.embeddings.base_url carries credentials"),
    ("  embeddings:\n    base_url: 'http://'\n    model: m\n", "knowledge.embeddings.base_url has no host"),
    ("  embeddings:\n    base_url: 'http://[::1'\n    model: m\n",
     "knowledge.embeddings.base_url is not a valid URL (Invalid IPv6 URL)"),
    ("  embeddings:\n    base_url: 'http://127.0.0.1:70000/v1'\n    model: m\n",
     "knowledge.embeddings.base_url is not a valid URL (Port out of range"),
    ("  rerank:\n    url: http://key:secret@127.0.0.1:8082/rerank\n", "knowledge.rerank.url carries credentials"),
    ("  rerank:\n    url: http://127.0.0.1:8082/rerank\n    shape: openai\n",
     "knowledge.rerank.shape must be one of auto, tei, cohere, got 'openai'"),
    ("  rerank:\n    url: http://127.0.0.1:8082/rerank\n    top_n: 1\n",
     "knowledge.rerank.top_n must be between 2 and 200, got 1"),
    ("  rerank:\n    url: http://127.0.0.1:8082/rerank\n    budget_ms: 0\n",
     "knowledge.rerank.budget_ms must be between 1 and 60000 (milliseconds), got 0"),
    ("  rerank:\n    model: m\n", "knowledge.rerank needs knowledge.rerank.url"),
    ("  checkpoints: litestreem\n", "knowledge.checkpoints must be sqlite or litestream, got 'litestreem'"),
    ("  expose:\n    mcp:\n      builtins: [knowledge_serch]\n",
     ("builtins names 'knowledge_serch', which is not a tool knowledge serves "
      "(accepted: knowledge_search, knowledge_enumerate, knowledge_read)")),
])
@pytest.mark.parametrize("command", [("index", "docs"), ("serve",)])
def test_a_setting_that_cannot_work_is_refused_before_anything_runs(
    workdir: Path, run_cli, yaml_text: str, expected: str, command: tuple[str, ...]
) -> None:
    (workdir / "docs").mkdir()
    (workdir / "knowledge.yaml").write_text("knowledge:\n" + yaml_text, encoding="utf-8")
    assert expected in _refused(run_cli, *command)


def test_a_broker_url_from_the_environment_is_checked_too(
    workdir: Path, run_cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KNOWLEDGE_BROKER_URL", "redis://127.0.0.1:99999/0")
    assert "knowledge.broker.url is not a valid URL" in _refused(run_cli, "search", "x")


def test_a_store_base_that_is_not_a_directory_is_refused(
    workdir: Path, run_cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KNOWLEDGE_STORE_DIR", "/dev/null")
    for args in (("index", "docs"), ("search", "x"), ("stats",)):
        assert "$KNOWLEDGE_STORE_DIR /dev/null is not a directory" in _refused(run_cli, *args)
    monkeypatch.delenv("KNOWLEDGE_STORE_DIR")
    assert "--store-dir /dev/null is not a directory" in _refused(run_cli, "--store-dir", "/dev/null", "stats")


def test_tool_names_are_trimmed_and_paths_may_start_at_home(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(workdir))
    config = _write(workdir, "knowledge:\n  paths: ['~/docs', notes]\n  directory: '~/store'\n"
                             "  expose:\n    mcp:\n      builtins: [' knowledge_search ', knowledge_enumerate]\n")
    s = load_settings(config, environ={})
    assert s.paths == (f"{workdir}/docs", "notes")
    assert s.store_dir == workdir / "store"
    assert s.expose.mcp.builtins == ("knowledge_search", "knowledge_enumerate")
