"""What a search's summary says about the trials at or below its bounds."""
from __future__ import annotations

from dataclasses import replace

import pytest
from softnet.analysis.searches import LossAtOrBelow, summarize_searches
from softnet.campaign.runner import run_campaign
from softnet.campaign.spec import CampaignSpec
from softnet.cli.campaign_cmd import at_or_below_line
from softnet.results.store import Store

# a knee with loss below saturation: trials near the bounds lose a little
SPEC = {"name": "s", "testbed": {"sut": "synthetic"},
        "synthetic": {"o_sat_pps": 400_000, "plr_at_sat": 0.01, "pre_sat_exponent": 4.0, "seed": 5},
        "method": {"kind": "search", "goals": ["ndr", "pdr0.5"], "runs": 2, "duration_s": 1.0, "width": 0.02}}


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    d = tmp_path_factory.mktemp("search")
    return d, run_campaign(CampaignSpec.model_validate(SPEC), d)


def test_trials_at_or_below_each_bound_are_counted_with_all_their_loss(searched):
    tmp_path, cid = searched
    with Store(tmp_path, read_only=True) as store:
        summaries = summarize_searches(store, cid)
        for s in summaries:
            expect_n, expect_over, worst = 0, 0, 0.0  # the synthetic SUT has no host stalls: as read = all
            for r in s.repeats:  # the same count, straight from the stored rows
                rows = store.query("SELECT lost_pkts, sent_pkts FROM trials WHERE campaign_id = ? AND run_index = ? "
                                   "AND intended_rate_pps <= ? AND sent_pkts > 0 "
                                   "AND json_extract(result_json, '$.latency_at') IS NULL",
                                   [cid, r.run_index, r.lower_bound_pps])
                expect_n += len(rows)
                expect_over += sum(x["lost_pkts"] / x["sent_pkts"] > s.loss_ratio for x in rows)
                worst = max([worst] + [x["lost_pkts"] / x["sent_pkts"] for x in rows])
            b = s.at_or_below
            assert (b.trials, b.over_goal, b.over_goal_as_read, b.host_stall_loss) == (
                expect_n, expect_over, expect_over, "set_apart"), s.goal
            assert b.max_loss_ratio == worst
    ndr = next(s for s in summaries if s.goal == "NDR")
    assert ndr.at_or_below.trials >= 2 and ndr.to_dict()["at_or_below_lower_bound"]["trials"] == ndr.at_or_below.trials


def test_the_line_says_how_many_lost_and_what_a_tester_counting_all_loss_reports(searched):
    tmp_path, cid = searched
    with Store(tmp_path, read_only=True) as store:
        ndr = next(s for s in summarize_searches(store, cid) if s.goal == "NDR")
    assert at_or_below_line(replace(ndr, at_or_below=LossAtOrBelow(12, 0, 0, 0.0, "set_apart"))) is None
    line = at_or_below_line(replace(ndr, at_or_below=LossAtOrBelow(12, 7, 1, 0.012, "set_apart")))
    assert line.startswith("synthetic NDR: 7 of 12 trials at or below the lower bound lost more than NDR allows "
                           "(up to 1.20% of their packets); 6 of them only through loss host stalls explain")
    assert "a tester counting all loss (RFC 2544, MLRsearch) reports a lower NDR (--host-stall-loss count)" in line
    line = at_or_below_line(replace(ndr, at_or_below=LossAtOrBelow(12, 1, 1, 0.0001, "count")))
    assert "1 of 12" in line and "not in every trial" in line and "RFC 2544" not in line
