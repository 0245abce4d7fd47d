"""Pure rules of a crawl, no IO and no clock: robots.txt, retries, recrawl schedule, traps, scope."""
