"""Tests for crawler.policy.robots.

1. Every EXPECT_TRUE / EXPECT_FALSE of Google's reference parser's robots_test.cc
   (github.com/google/robotstxt at c8ac4b1), ported one case each, with the reference's
   answer. Where we answer differently on purpose, the case says why (`deviation`); where the
   RFC 9309 text would answer differently but we follow the reference, the case says so
   (`rfc`). `test_agreement_with_reference` pins the N of M figures, so that a change in
   either direction is noticed.
2. The reference's other checks (line endings, byte order marks, sitemaps, URL path
   extraction, pattern escaping), ported as behaviour.
3. RFC 9309 examples and the parts the reference does not cover (crawl-delay, the size cap,
   /robots.txt), and hypothesis properties.
4. The compiled matcher: against the plain strongest-first loop (`_slow_allows`), and on
   huge and hostile files, where the work a URL costs is counted (never timed).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawler.policy.robots import (
    MAX_ROBOTS_BYTES,
    RobotsRules,
    _compile_rule,
    _normalize_pattern,
    _normalize_url_path,
    _path_and_query,
    is_allowed,
    product_token,
)
from crawler.policy.robots_match import MAX_MATCH_STEPS as _MAX_MATCH_STEPS
from crawler.policy.robots_match import Policy as _Policy
from crawler.policy.robots_match import compile_policy as _compile_policy
from crawler.policy.robots_match import matches_rest as _matches_rest
from crawler.policy.robots_match import slow_allows as _slow_allows

# --- 1. Google's reference test cases --------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One EXPECT_* of robots_test.cc. `robots` None: an IsValidUserAgentToObey check."""

    test: str
    robots: str | None
    agent: str
    url: str
    reference: bool  # what Google's parser answers
    deviation: str = ""  # non-empty: we answer `not reference`, for this reason
    rfc: str = ""  # non-empty: the RFC text would answer `not reference`; we follow the reference

    @property
    def ours(self) -> bool:
        return self.reference != bool(self.deviation)


# Where RFC 9309 §2.2.2 says more than the reference and the reference's tests pin the
# opposite, we follow the tests (see crawler.policy.robots): these cases are marked with this note.
RFC_SAYS_OTHERWISE = (
    "RFC 9309 §2.2.2 would encode the URL's non-ASCII octets and decode %-encoded unreserved "
    "characters (as crawler-commons does); the reference does neither, and neither do we."
)
UA_IS_HEADER = (
    "Our user_agent argument is a User-Agent header, reduced to its product token: "
    '"Foo Bar" is the token "Foo". The reference takes a bare token and rejects it.'
)
FOOBOT_DISALLOW_ALL = "user-agent: FooBot\ndisallow: /\n"


def cases_system_and_syntax() -> list[Case]:
    def c(robots: str, agent: str, url: str, ref: bool, test: str) -> Case:
        return Case(test, robots, agent, url, ref)

    incorrect = "foo: FooBot\nbar: /\n"
    accepted = "user-agent FooBot\ndisallow /\n"
    url = "http://foo.bar/x/y"
    return [
        c("", "FooBot", "", True, "GoogleOnly_SystemTest"),
        c(FOOBOT_DISALLOW_ALL, "", "", True, "GoogleOnly_SystemTest"),
        c(FOOBOT_DISALLOW_ALL, "FooBot", "", False, "GoogleOnly_SystemTest"),
        c("", "", "", True, "GoogleOnly_SystemTest"),
        c(FOOBOT_DISALLOW_ALL, "FooBot", url, False, "ID_LineSyntax_Line"),
        c(incorrect, "FooBot", url, True, "ID_LineSyntax_Line"),
        c(accepted, "FooBot", url, False, "ID_LineSyntax_Line"),
    ]


GROUPS = (
    "allow: /foo/bar/\n\nuser-agent: FooBot\ndisallow: /\nallow: /x/\nuser-agent: BarBot\n"
    "disallow: /\nallow: /y/\n\n\nallow: /w/\nuser-agent: BazBot\n\nuser-agent: FooBot\n"
    "allow: /z/\ndisallow: /\n"
)


def cases_groups() -> list[Case]:
    t = "ID_LineSyntax_Groups"
    base = "http://foo.bar"
    expectations = [
        ("FooBot", "/x/b", True),
        ("FooBot", "/z/d", True),
        ("FooBot", "/y/c", False),
        ("BarBot", "/y/c", True),
        ("BarBot", "/w/a", True),
        ("BarBot", "/z/d", False),
        ("BazBot", "/z/d", True),
        ("FooBot", "/foo/bar/", False),
        ("BarBot", "/foo/bar/", False),
        ("BazBot", "/foo/bar/", False),
    ]
    cases = [Case(t, GROUPS, agent, base + path, ref) for agent, path, ref in expectations]
    t = "ID_LineSyntax_Groups_OtherRules"
    sitemap = "User-agent: BarBot\nSitemap: https://foo.bar/sitemap\nUser-agent: *\nDisallow: /\n"
    unknown = "User-agent: FooBot\nInvalid-Unknown-Line: unknown\nUser-agent: *\nDisallow: /\n"
    for robots in (sitemap, unknown):
        cases += [
            Case(t, robots, "FooBot", "http://foo.bar/", False),
            Case(t, robots, "BarBot", "http://foo.bar/", False),
        ]
    return cases


def cases_case_insensitivity() -> list[Case]:
    keys = [
        "USER-AGENT: FooBot\nALLOW: /x/\nDISALLOW: /\n",
        "user-agent: FooBot\nallow: /x/\ndisallow: /\n",
        "uSeR-aGeNt: FooBot\nAlLoW: /x/\ndIsAlLoW: /\n",
    ]
    values = [
        "User-Agent: FOO BAR\nAllow: /x/\nDisallow: /\n",
        "User-Agent: foo bar\nAllow: /x/\nDisallow: /\n",
        "User-Agent: FoO bAr\nAllow: /x/\nDisallow: /\n",
    ]
    allowed, disallowed = "http://foo.bar/x/y", "http://foo.bar/a/b"
    t = "ID_REPLineNamesCaseInsensitive"
    cases = [Case(t, r, "FooBot", allowed, True) for r in keys]
    cases += [Case(t, r, "FooBot", disallowed, False) for r in keys]
    t = "ID_UserAgentValueCaseInsensitive"
    for agent in ("Foo", "foo"):
        cases += [Case(t, r, agent, allowed, True) for r in values]
        cases += [Case(t, r, agent, disallowed, False) for r in values]
    return cases


