"""robots.txt matching: one agent's merged rules compiled into a matcher whose work per URL
does not grow with the number of rules, and has a hard bound.

``compile_policy`` turns a ``Policy`` (its rules strongest first) into a ``Matcher``: plain
rules into a prefix index and a dict of exact (``$``) rules; wildcard rules into one regex
alternation when they are few, else an index by a literal substring of ``GRAM`` characters,
so a URL examines only the wildcard rules that could match it. A URL costs at most
``MAX_MATCH_STEPS``; past that it is disallowed. ``slow_allows`` is the same answer by
trying every rule, for tests and benchmarks. Parsing is ``crawler.policy.robots``.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import accumulate, chain

__all__ = ["MAX_MATCH_STEPS", "Matcher", "Policy", "Rule", "compile_policy", "matches_rest",
           "slow_allows"]  # fmt: skip


@dataclass(frozen=True, slots=True)
class Rule:
    """One allow/disallow line, pre-split so that wildcards need no backtracking regex."""

    allow: bool
    pattern: str  # normalised; its length is the rule's priority
    rank: int  # lower is stronger: longer pattern first, then allow before disallow
    head: str  # literal text before the first `*`
    middle: tuple[str, ...]  # literal segments between `*`s
    tail: str | None  # literal segment after the last `*`; None without a wildcard
    anchored: bool  # the pattern ended with `$`
    plain: bool  # no `*` and no `$`: a bare prefix test


@dataclass(frozen=True, slots=True)
class Policy:
    """The merged group that applies to one agent: rules strongest first."""

    rules: tuple[Rule, ...]
    crawl_delay_s: float | None


_Verdict = tuple[int, bool]  # (rank, allow) of the strongest rule found so far
_NO_MATCH: _Verdict = (1 << 62, True)  # when no rule matches: weaker than any rule

MAX_MATCH_STEPS = 2048
"""The most work one URL may cost. Each wildcard rule examined costs 1 + its middle segments
(the literal searches it may make after its head); past this budget the URL is disallowed."""

# Up to this many wildcard rules, this long in all, are one regex alternation, not indexed.
_FEW_WILDCARDS = 32
_FEW_WILDCARDS_CHARS = 2048
_GRAM = 3  # an indexed wildcard rule is keyed by one substring of this length of a literal


@dataclass(frozen=True, slots=True)
class _PrefixIndex:
    """The strongest of the prefix rules whose head a path starts with, in O(log n).

    `keys` are the heads, sorted; `chains[i]` lists the keys that are prefixes of `keys[i]`,
    shortest first and ending with it; `verdicts[i][j]` is the strongest verdict of
    `chains[i][: j + 1]`. Every key that a path starts with is a prefix of the greatest key
    not above the path, so a bisection and a binary search of that key's chain find them.
    (The strongest is not always the longest head: "/x%24" outranks "/x$y", head "/x$".)
    """

    keys: tuple[str, ...]
    chains: tuple[tuple[str, ...], ...]
    verdicts: tuple[tuple[_Verdict, ...], ...]

    def strongest(self, path: str) -> _Verdict:
        index = bisect_right(self.keys, path) - 1
        if index < 0:
            return _NO_MATCH
        ancestors = self.chains[index]
        low, high = 0, len(ancestors) - 1
        if path.startswith(ancestors[high]):
            return self.verdicts[index][high]
        while low < high:  # path starts with all of ancestors[:low], none of ancestors[high:]
            middle = (low + high) // 2
            if path.startswith(ancestors[middle]):
                low = middle + 1
            else:
                high = middle
        return self.verdicts[index][low - 1] if low else _NO_MATCH


@dataclass(frozen=True, slots=True)
class _GramIndex:
    """Wildcard rules bucketed by one literal substring each, which every path they match holds.

    A rule's key is the rarest, among the indexed rules, `_GRAM`-character substring of its
    literals (head included), or its longest literal where none is that long. A path visits
    only the buckets of its own substrings, strongest bucket first, each strongest rule first
    and only while a rule could still beat the verdict so far; each rule is in one bucket.
    """

    buckets: dict[str, tuple[int, tuple[Rule, ...]]]  # key -> (visiting order, rules)
    sizes: tuple[int, ...]  # the lengths of the keys, ascending

    def strongest(self, path: str, best: _Verdict, steps: int) -> tuple[_Verdict, int]:
        found: set[str] = set()
        for size in self.sizes:
            found.update(self.buckets.keys() & set(_substrings(path, size)))
        for _, rules in sorted(map(self.buckets.__getitem__, found)):
            best, steps = _strongest_match(rules, path, best, steps)
            if steps > MAX_MATCH_STEPS:
                break
        return best, steps


@dataclass(frozen=True, slots=True)
class Matcher:
    """A `Policy` compiled for the per-URL check, built on first use for an agent.

    Its cost per URL does not grow with the number of rules. Prefix rules (no `*`, or only
    trailing ones) go into a `_PrefixIndex`, exact rules ("/a/b$") into a dict; the stronger
    of their two verdicts is then challenged by the wildcard rules. A few short ones, the
    common case, are one regex alternation, strongest first, whose first matching branch is
    the strongest matching rule (`_wildcard_regex`); more go into a `_GramIndex`.
    """

    prefixes: _PrefixIndex | None
    exact: dict[str, _Verdict] | None  # path -> verdict of the anchored rules with no `*`
    wildcards: re.Pattern[str] | None  # when few: one capturing group a rule
    wildcard_rules: tuple[Rule, ...]  # those rules, strongest first
    wildcard_steps: tuple[int, ...]  # [k]: the steps of wildcard_rules[:k], within budget
    grams: _GramIndex | None  # the wildcard rules, when many
    crawl_delay_s: float | None

    def check(self, path: str) -> tuple[bool, int]:
        """Whether `path` is allowed, and the steps that took (see `MAX_MATCH_STEPS`)."""
        best = _NO_MATCH if self.prefixes is None else self.prefixes.strongest(path)
        if self.exact is not None:
            exact = self.exact.get(path)
            if exact is not None and exact < best:
                best = exact
        if self.wildcards is not None:
            if self.wildcard_rules[0].rank >= best[0]:
                return best[1], 0  # no wildcard rule could beat it
            found = self.wildcards.match(path)
            if found is None:
                return best[1], self.wildcard_steps[-1]
            index = found.lastindex or 0  # a branch matched, so its group did
            rule = self.wildcard_rules[index - 1]
            allowed = rule.allow if rule.rank < best[0] else best[1]
            return allowed, self.wildcard_steps[index]
        if self.grams is None:
            return best[1], 0
        best, steps = self.grams.strongest(path, best, 0)
        return steps <= MAX_MATCH_STEPS and best[1], steps


def compile_policy(policy: Policy, few: int = _FEW_WILDCARDS) -> Matcher:
    """`policy` as a `Matcher`; more than `few` wildcard rules are indexed."""
    prefixes: dict[str, _Verdict] = {}
    exact: dict[str, _Verdict] = {}
    patterns: list[Rule] = []
    for rule in policy.rules:  # strongest first, so a key's first verdict is its best
        verdict = (rule.rank, rule.allow)
        if rule.tail is None:
            (exact if rule.anchored else prefixes).setdefault(rule.head, verdict)
        elif not rule.tail and not any(rule.middle):  # "/a*", "/a**$": a prefix test too
            prefixes.setdefault(rule.head, verdict)
        else:
            patterns.append(rule)
    chars = sum(len(rule.pattern) for rule in patterns)
    steps = tuple(accumulate(map(_steps, patterns), initial=0))
    # The regex tries every branch it needs, uncounted: its rules must fit in the budget.
    indexed = len(patterns) > few or chars > _FEW_WILDCARDS_CHARS or steps[-1] > MAX_MATCH_STEPS
    return Matcher(
        prefixes=_prefix_index(prefixes) if prefixes else None,
        exact=exact or None,
        wildcards=None if indexed or not patterns else _wildcard_regex(patterns),
        wildcard_rules=() if indexed else tuple(patterns),
        wildcard_steps=() if indexed else steps,
        grams=_gram_index(patterns) if indexed else None,
        crawl_delay_s=policy.crawl_delay_s,
    )


def _wildcard_regex(rules: list[Rule]) -> re.Pattern[str]:
    """One branch a rule, in order, each its own group, matching as `matches_rest` does.

    Each middle segment is an atomic group that takes its leftmost occurrence and is never
    revisited, as `matches_rest`'s `find` does, so a failing branch cannot backtrack more
    than its tail's one greedy `.*` (any occurrence of the tail will do, and sre scans for a
    greedy `.*`'s literal fast).
    """
    branches = []
    for rule in rules:
        parts = [re.escape(rule.head)]
        parts += [f"(?>.*?{re.escape(segment)})" for segment in rule.middle if segment]
        parts += [".*", re.escape(rule.tail or ""), r"\Z" if rule.anchored else ""]
        branches.append(f"({''.join(parts)})")
    return re.compile("|".join(branches), re.DOTALL)


def _prefix_index(verdicts: dict[str, _Verdict]) -> _PrefixIndex:
    keys = sorted(verdicts)
    chains: list[tuple[str, ...]] = []
    bests: list[tuple[_Verdict, ...]] = []
    # The keys so far that are prefixes of `key`, shortest first (sorted order puts every
    # string between a key and one it is a prefix of under that key), and their best verdicts.
    ancestors: list[str] = []
    best: list[_Verdict] = []
    for key in keys:
        while ancestors and not key.startswith(ancestors[-1]):
            ancestors.pop()
            best.pop()
        best.append(min(verdicts[key], best[-1]) if best else verdicts[key])
        ancestors.append(key)
        chains.append(tuple(ancestors))
        bests.append(tuple(best))
    return _PrefixIndex(keys=tuple(keys), chains=tuple(chains), verdicts=tuple(bests))


def _gram_index(rules: list[Rule]) -> _GramIndex:
    options = [_key_options(rule) for rule in rules]
    counts = Counter(chain.from_iterable(options))
    members: defaultdict[str, list[Rule]] = defaultdict(list)
    for rule, grams in zip(rules, options, strict=True):  # strongest first
        members[min(grams, key=counts.__getitem__)].append(rule)
    # Buckets are visited strongest first, the order they were made in: the first match then
    # cuts every later bucket short.
    return _GramIndex(
        buckets={
            key: (order, tuple(bucket)) for order, (key, bucket) in enumerate(members.items())
        },
        sizes=tuple(sorted({len(key) for key in members})),
    )


def _key_options(rule: Rule) -> list[str]:
    """The substrings that may key `rule`, in pattern order: the `_GRAM`-character ones of its
    literals, else (all literals shorter) its longest literals; never empty for a wildcard
    rule that is not a prefix test."""
    literals = (rule.head, *rule.middle, rule.tail or "")
    grams = [lit[i : i + _GRAM] for lit in literals for i in range(len(lit) - _GRAM + 1)]
    if grams:
        return grams
    longest = max(map(len, literals))
    return [literal for literal in literals if len(literal) == longest]


# --- matching ------------------------------------------------------------------------------


def matches_rest(rule: Rule, path: str) -> bool:
    """Whether `path`, already known to start with `rule.head`, matches the rest of the rule.

    Leftmost placement of each literal segment is optimal for `*`-only globs, so one forward
    `find` per segment suffices: no backtracking, whatever the (untrusted) pattern.
    """
    tail = rule.tail
    if tail is None:  # anchored, no wildcard: an exact match
        return len(path) == len(rule.head)
    position = len(rule.head)
    for segment in rule.middle:
        found = path.find(segment, position)
        if found < 0:
            return False
        position = found + len(segment)
    if rule.anchored:
        return path.endswith(tail) and len(path) - len(tail) >= position
    return path.find(tail, position) >= 0


def _strongest_match(
    rules: Iterable[Rule], path: str, best: _Verdict, steps: int
) -> tuple[_Verdict, int]:
    """`best`, or the first of `rules` (strongest first) that beats it and matches `path`.

    Each rule examined adds its cost to `steps`; the search stops once they pass the budget.
    """
    rank = best[0]
    for rule in rules:
        if rule.rank >= rank:
            break
        steps += 1 + len(rule.middle)  # _steps(rule)
        if steps > MAX_MATCH_STEPS:
            break
        if path.startswith(rule.head) and matches_rest(rule, path):
            return (rule.rank, rule.allow), steps
    return best, steps


def _steps(rule: Rule) -> int:
    """What examining a wildcard rule costs: a `startswith` and up to one `find` a segment."""
    return 1 + len(rule.middle)


def _substrings(path: str, size: int) -> Iterable[str]:
    """Every `size`-character substring of `path`, in order."""
    if size == 1:
        return path
    stop = len(path) + 1
    return map(path.__getitem__, map(slice, range(stop - size), range(size, stop)))


def slow_allows(policy: Policy, path: str) -> bool:
    """The answer `Matcher.check` must give, by trying every rule strongest first.

    For tests and benchmarks only: its cost grows with the number of rules. `path` is
    normalised (`_normalize_url_path`); there is no work budget here.
    """
    for rule in policy.rules:
        if path.startswith(rule.head) and (rule.plain or matches_rest(rule, path)):
            return rule.allow
    return True
