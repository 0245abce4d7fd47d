"""The cost of one robots.txt check, per URL, by rule count and shape: old matcher and new.

    python bench/robots_bench.py [--counts 10,100,1000,15000] [--seconds 0.2] [--seed 1]

Times ``RobotsRules.is_allowed`` per URL, on URLs that match one of the rules and on URLs
that match none (half each), for robots.txt files of one group with N distinct rules:

  wild-slash   wildcard rules whose head is "/": ``/*w``, ``/*w1*w2$``, ``/*w?``
  wild-heads   wildcard rules with distinct literal heads: ``/dirN/*.php``, ``/w/*w2``
  prefix       plain prefix rules: ``/w1/w2``
  exact        ``$``-anchored rules with no wildcard: ``/w1/w2$``
  mixed        the four above, each rule allow or disallow at random
  flood        hostile: every rule's literals occur in the URLs, in the wrong order, so
               every rule is a candidate and none matches (the work budget's case)

and a typical small file (41 prefix rules, 5 wildcard rules). "old" is the matcher this
replaced (one regex alternation of the prefix rules, longest first, then every wildcard or
``$`` rule strongest first), rebuilt here from the same parsed rules and put in the rules'
agent cache, so both columns time the same ``is_allowed`` call. "steps" is the new matcher's
work count per URL (mean / max; ``crawler.policy.robots_match.MAX_MATCH_STEPS`` is the budget). The new
answers are checked against ``_slow_allows`` (every rule, strongest first) on every URL.
Then the parse and compile times of files filled to MAX_ROBOTS_BYTES with each shape.
"""

from __future__ import annotations

import argparse
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from crawler.policy.robots import (
    MAX_ROBOTS_BYTES,
    RobotsRules,
    _normalize_url_path,
    _path_and_query,
)
from crawler.policy.robots_match import MAX_MATCH_STEPS as _MAX_MATCH_STEPS
from crawler.policy.robots_match import Policy as _Policy
from crawler.policy.robots_match import matches_rest as _matches_rest
from crawler.policy.robots_match import slow_allows as _slow_allows

AGENT = "benchbot"
ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"
TYPICAL_ROBOTS = """\
User-agent: *
Disallow: /admin/
Disallow: /cart/
Disallow: /checkout/
Disallow: /account/
Disallow: /login
Disallow: /logout
Disallow: /wp-admin/
Allow: /wp-admin/admin-ajax.php
Disallow: /cgi-bin/
Disallow: /tmp/
Disallow: /private/
Disallow: /api/
Disallow: /user/
Disallow: /users/
Disallow: /static/private/
Disallow: /print/
Disallow: /feed/
Disallow: /trackback/
Disallow: /comments/
Disallow: /tag/
Disallow: /category/x/
Disallow: /page/
Disallow: /node/add
Disallow: /filter/
Disallow: /sort/
Disallow: /en/search
Disallow: /de/suche
Disallow: /fr/recherche
Disallow: /es/buscar
Disallow: /xmlrpc.php
Disallow: /wp-login.php
Disallow: /index.php?
Disallow: /share/
Disallow: /ajax/
Disallow: /internal/
Disallow: /beta/
Disallow: /old/
Disallow: /search
Allow: /search/help
Disallow: /wp-json/
Disallow: /calendar/
Disallow: /*.pdf$
Disallow: /*?sort=
Disallow: /*sessionid=
Disallow: /*/print$
Disallow: /*?*&page=
"""
TYPICAL_URLS = [
    "https://example.com/products/123/widget-blue",
    "https://example.com/admin/settings",
    "https://example.com/search?q=shoes&sort=price",
    "https://example.com/blog/2024/01/a-post-title",
    "https://example.com/docs/manual.pdf",
    "https://example.com/category/x/page/2",
    "https://example.com/",
    "https://example.com/shop/item?id=42&sessionid=abc",
]


@dataclass(frozen=True, slots=True)
class Shape:
    rules: list[tuple[bool, str]]  # (allow, pattern)
    urls: list[str]


