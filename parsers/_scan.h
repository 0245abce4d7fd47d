/* parsers/_scan.c: a page's links, text and head read from lexbor's tokens, with no tree. */
#ifndef PARSERS_SCAN_H
#define PARSERS_SCAN_H

#include <stddef.h>
#include <sys/types.h>

/* A run of bytes in a scan's `text` or `strings`; of size SCAN_NONE: absent. */
typedef struct {
    size_t at, size;
} scan_span;

enum { SCAN_NONE = (size_t)-1 };

/* A link: its href (or src) and rel (SCAN_NONE: no rel, or an empty one) in `strings`; the
   text of its element (every text node below it, in `text`) and how many nodes are below
   it (what parsers/_walk.c's Anchors read from a tree). */
typedef struct {
    scan_span href, rel, text;
    size_t visits;
} scan_link;

/* A text node's data (in `text`), and whether the page's visible text holds it. */
typedef struct {
    scan_span span;
    int visible;
} scan_piece;

typedef struct {
    unsigned char *data;
    size_t size, capacity;
} scan_bytes;

/* What a scan found. `text` holds every text node's data in document order (so that the
   text of a link element is one span of it), `strings` the attribute values. */
typedef struct {
    scan_bytes text, strings;
    scan_link *links;
    size_t link_count, link_capacity;
    scan_piece *pieces;
    size_t piece_count, piece_capacity;
    scan_span title;     /* the first <title> in the head: its text (in `text`) */
    scan_span base;      /* the first <base href> in the head: its href ("" if empty) */
    scan_span robots;    /* the first <meta name=robots> in the head: its content */
    scan_span canonical; /* the first <link rel=canonical> in the head: its href */
    scan_span lang;      /* the <html> start tag's lang */
} scan_result;

/* Find lexbor's tokenizer in the shared object at `path` (selectolax's lexbor module, loaded
   already): 0, or -1 where it is not there (then every scan_document answers 0). */
int scan_bind(const char *path);

/* Tokenize `data` (UTF-8) and read it as the HTML standard's tree builder would build it:
   1 with `out` filled (its first `most` links); 0 where the document holds anything whose
   tree this reading does not follow (misnested or implied elements, tables with text in
   them, templates, framesets...): parse it into a tree instead; -1 out of memory. */
int scan_document(const unsigned char *data, size_t size, size_t most, scan_result *out);

void scan_result_free(scan_result *out);

#endif