def cases_user_agents() -> list[Case]:
    t = "ID_VerifyValidUserAgentsToObey"
    valid = ["Foobot", "Foobot-Bar", "Foo_Bar"]
    # "" twice: the reference checks absl::string_view() and "" separately.
    invalid = ["", "", "ツ", "Foobot*", " Foobot ", "Foobot/2.1", "Foobot Bar"]
    cases = [Case(t, None, agent, "", True) for agent in valid]
    cases += [Case(t, None, agent, "", False) for agent in invalid]
    t = "GoogleOnly_AcceptUserAgentUpToFirstSpace"
    robots = "User-Agent: *\nDisallow: /\nUser-Agent: Foo Bar\nAllow: /x/\nDisallow: /\n"
    url = "http://foo.bar/x/y"
    cases += [
        Case(t, None, "Foobot Bar", "", False),
        Case(t, robots, "Foo", url, True),
        Case(t, robots, "Foo Bar", url, False, UA_IS_HEADER),
    ]
    t = "ID_GlobalGroups_Secondary"
    global_ = "user-agent: *\nallow: /\nuser-agent: FooBot\ndisallow: /\n"
    only_specific = (
        "user-agent: FooBot\nallow: /\nuser-agent: BarBot\ndisallow: /\n"
        "user-agent: BazBot\ndisallow: /\n"
    )
    cases += [
        Case(t, "", "FooBot", url, True),
        Case(t, global_, "FooBot", url, False),
        Case(t, global_, "BarBot", url, True),
        Case(t, only_specific, "QuxBot", url, True),
    ]
    t = "ID_AllowDisallow_Value_CaseSensitive"
    cases += [
        Case(t, "user-agent: FooBot\ndisallow: /x/\n", "FooBot", url, False),
        Case(t, "user-agent: FooBot\ndisallow: /X/\n", "FooBot", url, True),
    ]
    return cases


def cases_longest_match() -> list[Case]:
    t = "ID_LongestMatch"
    url = "http://foo.bar/x/page.html"
    ua = "user-agent: FooBot\n"
    table = [
        (ua + "disallow: /x/page.html\nallow: /x/\n", url, False),
        (ua + "allow: /x/page.html\ndisallow: /x/\n", url, True),
        (ua + "allow: /x/page.html\ndisallow: /x/\n", "http://foo.bar/x/", False),
        (ua + "disallow: \nallow: \n", url, True),
        (ua + "disallow: /\nallow: /\n", url, True),
        (ua + "disallow: /x\nallow: /x/\n", "http://foo.bar/x", False),
        (ua + "disallow: /x\nallow: /x/\n", "http://foo.bar/x/", True),
        (ua + "disallow: /x/page.html\nallow: /x/page.html\n", url, True),
        (ua + "allow: /page\ndisallow: /*.html\n", "http://foo.bar/page.html", False),
        (ua + "allow: /page\ndisallow: /*.html\n", "http://foo.bar/page", True),
        (ua + "allow: /x/page.\ndisallow: /*.html\n", url, True),
        (ua + "allow: /x/page.\ndisallow: /*.html\n", "http://foo.bar/x/y.html", False),
    ]
    groups = "User-agent: *\nDisallow: /x/\nUser-agent: FooBot\nDisallow: /y/\n"
    table += [
        (groups, "http://foo.bar/x/page", True),
        (groups, "http://foo.bar/y/page", False),
    ]
    return [Case(t, robots, "FooBot", u, ref) for robots, u, ref in table]


def cases_encoding() -> list[Case]:
    t = "ID_Encoding"
    head = "User-agent: FooBot\nDisallow: /\n"
    query = "/foo/bar?qux=taz&baz=http://foo.bar?tar&par"
    raw, encoded = "http://foo.bar/foo/bar/ツ", "http://foo.bar/foo/bar/%E3%83%84"
    return [
        Case(t, f"{head}Allow: {query}\n", "FooBot", "http://foo.bar" + query, True),
        Case(t, head + "Allow: /foo/bar/ツ\n", "FooBot", encoded, True),
        Case(t, head + "Allow: /foo/bar/ツ\n", "FooBot", raw, False, rfc=RFC_SAYS_OTHERWISE),
        Case(t, head + "Allow: /foo/bar/%E3%83%84\n", "FooBot", encoded, True),
        Case(t, head + "Allow: /foo/bar/%E3%83%84\n", "FooBot", raw, False, rfc=RFC_SAYS_OTHERWISE),
        Case(
            t,
            head + "Allow: /foo/bar/%62%61%7A\n",
            "FooBot",
            "http://foo.bar/foo/bar/baz",
            False,
            rfc=RFC_SAYS_OTHERWISE,
        ),
        Case(
            t,
            head + "Allow: /foo/bar/%62%61%7A\n",
            "FooBot",
            "http://foo.bar/foo/bar/%62%61%7A",
            True,
        ),
    ]


def cases_special_characters() -> list[Case]:
    t = "ID_SpecialCharacters"
    ua = "User-agent: FooBot\n"
    wildcard = ua + "Disallow: /foo/bar/quz\nAllow: /foo/*/qux\n"
    anchor = ua + "Disallow: /foo/bar$\nAllow: /foo/bar/qux\n"
    comment = ua + "# Disallow: /\nDisallow: /foo/quz#qux\nAllow: /\n"
    table = [
        (wildcard, "/foo/bar/quz", False),
        (wildcard, "/foo/quz", True),
        (wildcard, "/foo//quz", True),
        (wildcard, "/foo/bax/quz", True),
        (anchor, "/foo/bar", False),
        (anchor, "/foo/bar/qux", True),
        (anchor, "/foo/bar/", True),
        (anchor, "/foo/bar/baz", True),
        (comment, "/foo/bar", True),
        (comment, "/foo/quz", False),
    ]
    cases = [Case(t, r, "FooBot", "http://foo.bar" + path, ref) for r, path, ref in table]
    t = "GoogleOnly_IndexHTMLisDirectory"
    robots = "User-Agent: *\nAllow: /allowed-slash/index.html\nDisallow: /\n"
    table = [
        (robots, "/allowed-slash/", True),
        (robots, "/allowed-slash/index.htm", False),
        (robots, "/allowed-slash/index.html", True),
        (robots, "/anyother-url", False),
    ]
    cases += [Case(t, r, "foobot", "http://foo.com" + path, ref) for r, path, ref in table]
    return cases


