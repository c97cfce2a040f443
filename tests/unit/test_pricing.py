"""Usage priced from the one dated price table."""

from __future__ import annotations

import pytest

from pagefleet.pricing import REGIONS, Usage, Worker, as_dict, cost, price_table


def test_the_table_is_dated_sourced_and_covers_both_regions() -> None:
    table = price_table()
    assert table["as_of"] and table["source"]
    assert set(REGIONS) <= set(table["regions"])


def test_a_slot_second_is_a_share_of_the_task() -> None:
    # One hour of a 1 vCPU / 2 GB x86 task with two slots, in us-east-1.
    hour = cost(Usage(browser_seconds=3600), "us-east-1", Worker(slots=2))
    assert hour.by_service["fargate"] == pytest.approx((0.04048 + 2 * 0.004445) / 2)
    spot = cost(Usage(browser_seconds=3600), "us-east-1", Worker(slots=2, spot=True))
    assert spot.by_service["fargate"] == pytest.approx(hour.by_service["fargate"] * 0.3)


def test_usage_adds_up_and_each_service_is_priced() -> None:
    one = Usage(jobs=1, browser_seconds=10, api_requests=3, queue_requests=4, table_writes=6)
    thousand = one.scaled(1000)
    assert thousand == sum([one] * 999, one)
    priced = as_dict(cost(thousand, "ap-south-1"))
    assert priced["region"] == "ap-south-1" and priced["prices_as_of"]
    assert priced["by_service_usd"]["api_gateway"] == pytest.approx(3000 * 0.0000035)
    assert priced["total_usd"] > priced["by_service_usd"]["fargate"] > 0
    mumbai, virginia = cost(thousand, "ap-south-1").total, cost(thousand, "us-east-1").total
    assert mumbai > virginia  # Mumbai's Fargate and DynamoDB list prices are higher
