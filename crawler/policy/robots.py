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
  exact rules and an index of wildcard rules by a literal substring (`Matcher`), so a URL
  examines only the wildcard rules that could match it; and that work has a hard bound
  whatever the file, `MAX_MATCH_STEPS` (`crawler.policy.robots_match`). Compiling takes near-linear time.

Percent-encoding. Patterns are normalised as the reference does: non-ASCII octets become
%XX and `%xx` becomes `%XX`. The URL is expected percent-encoded already (the engine's URLs
are, after normalisation); only its `%xx` is upper-cased. Two places where RFC 9309 §2.2.2
says more than the reference, and the reference's tests pin the opposite, follow the tests:
%-encoded unreserved characters are not decoded (`/%7Ejoe` does not match `/~joe`), and raw
non-ASCII in the URL is not encoded for the caller. Both are flagged in tests/crawler/policy/test_robots.py.

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
- A URL whose check would cost more than `MAX_MATCH_STEPS` steps (a wildcard rule examined
  costs one step per literal segment after its head) is disallowed, rules not yet examined
  unread. Ordinary files, even huge ones, need a few steps a URL; only a file crafted so
  that thousands of wildcard rules each nearly match one URL reaches the budget, and a site
  whose robots.txt is too complex to evaluate gets the polite answer, as for a 5xx.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum, auto
from operator import attrgetter

from crawler.policy.robots_match import Matcher, Policy, Rule, compile_policy

__all__ = ["MAX_ROBOTS_BYTES", "RobotsRules", "is_allowed", "product_token"]

MAX_ROBOTS_BYTES = 512_000
"""Bytes of a robots.txt body that are parsed (500 KiB, the RFC 9309 §2.5 minimum)."""

# The reference keeps at most 2083 * 8 - 1 bytes of a line and ignores the rest of it.
_MAX_LINE_BYTES = 2083 * 8 - 1
_UTF8_BOM = b"\xef\xbb\xbf"
_MAX_CACHED_AGENTS = 256

_PATTERN_OCTETS = re.compile(rb"%[0-9A-Fa-f]{2}|[\x00-\x20\"<>`{}\x7f-\xff]")
"""What a pattern's path has escaped, or must have to match the URLs it is compared with:
those are WHATWG-normalised, whose path escapes controls, space, ``"<>`{}`` and non-ASCII."""
_QUERY_OCTETS = re.compile(rb"%[0-9A-Fa-f]{2}|[\x00-\x20\"#<>'\x7f-\xff]")
"""The same for the query of a pattern (past its first ``?``): WHATWG's query set, of a
special scheme (``'`` escaped, `` ` `` and braces not)."""
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


@dataclass(slots=True)
class _GroupBuilder:
    agents: set[str] = field(default_factory=set)  # lower-cased product tokens
    is_global: bool = False
    rules: list[Rule] = field(default_factory=list)
    crawl_delay_s: float | None = None


@dataclass(frozen=True, slots=True)
class RobotsRules:
    """Parsed robots.txt rules; build with `parse`, `allow_all` or `disallow_all`."""

    _specific: dict[str, Policy] = field(default_factory=dict, hash=False)
    _global: Policy | None = None
    _sitemaps: tuple[str, ...] = ()
    _cache: dict[str, Matcher | None] = field(
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
        return cls(_global=Policy(rules=(_compile_rule(False, "/"),), crawl_delay_s=None))

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

    def _matcher(self, user_agent: str) -> Matcher | None:
        """The compiled group for `user_agent` (None: no group applies), cached per string."""
        try:
            return self._cache[user_agent]
        except KeyError:
            pass
        policy = self._policy(user_agent)
        matcher = None if policy is None else compile_policy(policy)
        if len(self._cache) >= _MAX_CACHED_AGENTS:
            self._cache.clear()
        self._cache[user_agent] = matcher
        return matcher

    def _policy(self, user_agent: str) -> Policy | None:
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


def without_cut_line(data: bytes) -> bytes:
    """``data``, cut somewhere, to its last line end (the line the cut fell in is no rule:
    ``Allow: /private`` may be the cut of ``Allow: /private-exception/``)."""
    end = max(data.rfind(b"\n"), data.rfind(b"\r"))
    return data[: end + 1] if end >= 0 else data


def _capped_bytes(content: bytes | str) -> bytes:
    if isinstance(content, str):
        # Each character is at least one byte, so cutting the text first loses nothing.
        content = content[: MAX_ROBOTS_BYTES + 1].encode("utf-8", "surrogatepass")
    data = bytes(content[: MAX_ROBOTS_BYTES + 1])
    if len(data) > MAX_ROBOTS_BYTES:
        ends_line = data[MAX_ROBOTS_BYTES:] in (b"\n", b"\r")
        data = data[:MAX_ROBOTS_BYTES]
        if not ends_line:
            data = without_cut_line(data)
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


def _make_rules(allow: bool, value: bytes) -> list[Rule]:
    if not value:
        return []  # "Disallow:" with no path allows everything: it is no rule at all
    pattern = _normalize_pattern(value)
    rules = [_compile_rule(allow, pattern)]
    # Google leniency: allowing ".../index.htm*" also allows the directory itself, ".../$".
    slash = pattern.rfind("/")
    if allow and slash >= 0 and pattern.startswith("/index.htm", slash):
        rules.append(_compile_rule(True, pattern[: slash + 1] + "$"))
    return rules


def _compile_rule(allow: bool, pattern: str) -> Rule:
    anchored = pattern.endswith("$")
    body = pattern[:-1] if anchored else pattern
    segments = body.split("*")
    head, *rest = segments if "%2" not in body else map(_literal, segments)
    middle, tail = (tuple(rest[:-1]), rest[-1]) if rest else ((), None)
    return Rule(
        allow=allow,
        pattern=pattern,
        rank=-2 * len(pattern) + (0 if allow else 1),
        head=head,
        middle=middle,
        tail=tail,
        anchored=anchored,
        plain=not rest and not anchored,
    )


def _merge(groups: list[_GroupBuilder]) -> Policy:
    """Combine every group naming one agent (RFC 9309 §2.2.1) into one rule list."""
    # A rule is a function of (allow, pattern): a cheaper key than the whole rule's hash.
    rules = {(rule.allow, rule.pattern): rule for group in groups for rule in group.rules}
    ordered = sorted(rules.values(), key=attrgetter("rank", "pattern"))
    delays = [group.crawl_delay_s for group in groups if group.crawl_delay_s is not None]
    return Policy(rules=tuple(ordered), crawl_delay_s=max(delays) if delays else None)


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
    path, mark, query = value.partition(b"?")
    path = _PATTERN_OCTETS.sub(_encode_octet, path)
    return (path + mark + _QUERY_OCTETS.sub(_encode_octet, query)).decode("ascii")


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
