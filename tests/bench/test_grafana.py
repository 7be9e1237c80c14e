"""The Grafana board in docs/ is the one bench/grafana.py makes, and its evaluator of the
board's PromQL (what draws the picture in docs/screenshots/) computes as Prometheus."""

from __future__ import annotations

import json

import pytest

from bench.grafana import BOARD, Labels, Scrape, board, evaluate

NO_LABELS: Labels = frozenset()


def test_the_board_in_docs_is_current() -> None:
    assert json.loads(BOARD.read_text()) == board()


def _scrapes(values: list[dict[str, float]]) -> list[tuple[float, Scrape]]:
    out = []
    for t, sample in enumerate(values):
        scrape: Scrape = {}
        for key, v in sample.items():
            name, _, le = key.partition("@")
            labels = frozenset({("le", le)}) if le else NO_LABELS
            scrape[(name, labels)] = v
        out.append((float(t * 10), scrape))
    return out


def test_rate_is_the_increase_per_second_and_survives_a_reset() -> None:
    scrapes = _scrapes([{"c_total": 0}, {"c_total": 50}, {"c_total": 100}, {"c_total": 20}])
    rates = evaluate("sum(rate(c_total[5m]))", scrapes)[NO_LABELS]
    # at 30 s: 50 + 50 + 20 (after the reset to 0) over 30 s
    assert rates[:2] == [(10.0, 5.0), (20.0, 5.0)]
    assert rates[2][1] == pytest.approx(4.0)


def test_histogram_quantile_interpolates_within_the_bucket() -> None:
    buckets = {"h_bucket@1.0": 0.0, "h_bucket@2.0": 0.0, "h_bucket@+Inf": 0.0}
    later = {"h_bucket@1.0": 10.0, "h_bucket@2.0": 30.0, "h_bucket@+Inf": 40.0}
    scrapes = _scrapes([buckets, later])
    p50 = evaluate("histogram_quantile(0.5, sum by (le) (rate(h_bucket[5m])))", scrapes)
    # rank 20 of 40: 10 below 1.0, the next 20 in (1, 2]: halfway, 1.5
    [(t, value)] = p50[NO_LABELS]
    assert t == 10.0
    assert value == pytest.approx(1.5)
