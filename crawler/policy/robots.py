"""robots.txt rules (RFC 9309): parsing, group selection, URL matching, crawl-delay, sitemaps.

This module owns the interpretation of a robots.txt body. It is pure: no IO, no clock, no
network, no imports from the engine. The fetcher decides *which* body (or which fallback:
`RobotsRules.allow_all()` for a 4xx, `RobotsRules.disallow_all()` for a 5xx or an unreachable
host, RFC 9309 §2.3.1) and hands it to `RobotsRules.parse`.

Invariants
- `parse` never raises, whatever the bytes; it reads at most `MAX_ROBOTS_BYTES` (RFC 9309 §2.5)
  and drops a final line cut by that cap (half a rule is not the rule the site wrote).
- `RobotsRules` is immutable once built; only a private per-user-agent cache of the selected
  group changes, and a cache entry is a pure function of the rules and the agent.
- Matching follows Google's open-source reference parser (github.com/google/robotstxt), which
  RFC 9309 codifies: longest match wins, measured in the normalised pattern's characters
  (`*` and `$` included); `allow` wins a tie; an empty pattern matches nothing; groups naming
  the same product token are merged; with no such group the `*` groups apply; with neither,
  everything is allowed. Google's leniencies are kept: missing colons, key typos
  ("dissallow", "user agent"), a user-agent value read up to its first non-token character,
  `Allow: /dir/index.html` also allowing `/dir/`, lines cut after 16,663 bytes.
- The work of one URL check does not grow with the number of rules (a file may hold tens of
  thousands): each agent's group is compiled, on first use, into a prefix index, a dict of
  exact rules and an index of wildcard rules by a literal substring (`_Matcher`), so a URL
  examines only the wildcard rules that could match it; and that work has a hard bound
  whatever the file, `_MAX_MATCH_STEPS` (below). Compiling takes near-linear time.

Percent-encoding. Patterns are normalised as the reference does: non-ASCII octets become
%XX and `%xx` becomes `%XX`. The URL is expected percent-encoded already (the engine's URLs
are, after normalisation); only its `%xx` is upper-cased. Two places where RFC 9309 §2.2.2
says more than the reference, and the reference's tests pin the opposite, follow the tests:
%-encoded unreserved characters are not decoded (`/%7Ejoe` does not match `/~joe`), and raw
non-ASCII in the URL is not encoded for the caller. Both are flagged in tests/test_robots.py.

Deliberate differences from the reference (none contradicts one of its tests):
- The URL's `%xx` is upper-cased like the patterns' (RFC 3986 §6.2.2.1), and %2A / %24 in
  a pattern or a URL mean a literal `*` / `$`, so `Disallow: /a-%2A` matches `/a-*` and
  `/a-%2a` (RFC 9309 §2.2.3; google/robotstxt issue #57). Priorities are unchanged: they
  are the lengths of the patterns as the reference escapes them.
- `/robots.txt` is always allowed (RFC 9309 §2.2.2).
- The `user_agent` argument is a full User-Agent string ("MyBot/1.2 (+http://x)"): it is
  reduced to its product token ("MyBot") first. The reference takes a bare token and treats
  "Foo Bar" as matching no group; we read it as the token "Foo" (one reference case).
- `Crawl-delay` (in neither the RFC nor the reference) is read per group and, like the
  reference's unknown lines, does not end a group's user-agent list; a merged group takes
  the largest valid value.
- A URL whose check would cost more than `_MAX_MATCH_STEPS` steps (a wildcard rule examined
  costs one step per literal segment after its head) is disallowed, rules not yet examined
  unread. Ordinary files, even huge ones, need a few steps a URL; only a file crafted so
  that thousands of wildcard rules each nearly match one URL reaches the budget, and a site
  whose robots.txt is too complex to evaluate gets the polite answer, as for a 5xx.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum, auto
from itertools import accumulate, chain
from operator import attrgetter

__all__ = ["MAX_ROBOTS_BYTES", "RobotsRules", "is_allowed", "product_token"]

MAX_ROBOTS_BYTES = 512_000
"""Bytes of a robots.txt body that are parsed (500 KiB, the RFC 9309 §2.5 minimum)."""

# The reference keeps at most 2083 * 8 - 1 bytes of a line and ignores the rest of it.
_MAX_LINE_BYTES = 2083 * 8 - 1
_UTF8_BOM = b"\xef\xbb\xbf"
_MAX_CACHED_AGENTS = 256

_PATTERN_OCTETS = re.compile(rb"%[0-9A-Fa-f]{2}|[\x80-\xff]")
_URL_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
# `*` and `$` are operators in a pattern, so a site writes a literal one as %2A / %24
# (RFC 9309 §2.2.3); in a URL either spelling is that literal character.
_LITERAL_ESCAPES = {"%2A": "*", "%24": "$"}
_PATH_START = re.compile(r"[/?;]")
_WHITESPACE_RUN = re.compile(rb"[ \t]+")
_AGENT_TOKEN = re.compile(rb"[A-Za-z_-]*")
_PRODUCT_TOKEN = re.compile(r"[A-Za-z_-]*")
_DELAY_VALUE = re.compile(rb"[0-9]+(?:\.[0-9]*)?|\.[0-9]+")


class _Key(Enum):
    USER_AGENT = auto()
    ALLOW = auto()
    DISALLOW = auto()
    SITEMAP = auto()
    CRAWL_DELAY = auto()


# Checked in this order, by prefix, case-insensitively (as the reference does: "allowed:" is
# an allow line). The typos are the reference's list; the crawl-delay spellings are ours.
_KEY_PREFIXES: tuple[tuple[_Key, tuple[bytes, ...]], ...] = (
    (_Key.USER_AGENT, (b"user-agent", b"useragent", b"user agent")),
    (_Key.ALLOW, (b"allow",)),
    (_Key.DISALLOW, (b"disallow", b"dissallow", b"dissalow", b"disalow", b"diasllow", b"disallaw")),
    (_Key.SITEMAP, (b"sitemap", b"site-map")),
    (_Key.CRAWL_DELAY, (b"crawl-delay", b"crawl_delay", b"crawldelay", b"crawl delay")),
)


@dataclass(frozen=True, slots=True)
class _Rule:
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
class _Policy:
    """The merged group that applies to one agent: rules strongest first."""

    rules: tuple[_Rule, ...]
    crawl_delay_s: float | None


_Verdict = tuple[int, bool]  # (rank, allow) of the strongest rule found so far
_NO_MATCH: _Verdict = (1 << 62, True)  # when no rule matches: weaker than any rule

_MAX_MATCH_STEPS = 2048
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

    buckets: dict[str, tuple[int, tuple[_Rule, ...]]]  # key -> (visiting order, rules)
    sizes: tuple[int, ...]  # the lengths of the keys, ascending

    def strongest(self, path: str, best: _Verdict, steps: int) -> tuple[_Verdict, int]:
        found: set[str] = set()
        for size in self.sizes:
            found.update(self.buckets.keys() & set(_substrings(path, size)))
        for _, rules in sorted(map(self.buckets.__getitem__, found)):
            best, steps = _strongest_match(rules, path, best, steps)
            if steps > _MAX_MATCH_STEPS:
                break
        return best, steps


@dataclass(frozen=True, slots=True)
class _Matcher:
    """A `_Policy` compiled for the per-URL check, built on first use for an agent.

    Its cost per URL does not grow with the number of rules. Prefix rules (no `*`, or only
    trailing ones) go into a `_PrefixIndex`, exact rules ("/a/b$") into a dict; the stronger
    of their two verdicts is then challenged by the wildcard rules. A few short ones, the
    common case, are one regex alternation, strongest first, whose first matching branch is
    the strongest matching rule (`_wildcard_regex`); more go into a `_GramIndex`.
    """

    prefixes: _PrefixIndex | None
    exact: dict[str, _Verdict] | None  # path -> verdict of the anchored rules with no `*`
    wildcards: re.Pattern[str] | None  # when few: one capturing group a rule
    wildcard_rules: tuple[_Rule, ...]  # those rules, strongest first
    wildcard_steps: tuple[int, ...]  # [k]: the steps of wildcard_rules[:k], within budget
    grams: _GramIndex | None  # the wildcard rules, when many
    crawl_delay_s: float | None

    def check(self, path: str) -> tuple[bool, int]:
        """Whether `path` is allowed, and the steps that took (see `_MAX_MATCH_STEPS`)."""
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
        return steps <= _MAX_MATCH_STEPS and best[1], steps


@dataclass(slots=True)
class _GroupBuilder:
    agents: set[str] = field(default_factory=set)  # lower-cased product tokens
    is_global: bool = False
    rules: list[_Rule] = field(default_factory=list)
    crawl_delay_s: float | None = None


@dataclass(frozen=True, slots=True)
class RobotsRules:
    """Parsed robots.txt rules; build with `parse`, `allow_all` or `disallow_all`."""

    _specific: dict[str, _Policy] = field(default_factory=dict, hash=False)
    _global: _Policy | None = None
    _sitemaps: tuple[str, ...] = ()
    _cache: dict[str, _Matcher | None] = field(
        default_factory=dict, compare=False, hash=False, repr=False
    )

    @classmethod
    def parse(cls, content: bytes | str) -> RobotsRules:
        """Parse a robots.txt body (bytes, or text that is encoded as UTF-8 first)."""
        groups, sitemaps = _parse_groups(_capped_bytes(content))
        specific: dict[str, list[_GroupBuilder]] = {}
        for group in groups:
            for agent in group.agents:
                specific.setdefault(agent, []).append(group)
        global_groups = [group for group in groups if group.is_global]
        return cls(
            _specific={agent: _merge(members) for agent, members in specific.items()},
            _global=_merge(global_groups) if global_groups else None,
            _sitemaps=tuple(dict.fromkeys(sitemaps)),
        )

    @classmethod
    def allow_all(cls) -> RobotsRules:
        """Rules that allow everything (robots.txt missing: a 4xx answer)."""
        return cls()

    @classmethod
    def disallow_all(cls) -> RobotsRules:
        """Rules that disallow everything but /robots.txt (5xx or unreachable robots.txt)."""
        return cls(_global=_Policy(rules=(_compile_rule(False, "/"),), crawl_delay_s=None))

    def is_allowed(self, user_agent: str, url: str) -> bool:
        """Whether `user_agent` may fetch `url`: absolute, or a path with optional query.

        `url` should be percent-encoded, as a normalised URL is; `user_agent` may be a full
        User-Agent header value, of which only the product token counts.
        """
        matcher = self._matcher(user_agent)
        if matcher is None:
            return True
        path = _path_and_query(url)
        if path == "/robots.txt" or path.startswith("/robots.txt?"):
            return True
        return matcher.check(_normalize_url_path(path))[0]

    def crawl_delay(self, user_agent: str) -> float | None:
        """The Crawl-delay in seconds of the group that applies to `user_agent`, if any."""
        matcher = self._matcher(user_agent)
        return None if matcher is None else matcher.crawl_delay_s

    @property
    def sitemaps(self) -> tuple[str, ...]:
        """Sitemap URLs in file order, without duplicates (they belong to no group)."""
        return self._sitemaps

    def _matcher(self, user_agent: str) -> _Matcher | None:
        """The compiled group for `user_agent` (None: no group applies), cached per string."""
        try:
            return self._cache[user_agent]
        except KeyError:
            pass
        policy = self._policy(user_agent)
        matcher = None if policy is None else _compile_policy(policy)
        if len(self._cache) >= _MAX_CACHED_AGENTS:
            self._cache.clear()
        self._cache[user_agent] = matcher
        return matcher

    def _policy(self, user_agent: str) -> _Policy | None:
        """The merged group that applies to `user_agent`, if any."""
        token = product_token(user_agent).lower()
        return self._specific.get(token, self._global) if token else self._global


def is_allowed(robots_txt: bytes | str, user_agent: str, url: str) -> bool:
    """One-shot check: parse `robots_txt` and ask whether `user_agent` may fetch `url`."""
    return RobotsRules.parse(robots_txt).is_allowed(user_agent, url)


def product_token(user_agent: str) -> str:
    """The product token of a User-Agent string: "MyBot/1.2 (+http://x)" -> "MyBot".

    It is the leading run of [a-zA-Z_-] (RFC 9309 §2.2.1), after surrounding whitespace; it
    is empty when the string starts with anything else.
    """
    match = _PRODUCT_TOKEN.match(user_agent.strip())
    return match.group() if match else ""


# --- parsing -------------------------------------------------------------------------------


def _capped_bytes(content: bytes | str) -> bytes:
    if isinstance(content, str):
        # Each character is at least one byte, so cutting the text first loses nothing.
        content = content[: MAX_ROBOTS_BYTES + 1].encode("utf-8", "surrogatepass")
    data = bytes(content[: MAX_ROBOTS_BYTES + 1])
    if len(data) > MAX_ROBOTS_BYTES:
        ends_line = data[MAX_ROBOTS_BYTES:] in (b"\n", b"\r")
        data = data[:MAX_ROBOTS_BYTES]
        if not ends_line:
            cut = max(data.rfind(b"\n"), data.rfind(b"\r"))
            data = data[:cut] if cut >= 0 else data
    # A (possibly partial) UTF-8 byte order mark at the very start is skipped, as the
    # reference does; anywhere else it is part of the line.
    for size in (3, 2, 1):
        if data.startswith(_UTF8_BOM[:size]):
            return data[size:]
    return data


def _parse_groups(data: bytes) -> tuple[list[_GroupBuilder], list[str]]:
    """Split the body into groups (user-agent lines, then their rules) and sitemap URLs."""
    groups: list[_GroupBuilder] = []
    sitemaps: list[str] = []
    current: _GroupBuilder | None = None
    seen_rule = False  # a rule line since the last user-agent line: the next one opens a group
    for line in data.splitlines():  # bytes.splitlines: only \n, \r and \r\n end a line
        parsed = _key_value(line)
        if parsed is None:
            continue
        key, value = parsed
        if key is _Key.USER_AGENT:
            if current is None or seen_rule:
                current, seen_rule = _GroupBuilder(), False
                groups.append(current)
            _add_agent(current, value)
        elif key is _Key.SITEMAP:
            if value:
                sitemaps.append(value.decode("utf-8", "replace"))
        elif current is None:
            continue  # rules before the first user-agent line belong to no group
        elif key is _Key.CRAWL_DELAY:
            # Not a rule: like the reference's unknown lines it does not close the group.
            delay = _parse_delay(value)
            if delay is not None:
                current.crawl_delay_s = max(delay, current.crawl_delay_s or 0.0)
        else:
            seen_rule = True  # even an empty rule ends the group's user-agent list
            current.rules.extend(_make_rules(key is _Key.ALLOW, value))
    return groups, sitemaps


def _key_value(line: bytes) -> tuple[_Key, bytes] | None:
    """The known key and the value of one line, or None for blank, unknown or broken lines."""
    line = line[:_MAX_LINE_BYTES]
    comment = line.find(b"#")
    if comment >= 0:
        line = line[:comment]
    line = line.strip()
    colon = line.find(b":")
    if colon >= 0:
        raw_key, value = line[:colon].strip(), line[colon + 1 :].strip()
    else:
        # Google leniency: "disallow /x" is read as "disallow: /x", but only when the line
        # holds exactly two whitespace-separated words.
        words = _WHITESPACE_RUN.split(line)
        if len(words) != 2:
            return None
        raw_key, value = words
    if not raw_key:
        return None
    lowered = raw_key.lower()
    for key, prefixes in _KEY_PREFIXES:
        if lowered.startswith(prefixes):
            return key, value
    return None


def _add_agent(group: _GroupBuilder, value: bytes) -> None:
    # Google leniency: "* anything" is still the global agent.
    if value[:1] == b"*" and (len(value) == 1 or value[1:2].isspace()):
        group.is_global = True
        return
    match = _AGENT_TOKEN.match(value)
    token = match.group() if match else b""
    if token:  # "Foo Bar" names Foo; a value with no token at all names nobody
        group.agents.add(token.decode("ascii").lower())


def _parse_delay(value: bytes) -> float | None:
    if _DELAY_VALUE.fullmatch(value) is None:
        return None
    return float(value)


def _make_rules(allow: bool, value: bytes) -> list[_Rule]:
    if not value:
        return []  # "Disallow:" with no path allows everything: it is no rule at all
    pattern = _normalize_pattern(value)
    rules = [_compile_rule(allow, pattern)]
    # Google leniency: allowing ".../index.htm*" also allows the directory itself, ".../$".
    slash = pattern.rfind("/")
    if allow and slash >= 0 and pattern.startswith("/index.htm", slash):
        rules.append(_compile_rule(True, pattern[: slash + 1] + "$"))
    return rules


def _compile_rule(allow: bool, pattern: str) -> _Rule:
    anchored = pattern.endswith("$")
    body = pattern[:-1] if anchored else pattern
    segments = body.split("*")
    head, *rest = segments if "%2" not in body else map(_literal, segments)
    middle, tail = (tuple(rest[:-1]), rest[-1]) if rest else ((), None)
    return _Rule(
        allow=allow,
        pattern=pattern,
        rank=-2 * len(pattern) + (0 if allow else 1),
        head=head,
        middle=middle,
        tail=tail,
        anchored=anchored,
        plain=not rest and not anchored,
    )


def _merge(groups: list[_GroupBuilder]) -> _Policy:
    """Combine every group naming one agent (RFC 9309 §2.2.1) into one rule list."""
    # A rule is a function of (allow, pattern): a cheaper key than the whole rule's hash.
    rules = {(rule.allow, rule.pattern): rule for group in groups for rule in group.rules}
    ordered = sorted(rules.values(), key=attrgetter("rank", "pattern"))
    delays = [group.crawl_delay_s for group in groups if group.crawl_delay_s is not None]
    return _Policy(rules=tuple(ordered), crawl_delay_s=max(delays) if delays else None)


def _compile_policy(policy: _Policy, few: int = _FEW_WILDCARDS) -> _Matcher:
    """`policy` as a `_Matcher`; more than `few` wildcard rules are indexed."""
    prefixes: dict[str, _Verdict] = {}
    exact: dict[str, _Verdict] = {}
    patterns: list[_Rule] = []
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
    indexed = len(patterns) > few or chars > _FEW_WILDCARDS_CHARS or steps[-1] > _MAX_MATCH_STEPS
    return _Matcher(
        prefixes=_prefix_index(prefixes) if prefixes else None,
        exact=exact or None,
        wildcards=None if indexed or not patterns else _wildcard_regex(patterns),
        wildcard_rules=() if indexed else tuple(patterns),
        wildcard_steps=() if indexed else steps,
        grams=_gram_index(patterns) if indexed else None,
        crawl_delay_s=policy.crawl_delay_s,
    )


def _wildcard_regex(rules: list[_Rule]) -> re.Pattern[str]:
    """One branch a rule, in order, each its own group, matching as `_matches_rest` does.

    Each middle segment is an atomic group that takes its leftmost occurrence and is never
    revisited, as `_matches_rest`'s `find` does, so a failing branch cannot backtrack more
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


