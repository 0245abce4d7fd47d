/* The string fast path of href resolution, on a link's bytes as lexbor holds them.

parsers.links.Resolver.resolve, for the hrefs most pages are made of: relative, `../`,
root-relative or same-origin absolute, made of plain characters, with or without a
fragment, against an already normalised base; and absolute http(s) URLs to other hosts
already in the form ada writes (parsers.links._fast_absolute). Every other href is handed
back (RESOLVE_FALLBACK) for Resolver.resolve, which asks ada; another scheme than http(s)
(mailto:, javascript:) is RESOLVE_NOT_HTTP, as ada's answer would be. The results are those
of Resolver.resolve, href for href (tests/parsers/test_links.py holds them equal).

parsers._walk calls it for each link of a walk, so that a page's hrefs become URLs without
a str for each href first. No Python here: bytes in, bytes out.
*/
#include "_resolve.h"

#include <string.h>

typedef unsigned char uc;

#define ALNUM "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

/* The characters of parsers.links._SAFE_PATH, _SAFE_QUERY and _PLAIN_ORIGIN's host (with
   the dots between labels), and a scheme's after its first letter (WHATWG scheme state). */
static uc path_ok[256], query_ok[256], host_ok[256], scheme_ok[256];
static int tables_ready;
static const uc none[1]; /* an empty origin or directory */

static void
fill(uc *table, const char *chars)
{
    for (const char *c = chars; *c; c++) {
        table[(uc)*c] = 1;
    }
}

static void
ready(void)
{
    if (tables_ready) {
        return;
    }
    fill(path_ok, ALNUM "._~/-!$()*+,;=");
    fill(query_ok, ALNUM "._~/=&-!$()*+,;:@");
    fill(host_ok, "abcdefghijklmnopqrstuvwxyz0123456789-.");
    fill(scheme_ok, ALNUM "+-.");
    tables_ready = 1;
}

size_t
resolve_out_bytes(const resolve_base *base, size_t size)
{
    size_t relative = base->origin_size + base->directory_size + size;
    return (relative > base->base_size ? relative : base->base_size) + 1;
}

size_t
resolve_stack_entries(const resolve_base *base, size_t size)
{
    return base->directory_size + size + 2;
}

/* parsers.links._remove_dot_segments in place on out[w0:w] (a path starting with "/");
   the new end. A segment is never written before it was read. */
static size_t
remove_dot_segments(uc *out, size_t w0, size_t w, size_t *stack)
{
    size_t o = w0, depth = 0, r = w0 + 1; /* r: the segment's first byte */
    for (;;) {
        size_t end = r;
        while (end < w && out[end] != '/') {
            end++;
        }
        size_t size = end - r;
        int last = end >= w;
        if (size == 2 && out[r] == '.' && out[r + 1] == '.') {
            if (depth > 0) {
                o = stack[--depth];
            }
            if (last) {
                out[o++] = '/';
            }
        }
        else if (size == 1 && out[r] == '.') {
            if (last) {
                out[o++] = '/';
            }
        }
        else {
            stack[depth++] = o;
            out[o++] = '/';
            memmove(out + o, out + r, size);
            o += size;
        }
        if (last) {
            break;
        }
        r = end + 1;
    }
    if (o == w0) { /* every segment removed: the root */
        out[o++] = '/';
    }
    return o;
}

/* origin + directory + buf[start:end] (the last two a path starting with "/", then maybe a
   "?query") written at out[w:] with the path's dot segments removed: the new end, or
   RESOLVE_FALLBACK if buf[start:end] holds anything but the plain characters. `directory`
   is plain already (from a normalised base). */
static ssize_t
emit_path(const uc *buf, size_t start, size_t end, const uc *origin, size_t origin_size,
          const uc *directory, size_t directory_size, uc *out, size_t w, size_t *stack)
{
    size_t q = end;
    int dots = 0;
    uc previous = directory_size ? directory[directory_size - 1] : 0;
    for (size_t i = start; i < end; i++) {
        uc c = buf[i];
        if (c == '?') {
            q = i;
            break;
        }
        if (!path_ok[c]) {
            return RESOLVE_FALLBACK;
        }
        if (c == '.' && previous == '/') {
            dots = 1;
        }
        previous = c;
    }
    for (size_t i = q + 1; i < end; i++) {
        if (!query_ok[buf[i]]) {
            return RESOLVE_FALLBACK;
        }
    }
    memcpy(out + w, origin, origin_size);
    w += origin_size;
    size_t w0 = w;
    memcpy(out + w, directory, directory_size);
    w += directory_size;
    memcpy(out + w, buf + start, q - start);
    w += q - start;
    if (dots) {
        w = remove_dot_segments(out, w0, w, stack);
    }
    memcpy(out + w, buf + q, end - q);
    return (ssize_t)(w + end - q);
}