def cases_line_too_long() -> list[Case]:
    t = "GoogleOnly_LineTooLong"
    max_line = 2083 * 8
    allow, disallow = "allow: ", "disallow: "
    # As the reference pads them: the rule line is 2 bytes over the cap before "/qux".
    longline = "/x/".ljust(max_line - 3 - len(disallow) + 1, "a")
    robots = f"user-agent: FooBot\n{disallow}{longline}/qux\n"
    cases = [
        Case(t, robots, "FooBot", "http://foo.bar/fux", True),
        Case(t, robots, "FooBot", f"http://foo.bar{longline}/fux", False),
    ]
    size = max_line - 3 - len(allow) + 1
    long_a, long_b = "/x/".ljust(size, "a"), "/x/".ljust(size, "b")
    robots = f"{FOOBOT_DISALLOW_ALL}{allow}{long_a}/qux\n{allow}{long_b}/qux\n"
    cases += [
        Case(t, robots, "FooBot", "http://foo.bar/", False),
        Case(t, robots, "FooBot", f"http://foo.bar{long_a}/qux", True),
        Case(t, robots, "FooBot", f"http://foo.bar{long_b}/fux", True),
    ]
    return cases


def _doc_cases(pattern: str, allowed: list[str], disallowed: list[str]) -> list[Case]:
    robots = f"user-agent: FooBot\ndisallow: /\nallow: {pattern}\n"
    t = "GoogleOnly_DocumentationChecks"
    cases = [Case(t, robots, "FooBot", "http://foo.bar" + p, True) for p in allowed]
    return cases + [Case(t, robots, "FooBot", "http://foo.bar" + p, False) for p in disallowed]


def cases_documentation() -> list[Case]:
    fish_allowed = [
        "/fish",
        "/fish.html",
        "/fish/salmon.html",
        "/fishheads",
        "/fishheads/yummy.html",
        "/fish.html?id=anything",
    ]
    cases = _doc_cases("/fish", fish_allowed, ["/bar", "/Fish.asp", "/catfish", "/?id=fish"])
    cases += _doc_cases("/fish*", fish_allowed, ["/bar", "/Fish.bar", "/catfish", "/?id=fish"])
    cases += _doc_cases(
        "/fish/",
        ["/fish/", "/fish/salmon", "/fish/?salmon", "/fish/salmon.html", "/fish/?id=anything"],
        ["/bar", "/fish", "/fish.html", "/Fish/Salmon.html"],
    )
    cases += _doc_cases(
        "/*.php",
        [
            "/filename.php",
            "/folder/filename.php",
            "/folder/filename.php?parameters",
            "//folder/any.php.file.html",
            "/filename.php/",
            "/index?f=filename.php/",
        ],
        ["/bar", "/php/", "/index?php", "/windows.PHP"],
    )
    cases += _doc_cases(
        "/*.php$",
        ["/filename.php", "/folder/filename.php"],
        [
            "/bar",
            "/filename.php?parameters",
            "/filename.php/",
            "/filename.php5",
            "/php/",
            "/filename?php",
            "/aaaphpaaa",
            "//windows.PHP",
        ],
    )
    cases += _doc_cases(
        "/fish*.php",
        ["/fish.php", "/fishheads/catfish.php?parameters"],
        ["/bar", "/Fish.PHP"],
    )
    return cases + cases_precedence()


def cases_precedence() -> list[Case]:
    t = "GoogleOnly_DocumentationChecks"
    ua = "user-agent: FooBot\n"
    table = [
        (ua + "allow: /p\ndisallow: /\n", "http://example.com/page", True),
        (ua + "allow: /folder\ndisallow: /folder\n", "http://example.com/folder/page", True),
        (ua + "allow: /page\ndisallow: /*.htm\n", "http://example.com/page.htm", False),
        (ua + "allow: /$\ndisallow: /\n", "http://example.com/", True),
        (ua + "allow: /$\ndisallow: /\n", "http://example.com/page.html", False),
    ]
    return [Case(t, robots, "FooBot", url, ref) for robots, url, ref in table]


GOOGLE_CASES = [
    *cases_system_and_syntax(),
    *cases_groups(),
    *cases_case_insensitivity(),
    *cases_user_agents(),
    *cases_longest_match(),
    *cases_encoding(),
    *cases_special_characters(),
    *cases_line_too_long(),
    *cases_documentation(),
]


def answer(case: Case) -> bool:
    if case.robots is None:  # RobotsMatcher::IsValidUserAgentToObey
        return bool(case.agent) and product_token(case.agent) == case.agent
    return is_allowed(case.robots, case.agent, case.url)


@pytest.mark.parametrize(
    "case", GOOGLE_CASES, ids=[f"{i}-{c.test}" for i, c in enumerate(GOOGLE_CASES)]
)
def test_google_reference_case(case: Case) -> None:
    assert answer(case) is case.ours


def test_agreement_with_reference() -> None:
    agreeing = sum(answer(case) is case.reference for case in GOOGLE_CASES)
    # 156 EXPECT_TRUE/EXPECT_FALSE in robots_test.cc (google/robotstxt at c8ac4b1); the one
    # difference is UA_IS_HEADER, an API choice rather than a matching one.
    assert (agreeing, len(GOOGLE_CASES)) == (155, 156)
    # The figure NOTES.md quotes for protego (86 %) and robotspy (96 %): the 72 IsUserAgentAllowed
    # cases of the ID_ (RFC) tests. protego 0.7 scores 62 of these 72 on this port.
    rfc_cases = [c for c in GOOGLE_CASES if c.test.startswith("ID_") and c.robots is not None]
    assert sum(answer(c) is c.reference for c in rfc_cases) == len(rfc_cases) == 72
    assert sum(bool(c.rfc) for c in GOOGLE_CASES) == 3


def test_ported_case_lengths_match_reference() -> None:
    # The reference pads its long lines to exactly these lengths; a slip in the port would
    # make the LineTooLong cases pass for the wrong reason.
    robots = cases_line_too_long()[0].robots
    assert robots is not None
    assert len(robots.splitlines()[1]) == 2083 * 8 + 2
    robots = cases_line_too_long()[2].robots
    assert robots is not None
    assert [len(line) for line in robots.splitlines()[2:]] == [2083 * 8 + 2] * 2


# --- 2. The reference's other checks, as behaviour -------------------------------------------

LINE_ENDINGS = {
    "unix": "User-Agent: foo\nAllow: /some/path\nUser-Agent: bar\n\n\nDisallow: /\n",
    "dos": "User-Agent: foo\r\nAllow: /some/path\r\nUser-Agent: bar\r\n\r\n\r\nDisallow: /\r\n",
    "mac": "User-Agent: foo\rAllow: /some/path\rUser-Agent: bar\r\r\rDisallow: /\r",
    "no-final-newline": "User-Agent: foo\nAllow: /some/path\nUser-Agent: bar\n\n\nDisallow: /",
    "mixed": "User-Agent: foo\nAllow: /some/path\r\nUser-Agent: bar\n\r\n\nDisallow: /",
}


