"""`tests/reports.odd_spans`, the journeys tests' check that every time in a report is a span of the run."""

from tests.reports import odd_spans


def test_clock_sums_and_lost_signs_are_odd_while_rates_shares_and_unmeasured_times_are_not():
    report = {"ok_s": 0.4, "runs": [{"ttft_s": 3.4e9}, {"ttft_s": 0.2}], "lag_s": -0.1, "end_s": float("inf"),
              "page_share_median_s": -0.03, "page_first_sound_median_s": float("nan"), "tokens_per_s": 577.0,
              "count": 5, "flag_s": True}
    assert odd_spans(report, signed=("share",)) == {"/runs[0]/ttft_s": 3.4e9, "/lag_s": -0.1, "/end_s": float("inf")}
    assert odd_spans({"a_share_s": -121.0}, signed=("share",)) == {"/a_share_s": -121.0}
