// Crawlee for JavaScript (CheerioCrawler) as crawl_bench.py's peer: same-origin links,
// in-memory storage, a fixed concurrency. Prints {"pages": N} last, as fetch_only.py does.
//     node bench/crawlee_cheerio.mjs SEED [CONCURRENCY]
// Run with NODE_PATH (or from a directory) where `crawlee` and `cheerio` are installed:
// crawl_bench.py installs them under bench/work/crawlee-js with npm.
import { CheerioCrawler, Configuration, log } from 'crawlee';

const [seed, concurrency = '64'] = process.argv.slice(2);
log.setLevel(log.LEVELS.OFF);
const config = new Configuration({ persistStorage: false, purgeOnStart: true });
let pages = 0;
const crawler = new CheerioCrawler({
    maxConcurrency: Number(concurrency),
    minConcurrency: Number(concurrency),
    maxRequestRetries: 1,
    maxRequestsPerMinute: 1e9,
    async requestHandler({ $, enqueueLinks }) {
        pages += 1;
        $('title').text();
        await enqueueLinks({ strategy: 'same-origin' });
    },
}, config);
await crawler.run([seed]);
console.log(JSON.stringify({ pages }));
