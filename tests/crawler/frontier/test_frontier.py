"""crawler.frontier.hosts: pure scheduling, time passed in. Properties checked with hypothesis."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from crawler.frontier.best_first import BestFirstFrontier
from crawler.frontier.hosts import EARLY_S, MAX_REFUSALS_PER_CALL, FetchJob, Frontier
from crawler.policy.robots import RobotsRules


def drain(frontier: Frontier, now: float) -> list[FetchJob]:
    jobs = []
    while isinstance(job := frontier.next(now), FetchJob):
        jobs.append(job)
    return jobs


def test_robots_first_then_pages_in_fifo_order() -> None:
    f = Frontier(per_host=2, delay_s=0.0)
    for i in range(3):
        assert f.add(f"http://a.com/{i}", 1, 0.0)
    assert not f.add("http://a.com/0", 1, 0.0)
    robots = f.next(0.0)
    assert (
        isinstance(robots, FetchJob) and robots.robots and robots.url == "http://a.com/robots.txt"
    )
    assert f.next(0.0) is None  # nothing may start before robots.txt is known
    f.release(robots, 0.0)
    assert f.next(0.0) is None
    f.robots_done(robots, None, None, 0.0)
    assert [j.url for j in drain(f, 0.0)] == ["http://a.com/0", "http://a.com/1"]
    assert f.in_flight == 2 and f.queued == 1


def test_delay_and_per_host_limit() -> None:
    f = Frontier(per_host=1, delay_s=2.0, check_robots=False)
    f.add("http://a.com/1", 0, 0.0)
    f.add("http://a.com/2", 0, 0.0)
    first = f.next(10.0)
    assert isinstance(first, FetchJob)
    assert f.next(10.0) is None  # per-host limit reached: wait for a release
    f.release(first, 11.0)
    assert f.next(11.0) == 12.0  # released, but the delay runs from the previous start
    assert isinstance(f.next(12.0), FetchJob)
    assert f.empty is False and f.queued == 0


def test_a_fast_host_without_a_floor_delay_starts_in_bursts_that_keep_its_pace() -> None:
    """No floor delay: the adaptive delay (here 0.1 ms) lets jobs start up to EARLY_S ahead
    of the host's next start, in a burst, and each start counts from the planned one, so that
    over time the host gets no more than one start per delay (and one burst)."""
    f = Frontier(per_host=1000, delay_s=0.0, check_robots=False)
    for i in range(500):
        f.add(f"http://a.com/{i}", 0, 0.0)
    first = f.next(0.0)
    assert isinstance(first, FetchJob)
    f.release(first, 0.0064, latency_s=0.0064, status=200)
    delay = 0.0064 / 1000  # latency / per_host: the adaptive delay, 6.4 us
    now = 1.0
    burst = drain(f, now)
    assert len(burst) == 1 + round(EARLY_S / delay)  # at now, then one per delay up to now + 1 ms
    wait = f.next(now)
    assert isinstance(wait, float) and wait > now + EARLY_S
    # A dispatcher that asks again whenever it is told to: the pace holds over the stretch.
    starts = len(burst)
    while starts < 400:
        now = wait if isinstance(wait, float) else now
        starts += len(drain(f, now))
        wait = f.next(now)
    assert starts <= (now - 1.0 + EARLY_S) / delay + 2


def test_a_floor_delay_a_pause_or_a_retry_is_kept_to_the_letter() -> None:
    f = Frontier(per_host=10, delay_s=0.0004, check_robots=False)  # --delay 0.4 ms
    for i in range(5):
        f.add(f"http://a.com/{i}", 0, 0.0)
    assert len(drain(f, 1.0)) == 1
    assert f.next(1.0) == 1.0004  # within EARLY_S, but a floor delay is not bent
    g = Frontier(per_host=10, delay_s=0.0, check_robots=False)
    for i in range(5):
        g.add(f"http://b.com/{i}", 0, 0.0)
    job = g.next(1.0)
    assert isinstance(job, FetchJob)
    g.release(job, 1.0, latency_s=0.01, status=503, paused_until=1.0005)  # Retry-After
    assert g.next(1.0) == 1.0005  # no early start into a pause either
    h = Frontier(per_host=10, delay_s=0.0, check_robots=False)  # a retry's backoff neither
    h.add("http://c.com/1", 0, 0.0)
    job = h.next(0.0)
    assert isinstance(job, FetchJob)
    h.release(job, 1.0, latency_s=0.01, status=502)
    h.retry(job, 11.0, 1.0)
    assert h.next(10.9995) == 11.0
    assert isinstance(h.next(11.0), FetchJob)
    r = Frontier(per_host=10, delay_s=0.0)  # nor robots.txt asked again later
    r.add("http://d.com/1", 0, 0.0)
    robots = r.next(1.0)
    assert isinstance(robots, FetchJob) and robots.robots
    r.release(robots, 1.0)
    r.robots_retry(robots, 2.0, 1.0)
    assert r.next(1.9995) == 2.0


def test_crawl_delay_and_robots_rules() -> None:
    f = Frontier(per_host=4, delay_s=0.5, user_agent="MyBot")
    f.add("http://a.com/private/x", 0, 0.0)
    f.add("http://a.com/public", 0, 0.0)
    robots = f.next(0.0)
    assert isinstance(robots, FetchJob)
    rules = RobotsRules.parse("User-agent: *\nDisallow: /private\nCrawl-delay: 3")
    f.release(robots, 1.0)
    f.robots_done(robots, rules, rules.crawl_delay("MyBot"), 1.0)
    assert f.next(1.0) == 4.0
    job = f.next(4.0)
    assert isinstance(job, FetchJob) and job.url == "http://a.com/public"
    assert f.drain_skipped() == [("http://a.com/private/x", 0, "robots")]


def test_hosts_are_independent() -> None:
    f = Frontier(per_host=1, delay_s=5.0, check_robots=False)
    for host in ("a", "b", "c"):
        f.add(f"http://{host}.com/", 0, 0.0)
        f.add(f"http://{host}.com/2", 0, 0.0)
    assert sorted(j.origin for j in drain(f, 0.0)) == [
        "http://a.com",
        "http://b.com",
        "http://c.com",
    ]


def test_a_late_request_holds_the_next_one_of_its_host_back() -> None:
    f = Frontier(per_host=2, delay_s=1.0, check_robots=False)
    for i in range(3):
        f.add(f"http://a.com/{i}", 0, 0.0)
    first = f.next(0.0)
    assert isinstance(first, FetchJob) and f.sending(first, 0.0) == 0.0  # on time
    second = f.next(1.0)
    assert isinstance(second, FetchJob)
    assert f.sending(second, 1.7) == 1.7  # its task ran 0.7 s late: it goes now ...
    f.release(first, 1.8)
    assert f.next(2.0) == 2.7  # ... and the host's next start moves with it
    assert isinstance(f.next(2.7), FetchJob)


def test_requests_go_out_the_floor_delay_apart_whatever_their_tasks_lag() -> None:
    f = Frontier(per_host=4, delay_s=1.0, check_robots=False)
    for i in range(4):
        f.add(f"http://a.com/{i}", 0, 0.0)
    jobs = [f.next(t) for t in (0.0, 1.0, 2.0)]
    assert all(isinstance(j, FetchJob) for j in jobs)
    f.add("http://b.com/", 0, 2.0)
    # the first task ran 1.9 s late, the two others on time: sent 1.0 s apart all the same
    sent = [f.sending(jobs[1], 1.0), f.sending(jobs[0], 1.9), f.sending(jobs[2], 2.0)]
    assert sent == [1.0, 2.0, 3.0]
    b = f.next(3.0)  # the other hosts go on as before
    assert isinstance(b, FetchJob) and b.origin == "http://b.com"
    assert f.sending(b, 3.0) == 3.0
    assert f.next(3.0) == 4.0


actions = st.lists(
    st.tuples(
        st.sampled_from(["add", "next", "send", "release", "tick", "raise"]), st.integers(0, 30)
    ),
    max_size=200,
)


@settings(max_examples=150, deadline=None)
@given(actions, st.integers(1, 3), st.sampled_from([0.0, 0.5, 2.0]), st.booleans())
# two jobs of a host handed out 2 s apart, the first one's task running late: sent together?
@example([("add", 0), ("add", 3), ("next", 0), ("tick", 20), ("next", 0), ("send", 0),
          ("send", 0)], 2, 2.0, False)  # fmt: skip
def test_politeness_invariants(
    ops: list[tuple[str, int]], per_host: int, delay: float, best_first: bool
) -> None:
    """Also for a best-first frontier whose queued URLs move up (``raise_priority``): every
    URL once, the per-host limit, the delays, and in-flight and queued counts that add up."""
    kind = BestFirstFrontier if best_first else Frontier
    f = kind(per_host=per_host, delay_s=delay, check_robots=False)
    added: set[str] = set()
    now = 0.0
    running: list[FetchJob] = []
    unsent: list[FetchJob] = []
    handed: set[str] = set()
    last_start: dict[str, float] = {}
    last_sent: dict[str, float] = {}
    for op, n in ops:
        if op == "add":
            url = f"http://h{n % 3}.com/p{n}"
            if f.add(url, 0, now, priority=n % 4):
                added.add(url)
        elif op == "raise":
            f.raise_priority(f"http://h{n % 3}.com/p{n}", 1 + n % 3, now)
        elif op == "tick":
            now += n / 10
        elif op == "send" and unsent:
            job = unsent.pop(n % len(unsent))
            at = f.sending(job, now)  # jobs' tasks may send in any order, at any lag
            assert at >= now
            if job.origin in last_sent:
                assert at - last_sent[job.origin] >= delay - 1e-9
            last_sent[job.origin] = at
        elif op == "release" and running:
            job = running.pop(n % len(running))
            if job in unsent:
                unsent.remove(job)
            f.release(job, now)
        elif op == "next":
            job = f.next(now)
            if isinstance(job, float):
                assert job > now
            elif job is not None:
                assert job.url not in handed
                handed.add(job.url)
                if job.origin in last_start:
                    assert now - last_start[job.origin] >= delay - 1e-9
                last_start[job.origin] = now
                running.append(job)
                unsent.append(job)
                assert sum(j.origin == job.origin for j in running) <= per_host
        assert f.in_flight == len(running)
        assert f.queued == len(added - handed)


def test_a_redirect_hop_keeps_its_hosts_pace() -> None:
    """A hop waits for its host's next start and floor delay, then counts as a start; one
    that would wait longer than its fetch has left is refused, and changes nothing."""
    f = Frontier(per_host=2, delay_s=0.5, check_robots=False)
    f.add("http://a.com/1", 0, 0.0)
    f.add("http://a.com/2", 0, 0.0)
    job = f.next(0.0)
    assert isinstance(job, FetchJob)
    assert f.sending(job, 0.0) == 0.0
    assert f.hop("http://a.com/3", 0.1, 10.0) == 0.4  # 0.5 s after the job's start
    assert f.next(0.6) == 1.0  # the host's next start moved past the hop
    assert f.hop("http://a.com/4", 0.6, 0.3) is None  # would wait 0.4 > 0.3 s left
    assert f.next(1.0) is not None
    assert f.hop("http://b.com/x", 5.0, 1.0) == 0.0  # a host not seen yet: at once


def test_a_gate_drops_queued_pages_as_it_is_asked() -> None:
    f = Frontier(per_host=4, delay_s=0.0, check_robots=False)
    for name in ("keep", "drop", "keep2"):
        f.add(f"http://a.com/{name}", 2, 0.0)
    f.gate = lambda url: "url-template" if url.endswith("/drop") else None
    assert [job.url for job in drain(f, 1.0)] == ["http://a.com/keep", "http://a.com/keep2"]
    assert f.drain_skipped() == [("http://a.com/drop", 2, "url-template")]


def test_refusals_by_the_thousand_come_back_to_the_caller_between_rounds() -> None:
    """A host whose whole queue robots.txt refuses: ``next`` returns ``now`` (come back at
    once) after ``MAX_REFUSALS_PER_CALL`` of them, so the event loop runs between rounds."""
    f = Frontier(per_host=1, delay_s=0.0)
    n = 3 * MAX_REFUSALS_PER_CALL + 5
    for i in range(n):
        f.add(f"http://a.com/x{i}", 1, 0.0)
    f.add("http://a.com/ok", 1, 0.0)
    robots = f.next(0.0)
    assert isinstance(robots, FetchJob) and robots.robots
    f.release(robots, 0.0)
    f.robots_done(robots, RobotsRules.parse("User-agent: *\nAllow: /ok\nDisallow: /x"), None, 0.0)
    rounds, job = 0, f.next(0.0)
    while not isinstance(job, FetchJob):
        assert job == 0.0
        rounds += 1
        job = f.next(0.0)
    assert job.url == "http://a.com/ok" and rounds == 3
    assert len(f.drain_skipped()) == n


def test_only_failures_of_the_servers_slow_a_host() -> None:
    f = Frontier(per_host=1, delay_s=0.0, check_robots=False)
    for i in range(3):
        f.add(f"http://a.com/{i}", 0, 0.0)
    job = f.next(0.0)
    assert isinstance(job, FetchJob)
    f.release(job, 0.01, latency_s=0.01)  # the crawler stopped it (SSRF, too large ...)
    job = f.next(0.01)
    assert isinstance(job, FetchJob)  # no backoff
    f.release(job, 0.02, latency_s=0.01, failed=True)  # a timeout, a reset
    assert f.next(0.02) == 0.02 + 1.0  # backed off, from now


def test_best_first_within_and_across_hosts_and_raised_links_move_up() -> None:
    """A best-first frontier: among the hosts that may start now, the best queued URL
    first; a URL another page links to moves up by its evidence (added, not replaced), and
    its old place is skipped, never handed out twice."""
    f = BestFirstFrontier(per_host=1, delay_s=0.0, check_robots=False)
    f.add("http://a.com/low", 1, 0.0, priority=0.2)
    f.add("http://a.com/mid", 1, 0.0, priority=1.0)
    f.add("http://b.com/high", 1, 0.0, priority=1.5)
    f.add("http://c.com/none", 1, 0.0, priority=0.0)
    assert f.raise_priority("http://a.com/low", 0.7, 0.0)  # 0.9: still under mid
    assert f.raise_priority("http://c.com/none", 1.2, 0.0)  # 1.2: between high and mid
    assert not f.raise_priority("http://a.com/elsewhere", 5.0, 0.0)  # not queued here
    assert f.priority_of("http://a.com/low") == 0.2 + 0.7
    order = []
    while isinstance(job := f.next(0.0), FetchJob):
        order.append(job.url)
        f.release(job, 0.0)
    assert order == ["http://b.com/high", "http://c.com/none", "http://a.com/mid",
                     "http://a.com/low"]  # fmt: skip
    assert f.queued == 0 and f.empty
    assert not f.raise_priority("http://a.com/low", 1.0, 0.0)  # fetched: left alone


def test_many_raises_keep_a_hosts_heap_small() -> None:
    f = BestFirstFrontier(per_host=1, delay_s=0.0, check_robots=False)
    for i in range(10):
        f.add(f"http://a.com/{i}", 1, 0.0)
    for round_ in range(2000):
        f.raise_priority(f"http://a.com/{round_ % 10}", 0.001, 0.0)
    assert len(f._hosts["http://a.com"].queue) <= 2 * 10 + 1024 + 1
    urls = [job.url for job in drain_released(f)]
    assert sorted(urls) == sorted(f"http://a.com/{i}" for i in range(10))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 29), st.floats(-0.5, 3.0)), max_size=60))
def test_raises_in_one_call_order_the_urls_as_one_at_a_time(
    raises: list[tuple[int, float]],
) -> None:
    """``raise_priorities`` (a page's known links at once) leaves the frontier as the same
    raises one ``raise_priority`` each would: the same priorities, the same order out, on
    every host; URLs not queued, repeated ones and ``by <= 0`` included."""
    one, batched = (BestFirstFrontier(per_host=1, delay_s=0.0, check_robots=False)
                    for _ in range(2))  # fmt: skip
    for f in (one, batched):
        for i in range(24):  # p24..p29 are never queued
            f.add(f"http://h{i % 3}.com/p{i}", 1, 0.0, priority=(i * 7 % 5) / 2)
    pairs = [(f"http://h{n % 3}.com/p{n}", by) for n, by in raises]
    moved = [one.raise_priority(url, by, 0.0) for url, by in pairs]
    assert batched.raise_priorities(pairs, 0.0) == any(moved)
    for i in range(30):
        url = f"http://h{i % 3}.com/p{i}"
        assert batched.priority_of(url) == one.priority_of(url)
    assert [j.url for j in drain_released(batched)] == [j.url for j in drain_released(one)]


def drain_released(frontier: Frontier) -> list[FetchJob]:
    jobs = []
    while isinstance(job := frontier.next(0.0), FetchJob):
        jobs.append(job)
        frontier.release(job, 0.0)
    return jobs
