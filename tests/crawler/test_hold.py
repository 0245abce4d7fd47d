"""crawler.engine.hold: a best-first crawl waits a moment for a promising page's links."""

from __future__ import annotations

from crawler.engine.hold import HOLD_MAX_S, PROMISING, Hold
from crawler.frontier.best_first import BestFirstFrontier
from crawler.frontier.hosts import FetchJob, Frontier


def test_poor_urls_wait_while_a_promising_page_is_unfinished_for_a_bounded_time() -> None:
    frontier = BestFirstFrontier(per_host=4, delay_s=0.0, check_robots=False)
    hold = Hold(frontier)
    frontier.add("http://a.test/good", 1, 0.0, priority=PROMISING + 0.5)
    frontier.add("http://a.test/poor", 1, 0.0, priority=0.05)
    good = hold.next(0.0)
    assert isinstance(good, FetchJob) and good.url.endswith("/good")
    hold.started(good)
    assert hold.next(0.0) == HOLD_MAX_S  # the poor one waits: a time to come back at
    assert hold.next(0.5) == HOLD_MAX_S  # still the same hold, not a new one
    late = hold.next(HOLD_MAX_S + 0.01)  # held long enough: the poor one goes
    assert isinstance(late, FetchJob) and late.url.endswith("/poor")


def test_a_finished_promising_page_or_a_good_url_ends_the_hold() -> None:
    frontier = BestFirstFrontier(per_host=4, delay_s=0.0, check_robots=False)
    hold = Hold(frontier)
    frontier.add("http://a.test/good", 1, 0.0, priority=1.0)
    frontier.add("http://a.test/poor", 1, 0.0, priority=0.0)
    good = hold.next(0.0)
    assert isinstance(good, FetchJob)
    hold.started(good)
    assert isinstance(hold.next(0.0), float)
    frontier.add("http://b.test/better", 1, 0.1, priority=2.0)  # another host, good
    better = hold.next(0.1)
    assert isinstance(better, FetchJob) and better.url.endswith("/better")
    hold.started(better)
    hold.finished(good)
    hold.finished(better)  # nothing promising in flight: no wait
    poor = hold.next(0.2)
    assert isinstance(poor, FetchJob) and poor.url.endswith("/poor")


def test_a_crawl_without_a_query_never_waits() -> None:
    frontier = Frontier(per_host=4, delay_s=0.0, check_robots=False)
    hold = Hold(frontier)
    frontier.add("http://a.test/1", 1, 0.0)
    frontier.add("http://a.test/2", 1, 0.0)
    first = hold.next(0.0)
    assert isinstance(first, FetchJob)
    hold.started(first)
    assert isinstance(hold.next(0.0), FetchJob)
