"""The Scrapy peer: a CrawlSpider + LinkExtractor over one host, title and visible text out.

Run with the Scrapy venv (bench/.venv-scrapy), as the harness does:

    python -m scrapy runspider bench/scrapy_spider.py -a start_url=http://127.0.0.1:PORT/index.html
        -O pages.jsonl:jsonlines [-s CLOSESPIDER_PAGECOUNT=N]

Traps handled: `LinkExtractor(allow_domains=...)` compares against host:port, so the port must
be in it or only the start page is crawled; Scrapy 2.19's remote-control HTTP server is on by
default (`REMOTE_CONTROL_ENABLED=False`); CrawlSpider ignores the start page's own item
unless `parse_start_url` is overridden; the start request bypasses the duplicate filter, so
the start URL is fetched again when a page links to it (count distinct URLs, not items).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule

TEXT_XPATH = "//body//text()[not(ancestor::script) and not(ancestor::style)]"


class BenchSpider(CrawlSpider):
    """Follows every same-host:port link and yields {url, title, text} per page."""

    name = "bench"
    custom_settings = {  # noqa: RUF012 - Scrapy reads this class attribute
        "CONCURRENT_REQUESTS": 64,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 64,
        "DOWNLOAD_DELAY": 0,
        "ROBOTSTXT_OBEY": True,
        "AUTOTHROTTLE_ENABLED": False,
        "REMOTE_CONTROL_ENABLED": False,
        "TELNETCONSOLE_ENABLED": False,
        "LOG_LEVEL": "INFO",
    }

    def __init__(self, start_url: str, *args, **kwargs) -> None:
        self.start_urls = [start_url]
        netloc = urlsplit(start_url).netloc  # "127.0.0.1:PORT": the port is part of the domain
        self.rules = (
            Rule(LinkExtractor(allow_domains=[netloc]), callback="parse_item", follow=True),
        )
        super().__init__(*args, **kwargs)

    def parse_start_url(self, response):
        return self.parse_item(response)

    def parse_item(self, response):
        yield {
            "url": response.url,
            "title": response.xpath("//title/text()").get(default=""),
            "text": " ".join(response.xpath(TEXT_XPATH).getall()),
        }
