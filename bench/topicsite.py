"""A deterministic topical site for the focused-crawling (harvest rate) benchmark, on aiohttp.

    python bench/topicsite.py --port P [--pages 5000] [--seed 1]

`--pages` pages at `/p/<id>.html`, each about one of eight topics. The target topic,
astronomy, holds ~10 % of them; the rest are spread over seven other topics (cooking,
football, finance, gardening, music, law, medicine). A page's text (300-800 words in
paragraphs) mixes a large general vocabulary (English function words and Zipf-distributed
made-up words) with 12-25 % words of its own topic's ~30-word vocabulary, and a little noise:
off-topic pages now and then use a couple of astronomy words, and "star"/"stars"/"solar"/
"orbit" also belong to other topics. Each page links to 10-30 others, anchor text mostly the
target's title (which uses its topic's words), sometimes a generic "read more":

- astronomy pages link to astronomy pages 80 % of the time, off-topic pages stay within their
  own topic 85 % of the time; the rest are cross links to a random page of another topic;
- every page links to the next page of its topic (a ring per topic), and `/`, the seed, is a
  hub linking to five pages of each topic, shuffled: everything is reachable from `/` and a
  breadth-first crawl has no shortcut into astronomy.

Page ids are shuffled, so a URL says nothing about its topic. Everything (topics, links,
text) derives from `--seed` and `--pages`: `TopicSite(pages, seed)` rebuilds the same site in
another process, and `on_topic_paths()` is the ground truth. The server also answers
`/truth.json` (not linked from any page) and an allow-all `/robots.txt`. Pages are generated on
first request and cached. Serves on 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import functools
import html
import itertools
import json
import random
import sys
from dataclasses import dataclass

import uvloop
from aiohttp import web

TARGET = "astronomy"
TARGET_SHARE = 0.10
HUB_LINKS_PER_TOPIC = 5
SAME_TOPIC_LINKS = {True: 0.80, False: 0.85}  # keyed by "is the page on the target topic"
TOPIC_DENSITY = (0.12, 0.25)
WORDS = (300, 800)
LINKS = (10, 30)
GENERIC_ANCHOR_SHARE = 0.25
ROBOTS = "User-agent: *\nAllow: /\n"

TOPICS: dict[str, tuple[str, ...]] = {
    "astronomy": (
        "astronomy", "telescope", "telescopes", "galaxy", "galaxies", "nebula", "nebulae",
        "planet", "planets", "star", "stars", "stellar", "orbit", "comet", "asteroid",
        "supernova", "quasar", "pulsar", "cosmic", "eclipse", "observatory", "astronomer",
        "constellation", "spectroscopy", "redshift", "exoplanet", "lunar", "solar", "meteor",
        "cosmology",
    ),
    "cooking": (
        "recipe", "recipes", "oven", "bake", "baking", "flour", "butter", "garlic", "onion",
        "simmer", "saute", "roast", "braise", "dough", "pastry", "sauce", "broth", "skillet",
        "whisk", "knead", "seasoning", "marinade", "vinegar", "caramel", "chef", "kitchen",
        "spatula", "yeast", "noodles", "dumplings",
    ),
    "football": (
        "football", "striker", "goalkeeper", "midfielder", "defender", "penalty", "offside",
        "referee", "league", "match", "goal", "goals", "coach", "stadium", "fixture",
        "tackle", "dribble", "corner", "header", "transfer", "derby", "relegation", "trophy",
        "season", "squad", "kickoff", "star", "winger", "pitch", "captain",
    ),
    "finance": (
        "finance", "stock", "stocks", "bond", "bonds", "dividend", "equity", "portfolio",
        "investor", "inflation", "interest", "yield", "broker", "hedge", "liquidity",
        "valuation", "earnings", "revenue", "market", "markets", "currency", "credit", "loan",
        "mortgage", "bank", "banking", "capital", "asset", "assets", "orbit",
    ),
    "gardening": (
        "garden", "gardening", "compost", "mulch", "seedling", "seedlings", "prune",
        "pruning", "soil", "fertilizer", "perennial", "annuals", "shrub", "hedge", "bulbs",
        "tomatoes", "greenhouse", "watering", "weeds", "trowel", "rake", "blossom", "roses",
        "orchard", "harvest", "sowing", "cuttings", "lawn", "solar", "irrigation",
    ),
    "music": (
        "music", "guitar", "piano", "violin", "melody", "harmony", "chord", "chords", "rhythm",
        "tempo", "album", "concert", "orchestra", "symphony", "singer", "band", "drummer",
        "lyrics", "chorus", "composer", "jazz", "opera", "tuning", "amplifier", "studio",
        "recording", "star", "stars", "encore", "ballad",
    ),
    "law": (
        "law", "court", "judge", "jury", "verdict", "statute", "plaintiff", "defendant",
        "attorney", "lawyer", "litigation", "contract", "tort", "appeal", "testimony",
        "evidence", "prosecutor", "counsel", "lawsuit", "settlement", "liability",
        "injunction", "precedent", "ruling", "tribunal", "clause", "felony", "custody",
        "arbitration", "subpoena",
    ),
    "medicine": (
        "medicine", "patient", "patients", "diagnosis", "therapy", "clinic", "hospital",
        "surgeon", "surgery", "vaccine", "symptoms", "infection", "antibiotic", "dosage",
        "physician", "nurse", "cardiology", "oncology", "pediatric", "chronic", "prescription",
        "immune", "pathology", "radiology", "trial", "clinical", "fever", "inflammation",
        "anesthesia", "recovery",
    ),
}  # fmt: skip

# Words a focused crawl of the target would search for (the benchmark's --query default).
QUERY = "astronomy telescope galaxy nebula planet stars comet observatory"

_FUNCTION_TEXT = (
    "the of and a to in is it that was for on are as with his they at be this from have or "
    "by one had not but what all were when we there can an your which their said if do will "
    "each about how up out them then she many some so these would other into has more her "
    "two like him see time could no make than first been its who now people my made over did "
    "down only way find use may water long little very after words called just where most "
    "know get through back much before go good new write our used me man too any day same "
    "right look think also around another came come work three word must because does part"
)
_SYLLABLE_TEXT = (
    "ba be bi bo bu da de di do du fa fe fi fo ga ge go ka ke ki ko ku la le li lo lu ma me mi "
    "mo mu na ne ni no nu pa pe pi po pu ra re ri ro ru sa se si so su ta te ti to tu va ve vi "
    "vo za ze zo ran len tor mas pel dor vin kel sul"
)
FUNCTION_WORDS = _FUNCTION_TEXT.split()
SYLLABLES = _SYLLABLE_TEXT.split()
GENERAL_WORDS = 4000
GENERIC_ANCHORS = ("read more", "more", "next", "see also", "details", "continue", "link")


@functools.cache
def general_vocabulary() -> tuple[tuple[str, ...], tuple[float, ...]]:
    """Made-up words (none a topic word) and their cumulative Zipf weights, function words first."""
    rng = random.Random("topicsite-vocabulary")
    taken = {w for words in TOPICS.values() for w in words} | set(FUNCTION_WORDS)
    made: list[str] = []
    while len(made) < GENERAL_WORDS:
        word = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4)))
        if word not in taken:
            taken.add(word)
            made.append(word)
    words = (*FUNCTION_WORDS, *made)
    weights = itertools.accumulate(1.0 / (rank + 1) for rank in range(len(words)))
    return words, tuple(weights)


@dataclass(frozen=True, slots=True)
class Link:
    path: str
    anchor: str


class TopicSite:
    """The whole site: each page's topic and links, its HTML on demand, and the ground truth."""

    def __init__(self, pages: int = 5000, seed: int = 1) -> None:
        topics = list(TOPICS)
        if pages < 10 * len(topics):
            raise ValueError(f"at least {10 * len(topics)} pages, please")
        self.pages, self.seed = pages, seed
        rng = random.Random(f"topicsite:{seed}:{pages}")
        n_target = round(pages * TARGET_SHARE)
        others = [t for t in topics if t != TARGET]
        labels = [TARGET] * n_target + [others[k % len(others)] for k in range(pages - n_target)]
        rng.shuffle(labels)
        self.topic: list[str] = labels  # page id -> topic
        self.members: dict[str, list[int]] = {t: [] for t in topics}
        for page_id, topic in enumerate(labels):
            self.members[topic].append(page_id)
        # Ring successor within the topic, in a shuffled order: reachability from the hub.
        self.ring: dict[int, int] = {}
        for ids in self.members.values():
            order = ids[:]
            rng.shuffle(order)
            for a, b in zip(order, order[1:] + order[:1], strict=True):
                self.ring[a] = b
        self.hub_ids = [i for t in topics for i in rng.sample(self.members[t], HUB_LINKS_PER_TOPIC)]
        rng.shuffle(self.hub_ids)

    # ---------------------------------------------------------------- ground truth

    @staticmethod
    def path(page_id: int) -> str:
        return f"/p/{page_id}.html"

    def on_topic_ids(self) -> list[int]:
        return self.members[TARGET]

    def on_topic_paths(self) -> set[str]:
        return {self.path(i) for i in self.members[TARGET]}

    def page_id(self, path: str) -> int | None:
        """The id of `/p/<id>.html`, or None for any other path."""
        if path.startswith("/p/") and path.endswith(".html"):
            digits = path[3:-5]
            if digits.isdigit() and int(digits) < self.pages and self.path(int(digits)) == path:
                return int(digits)
        return None

    def truth(self) -> dict[str, object]:
        return {
            "topic": TARGET,
            "pages": self.pages,
            "seed": self.seed,
            "query": QUERY,
            "on_topic": sorted(self.on_topic_paths(), key=lambda p: int(p[3:-5])),
        }

    # ---------------------------------------------------------------- content

    def _rng(self, page_id: int, part: str) -> random.Random:
        return random.Random(f"topicsite:{self.seed}:{self.pages}:{page_id}:{part}")

    @functools.cache  # noqa: B019 - one site per process, every page wanted anyway
    def title(self, page_id: int) -> str:
        rng = self._rng(page_id, "title")
        words, _ = general_vocabulary()
        vocab = TOPICS[self.topic[page_id]]
        picks = rng.sample(vocab, rng.randint(2, 3))
        picks += rng.choices(words[len(FUNCTION_WORDS) :], k=rng.randint(1, 2))
        rng.shuffle(picks)
        return " ".join(picks).capitalize() + f" ({page_id})"

    def links(self, page_id: int) -> list[Link]:
        rng = self._rng(page_id, "links")
        topic = self.topic[page_id]
        same = SAME_TOPIC_LINKS[topic == TARGET]
        others = [t for t in TOPICS if t != topic]
        targets = [self.ring[page_id]]
        wanted = rng.randint(*LINKS)
        while len(targets) < wanted:
            pool = self.members[topic] if rng.random() < same else self.members[rng.choice(others)]
            target = rng.choice(pool)
            if target != page_id and target not in targets:
                targets.append(target)
        rng.shuffle(targets)
        return [Link(self.path(t), self._anchor(rng, t)) for t in targets]

    def _anchor(self, rng: random.Random, target: int) -> str:
        if rng.random() < GENERIC_ANCHOR_SHARE:
            return rng.choice(GENERIC_ANCHORS)
        return self.title(target).rsplit(" (", 1)[0]

    def text(self, page_id: int) -> list[str]:
        """The page's paragraphs."""
        rng = self._rng(page_id, "text")
        words, cum = general_vocabulary()
        topic = self.topic[page_id]
        vocab = TOPICS[topic]
        density = rng.uniform(*TOPIC_DENSITY)
        n_words = rng.randint(*WORDS)
        body = rng.choices(words, cum_weights=cum, k=n_words)
        for k in rng.sample(range(n_words), round(n_words * density)):
            body[k] = rng.choice(vocab)
        # Noise: off-topic pages sometimes mention astronomy, on-topic ones another topic.
        if topic != TARGET and rng.random() < 0.3:
            noise = TOPICS[TARGET]
        elif topic == TARGET and rng.random() < 0.3:
            noise = TOPICS[rng.choice([t for t in TOPICS if t != TARGET])]
        else:
            noise = ()
        for k in rng.sample(range(n_words), rng.randint(1, 3) if noise else 0):
            body[k] = rng.choice(noise)
        paragraphs, start = [], 0
        while start < n_words:
            end = min(n_words, start + rng.randint(40, 90))
            sentences = []
            for s in range(start, end, 12):
                chunk = body[s : min(end, s + 12)]
                sentences.append(" ".join(chunk).capitalize() + ".")
            paragraphs.append(" ".join(sentences))
            start = end
        return paragraphs

    @functools.cache  # noqa: B019
    def page_html(self, page_id: int) -> str:
        title = html.escape(self.title(page_id))
        paragraphs = "\n".join(f"<p>{html.escape(p)}</p>" for p in self.text(page_id))
        anchors = "\n".join(
            f'<li><a href="{link.path}">{html.escape(link.anchor)}</a></li>'
            for link in self.links(page_id)
        )
        return (
            f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>{title}</title></head><body>\n<h1>{title}</h1>\n{paragraphs}\n"
            f"<ul>\n{anchors}\n</ul>\n</body></html>\n"
        )

    @functools.cache  # noqa: B019
    def hub_html(self) -> str:
        rng = self._rng(-1, "hub")
        words, cum = general_vocabulary()
        intro = " ".join(rng.choices(words, cum_weights=cum, k=120)).capitalize() + "."
        anchors = "\n".join(
            f'<li><a href="{self.path(i)}">{html.escape(self._anchor(rng, i))}</a></li>'
            for i in self.hub_ids
        )
        return (
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            "<title>Front page</title></head><body>\n<h1>Front page</h1>\n"
            f"<p>{intro}</p>\n<ul>\n{anchors}\n</ul>\n</body></html>\n"
        )

    # ---------------------------------------------------------------- checks

    def reachable(self) -> set[int]:
        """Page ids reachable from the hub (all of them, by construction)."""
        seen, todo = set(self.hub_ids), list(self.hub_ids)
        while todo:
            for link in self.links(todo.pop()):
                target = self.page_id(link.path)
                if target is not None and target not in seen:
                    seen.add(target)
                    todo.append(target)
        return seen


