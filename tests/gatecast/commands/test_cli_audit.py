"""Which CLI commands the audit log records, and what of their arguments."""

from __future__ import annotations

from gatecast.cli import app
from gatecast.commands.common import _redacted, command_path, is_changing


def test_the_command_words_are_found_in_argv() -> None:
    assert command_path(app, ["campaign", "pause", "3"]) == (["campaign", "pause"], ["3"])
    assert command_path(app, ["users", "key", "create", "olga", "--role", "viewer"]) == (
        ["users", "key", "create"],
        ["olga", "--role", "viewer"],
    )
    assert command_path(app, ["nonsense"]) == ([], ["nonsense"])


def test_only_changes_are_recorded() -> None:
    changing = [["campaign", "pause"], ["contacts", "import"], ["users", "key", "revoke"]]
    for path in changing:
        assert is_changing(path, []), path
    for path in (["campaign", "list"], ["audit", "export"], ["serve"], ["users", "key", "list"]):
        assert not is_changing(path, []), path
    assert not is_changing(["campaign", "pause"], ["3", "--help"])


def test_secret_option_values_are_hidden() -> None:
    assert _redacted(["olga", "--password", "hunter2", "--token=abc", "--password-stdin"]) == [
        "olga",
        "--password",
        "***",
        "--token=***",
        "--password-stdin",
    ]
