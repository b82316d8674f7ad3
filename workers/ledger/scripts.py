"""The ledger's Lua scripts, kept as .lua files in workers/ledger/lua/ and loaded by name."""

from __future__ import annotations

from functools import cache
from importlib import resources

import redis
from redis.commands.core import Script


@cache
def source(name: str) -> str:
    """The text of lua/<name>.lua (installed as package data)."""
    return resources.files("workers.ledger").joinpath("lua", f"{name}.lua").read_text(encoding="utf-8")


class Scripts:
    """Scripts registered on one Redis client, each once, on first use."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self._registered: dict[str, Script] = {}

    def __getitem__(self, name: str) -> Script:
        script = self._registered.get(name)
        if script is None:
            script = self._registered[name] = self.client.register_script(source(name))
        return script
