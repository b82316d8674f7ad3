"""A document's language (path, front matter, text) and its translation group, kept by the writer across runs."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from pipeline import db, schema
from pipeline.languages import detect_query, detect_text, tag
from tests.conftest import write_tree

RunCli = Callable[..., tuple[int, str, str]]

EN = "# Install\n\nRun the installer and then restart the service when it is done.\n"
DE = "# Installieren\n\nStarten Sie das Programm und dann den Dienst neu, wenn es fertig ist.\n"
JA = "# インストール\n\nインストーラーを実行して、終わったらサービスを再起動します。\n"


def _documents(run_cli: RunCli) -> dict[str, tuple[str, str, str | None]]:
    code, out, err = run_cli("sources", "--json")
    assert code == 0, out + err
    return {d["path"]: (d["lang"], d["lang_source"], d["translation_group"]) for d in json.loads(out)["documents"]}


@pytest.mark.parametrize(("text", "lang"), [
    ("The service restarts when the configuration changes, and the old workers are stopped.", "en"),
    ("Der Dienst startet neu, wenn sich die Konfiguration ändert, und die alten Worker werden gestoppt.", "de"),
    ("Le service redémarre quand la configuration change, et les anciens processus sont arrêtés.", "fr"),
    ("El servicio se reinicia cuando cambia la configuración y los procesos antiguos se detienen.", "es"),
    ("設定が変わるとサービスは再起動し、古いワーカーは停止します。", "ja"),
    ("配置更改时服务会重新启动，旧的工作进程会停止。", "zh"),
    ("설정이 바뀌면 서비스가 다시 시작됩니다.", "ko"),
    ("Служба перезапускается, когда меняется конфигурация.", "ru"),
    ("Служба перезапускається, коли змінюється конфігурація і її параметри.", "uk"),
])
def test_a_text_is_told_by_its_script_then_by_its_stop_words(text: str, lang: str) -> None:
    assert detect_text(text) == lang


def test_a_query_too_short_to_tell_has_no_language_and_one_stop_word_or_character_tells() -> None:
    assert detect_query("websockets") is None and detect_query("CORSMiddleware") is None
    assert detect_query("pydantic custom field validator") is None
    assert detect_query("how do I add CORS middleware") == "en"
    assert detect_query("wie füge ich CORS hinzu") == "de"
    assert detect_query("ファイル") == "ja" and detect_query("文件") == "zh"


def test_a_name_is_a_language_tag_only_when_its_code_is_known() -> None:
    assert tag("de") == "de" and tag("zh-Hant") == "zh-hant" and tag("pt_BR") == "pt-br"
    assert tag("api") is None and tag("go") is None and tag("docs") is None and tag("em") is None
    assert tag("em", ("em",)) == "em"


def test_language_directories_need_a_sibling_language_and_their_pages_form_groups(workdir: Path,
                                                                                 run_cli: RunCli) -> None:
    write_tree(workdir, {
        "docs/en/guide/install.md": EN, "docs/de/guide/install.md": DE, "docs/ja/guide/install.md": JA,
        "docs/en/guide/only.md": EN.replace("Install", "Only"),
        "site/go/intro.md": DE, "site/api/ref.md": EN,  # `go`, `api`: not languages
        "misc/it/notes.md": EN,  # `it` is a code, but no language directory is beside it
    })
    assert run_cli("index", "docs", "site", "misc")[0] == 0
    found = _documents(run_cli)
    group = "docs/de/guide/install.md"  # a group is named by its first member's path
    assert found["docs/en/guide/install.md"] == ("en", "path", group)
    assert found["docs/de/guide/install.md"] == ("de", "path", group)
    assert found["docs/ja/guide/install.md"] == ("ja", "path", group)
    assert found["docs/en/guide/only.md"] == ("en", "path", None)
    assert found["site/go/intro.md"] == ("de", "text", None)
    assert found["site/api/ref.md"] == ("en", "text", None)
    assert found["misc/it/notes.md"] == ("en", "text", None)


def test_suffixes_front_matter_and_configured_directories_say_a_language_too(workdir: Path, run_cli: RunCli) -> None:
    write_tree(workdir, {
        "knowledge.yaml": "knowledge:\n  languages:\n    directories: [solo]\n",
        "docs/page.md": EN, "docs/page.de.md": DE, "docs/notes.hi.md": EN,
        "solo/de/only.md": EN,  # configured: a lone language directory is one
        "blog/post.md": "---\nlang: fr\ntranslationKey: launch\n---\n# Lancement\n\nbonjour\n",
        "blog/post-en.md": "---\ntranslationKey: launch\n---\n" + EN,
        "blog/guide.md": EN, "blog/guide-ja.md": "---\ntranslation_of: blog/guide.md\n---\n" + JA,
    })
    assert run_cli("index", "docs", "solo", "blog")[0] == 0
    found = _documents(run_cli)
    assert found["docs/page.de.md"] == ("de", "path suffix", "docs/page.de.md")
    assert found["docs/page.md"] == ("en", "text", "docs/page.de.md")
    assert found["docs/notes.hi.md"] == ("en", "text", None)  # no page beside it shows the convention
    assert found["solo/de/only.md"] == ("de", "path", None)
    assert found["blog/post.md"] == ("fr", "front matter", "blog/post-en.md")
    assert found["blog/post-en.md"] == ("en", "text", "blog/post-en.md")
    assert found["blog/guide-ja.md"][::2] == ("ja", "blog/guide-ja.md")
    assert found["blog/guide.md"][2] == "blog/guide-ja.md"


def test_a_document_nothing_tells_takes_the_default_language(workdir: Path, run_cli: RunCli) -> None:
    write_tree(workdir, {"docs/a.md": EN, "docs/b.md": EN.replace("Install", "Other"), "docs/c.md": "# X\n\n42\n"})
    assert run_cli("index", "docs")[0] == 0
    assert _documents(run_cli)["docs/c.md"] == ("en", "default", None)
    (workdir / "knowledge.yaml").write_text("knowledge:\n  languages:\n    default: de\n", encoding="utf-8")
    assert run_cli("index", "docs")[0] == 0  # an unchanged tree: the run's last pass applies the configuration
    assert _documents(run_cli)["docs/c.md"] == ("de", "default", None)


def test_the_writer_keeps_groups_right_after_adds_changes_and_removals(workdir: Path, run_cli: RunCli) -> None:
    write_tree(workdir, {"docs/en/a.md": EN, "docs/de/a.md": DE, "docs/ja/a.md": JA})
    assert run_cli("index", "docs")[0] == 0
    assert {g for _, _, g in _documents(run_cli).values()} == {"docs/de/a.md"}
    (workdir / "docs/de/a.md").unlink()
    assert run_cli("index", "docs")[0] == 0
    assert {p: g for p, (_, _, g) in _documents(run_cli).items()} == {"docs/en/a.md": "docs/en/a.md",
                                                                      "docs/ja/a.md": "docs/en/a.md"}
    assert run_cli("rm", "docs/ja/a.md")[0] == 0  # `knowledge rm` regroups too: en is alone, and `en` no language
    assert _documents(run_cli) == {"docs/en/a.md": ("en", "text", None)}
    (workdir / "docs/ja/a.md").unlink()
    write_tree(workdir, {"docs/fr/a.md": "# Installer\n\nLancez le programme et redémarrez le service quand il est"
                                         " fini.\n"})
    assert run_cli("index", "docs")[0] == 0
    assert _documents(run_cli) == {"docs/en/a.md": ("en", "path", "docs/en/a.md"),
                                   "docs/fr/a.md": ("fr", "path", "docs/en/a.md")}
    write_tree(workdir, {"docs/fr/a.md": "---\nlang: de\n---\n" + DE})  # a changed file: the path still rules
    assert run_cli("index", "docs")[0] == 0
    assert _documents(run_cli)["docs/fr/a.md"] == ("fr", "path", "docs/en/a.md")


def test_a_format_6_store_gets_languages_and_groups_from_its_stored_text(workdir: Path, run_cli: RunCli) -> None:
    write_tree(workdir, {"docs/en/a.md": EN, "docs/de/a.md": DE, "notes/b.md": "---\nlang: ja\n---\n# B\n\nb\n"})
    assert run_cli("index", "docs", "notes")[0] == 0
    db_path = workdir / "knowledge" / "default" / "knowledge.db"
    conn = db.open_writer(db_path)
    try:
        conn.execute("DROP INDEX documents_translation_group")
        for column in schema.LANGUAGE_COLUMNS:
            conn.execute(f"ALTER TABLE documents DROP COLUMN {column}")
        schema.write_meta(conn, {schema.FORMAT_VERSION_KEY: "6"})
    finally:
        conn.close()
    code, out, err = run_cli("index", "docs", "notes")
    assert code == 0 and "unchanged=3" in out, out + err  # nothing is read again
    assert _documents(run_cli) == {"docs/de/a.md": ("de", "path", "docs/de/a.md"),
                                   "docs/en/a.md": ("en", "path", "docs/de/a.md"),
                                   "notes/b.md": ("ja", "front matter", None)}
