"""A failed status is recorded in the words every face shows (campaigns.failure_reasons)."""

from __future__ import annotations

import pytest

from campaigns import failure_reasons as fr
from campaigns.gateway_events import STATUS_RULES


@pytest.mark.parametrize(
    ("code", "recorded", "shown"),
    [
        ("404", "not on WhatsApp (code 404)", fr.NOT_ON_APP),
        ("463", f"{fr.RESTRICTED} (code 463)", fr.RESTRICTED),
        ("500", "failed by the gateway (code 500)", "failed by the gateway (code 500)"),
        (None, "failed by the gateway", "failed by the gateway"),
    ],
)
def test_the_recorded_error_reads_as_the_reason_shown(
    code: str | None, recorded: str, shown: str
) -> None:
    assert fr.gateway_failure(code) == recorded
    assert fr.plain_reason(recorded, code) == shown


def test_the_bulk_statement_records_the_same_words() -> None:
    assert dict(STATUS_RULES.code_errors) == {
        code: fr.gateway_failure(code) for code, _ in fr.GATEWAY_CODE_WORDS
    }
