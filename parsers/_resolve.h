/* parsers/_resolve.c: the string fast path of href resolution, on bytes (see there). */
#ifndef PARSERS_RESOLVE_H
#define PARSERS_RESOLVE_H

#include <stddef.h>
#include <sys/types.h>

enum { RESOLVE_FALLBACK = -1, RESOLVE_NOT_HTTP = -2 };

/* A page's base, split as parsers.links.Resolver splits it: `origin` (scheme://host[:port]),
   `directory` (the base's path up to its last slash) and the whole `base`. */
typedef struct {
    const unsigned char *origin;
    size_t origin_size;
    const unsigned char *directory;
    size_t directory_size;
    const unsigned char *base;
    size_t base_size;
} resolve_base;

/* Bytes `out` needs for an href of `size` bytes, and the entries `stack` needs. */
size_t resolve_out_bytes(const resolve_base *base, size_t size);
size_t resolve_stack_entries(const resolve_base *base, size_t size);

/* The href `href[0:size]` resolved against `base` into `out` (ASCII): its length, or
   RESOLVE_FALLBACK (Resolver.resolve decides) or RESOLVE_NOT_HTTP (another scheme). */
ssize_t resolve_href(const unsigned char *href, size_t size, const resolve_base *base,
                     unsigned char *out, size_t *stack);

#endif
