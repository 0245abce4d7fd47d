"""``python -m crawler`` is the ``crawl`` command."""

from crawler.entry import main

main()