class Words:
    """Distinct random words, so that N rules are N distinct rules."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.seen: set[str] = set()

    def __call__(self, low: int = 5, high: int = 8) -> str:
        while True:
            word = "".join(self.rng.choices(ALPHABET, k=self.rng.randint(low, high)))
            if word not in self.seen:
                self.seen.add(word)
                return word


def wild_slash(word: Words, i: int) -> str:
    return (f"/*{word()}", f"/*{word()}*{word(3, 5)}$", f"/*{word()}?")[i % 3]


def wild_heads(word: Words, i: int) -> str:
    return f"/dir{i}/*.php" if i % 2 else f"/{word()}/*{word(3, 5)}"


def prefix(word: Words, i: int) -> str:
    return f"/{word()}/{word(3, 6)}"


def exact(word: Words, i: int) -> str:
    return f"/{word()}/{word(3, 6)}$"


MAKERS: dict[str, Callable[[Words, int], str]] = {
    "wild-slash": wild_slash,
    "wild-heads": wild_heads,
    "prefix": prefix,
    "exact": exact,
}


def matching_path(pattern: str, rng: random.Random) -> str:
    """A path that `pattern` matches: each `*` becomes random text, a final `$` goes."""
    body = pattern[:-1] if pattern.endswith("$") else pattern
    filler = ("".join(rng.choices(ALPHABET, k=rng.randint(0, 6))) for _ in range(body.count("*")))
    return re.sub(r"\*", lambda _: next(filler), body)


def miss_path(word: Words, rng: random.Random) -> str:
    return f"/products/{word()}/{word()}-{rng.randint(1, 999)}.html?page={rng.randint(1, 9)}"


def make_shape(name: str, count: int, rng: random.Random) -> Shape:
    word = Words(rng)
    if name == "flood":
        return flood(count, rng)
    if name == "mixed":
        makers = list(MAKERS.values())
        rules = [(rng.random() < 0.5, rng.choice(makers)(word, i)) for i in range(count)]
    else:
        rules = [(False, MAKERS[name](word, i)) for i in range(count)]
    hits = [matching_path(pattern, rng) for _, pattern in rng.sample(rules, min(50, count))]
    misses = [miss_path(word, rng) for _ in range(50)]
    return Shape(rules, [f"https://example.com{path}" for path in hits + misses])


def flood(count: int, rng: random.Random) -> Shape:
    """Rules "/*b*a" for substrings a before b in the target paths: candidates, never matches."""
    targets = ["/" + "".join(rng.choices(ALPHABET, k=100)) for _ in range(8)]
    rules: set[tuple[bool, str]] = set()
    while len(rules) < count:
        path = rng.choice(targets)
        i = rng.randrange(1, len(path) - 8)
        j = rng.randrange(i + 4, len(path) - 3)
        first, second = path[i : i + 4], path[j : j + 4]
        if not any(re.search(f"{second}.*{first}", target) for target in targets):
            rules.add((False, f"/*{second}*{first}"))
    return Shape(sorted(rules), [f"https://example.com{path}" for path in targets])


def robots_txt(rules: list[tuple[bool, str]]) -> str:
    lines = "".join(f"{'Allow' if allow else 'Disallow'}: {pattern}\n" for allow, pattern in rules)
    return f"User-agent: *\n{lines}"


@dataclass(frozen=True, slots=True)
class OldMatcher:
    """The matcher before the compiled index, as it was, answering `_Matcher.check`'s way."""

    prefixes: re.Pattern[str] | None
    prefix_verdicts: dict[str, tuple[int, bool]]
    patterns: tuple
    crawl_delay_s: float | None

    @classmethod
    def build(cls, policy: _Policy) -> OldMatcher:
        verdicts: dict[str, tuple[int, bool]] = {}
        for rule in policy.rules:
            if rule.plain:
                verdicts.setdefault(rule.head, (rule.rank, rule.allow))
        heads = sorted(verdicts, key=len, reverse=True)
        return cls(
            prefixes=re.compile("|".join(map(re.escape, heads))) if heads else None,
            prefix_verdicts=verdicts,
            patterns=tuple(rule for rule in policy.rules if not rule.plain),
            crawl_delay_s=policy.crawl_delay_s,
        )

    def check(self, path: str) -> tuple[bool, int]:
        rank, allow = 1 << 62, True
        if self.prefixes is not None:
            found = self.prefixes.match(path)
            if found is not None:
                rank, allow = self.prefix_verdicts[found.group()]
        for rule in self.patterns:
            if rule.rank >= rank:
                break
            if path.startswith(rule.head) and _matches_rest(rule, path):
                return rule.allow, 0
        return allow, 0