def _gram_index(rules: list[_Rule]) -> _GramIndex:
    options = [_key_options(rule) for rule in rules]
    counts = Counter(chain.from_iterable(options))
    members: defaultdict[str, list[_Rule]] = defaultdict(list)
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


def _key_options(rule: _Rule) -> list[str]:
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


def _matches_rest(rule: _Rule, path: str) -> bool:
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
    rules: Iterable[_Rule], path: str, best: _Verdict, steps: int
) -> tuple[_Verdict, int]:
    """`best`, or the first of `rules` (strongest first) that beats it and matches `path`.

    Each rule examined adds its cost to `steps`; the search stops once they pass the budget.
    """
    rank = best[0]
    for rule in rules:
        if rule.rank >= rank:
            break
        steps += 1 + len(rule.middle)  # _steps(rule)
        if steps > _MAX_MATCH_STEPS:
            break
        if path.startswith(rule.head) and _matches_rest(rule, path):
            return (rule.rank, rule.allow), steps
    return best, steps


def _steps(rule: _Rule) -> int:
    """What examining a wildcard rule costs: a `startswith` and up to one `find` a segment."""
    return 1 + len(rule.middle)


def _substrings(path: str, size: int) -> Iterable[str]:
    """Every `size`-character substring of `path`, in order."""
    if size == 1:
        return path
    stop = len(path) + 1
    return map(path.__getitem__, map(slice, range(stop - size), range(size, stop)))