/* The index of the ":" that ends a scheme at buf[pos:cut], or -1 (no scheme). */
static ssize_t
scheme_end(const uc *buf, size_t pos, size_t cut)
{
    uc c = buf[pos] | 32; /* ASCII lower case */
    if (c < 'a' || c > 'z') {
        return -1;
    }
    for (size_t i = pos + 1; i < cut; i++) {
        if (buf[i] == ':') {
            return (ssize_t)i;
        }
        if (!scheme_ok[buf[i]]) {
            return -1;
        }
    }
    return -1;
}

/* parsers.links._fast_absolute: "http(s)://" (lower case), a lower-case DNS name whose last
   label starts with a letter and holds no "xn--", an optional port of 1 to 5 digits (no
   leading zero, at most 65535; the scheme's default is dropped), then nothing or a plain
   path. The new end, or RESOLVE_FALLBACK. */
static ssize_t
emit_absolute(const uc *buf, size_t pos, size_t colon, size_t cut, uc *out, size_t w,
              size_t *stack)
{
    if (colon + 2 >= cut || buf[colon + 1] != '/' || buf[colon + 2] != '/') {
        return RESOLVE_FALLBACK;
    }
    size_t host = colon + 3, i = host, label = host;
    while (i < cut && host_ok[buf[i]]) {
        if (buf[i] == '.') {
            if (i == label) {
                return RESOLVE_FALLBACK; /* an empty label */
            }
            label = i + 1;
        }
        i++;
    }
    if (i == label || buf[label] < 'a' || buf[label] > 'z') {
        return RESOLVE_FALLBACK; /* no host, a trailing dot, or a numeric last label */
    }
    for (size_t j = host; j + 3 < i; j++) {
        if (buf[j] == 'x' && buf[j + 1] == 'n' && buf[j + 2] == '-' && buf[j + 3] == '-') {
            return RESOLVE_FALLBACK; /* punycode, for ada to validate */
        }
    }
    size_t origin_end = i;
    if (i < cut && buf[i] == ':') {
        i++;
        if (i >= cut || buf[i] < '1' || buf[i] > '9') {
            return RESOLVE_FALLBACK;
        }
        unsigned long port = 0;
        size_t digits = 0;
        while (i < cut && buf[i] >= '0' && buf[i] <= '9') {
            if (++digits > 5) {
                return RESOLVE_FALLBACK;
            }
            port = port * 10 + (unsigned long)(buf[i] - '0');
            i++;
        }
        if (port > 65535) {
            return RESOLVE_FALLBACK;
        }
        int https = colon - pos == 5;
        if (!((port == 80 && !https) || (port == 443 && https))) {
            origin_end = i; /* not the scheme's default port: kept */
        }
    }
    if (i < cut && buf[i] != '/') {
        return RESOLVE_FALLBACK;
    }
    memcpy(out + w, buf + pos, origin_end - pos);
    w += origin_end - pos;
    if (i == cut) {
        out[w] = '/';
        return (ssize_t)(w + 1);
    }
    return emit_path(buf, i, cut, none, 0, none, 0, out, w, stack);
}

ssize_t
resolve_href(const uc *buf, size_t size, const resolve_base *base, uc *out, size_t *stack)
{
    ready();
    if (size == 0) {
        return RESOLVE_FALLBACK; /* an empty href: the base (ada decides) */
    }
    size_t cut = 0;
    while (cut < size && buf[cut] != '#') {
        cut++;
    }
    if (cut == 0) { /* "#fragment": this page */
        memcpy(out, base->base, base->base_size);
        return (ssize_t)base->base_size;
    }
    uc first = buf[0];
    if (first == '/') {
        if (cut >= 2 && buf[1] == '/') {
            return RESOLVE_FALLBACK; /* "//host" */
        }
        return emit_path(buf, 0, cut, base->origin, base->origin_size, none, 0, out, 0, stack);
    }
    if (first == '?') {
        return RESOLVE_FALLBACK;
    }
    size_t origin_size = base->origin_size;
    if (cut > origin_size && buf[origin_size] == '/' &&
        memcmp(buf, base->origin, origin_size) == 0) { /* same origin */
        return emit_path(buf, origin_size, cut, base->origin, origin_size, none, 0, out, 0,
                         stack);
    }
    ssize_t colon = scheme_end(buf, 0, cut);
    if (colon < 0) { /* relative: any odd character fails the plain check */
        return emit_path(buf, 0, cut, base->origin, origin_size, base->directory,
                         base->directory_size, out, 0, stack);
    }
    int http = (colon == 4 || colon == 5) && (buf[0] | 32) == 'h' && (buf[1] | 32) == 't' &&
               (buf[2] | 32) == 't' && (buf[3] | 32) == 'p' &&
               (colon == 4 || (buf[4] | 32) == 's');
    if (!http) {
        return RESOLVE_NOT_HTTP; /* mailto:, javascript:, ftp: ... never an http(s) URL */
    }
    for (ssize_t i = 0; i < colon; i++) {
        if (buf[i] < 'a') {
            return RESOLVE_FALLBACK; /* "HTTP:" (ada lower-cases it) */
        }
    }
    return emit_absolute(buf, 0, (size_t)colon, cut, out, 0, stack);
}
