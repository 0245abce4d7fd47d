"""``python -m crawler`` is the ``crawl`` command."""

from crawler.cli import main

main()