def make_app(site: TopicSite) -> web.Application:
    async def robots(_: web.Request) -> web.Response:
        return web.Response(text=ROBOTS, content_type="text/plain")

    async def truth(_: web.Request) -> web.Response:
        return web.json_response(site.truth())

    async def hub(_: web.Request) -> web.Response:
        return web.Response(text=site.hub_html(), content_type="text/html")

    async def page(request: web.Request) -> web.Response:
        page_id = site.page_id(request.path)
        if page_id is None:
            raise web.HTTPNotFound()
        return web.Response(text=site.page_html(page_id), content_type="text/html")

    app = web.Application()
    app.router.add_get("/robots.txt", robots)
    app.router.add_get("/truth.json", truth)
    app.router.add_get("/", hub)
    app.router.add_get("/p/{name}", page)
    return app


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="required unless --check")
    parser.add_argument("--pages", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--check", action="store_true", help="print site facts and exit")
    args = parser.parse_args(argv)
    site = TopicSite(args.pages, args.seed)
    if args.check:
        words = [sum(len(p.split()) for p in site.text(i)) for i in range(min(args.pages, 200))]
        links = [len(site.links(i)) for i in range(min(args.pages, 200))]
        facts = {
            "pages": args.pages,
            "on_topic": len(site.on_topic_ids()),
            "reachable": len(site.reachable()),
            "words": [min(words), max(words)],
            "links": [min(links), max(links)],
        }
        print(json.dumps(facts))
        return 0
    if not args.port:
        parser.error("--port is required")
    web.run_app(
        make_app(site),
        host="127.0.0.1",
        port=args.port,
        print=None,
        access_log=None,
        loop=uvloop.new_event_loop(),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