def per_call_us(rules: RobotsRules, urls: list[str], seconds: float) -> float:
    """Mean µs of one `is_allowed` call, cycling through `urls` for about `seconds`."""
    calls, start = 0, time.perf_counter()
    while True:
        for url in urls:
            rules.is_allowed(AGENT, url)
        calls += len(urls)
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return elapsed / calls * 1e6


def measure(robots: str, urls: list[str], seconds: float) -> tuple[float, float, str, int, int]:
    """(old µs, new µs, steps "mean / max", URLs over the budget, answers that differ from
    `_slow_allows` on the others)."""
    new = RobotsRules.parse(robots)
    policy = new._policy(AGENT)
    assert policy is not None
    matcher = new._matcher(AGENT)
    assert matcher is not None
    paths = [_normalize_url_path(_path_and_query(url)) for url in urls]
    checks = [matcher.check(path) for path in paths]
    steps = [count for _, count in checks]
    wrong = sum(
        allowed != _slow_allows(policy, path)
        for (allowed, count), path in zip(checks, paths, strict=True)
        if count <= _MAX_MATCH_STEPS
    )
    old = RobotsRules.parse(robots)
    old._cache[AGENT] = OldMatcher.build(policy)
    old_us = per_call_us(old, urls, seconds)
    new_us = per_call_us(new, urls, seconds)
    over = sum(count > _MAX_MATCH_STEPS for count in steps)
    return old_us, new_us, f"{sum(steps) / len(steps):.1f} / {max(steps)}", over, wrong


def compile_times(name: str, rng: random.Random) -> tuple[int, int, float, float]:
    """(rules, bytes, parse ms, compile ms) for a file of shape `name` filled to the cap."""
    count = 30_000
    while True:
        shape = make_shape(name, count, rng)
        robots = robots_txt(shape.rules)
        if len(robots) <= MAX_ROBOTS_BYTES:
            break
        count = int(count * MAX_ROBOTS_BYTES / len(robots) * 0.995)
    start = time.perf_counter()
    rules = RobotsRules.parse(robots)
    parsed = time.perf_counter()
    rules.is_allowed(AGENT, "/")
    compiled = time.perf_counter()
    return count, len(robots), (parsed - start) * 1e3, (compiled - parsed) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--counts", default="10,100,1000,15000")
    parser.add_argument("--seconds", type=float, default=0.2, help="timing per cell")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    counts = [int(count) for count in args.counts.split(",")]
    print(f"budget: {_MAX_MATCH_STEPS} steps a URL; 'over': URLs past it (disallowed)")
    header = f"{'shape':<11} {'rules':>6} {'KiB':>6} {'old µs':>10} {'new µs':>8} {'steps':>12}"
    print(f"{header} {'URLs':>5} {'over':>5}")
    cells = [("typical", TYPICAL_ROBOTS, TYPICAL_URLS)]
    for name in [*MAKERS, "mixed", "flood"]:
        for count in counts:
            shape = make_shape(name, count, rng)
            cells.append((name, robots_txt(shape.rules), shape.urls))
    for name, robots, urls in cells:
        assert len(robots) <= MAX_ROBOTS_BYTES, (name, len(robots))
        old_us, new_us, steps, over, wrong = measure(robots, urls, args.seconds)
        rules = robots.count("\n") - 1
        flag = f"  {wrong} ANSWERS DIFFER FROM _slow_allows" if wrong else ""
        print(
            f"{name:<11} {rules:>6} {len(robots) / 1024:>6.0f} {old_us:>10.2f} {new_us:>8.2f}"
            f" {steps:>12} {len(urls):>5} {over:>5}{flag}"
        )
    print(f"\nfiles filled to MAX_ROBOTS_BYTES ({MAX_ROBOTS_BYTES} bytes)")
    print(f"{'shape':<11} {'rules':>6} {'KiB':>6} {'parse ms':>9} {'compile ms':>11}")
    for name in [*MAKERS, "mixed", "flood"]:
        count, size, parse_ms, compile_ms = compile_times(name, rng)
        print(f"{name:<11} {count:>6} {size / 1024:>6.0f} {parse_ms:>9.0f} {compile_ms:>11.0f}")


if __name__ == "__main__":
    main()
