"""Topical sites of other shapes than bench/topicsite.py's, for the focused-crawling benchmark.

    python bench/shapesite.py --shape clusters|tunnel|topicsite --port P [--pages 3000] [--seed 1]
    python bench/shapesite.py --shape tunnel --check          # the site's facts, as JSON

Built by different rules from topicsite (another topic, vocabulary, text and link model),
so that a focused crawl tuned on one is tried on sites it was not tuned on:

- ``clusters``: 10 % of the pages are about beekeeping, the rest about nine other topics.
  The seed ``/`` links to 20 hubs, two of them on the topic (anchor: the hub's topic words).
  A hub links to 25 pages of its topic. An on-topic page links to 6-14 pages, 85 % of them
  on-topic with the target's title as anchor text (topic words), the rest to other topics'
  pages; an off-topic page links within its own topic 94 % of the time and otherwise into the
  beekeeping cluster with a bland anchor ("read more", "this page", ...). Off-topic texts now
  and then use a beekeeping word.
- ``tunnel``: the same cluster, but no hub is on the topic: the seed links to 20 off-topic
  hubs; one page in 40 of the off-topic ones is a bridge: off-topic text, linked from its
  hub with a bland anchor, holding 4-6 links into the cluster with on-topic anchors. The
  topic is reached only through two off-topic pages (hub, bridge) after the seed.
- ``topicsite``: bench/topicsite.py's site (astronomy), served from here.

``Site.pages`` is every page's HTML by path, ``Site.on_topic`` the ground truth and
``Site.query`` the words a user would give ``--query``. The server answers only those pages,
``/robots.txt`` (allow all) and ``/truth.json``, on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import bisect
import html
import itertools
import json
import random
import sys
from dataclasses import dataclass, field

SHAPES = ("clusters", "tunnel", "topicsite")
TARGET = "beekeeping"
TOPICS: dict[str, tuple[str, ...]] = {
    "beekeeping": (
        "beekeeping", "beehive", "hive", "hives", "honey", "honeybee", "bees", "apiary", "colony",
        "queen", "drone", "drones", "worker", "brood", "comb", "beeswax", "nectar", "pollen",
        "swarm", "swarming", "smoker", "varroa", "mite", "frames", "super", "propolis",
        "forager", "apiarist", "royal", "jelly",
    ),
    "sailing": (
        "sailing", "yacht", "keel", "mainsail", "jib", "tack", "tacking", "regatta", "mast",
        "rigging", "halyard", "starboard", "port", "bow", "stern", "anchor", "mooring",
        "harbour", "dinghy", "spinnaker", "helm", "sheet", "winch", "hull", "knots", "gale",
        "current", "tide", "buoy", "crew",
    ),
    "chess": (
        "chess", "pawn", "knight", "bishop", "rook", "castling", "checkmate", "gambit",
        "opening", "endgame", "tempo", "fianchetto", "blitz", "grandmaster", "tournament",
        "board", "file", "rank", "sacrifice", "fork", "pin", "skewer", "stalemate", "elo",
        "zugzwang", "middlegame", "defence", "attack", "variation", "queen",
    ),
    "pottery": (
        "pottery", "clay", "kiln", "glaze", "glazes", "wheel", "throwing", "stoneware",
        "porcelain", "earthenware", "slip", "bisque", "firing", "ceramic", "ceramics", "potter",
        "trimming", "wedging", "raku", "vessel", "bowl", "mug", "studio", "cone", "oxide",
        "celadon", "coil", "slab", "terracotta", "handle",
    ),
    "cycling": (
        "cycling", "bicycle", "bike", "pedal", "gear", "gears", "derailleur", "saddle",
        "handlebar", "peloton", "sprint", "climb", "descent", "cadence", "chain", "tyre",
        "tyres", "spokes", "frame", "helmet", "criterium", "velodrome", "breakaway", "stage",
        "rider", "riders", "puncture", "crank", "brake", "wheel",
    ),
    "photography": (
        "photography", "camera", "lens", "lenses", "aperture", "shutter", "exposure", "iso",
        "tripod", "focus", "portrait", "landscape", "macro", "flash", "sensor", "bokeh",
        "composition", "darkroom", "film", "negative", "print", "zoom", "prime", "lighting",
        "studio", "mirrorless", "viewfinder", "histogram", "raw", "frame",
    ),
    "baking": (
        "baking", "bread", "sourdough", "loaf", "crust", "crumb", "dough", "knead", "proof",
        "yeast", "starter", "flour", "oven", "pastry", "croissant", "butter", "sugar", "whisk",
        "batter", "cake", "icing", "biscuit", "scone", "rye", "bake", "honey", "tin", "rise",
        "glaze", "baker",
    ),
    "hiking": (
        "hiking", "trail", "trails", "summit", "ridge", "boots", "backpack", "compass", "map",
        "route", "ascent", "descent", "valley", "pass", "cairn", "hut", "tent", "campsite",
        "switchback", "scramble", "waymark", "footpath", "moorland", "peak", "gaiters",
        "altitude", "blister", "trek", "trekking", "forest",
    ),
    "knitting": (
        "knitting", "yarn", "needles", "stitch", "stitches", "purl", "cable", "wool", "skein",
        "gauge", "pattern", "sweater", "scarf", "mittens", "cast", "bind", "rib", "lace",
        "cardigan", "alpaca", "merino", "tension", "row", "rows", "swatch", "knitter",
        "crochet", "hook", "fibre", "drop",
    ),
    "astronomy": (
        "astronomy", "telescope", "galaxy", "nebula", "planet", "stars", "comet", "orbit",
        "eclipse", "observatory", "cosmos", "meteor", "lunar", "solar", "asteroid", "pulsar",
        "quasar", "redshift", "spectrum", "supernova", "constellation", "exoplanet", "crater",
        "moon", "celestial", "stellar", "parallax", "zenith", "equinox", "aurora",
    ),
}  # fmt: skip
QUERY = "beekeeping hive honey bees apiary colony queen swarm"
_FILLER = (
    "we you it this that with from have will about there their some would what when your "
    "which more other into could time very people first also because only many then these "
    "them most over such after well even made just back years before through where much "
    "however while around every under still never might again since often though"
)
_ROOTS = "qua zel mir thon vak pry lud sen cor fab gim hest ulm yor wex brin dal kesh nof rill"
BLAND = ("read more", "this page", "see here", "continue", "more on this", "click here", "next")
HUBS, HUB_LINKS, ON_SHARE = 20, 25, 0.10


def filler_words() -> list[str]:
    """Common words and 3,000 made-up ones (none a topic word): the texts' background."""
    rng = random.Random("shapesite-filler")
    roots = _ROOTS.split()
    made = {"".join(rng.choice(roots) for _ in range(rng.randint(2, 3))) for _ in range(4000)}
    topical = {w for words in TOPICS.values() for w in words}
    return [*_FILLER.split(), *sorted(made - topical)[:3000]]


