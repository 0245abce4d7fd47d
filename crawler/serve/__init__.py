"""``crawl serve DB``: a read-only dashboard and search over a crawl database, on aiohttp.

``crawler.serve.app`` holds the routes and the safety rules, ``views`` the HTML, ``chart``
the SVG charts, ``search`` the warm BM25 index; the queries are ``storage.dashboard``'s.
"""
