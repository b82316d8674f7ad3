"""Statuses are defined once: every one a tool description promises is a Status, printed as its plain string."""

from __future__ import annotations

import json
import re

from query import tools
from query.status import Status


def test_every_status_a_tool_description_names_is_a_status() -> None:
    for spec in tools.TOOLS.values():
        listed = re.search(r"`status` \(([^)]*)\)", spec.description)
        assert listed, f"{spec.name} names no statuses"
        named = [s.strip() for s in listed.group(1).split(",")]
        assert named and all(name in set(Status) for name in named), (spec.name, named)


def test_a_status_prints_as_its_plain_string_in_json_and_text() -> None:
    for status in Status:
        assert json.dumps({"status": status}) == json.dumps({"status": status.value})
        assert f"{status}" == str(status) == status.value
        by_value: dict[str, int] = {status.value: 1}
        assert by_value[status] == 1  # a lookup by the JSON string finds the member, and back
