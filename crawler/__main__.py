"""``python -m crawler`` is the ``crawl`` command."""

from crawler.cli.entry import main

main()