@pytest.mark.parametrize("robots", LINE_ENDINGS.values(), ids=LINE_ENDINGS.keys())
def test_line_endings(robots: str) -> None:
    rules = RobotsRules.parse(robots)
    assert rules.is_allowed("foo", "/anything")
    assert not rules.is_allowed("bar", "/anything")
    assert not rules.is_allowed("bar", "/some/path")


@pytest.mark.parametrize(
    ("prefix", "applies"),
    [
        (b"\xef\xbb\xbf", True),
        (b"\xef\xbb", True),
        (b"\xef", True),
        (b"", True),
        (b"\xef\x11\xbf", False),  # a broken mark garbles the user-agent line
    ],
)
def test_byte_order_mark_is_skipped(prefix: bytes, applies: bool) -> None:
    rules = RobotsRules.parse(prefix + b"User-Agent: foo\nDisallow: /AnyValue\n")
    assert rules.is_allowed("foo", "/AnyValue") is not applies


def test_byte_order_mark_only_at_start() -> None:
    rules = RobotsRules.parse(b"User-Agent: foo\n\xef\xbb\xbfDisallow: /AnyValue\n")
    assert rules.is_allowed("foo", "/AnyValue")


@pytest.mark.parametrize("where", ["end", "start"])
def test_sitemap_anywhere(where: str) -> None:
    body = "User-Agent: foo\nAllow: /some/path\nUser-Agent: bar\n\n\n"
    line = "Sitemap: http://foo.bar/sitemap.xml\n"
    rules = RobotsRules.parse(body + line if where == "end" else line + body)
    assert rules.sitemaps == ("http://foo.bar/sitemap.xml",)


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("", "/"),
        ("http://www.example.com", "/"),
        ("http://www.example.com/", "/"),
        ("http://www.example.com/a", "/a"),
        ("http://www.example.com/a/", "/a/"),
        ("http://www.example.com/a/b?c=http://d.e/", "/a/b?c=http://d.e/"),
        ("http://www.example.com/a/b?c=d&e=f#fragment", "/a/b?c=d&e=f"),
        ("example.com", "/"),
        ("example.com/", "/"),
        ("example.com/a", "/a"),
        ("example.com/a/", "/a/"),
        ("example.com/a/b?c=d&e=f#fragment", "/a/b?c=d&e=f"),
        ("a", "/"),
        ("a/", "/"),
        ("/a", "/a"),
        ("a/b", "/b"),
        ("example.com?a", "/?a"),
        ("example.com/a;b#c", "/a;b"),
        ("//a/b/c", "/b/c"),
        # Ours, beyond the reference's list: the engine's own shapes.
        ("/a/b?q=1#frag", "/a/b?q=1"),
        ("https://h:8080/p?x=http://y/z#f", "/p?x=http://y/z"),
        ("https://h#frag/x", "/"),
    ],
)
def test_path_and_query(url: str, path: str) -> None:
    assert _path_and_query(url) == path


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        ("http://www.example.com", "http://www.example.com"),
        ("/a/b/c", "/a/b/c"),
        ("á", "%C3%A1"),
        ("%aa", "%AA"),
        # Ours: escapes upper-cased but never decoded, `*` and `$` untouched, a stray `%` kept.
        ("/%7euser/%2f%3A", "/%7Euser/%2F%3A"),
        ("/a$b*c$", "/a$b*c$"),
        ("/100%", "/100%"),
        ("/%zz%4", "/%zz%4"),
    ],
)
def test_normalize_pattern(raw: str, normalized: str) -> None:
    assert _normalize_pattern(raw.encode()) == normalized


# --- 3. RFC 9309 examples and our own semantics ----------------------------------------------

RFC_SIMPLE_EXAMPLE = """\
User-Agent: *
Disallow: *.gif$
Disallow: /example/
Allow: /publications/

User-Agent: foobot
Disallow:/
Allow:/example/page.html
Allow:/example/allowed.gif

User-Agent: barbot
User-Agent: bazbot
Disallow: /example/page.html

User-Agent: quxbot

EOF
"""


@pytest.mark.parametrize(
    ("agent", "path", "allowed"),
    [
        ("otherbot", "/publications/x", True),
        ("otherbot", "/example/x", False),
        ("otherbot", "/a/b.gif", False),
        ("otherbot", "/a/b.gif?x", True),
        ("foobot", "/example/page.html", True),
        ("foobot", "/example/allowed.gif", True),
        ("foobot", "/publications/x", False),
        ("barbot", "/example/page.html", False),
        ("bazbot", "/example/page.html", False),
        ("bazbot", "/example/other.html", True),
        ("quxbot", "/example/x", True),
    ],
)
def test_rfc_simple_example(agent: str, path: str, allowed: bool) -> None:
    assert is_allowed(RFC_SIMPLE_EXAMPLE, agent, path) is allowed


def test_rfc_longest_match_example() -> None:
    robots = "User-Agent: foobot\nAllow: /example/page/\nDisallow: /example/page/disallowed.gif\n"
    assert not is_allowed(robots, "foobot", "http://example.com/example/page/disallowed.gif")
    assert is_allowed(robots, "foobot", "http://example.com/example/page/other.gif")


@pytest.mark.parametrize(
    ("pattern", "url"),
    [
        # RFC 9309 §2.2.3: a literal `*` or `$` in the URI is matched by %2A / %24.
        ("/path/file-with-a-%2A.html", "https://www.example.com/path/file-with-a-*.html"),
        ("/path/file-with-a-%2a.html", "https://www.example.com/path/file-with-a-%2a.html"),
        ("/path/a*b-%2A", "https://www.example.com/path/a-x-b-%2A"),
        ("/path/foo-%24", "https://www.example.com/path/foo-$"),
        ("/path/foo-%24", "https://www.example.com/path/foo-%24"),
        ("/path/foo-$bar", "https://www.example.com/path/foo-$bar"),
        # Escapes compare case-insensitively; a raw non-ASCII pattern matches its encoding.
        ("/café", "https://www.example.com/caf%c3%a9"),
        ("/caf%c3%a9", "https://www.example.com/caf%C3%A9"),
    ],
)
def test_percent_encoding_matches(pattern: str, url: str) -> None:
    assert not is_allowed(f"User-agent: *\nDisallow: {pattern}\n", "bot", url)


