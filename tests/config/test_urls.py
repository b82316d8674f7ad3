"""Which URLs may be indexed, their stored spelling, and knowledge.urls validation."""

from __future__ import annotations

from pathlib import Path

import pytest

from config.errors import ConfigError
from config.loader import load_settings
from config.urls import looks_like_url, normalize_url, normalize_urls


def test_a_url_is_stored_with_scheme_and_host_lower_cased_and_no_fragment() -> None:
    assert normalize_url(" HTTPS://Docs.Example.NET:8443/Guide.html?x=1#intro ") == \
        "https://docs.example.net:8443/Guide.html?x=1"
    assert normalize_url("http://example.net") == "http://example.net/"
    assert normalize_urls(["http://h/a#1", "http://h/a", "http://h/b"]) == ["http://h/a", "http://h/b"]


@pytest.mark.parametrize(("raw", "reason"), [
    ("file:///etc/passwd", "only http:// and https:// URLs are indexed, not file:"),
    ("ftp://host/file.txt", "not ftp:"),
    ("javascript:alert(1)", "not javascript:"),
    ("docs/guide.md", "is not a URL"),
    ("http:///path", "has no host"),
    ("https://user:secret@host/page", "carries credentials"),
    ("http://host/a b", "whitespace or control characters"),
    ("http://host/\x1b[31m", "whitespace or control characters"),
    ("http://host:99999/", "not a valid URL"),
])
def test_other_schemes_and_malformed_urls_are_refused_with_the_reason(raw: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason.replace("(", r"\(")):
        normalize_url(raw)


def test_command_line_arguments_with_a_scheme_are_urls_and_paths_are_not() -> None:
    for arg in ("https://h/p", "ftp://h/f", "file:///etc/passwd", "file:notes.md", "FILE:x"):
        assert looks_like_url(arg), arg
    for arg in ("docs", "docs/guide.md", "notes:2024.md", "./http:/x", "C:"):
        assert not looks_like_url(arg), arg


def test_a_bad_configured_url_names_its_entry(tmp_path: Path) -> None:
    config = tmp_path / "knowledge.yaml"
    config.write_text("knowledge:\n  urls:\n    - https://a.example/x\n    - http://b.example/\n"
                      "    - file:///etc/passwd\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_settings(str(config), environ={})
    assert "knowledge.urls[2]" in str(info.value) and "file:" in str(info.value)
    assert info.value.exit_code == 2
    config.write_text("knowledge:\n  urls: [https://a.example/x]\n", encoding="utf-8")
    assert load_settings(str(config), environ={}).urls == ("https://a.example/x",)
