"""The network: the fetcher (redirects, deadlines, caps), body decoding, the SSRF guard and the HTTP/1.1 client."""