@pytest.mark.parametrize(
    ("pattern", "url"),
    [
        ("/path/file-with-a-%2A.html", "https://www.example.com/path/file-with-a-x.html"),
        ("/path/foo-%24", "https://www.example.com/path/foo-"),
        # Following the reference's tests, not RFC 9309 §2.2.2 (see RFC_SAYS_OTHERWISE).
        ("/~joe/", "https://www.example.com/%7Ejoe/x"),
        ("/%7Ejoe/", "https://www.example.com/~joe/x"),
        ("/caf%C3%A9", "https://www.example.com/café"),
    ],
)
def test_percent_encoding_does_not_match(pattern: str, url: str) -> None:
    assert is_allowed(f"User-agent: *\nDisallow: {pattern}\n", "bot", url)


def test_reserved_characters_stay_distinct() -> None:
    robots = "User-agent: *\nDisallow: /a%2Fb\n"
    assert is_allowed(robots, "bot", "/a/b")
    assert not is_allowed(robots, "bot", "/a%2fb")


def test_merged_groups() -> None:
    robots = "user-agent: ExampleBot\ndisallow: /foo\ndisallow: /bar\n\nuser-agent: ExampleBot\ndisallow: /baz\n"
    rules = RobotsRules.parse(robots)
    assert not any(rules.is_allowed("ExampleBot", p) for p in ("/foo", "/bar", "/baz"))
    assert rules.is_allowed("ExampleBot", "/qux")


def test_group_with_star_and_named_agent() -> None:
    rules = RobotsRules.parse("User-agent: *\nUser-agent: a\nDisallow: /x\n")
    assert not rules.is_allowed("a", "/x")
    assert not rules.is_allowed("b", "/x")


def test_rules_outside_groups_and_missing_colon_with_three_words() -> None:
    rules = RobotsRules.parse("Disallow: /\nuser agent FooBot\nDisallow: /x\n")
    assert rules.is_allowed("FooBot", "/x")  # three words: not a line, so no group
    assert RobotsRules.parse("User agent: FooBot\nDissallow: /x\n").is_allowed("FooBot", "/y")
    assert not RobotsRules.parse("User agent: FooBot\nDissallow: /x\n").is_allowed("foobot", "/x")


def test_robots_txt_always_allowed() -> None:
    rules = RobotsRules.parse("User-agent: *\nDisallow: /\n")
    assert rules.is_allowed("bot", "https://h/robots.txt")
    assert rules.is_allowed("bot", "/robots.txt?x=1")
    assert not rules.is_allowed("bot", "/robots.txt.bak")
    assert RobotsRules.disallow_all().is_allowed("bot", "http://h/robots.txt")


@pytest.mark.parametrize(
    ("user_agent", "token"),
    [
        ("MyBot/1.2 (+http://x)", "MyBot"),
        ("MyBot", "MyBot"),
        ("my_bot-x/2", "my_bot-x"),
        ("  MyBot/1 ", "MyBot"),
        ("Mozilla/5.0 (compatible; ExampleBot/0.1)", "Mozilla"),
        ("ツBot", ""),
        ("", ""),
    ],
)
def test_product_token(user_agent: str, token: str) -> None:
    assert product_token(user_agent) == token


def test_full_user_agent_string_selects_group() -> None:
    rules = RobotsRules.parse("User-agent: *\nDisallow: /\nUser-agent: mybot\nDisallow: /private\n")
    assert rules.is_allowed("MyBot/1.2 (+http://x)", "https://h/public")
    assert not rules.is_allowed("MyBot/1.2 (+http://x)", "https://h/private/a")
    assert not rules.is_allowed("OtherBot/1.0", "https://h/public")
    # The cached group is per agent string, so a second agent is not served the first's.
    assert rules.is_allowed("MyBot/1.2 (+http://x)", "https://h/public")


@pytest.mark.parametrize(
    ("value", "delay"),
    [("10", 10.0), ("0.5", 0.5), (".5", 0.5), ("3.", 3.0), ("0", 0.0)],
)
def test_crawl_delay_valid(value: str, delay: float) -> None:
    assert RobotsRules.parse(f"User-agent: a\nCrawl-delay: {value}\n").crawl_delay("a") == delay


@pytest.mark.parametrize("value", ["", "-1", "abc", "1e3", "nan", "inf", "1_0", "5s", "1,5"])
def test_crawl_delay_invalid_is_ignored(value: str) -> None:
    assert RobotsRules.parse(f"User-agent: a\nCrawl-delay: {value}\n").crawl_delay("a") is None


def test_crawl_delay_per_group() -> None:
    robots = (
        "User-agent: *\nCrawl-delay: 2\nDisallow: /x\n\n"
        "User-agent: a\nCrawl-delay: 5\nDisallow: /a\n\nUser-agent: a\ncrawl-delay: 7\nAllow: /\n\n"
        "User-agent: b\nDisallow: /y\n\n"
        # Crawl-delay is not a rule, so it does not close the user-agent list: c and d share.
        "User-agent: c\nCrawl-delay: 1\nUser-agent: d\nDisallow: /z\n"
    )
    rules = RobotsRules.parse(robots)
    assert rules.crawl_delay("a/1.0") == 7.0  # merged groups: the larger value
    assert rules.crawl_delay("b") is None  # b's own group has none; * does not leak in
    assert rules.crawl_delay("zzz") == 2.0
    assert rules.crawl_delay("c") == rules.crawl_delay("d") == 1.0
    assert not rules.is_allowed("c", "/z")
    assert RobotsRules.allow_all().crawl_delay("a") is None


def test_sitemaps_global_deduplicated_and_unescaped() -> None:
    robots = (
        "Sitemap: https://h/s1.xml\nUser-agent: a\nDisallow: /\nsitemap: https://h/s2.xml\n"
        "Site-map: https://h/s1.xml\nSitemap:\nSitemap: https://h/ü.xml\n"
    )
    rules = RobotsRules.parse(robots)
    assert rules.sitemaps == ("https://h/s1.xml", "https://h/s2.xml", "https://h/ü.xml")
    # A sitemap line does not close the group (RFC 9309 §2.2.4).
    assert not rules.is_allowed("a", "/x")


def test_str_and_bytes_agree() -> None:
    text = "User-agent: *\nDisallow: /café\nAllow: /café/ok\n"
    for rules in (RobotsRules.parse(text), RobotsRules.parse(text.encode())):
        assert not rules.is_allowed("bot", "/caf%C3%A9/x")
        assert rules.is_allowed("bot", "/caf%C3%A9/ok")
        assert rules.is_allowed("bot", "/cafe")
    assert RobotsRules.parse(text) == RobotsRules.parse(text.encode())