@dataclass
class Site:
    """Pages by path, the on-topic paths, and the query for them."""

    shape: str
    pages: dict[str, str] = field(default_factory=dict)
    on_topic: set[str] = field(default_factory=set)
    query: str = QUERY
    target: str = TARGET


class _Builder:
    def __init__(self, shape: str, n: int, seed: int) -> None:
        self.rng = random.Random(f"shapesite:{shape}:{n}:{seed}")
        self.shape, self.filler = shape, filler_words()
        self.weights = list(
            itertools.accumulate(1 / (r + 1) ** 0.9 for r in range(len(self.filler)))
        )
        self.total = self.weights[-1]
        others = [t for t in TOPICS if t != TARGET]
        ids = list(range(n))
        self.rng.shuffle(ids)
        n_on = round(n * ON_SHARE)
        self.topic = {i: TARGET for i in ids[:n_on]}
        for k, i in enumerate(ids[n_on:]):
            self.topic[i] = others[k % len(others)]
        self.members: dict[str, list[int]] = {}
        for i in range(n):
            self.members.setdefault(self.topic[i], []).append(i)
        self.titles = {i: self.title(self.topic[i]) for i in range(n)}

    def title(self, topic: str) -> str:
        words = self.rng.sample(TOPICS[topic], 2) + self.rng.sample(self.filler[:60], 1)
        self.rng.shuffle(words)
        return " ".join(words).capitalize()

    def text(self, topic: str) -> str:
        rng, vocab = self.rng, TOPICS[topic]
        density = rng.uniform(0.06, 0.16)
        words = []
        for _ in range(rng.randint(150, 600)):
            if rng.random() < density:
                words.append(rng.choice(vocab))
            elif topic != TARGET and rng.random() < 0.004:
                words.append(rng.choice(TOPICS[TARGET]))  # a stray topic word
            else:
                words.append(self.filler[bisect.bisect(self.weights, rng.random() * self.total)])
        sentences = [
            " ".join(words[k : k + 12]).capitalize() + "." for k in range(0, len(words), 12)
        ]
        return "\n".join(f"<p>{html.escape(' '.join(sentences[k : k + 5]))}</p>"
                         for k in range(0, len(sentences), 5))  # fmt: skip

    def page(self, title: str, body: str, links: list[tuple[str, str]]) -> str:
        anchors = "".join(f'<li><a href="{p}">{html.escape(a)}</a></li>' for p, a in links)
        return (f"<!doctype html><html lang=en><head><title>{html.escape(title)}</title></head>"
                f"<body><h1>{html.escape(title)}</h1>{body}<ul>{anchors}</ul></body></html>")  # fmt: skip

    def links(self, i: int) -> list[tuple[str, str]]:
        rng, topic = self.rng, self.topic[i]
        on = topic == TARGET
        out = []
        for _ in range(rng.randint(6, 14)):
            if on:
                same = rng.random() < 0.85
                pool = self.members[TARGET] if same else self.members[rng.choice(self._others)]
                j = rng.choice(pool)
                out.append((path(j), self.titles[j]))
            elif rng.random() < 0.94:
                j = rng.choice(self.members[topic])
                out.append((path(j), self.titles[j]))
            else:
                out.append((path(rng.choice(self.members[TARGET])), rng.choice(BLAND)))
        return out

    @property
    def _others(self) -> list[str]:
        return [t for t in self.members if t != TARGET]

    def build(self) -> Site:
        rng, site = self.rng, Site(self.shape)
        site.on_topic = {path(i) for i in self.members[TARGET]}
        hub_topics = [TARGET, TARGET] if self.shape == "clusters" else []
        others = self._others
        while len(hub_topics) < HUBS:
            hub_topics.append(others[len(hub_topics) % len(others)])
        bridges: set[int] = set()
        hub_links: list[tuple[str, str]] = []
        for h, topic in enumerate(hub_topics):
            members = self.members[topic]
            targets = rng.sample(members, min(HUB_LINKS, len(members)))
            links = [(path(j), self.titles[j]) for j in targets]
            if self.shape == "tunnel":
                bridge = rng.choice([j for j in members if j not in bridges])
                bridges.add(bridge)
                links.insert(rng.randrange(len(links) + 1), (path(bridge), rng.choice(BLAND)))
            hub = f"/hub/{h}.html"
            title = f"{topic.capitalize()} {' '.join(rng.sample(TOPICS[topic], 2))}"
            if topic == TARGET:
                site.on_topic.add(hub)
            site.pages[hub] = self.page(title, self.text(topic), links)
            hub_links.append((hub, title))
        rng.shuffle(hub_links)
        site.pages["/"] = self.page("Welcome", self.text(others[0])[:400], hub_links)
        for i, topic in self.topic.items():
            links = self.links(i)
            if self.shape == "tunnel" and topic != TARGET:
                # no bland shortcut into the cluster: only the bridges lead there
                links = [(p, a) for p, a in links if p not in site.on_topic]
                if i in bridges:
                    for j in rng.sample(self.members[TARGET], rng.randint(4, 6)):
                        links.append((path(j), self.titles[j]))
            site.pages[path(i)] = self.page(self.titles[i], self.text(topic), links)
        return site