def _slow_allows(policy: _Policy, path: str) -> bool:
    """The answer `_Matcher.check` must give, by trying every rule strongest first.

    For tests and benchmarks only: its cost grows with the number of rules. `path` is
    normalised (`_normalize_url_path`); there is no work budget here.
    """
    for rule in policy.rules:
        if path.startswith(rule.head) and (rule.plain or _matches_rest(rule, path)):
            return rule.allow
    return True


def _path_and_query(url: str) -> str:
    """The path, params and query of `url` (no fragment), always starting with "/".

    Mirrors the reference's GetPathParamsQuery, which also copes with scheme-less
    "host/path" and returns "/" for a URL with no path at all.
    """
    if url[:1] == "/" and url[1:2] != "/":  # already a path
        fragment = url.find("#")
        return url if fragment < 0 else url[:fragment]
    if url.startswith(("https://", "http://")):  # the engine's common case
        authority = url.index("//") + 2
        slash = url.find("/", authority)
        host = url[authority:slash]
        if slash >= 0 and "?" not in host and ";" not in host and "#" not in host:
            fragment = url.find("#", slash)
            return url[slash:] if fragment < 0 else url[slash:fragment]
    start = 2 if url.startswith("//") else 0
    early = _PATH_START.search(url, start)
    scheme_end = url.find("://", start)
    if scheme_end < 0 or (early is not None and early.start() < scheme_end):
        authority = start  # "://" inside the path or query is not a scheme separator
    else:
        authority = scheme_end + 3
    found = _PATH_START.search(url, authority)
    if found is None:
        return "/"
    path_start = found.start()
    fragment = url.find("#", start)
    if 0 <= fragment < path_start:
        return "/"
    path = url[path_start:fragment] if fragment >= 0 else url[path_start:]
    return path if path[0] == "/" else "/" + path


def _encode_octet(match: re.Match[bytes]) -> bytes:
    text = match.group()
    if len(text) == 1:  # a non-ASCII octet
        return b"%%%02X" % text[0]
    return text.upper()  # "%2f" -> "%2F"


def _normalize_pattern(value: bytes) -> str:
    """A rule's path as the reference escapes it: "/SanJosé%2f" -> "/SanJos%C3%A9%2F"."""
    if value.isascii() and b"%" not in value:
        return value.decode("ascii")
    return _PATTERN_OCTETS.sub(_encode_octet, value).decode("ascii")


def _literal(segment: str) -> str:
    """A pattern's literal text as matched against a URL: %2A and %24 are `*` and `$`."""
    if "%2" not in segment:
        return segment
    return segment.replace("%2A", "*").replace("%24", "$")


def _normalize_url_escape(match: re.Match[str]) -> str:
    escape = match.group().upper()
    return _LITERAL_ESCAPES.get(escape, escape)


def _normalize_url_path(path: str) -> str:
    """A URL's path and query in the patterns' form: "%2f" -> "%2F", "%2a" -> "*"."""
    if "%" not in path:
        return path
    return _URL_ESCAPE.sub(_normalize_url_escape, path)