def test_non_utf8_pattern_bytes_are_escaped_not_replaced() -> None:
    # A Latin-1 robots.txt: the octet itself is %-encoded, as the reference does.
    rules = RobotsRules.parse(b"User-agent: *\nDisallow: /caf\xe9\n")
    assert not rules.is_allowed("bot", "/caf%E9")
    assert rules.is_allowed("bot", "/caf%EF%BF%BD")


def test_allow_all_and_disallow_all() -> None:
    assert RobotsRules.allow_all().is_allowed("bot", "https://h/x")
    assert not RobotsRules.disallow_all().is_allowed("bot", "https://h/x")
    assert not RobotsRules.disallow_all().is_allowed("", "")
    assert RobotsRules.allow_all().sitemaps == ()
    assert RobotsRules.allow_all() == RobotsRules.parse("")


def test_rules_are_hashable_and_frozen() -> None:
    rules = RobotsRules.parse("User-agent: *\nDisallow: /x\n")
    assert hash(rules) == hash(RobotsRules.parse("User-agent: *\nDisallow: /x\n"))
    with pytest.raises(AttributeError):
        rules._sitemaps = ()  # type: ignore[misc]


# --- the size cap ----------------------------------------------------------------------------


def _big_robots(tail: str) -> str:
    head = "User-agent: *\nDisallow: /early\n"
    filler = "# " + "x" * 97 + "\n"  # 100 bytes a line
    lines = 600_000 // len(filler)
    return head + filler * lines + tail


def test_file_over_cap_is_truncated() -> None:
    robots = _big_robots("Disallow: /late\nSitemap: https://h/late.xml\n")
    assert len(robots) > 600_000
    rules = RobotsRules.parse(robots)
    assert not rules.is_allowed("bot", "/early")
    assert rules.is_allowed("bot", "/late")
    assert rules.sitemaps == ()
    assert RobotsRules.parse(robots.encode()) == rules


def test_line_cut_by_cap_is_dropped() -> None:
    head = "User-agent: *\n"
    rule = "Disallow: /cut-here-and-you-get-a-different-rule\n"
    padding = "#" * (MAX_ROBOTS_BYTES - len(head) - 12) + "\n"
    robots = head + padding + rule  # the cap falls inside `rule`, after "Disallow: /"
    rules = RobotsRules.parse(robots)
    assert rules.is_allowed("bot", "/anything")
    # Cut exactly at a line end: the last full line is kept.
    exact = head + "#" * (MAX_ROBOTS_BYTES - len(head) - len(rule) - 1) + "\n" + rule
    assert len(exact.encode()) == MAX_ROBOTS_BYTES
    assert not RobotsRules.parse(exact + "x" * 10).is_allowed(
        "bot", "/cut-here-and-you-get-a-different-rule"
    )


# --- properties ------------------------------------------------------------------------------