def path(page_id: int) -> str:
    return f"/page/{page_id}.html"


def topicsite_site(pages: int, seed: int) -> Site:
    """bench/topicsite.py's site as a ``Site``."""
    from topicsite import QUERY as TOPIC_QUERY
    from topicsite import TARGET as TOPIC_TARGET
    from topicsite import TopicSite

    built = TopicSite(pages, seed)
    site = Site("topicsite", query=TOPIC_QUERY, target=TOPIC_TARGET)
    site.pages["/"] = built.hub_html()
    for i in range(pages):
        site.pages[built.path(i)] = built.page_html(i)
    site.on_topic = built.on_topic_paths()
    return site


def build(shape: str, pages: int = 3000, seed: int = 1) -> Site:
    """The site of ``shape`` (``SHAPES``), the same for the same arguments in any process."""
    if shape == "topicsite":
        return topicsite_site(pages, seed)
    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}: one of {', '.join(SHAPES)}")
    return _Builder(shape, pages, seed).build()


def serve(site: Site, port: int) -> None:
    import uvloop
    from aiohttp import web

    truth = json.dumps({"on_topic": sorted(site.on_topic), "query": site.query})

    async def answer(request: web.Request) -> web.Response:
        if request.path == "/robots.txt":
            return web.Response(text="User-agent: *\nAllow: /\n")
        if request.path == "/truth.json":
            return web.Response(text=truth, content_type="application/json")
        body = site.pages.get(request.path)
        if body is None:
            raise web.HTTPNotFound()
        return web.Response(text=body, content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", answer)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None,
                loop=uvloop.new_event_loop())  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=SHAPES, default="clusters")
    parser.add_argument("--port", type=int, default=0, help="required unless --check")
    parser.add_argument("--pages", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--check", action="store_true", help="print the site's facts and exit")
    args = parser.parse_args(argv)
    site = build(args.shape, args.pages, args.seed)
    if args.check:
        print(json.dumps({"shape": site.shape, "pages": len(site.pages),
                          "on_topic": len(site.on_topic), "query": site.query}))  # fmt: skip
        return 0
    if not args.port:
        parser.error("--port is required")
    serve(site, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
