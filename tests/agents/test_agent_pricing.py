"""The price table and the usage meter."""
from __future__ import annotations

import pytest

from autogk_git import config as config_mod
from autogk_git.agents import pricing
from autogk_git.errors import ConfigError


def test_prices_by_alias_dated_id_and_override():
    assert pricing.price_of("claude-sonnet-5-5") == [2.0, 10.0, 2.5, 0.2]
    assert pricing.price_of("claude-sonnet-4-5-20250929") == [3.0, 15.0, 3.75, pytest.approx(0.3)]
    assert pricing.price_of("claude-unknown") is None
    assert pricing.price_of("claude-sonnet-5-5", {"claude-sonnet-5-5": [1, 2, 3, 4]}) == [1, 2, 3, 4]


def test_meter_sums_requests_and_prices_cache_tokens():
    m = pricing.Meter("claude-haiku-4-5")
    m.add({"input_tokens": 1_000_000, "output_tokens": 0})
    m.add({"input_tokens": 0, "output_tokens": 100_000, "cache_creation_input_tokens": 1_000_000,
           "cache_read_input_tokens": 1_000_000})
    u = m.as_usage()
    assert u["cost_usd"] == pytest.approx(1.0 + 0.5 + 1.25 + 0.1)
    assert u["tokens"] == 3_100_000 and u["requests"] == 2 and [r["usd"] for r in u["per_request"]] == [1.0, 1.85]
    total = pricing.add_usage({}, u)
    pricing.add_usage(total, {"cost_usd": 0.15, "tokens": 10, "model": "x", "priced": True})
    assert total["cost_usd"] == pytest.approx(2.85 + 0.15) and total["tokens"] == 3_100_010 and "model" not in total


def test_a_bad_price_table_names_the_key():
    with pytest.raises(ConfigError, match=r"\[agent\] prices"):
        config_mod.parse({"agent": {"prices": {"m": [1]}}}, environ={})
    with pytest.raises(ConfigError, match="AUTOGK_AGENT_PRICES"):
        config_mod.parse({}, environ={"AUTOGK_AGENT_PRICES": "not json"})
    ok = config_mod.parse({}, environ={"AUTOGK_AGENT_PRICES": '{"m": [1, 2]}'})
    assert ok.agent.prices == {"m": [1, 2]}
    assert '# prices = {}' in config_mod.render_default("main", "t")