AGENTS = st.sampled_from(["FooBot", "foobot/1.0", "*", "", "ツ", "Bar Bot", "x"])
URLS = st.one_of(
    st.text(max_size=40),
    st.builds(lambda p: "https://h.example" + p, st.text(max_size=30)),
    st.builds(lambda p: "/" + p, st.text(alphabet="/ab*$%?#9AF~ü", max_size=20)),
)
LINES = st.lists(
    st.one_of(
        st.sampled_from(
            ["user-agent: *", "User-agent: FooBot", "Disallow: /", "Allow: /a", "Crawl-delay: 1"]
        ),
        st.builds(
            lambda k, v: f"{k}: {v}",
            st.sampled_from(["allow", "disallow", "user-agent", "sitemap", "crawl-delay"]),
            st.text(alphabet="/ab*$%?#9AF~ü \t", max_size=12),
        ),
        st.text(max_size=20),
    ),
    max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(body=st.binary(max_size=300), agent=AGENTS, url=URLS)
def test_never_raises_on_arbitrary_bytes(body: bytes, agent: str, url: str) -> None:
    rules = RobotsRules.parse(body)
    assert isinstance(rules.is_allowed(agent, url), bool)
    delay = rules.crawl_delay(agent)
    assert delay is None or delay >= 0
    assert all(isinstance(s, str) for s in rules.sitemaps)


@settings(max_examples=300, deadline=None)
@given(lines=LINES, agent=AGENTS, url=URLS, newline=st.sampled_from(["\n", "\r\n", "\r"]))
def test_line_ending_never_changes_the_answer(
    lines: list[str], agent: str, url: str, newline: str
) -> None:
    lines = [re.sub(r"[\r\n]", "", line) for line in lines]
    expected = is_allowed("\n".join(lines), agent, url)
    assert is_allowed(newline.join(lines), agent, url) is expected


@settings(deadline=None)
@given(
    agents=st.lists(st.sampled_from(["*", "FooBot", "BarBot", "a_b-c"]), min_size=1, max_size=4),
    agent=AGENTS,
    url=URLS,
)
def test_only_empty_disallow_allows_everything(agents: list[str], agent: str, url: str) -> None:
    robots = "".join(f"User-agent: {a}\nDisallow:\n\n" for a in agents) + "Disallow:\n"
    assert is_allowed(robots, agent, url)


@settings(deadline=None)
@given(agent=st.text(max_size=20), url=URLS)
def test_allow_all_and_disallow_all_properties(agent: str, url: str) -> None:
    assert RobotsRules.allow_all().is_allowed(agent, url)
    is_robots_txt = _path_and_query(url).split("?")[0] == "/robots.txt"
    assert RobotsRules.disallow_all().is_allowed(agent, url) is is_robots_txt


def _reference_match(path: str, pattern: str) -> bool:
    """The reference's position-set matcher, written independently, as an oracle."""
    positions = {0}
    for i, char in enumerate(pattern):
        if char == "$" and i == len(pattern) - 1:
            return len(path) in positions
        if char == "*":
            positions = set(range(min(positions), len(path) + 1))
        else:
            positions = {p + 1 for p in positions if p < len(path) and path[p] == char}
            if not positions:
                return False
    return True


@settings(max_examples=500, deadline=None)
@given(
    pattern=st.text(alphabet="/ab*$", max_size=8),
    path=st.text(alphabet="/ab$", max_size=10),
)
def test_wildcard_matcher_agrees_with_reference_algorithm(pattern: str, path: str) -> None:
    # Both sides use raw text (no normalisation), so a mid-pattern `$` is a literal here.
    rule = _compile_rule(True, pattern)
    ours = path.startswith(rule.head) and (rule.plain or _matches_rest(rule, path))
    assert ours is _reference_match(path, pattern)


@settings(max_examples=500, deadline=None)
@given(
    rules=st.lists(
        st.tuples(st.booleans(), st.text(alphabet="/ab*$", min_size=1, max_size=6)), max_size=6
    ),
    path=st.text(alphabet="/ab$", max_size=8),
)
def test_longest_match_agrees_with_reference_algorithm(
    rules: list[tuple[bool, str]], path: str
) -> None:
    path = "/" + path
    robots = "User-agent: *\n" + "".join(
        f"{'Allow' if allow else 'Disallow'}: {pattern}\n" for allow, pattern in rules
    )
    # The reference: the longest matching allow and disallow patterns, by pattern length;
    # disallowed only when the disallow is strictly longer.
    allow_len, disallow_len = (
        max((len(p) for a, p in rules if a is kind and _reference_match(path, p)), default=0)
        for kind in (True, False)
    )
    assert is_allowed(robots, "bot", "http://h" + path) is (disallow_len <= allow_len)


def test_pathological_pattern_is_fast_enough_to_finish() -> None:
    # Linear matching: a backtracking regex would take far longer on this (no timing asserted;
    # the test would hit pytest-timeout instead).
    robots = "User-agent: *\nDisallow: /" + "*a" * 2000 + "b\n"
    assert is_allowed(robots, "bot", "/" + "a" * 5000)


# --- 4. The compiled matcher ------------------------------------------------------------------

PATTERN_PIECES = ["a", "b", "/", "*", "$", "ab", "ba", "?", "%2A", "%24", "%2f", "é", "x="]
PATH_PIECES = ["a", "b", "/", "*", "$", "ab", "?", "%2A", "%2a", "%24", "%2F", "%C3%A9", "x="]


def _robots_txt(rules: list[tuple[bool, str]]) -> str:
    lines = (f"{'Allow' if allow else 'Disallow'}: {pattern}\n" for allow, pattern in rules)
    return "User-agent: *\n" + "".join(lines)


def _robots(rules: list[tuple[bool, str]]) -> RobotsRules:
    return RobotsRules.parse(_robots_txt(rules))


def _policy(rules: list[tuple[bool, str]]) -> _Policy:
    return _robots(rules)._policy("bot") or _Policy(rules=(), crawl_delay_s=None)


@settings(max_examples=400, deadline=None)
@given(
    rules=st.lists(
        st.tuples(
            st.booleans(),
            st.lists(st.sampled_from(PATTERN_PIECES), max_size=6).map(lambda p: "/" + "".join(p)),
        ),
        max_size=40,
    ),
    paths=st.lists(
        st.lists(st.sampled_from(PATH_PIECES), max_size=10).map(lambda p: "/" + "".join(p)),
        min_size=1,
        max_size=8,
    ),
)
def test_compiled_matcher_agrees_with_plain_loop(
    rules: list[tuple[bool, str]], paths: list[str]
) -> None:
    # Ties come from allow and disallow of one pattern, and from patterns of equal length.
    rules += [(not allow, pattern) for allow, pattern in rules[:3]]
    policy = _policy(rules)
    # Both layouts of the wildcard rules: one regex (these are short) and the index.
    matchers = [_compile_policy(policy, few=1000), _compile_policy(policy, few=0)]
    assert matchers[0].grams is None and matchers[1].wildcards is None
    for raw in paths:
        path = _normalize_url_path(raw)
        expected = _slow_allows(policy, path)
        for matcher in matchers:
            allowed, steps = matcher.check(path)
            assert steps <= _MAX_MATCH_STEPS  # these rule sets are far from the budget
            assert allowed is expected, raw
        assert _robots(rules).is_allowed("bot", "https://h" + raw) is expected


def test_strongest_prefix_is_not_always_the_longest_head() -> None:
    # "/x%24" (5 characters as written) outranks "/x$y" (4), though its head "/x$" is shorter.
    robots = "User-agent: *\nDisallow: /x%24\nAllow: /x$y\nAllow: /x%24y%24\n"
    rules = RobotsRules.parse(robots)
    assert not rules.is_allowed("bot", "/x$yz")
    assert not rules.is_allowed("bot", "/x%24yz")
    assert rules.is_allowed("bot", "/x$y$z")  # "/x%24y%24" (9) outranks "/x%24"


def test_trailing_wildcards_are_prefix_rules_with_their_own_rank() -> None:
    # "/a/*", "/a/**" and "/a/*$" test the prefix "/a/", each with its own length.
    assert is_allowed("User-agent: *\nDisallow: /a/*\nAllow: /a/b\n", "bot", "/a/b")  # a tie
    assert not is_allowed("User-agent: *\nDisallow: /a/**\nAllow: /a/b\n", "bot", "/a/b")
    robots = "User-agent: *\nDisallow: /a/**\nAllow: /a/*$\n"
    assert is_allowed(robots, "bot", "/a/c")  # 5 characters each: allow wins the tie
    assert is_allowed(robots, "bot", "/a")  # neither: "/a" is not under "/a/"


# --- hostile and huge files --------------------------------------------------------------------

HOSTILE_RULES = 15_000  # distinct rules in one group, within MAX_ROBOTS_BYTES
WORD_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"
STEPS_BOUND = 64  # the most steps a URL may take against the files below not crafted for it


def _words(rng: random.Random, count: int, low: int = 5, high: int = 8) -> list[str]:
    words: dict[str, None] = {}
    while len(words) < count:
        words["".join(rng.choices(WORD_ALPHABET, k=rng.randint(low, high)))] = None
    return list(words)


def _wild_slash(rng: random.Random, i: int, word: str, other: str) -> str:
    return (f"/*{word}", f"/*{word}*{other[:4]}$", f"/*{word}?")[i % 3]


def _wild_heads(rng: random.Random, i: int, word: str, other: str) -> str:
    return f"/dir{i}/*.php" if i % 2 else f"/{word}/*{other[:4]}"


def _plain(rng: random.Random, i: int, word: str, other: str) -> str:
    return f"/{word}/{other[:5]}"


def _exact(rng: random.Random, i: int, word: str, other: str) -> str:
    return f"/{word}/{other[:5]}$"


def _mixed(rng: random.Random, i: int, word: str, other: str) -> str:
    return rng.choice([_wild_slash, _wild_heads, _plain, _exact])(rng, i, word, other)


SHAPES: dict[str, Callable[[random.Random, int, str, str], str]] = {
    "wildcards-after-slash": _wild_slash,
    "wildcards-with-heads": _wild_heads,
    "plain-prefixes": _plain,
    "exact": _exact,
    "mixed": _mixed,
}


def _a_match_of(pattern: str, rng: random.Random) -> str:
    """A path that `pattern` matches: each `*` becomes random text, a final `$` goes."""
    body = pattern.removesuffix("$")
    return re.sub(r"\*", lambda _: "".join(rng.choices(WORD_ALPHABET, k=rng.randint(0, 5))), body)


@pytest.mark.parametrize("shape", SHAPES)
def test_huge_file_answers_correctly_with_few_steps(shape: str) -> None:
    rng = random.Random(shape)
    words = _words(rng, 2 * HOSTILE_RULES)
    maker = SHAPES[shape]
    rules = [
        (shape == "mixed" and rng.random() < 0.5, maker(rng, i, words[2 * i], words[2 * i + 1]))
        for i in range(HOSTILE_RULES)
    ]
    robots = _robots_txt(rules)
    assert len(robots.encode()) <= MAX_ROBOTS_BYTES
    parsed = RobotsRules.parse(robots)
    policy = parsed._policy("bot")
    matcher = parsed._matcher("bot")
    assert policy is not None and matcher is not None
    assert len(policy.rules) == HOSTILE_RULES
    hits = [(allow, _a_match_of(pattern, rng)) for allow, pattern in rng.sample(rules, 40)]
    misses = [f"/shop/{word}/item-{rng.randint(1, 99)}.html?page=2" for word in _words(rng, 40)]
    for expected, path in hits + [(True, path) for path in misses]:
        allowed, steps = matcher.check(path)
        assert steps <= STEPS_BOUND, (path, steps)
        if shape == "mixed":  # another rule may match too: ask the plain loop
            expected = _slow_allows(policy, path)
        assert allowed is expected, path
        assert parsed.is_allowed("bot", "https://example.com" + path) is allowed


def test_deeply_nested_prefixes() -> None:
    # Each rule a prefix of the next, alternately allowed: the longest match decides.
    robots = "User-agent: *\n" + "".join(
        f"{'Allow' if depth % 2 else 'Disallow'}: /{'a' * depth}\n" for depth in range(1, 900)
    )
    assert len(robots) <= MAX_ROBOTS_BYTES
    rules = RobotsRules.parse(robots)
    for depth in (1, 2, 3, 450, 451, 898, 899, 2000):
        assert rules.is_allowed("bot", "/" + "a" * depth) is bool(min(depth, 899) % 2)
        assert rules.is_allowed("bot", "/" + "a" * depth + "b") is bool(min(depth, 899) % 2)
    assert rules.is_allowed("bot", "/b")


def test_crafted_file_hits_the_budget_and_is_disallowed() -> None:
    # Every rule's literals occur in the target path, but in the wrong order: every rule is a
    # candidate and none matches, so the check must give up and answer conservatively.
    rng = random.Random(7)
    target = "/" + "".join(rng.choices(WORD_ALPHABET, k=200))
    patterns: dict[str, None] = {}
    while len(patterns) < HOSTILE_RULES:
        i = rng.randrange(1, len(target) - 8)
        j = rng.randrange(i + 4, len(target) - 3)
        first, second = target[i : i + 4], target[j : j + 4]
        if re.search(f"{second}.*{first}", target) is None:
            patterns[f"/*{second}*{first}"] = None
    robots = "User-agent: *\nAllow: /\n" + "".join(f"Disallow: {p}\n" for p in patterns)
    assert len(robots) <= MAX_ROBOTS_BYTES
    rules = RobotsRules.parse(robots)
    matcher = rules._matcher("bot")
    assert matcher is not None
    allowed, steps = matcher.check(target)
    assert not allowed  # the plain loop would allow it: no rule matches
    assert _slow_allows(rules._policy("bot"), target)  # type: ignore[arg-type]
    # It stopped at the budget: past it by at most the cost of the rule that crossed it.
    assert _MAX_MATCH_STEPS < steps <= _MAX_MATCH_STEPS + 2
    assert not rules.is_allowed("bot", target)
    # Paths the crafted rules were not aimed at are still answered, cheaply.
    allowed, steps = matcher.check("/shop/item-12.html")
    assert allowed and steps <= STEPS_BOUND


def test_many_segments_count_against_the_budget() -> None:
    # A rule costs a step a segment: one that may search for more than the budget allows is
    # not evaluated where its key ("ab") occurs in the path, and the URL is disallowed.
    def robots(segments: int) -> str:
        return f"User-agent: *\nDisallow: /\nAllow: /{'*a' * segments}b\n"

    path = "/" + "a" * 3000 + "b"  # the allow rules below all match it
    assert is_allowed(robots(_MAX_MATCH_STEPS), "bot", path)
    assert not is_allowed(robots(_MAX_MATCH_STEPS + 1), "bot", path)
    costly = RobotsRules.parse(robots(_MAX_MATCH_STEPS + 1))._matcher("bot")
    assert costly is not None
    assert costly.check("/b") == (False, 0)  # no "ab", no candidate: "Disallow: /" decides
    assert costly.check(path)[1] > _MAX_MATCH_STEPS


def test_a_file_cut_at_the_limit_inside_a_rule_drops_that_rule() -> None:
    """Past 500 KiB the rest is ignored (RFC 9309 2.5), and so is the line the limit cuts:
    a cut "Allow: /private/only" must not read as "Allow: /", which would win its tie with
    "Disallow: /". What the crawl hands the parser is one byte past the limit."""
    from crawler.engine.discovery import robots_rules

    head = b"User-agent: *\nDisallow: /\n"
    padding = b"#" * (MAX_ROBOTS_BYTES - len(head) - len(b"Allow: /") - 1) + b"\n"
    body = head + padding + b"Allow: /private/only\n"
    assert body[:MAX_ROBOTS_BYTES].endswith(b"\nAllow: /")  # the limit cuts the rule there
    rules = robots_rules(200, body)
    assert rules is not None
    assert not rules.is_allowed("crawler", "http://h/p1")
    assert not rules.is_allowed("crawler", "http://h/private/only")


@pytest.mark.parametrize(
    ("rule", "url"),
    [("/a<d", "http://h/a%3Cd"), ("/sp ace", "http://h/sp%20ace"), ('/q"x', "http://h/q%22x"),
     ("/b`{}", "http://h/b%60%7B%7D"), ("/q?x={y}", "http://h/q?x={y}"),
     ("/q?it's", "http://h/q?it%27s")],
)  # fmt: skip
def test_a_pattern_matches_the_url_as_it_is_normalised(rule: str, url: str) -> None:
    """The crawl's URLs are WHATWG-normalised (a path escapes space, quotes, <>`{}; a query
    space, quotes, <>): a rule written with the raw character matches them (RFC 9309 2.2.2:
    both sides percent-encoded before they are compared)."""
    rules = RobotsRules.parse(f"User-agent: *\nDisallow: {rule}\n".encode())
    assert not rules.is_allowed("crawler", url)
    assert rules.is_allowed("crawler", "http://h/other")
