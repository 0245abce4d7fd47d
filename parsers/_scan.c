/* parsers/_scan.c: a page's links, visible text and head from lexbor's tokens, with no tree.

Parsing a page into a tree costs lexbor about twice what tokenizing it does (the tree
builder's callback, each node and attribute allocated, then the tree freed), and the crawl
then reads only a page's links, text and head from it. Here lexbor's own tokenizer (the
one its tree builder runs on: character references, raw text, comments, attributes as the
HTML standard tokenizes them) hands its tokens to a callback that follows the tree builder
for the documents whose tree mirrors their tokens: elements that nest and close as they are
written, the head and body implied or not. Anything else (a misnested or implied end, a
table with text in it, a template, a frameset, MathML, most of what SVG can hold, a
processing instruction, a NUL) stops the scan, and the page is parsed into a tree as before:
the scan never guesses what the tree builder would do. The tests hold its results to the
tree's on generated markup and on real pages.

What it reads, as parsers/_walk.c reads the tree: the href of <a> and <area>, the src of
<iframe> (and of <frame>, which stops the scan), their rel, each one's text (every text node
below it) and node count; the text nodes below the body that are not below a script, style,
noscript or template; and from the head the first title, base href, meta robots and
canonical link, and the <html> tag's lang.

The tokenizer is found in selectolax's lexbor module (scan_bind: dlopen of the loaded
object, dlsym of lexbor's exported functions); its token and attribute structs are read by
the layout of the lexbor that selectolax release bundles, as _walk.c reads its nodes
(parsers/tree_walk.py checks both on probe pages before either is used).
*/
#ifndef _WIN32
#include <dlfcn.h>
#endif
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_scan.h"

/* ---- lexbor: html/token.h, html/token_attr.h, dom/interfaces/attr.h, core/hash.h ---- */

typedef struct {
    union {
        unsigned char *long_str;
        unsigned char short_str[16 + 1];
    } u;
    size_t length;
    void *next;
} lx_hash_entry;

typedef struct {
    lx_hash_entry entry;
    uintptr_t attr_id;
    size_t ref_count;
    _Bool read_only;
} lx_attr_data;

typedef struct lx_token_attr lx_token_attr;
struct lx_token_attr {
    const unsigned char *name_begin, *name_end;
    const unsigned char *value_begin, *value_end;
    const lx_attr_data *name;
    unsigned char *value;
    size_t value_size;
    lx_token_attr *next, *prev;
    int type;
};

typedef struct {
    const unsigned char *begin, *end;
    const unsigned char *text_start, *text_end;
    lx_token_attr *attr_first, *attr_last;
    void *base_element;
    size_t null_count;
    uintptr_t tag_id;
    int type;
} lx_token;

enum { TOKEN_CLOSE = 0x1, TOKEN_CLOSE_SELF = 0x2 };
enum { NS_HTML = 0x02, NS_SVG = 0x04 };

enum {
    T__EOF = 0x01, T__TEXT = 0x02, T__COMMENT = 0x04, T__DOCTYPE = 0x05, T__PI = 0x06,
    T_A = 0x07, T_ADDRESS = 0x0a, T_ANNOTATION_XML = 0x11, T_APPLET = 0x12, T_AREA = 0x13,
    T_ARTICLE = 0x14, T_ASIDE = 0x15, T_B = 0x17, T_BASE = 0x18, T_BASEFONT = 0x19,
    T_BGSOUND = 0x1c, T_BIG = 0x1d, T_BLOCKQUOTE = 0x1f, T_BODY = 0x20, T_BR = 0x21,
    T_BUTTON = 0x22, T_CAPTION = 0x24, T_CENTER = 0x25, T_CODE = 0x28, T_COL = 0x29,
    T_COLGROUP = 0x2a, T_DD = 0x2d, T_DESC = 0x2f, T_DETAILS = 0x30, T_DIALOG = 0x32,
    T_DIR = 0x33, T_DIV = 0x34, T_DL = 0x35, T_DT = 0x36, T_EM = 0x37, T_EMBED = 0x38,
    T_FIELDSET = 0x52, T_FIGCAPTION = 0x53, T_FIGURE = 0x54, T_FONT = 0x55, T_FOOTER = 0x56,
    T_FOREIGNOBJECT = 0x57, T_FORM = 0x58, T_FRAME = 0x59, T_FRAMESET = 0x5a, T_H1 = 0x5c,
    T_H6 = 0x61, T_HEAD = 0x62, T_HEADER = 0x63, T_HGROUP = 0x64, T_HR = 0x65, T_HTML = 0x66,
    T_I = 0x67, T_IFRAME = 0x68, T_IMAGE = 0x69, T_IMG = 0x6a, T_INPUT = 0x6b,
    T_ISINDEX = 0x6d, T_KEYGEN = 0x6f, T_LI = 0x72, T_LINK = 0x74, T_LISTING = 0x75,
    T_MAIN = 0x76, T_MARQUEE = 0x7a, T_MATH = 0x7b, T_MENU = 0x7c, T_META = 0x7d,
    T_MI = 0x81, T_MN = 0x82, T_MO = 0x83, T_MS = 0x84, T_MTEXT = 0x85, T_NAV = 0x87,
    T_NOBR = 0x89, T_NOEMBED = 0x8a, T_NOFRAMES = 0x8b, T_NOSCRIPT = 0x8c, T_OBJECT = 0x8d,
    T_OL = 0x8e, T_OPTGROUP = 0x8f, T_OPTION = 0x90, T_P = 0x92, T_PARAM = 0x93,
    T_PLAINTEXT = 0x96, T_PRE = 0x97, T_RB = 0x9b, T_RP = 0x9c, T_RT = 0x9d, T_RTC = 0x9e,
    T_RUBY = 0x9f, T_S = 0xa0, T_SCRIPT = 0xa2, T_SEARCH = 0xa3, T_SECTION = 0xa4,
    T_SELECT = 0xa5, T_SMALL = 0xa8, T_SOURCE = 0xa9, T_SPAN = 0xab, T_STRIKE = 0xac,
    T_STRONG = 0xad, T_STYLE = 0xae, T_SUB = 0xaf, T_SUMMARY = 0xb0, T_SUP = 0xb1,
    T_SVG = 0xb2, T_TABLE = 0xb3, T_TBODY = 0xb4, T_TD = 0xb5, T_TEMPLATE = 0xb6,
    T_TEXTAREA = 0xb7, T_TFOOT = 0xb9, T_TH = 0xba, T_THEAD = 0xbb, T_TITLE = 0xbd,
    T_TR = 0xbe, T_TRACK = 0xbf, T_TT = 0xc0, T_U = 0xc1, T_UL = 0xc2, T_VAR = 0xc3,
    T_WBR = 0xc5, T_XMP = 0xc6,
};
enum { A_CONTENT = 0x10, A_HREF = 0x1d, A_LANG = 0x23, A_REL = 0x32, A_SRC = 0x3d };

/* ---- lexbor's tokenizer, found by scan_bind ---- */

typedef void *(*token_f)(void *tkz, lx_token *token, void *ctx);
static void *(*tkz_create)(void);
static unsigned (*tkz_init)(void *);
static unsigned (*tkz_begin)(void *);
static unsigned (*tkz_chunk)(void *, const unsigned char *, size_t);
static unsigned (*tkz_end)(void *);
static void (*tkz_clean)(void *);
static void (*tkz_callback_set)(void *, token_f, void *);
static void (*tkz_state_by_tag)(void *, _Bool, uintptr_t, uintptr_t);
static void *(*tkz_destroy)(void *);
static void *tokenizer;
static size_t tokenized; /* bytes this tokenizer has read */

/* The tokenizer keeps every tag and attribute name it meets in hash tables of its own, for
   as long as it lives: a page could grow them with made-up names. So it is replaced after
   this many bytes of input (the tables then hold what that many bytes can name). */
#define TOKENIZER_BYTES ((size_t)1 << 20)

int
scan_bind(const char *path)
{
    if (tokenizer != NULL) {
        return 0;
    }
#ifdef _WIN32
    (void)path;
    return -1; /* (no dlopen: every page is parsed into a tree) */
#else
    void *object = dlopen(path, RTLD_NOW | RTLD_NOLOAD | RTLD_LOCAL);
    if (object == NULL) {
        return -1;
    }
#define FIND(var, name)                                  \
    do {                                                 \
        *(void **)(&var) = dlsym(object, name);          \
        if (var == NULL) {                               \
            return -1;                                   \
        }                                                \
    } while (0)
    FIND(tkz_create, "lxb_html_tokenizer_create");
    FIND(tkz_init, "lxb_html_tokenizer_init");
    FIND(tkz_begin, "lxb_html_tokenizer_begin");
    FIND(tkz_chunk, "lxb_html_tokenizer_chunk");
    FIND(tkz_end, "lxb_html_tokenizer_end");
    FIND(tkz_clean, "lxb_html_tokenizer_clean");
    FIND(tkz_callback_set, "lxb_html_tokenizer_callback_token_done_set_noi");
    FIND(tkz_state_by_tag, "lxb_html_tokenizer_set_state_by_tag");
    FIND(tkz_destroy, "lxb_html_tokenizer_destroy");
#undef FIND
    void *made = tkz_create();
    if (made == NULL || tkz_init(made) != 0) {
        return -1; /* (a tokenizer that failed to init is left: lexbor would free it half-made) */
    }
    tokenizer = made;
    return 0;
#endif
}

/* ---- the scan's state ---- */

enum mode { BEFORE_HEAD, IN_HEAD, AFTER_HEAD, IN_BODY, AFTER_BODY };

typedef struct {
    uintptr_t tag;
    unsigned char svg;  /* an SVG element */
    unsigned char hide; /* script, style, noscript: the text below it is not the page's */
    unsigned char link; /* a link element being read (its index in open_links) */
} open_element;

#define MOST_OPEN_LINKS 8

/* Elements a search of the stack looks at before the scan gives up: the tree builder's own
   searches (an element in scope, the list item to close) look as deep, but one page of
   thousands of open elements could make each of its tags search them all. */
#define MOST_SEARCHED 512

typedef struct {
    scan_result *out;
    size_t most;
    int status;         /* 1 going on; 0 stop (build a tree); -1 out of memory */
    enum mode mode;
    int started;        /* the <html> element is made (its start tag read, or implied) */
    open_element *stack; /* below <body>: the elements open in it */
    size_t depth, stack_capacity;
    size_t open_a, open_p, open_form, open_button, open_tables, hidden, svg;
    uintptr_t head_raw; /* the raw text element open in the head (script, style, title...) */
    int head_noscript;  /* a <noscript> open in the head ("in head noscript", no scripting) */
    size_t template_depth; /* <template>s open: their content is a fragment, not the tree's */
    size_t template_svg;   /* <svg>s open in that content (no raw text in them) */
    int title_seen, title_open, base_seen, robots_seen, canonical_seen;
    int skip_newline;   /* the token after <pre>, <listing>, <textarea>: a first LF is dropped */
    int piece_open;     /* the last node inserted is a text node: the next text joins it */
    size_t open_links[MOST_OPEN_LINKS]; /* the link elements open, outermost first */
    size_t open_link_count;
} scan_state;

static int
grow(void **data, size_t *capacity, size_t needed, size_t item)
{
    if (needed <= *capacity) {
        return 0;
    }
    size_t grown = *capacity ? *capacity : 16;
    while (grown < needed) {
        grown *= 2;
    }
    void *more = realloc(*data, grown * item);
    if (more == NULL) {
        return -1;
    }
    *data = more;
    *capacity = grown;
    return 0;
}

static void
stop(scan_state *s, int status)
{
    if (s->status == 1) {
        s->status = status;
    }
}

/* `data` appended to `bytes`: its span (absent if memory ran out: the scan then stops). */
static scan_span
keep(scan_state *s, scan_bytes *bytes, const unsigned char *data, size_t size)
{
    scan_span span = {bytes->size, size};
    if (grow((void **)&bytes->data, &bytes->capacity, bytes->size + size + 1, 1) < 0) {
        stop(s, -1);
        span.size = SCAN_NONE;
        return span;
    }
    if (size) {
        memcpy(bytes->data + bytes->size, data, size);
    }
    bytes->size += size;
    return span;
}

static int
is_space(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r';
}

/* The first attribute of `token` with the static id `id` (the tree keeps the first). */
static const lx_token_attr *
attr_by_id(const lx_token *token, uintptr_t id)
{
    for (const lx_token_attr *attr = token->attr_first; attr != NULL; attr = attr->next) {
        if (attr->name != NULL && attr->name->attr_id == id) {
            return attr;
        }
    }
    return NULL;
}

/* The first attribute named `name` (lower case, as lexbor keeps names), for one with no
   static id. */
static const lx_token_attr *
attr_by_name(const lx_token *token, const char *name, size_t size)
{
    for (const lx_token_attr *attr = token->attr_first; attr != NULL; attr = attr->next) {
        if (attr->name == NULL || attr->name->entry.length != size) {
            continue;
        }
        const unsigned char *text =
            size <= 16 ? attr->name->entry.u.short_str : attr->name->entry.u.long_str;
        if (memcmp(text, name, size) == 0) {
            return attr;
        }
    }
    return NULL;
}

/* An attribute's value as the tree stores it: (NULL, 0) for none or an empty one. */
static size_t
attr_value(const lx_token_attr *attr, const unsigned char **value)
{
    if (attr == NULL || attr->value_begin == NULL || attr->value == NULL) {
        *value = NULL;
        return 0;
    }
    *value = attr->value;
    return attr->value_size;
}

/* A node (element, comment or text) inserted: below every open link element. */
static void
count_node(scan_state *s)
{
    for (size_t k = 0; k < s->open_link_count; k++) {
        s->out->links[s->open_links[k]].visits++;
    }
}

/* Text inserted at the current node, in the body: it joins the text node before it if
   no node came between (as the tree builder appends to the last child). */
static void
body_text(scan_state *s, const unsigned char *data, size_t size)
{
    if (size == 0) {
        return;
    }
    scan_result *out = s->out;
    if (!s->piece_open) {
        if (grow((void **)&out->pieces, &out->piece_capacity, out->piece_count + 1,
                 sizeof(scan_piece)) < 0) {
            stop(s, -1);
            return;
        }
        out->pieces[out->piece_count++] = (scan_piece){{out->text.size, 0}, s->hidden == 0};
        s->piece_open = 1;
        count_node(s);
    }
    if (keep(s, &out->text, data, size).size != SCAN_NONE) {
        out->pieces[out->piece_count - 1].span.size += size;
    }
}

/* Another node than text inserted, or an element popped: the next text is a node of its own. */
static void
boundary(scan_state *s)
{
    s->piece_open = 0;
}

static void
push(scan_state *s, uintptr_t tag, int svg, int link)
{
    if (grow((void **)&s->stack, &s->stack_capacity, s->depth + 1, sizeof(open_element)) < 0) {
        stop(s, -1);
        return;
    }
    int hide = !svg && (tag == T_SCRIPT || tag == T_STYLE || tag == T_NOSCRIPT);
    s->stack[s->depth++] = (open_element){tag, (unsigned char)svg, (unsigned char)hide,
                                          (unsigned char)link};
    s->hidden += hide;
    s->svg += svg;
    if (!svg) {
        s->open_a += tag == T_A;
        s->open_p += tag == T_P;
        s->open_form += tag == T_FORM;
        s->open_button += tag == T_BUTTON;
        s->open_tables += tag == T_TABLE;
    }
}

/* The current node popped: a link element's text ends there. */
static void
pop(scan_state *s)
{
    open_element top = s->stack[--s->depth];
    s->hidden -= top.hide;
    s->svg -= top.svg;
    if (!top.svg) {
        s->open_a -= top.tag == T_A;
        s->open_p -= top.tag == T_P;
        s->open_form -= top.tag == T_FORM;
        s->open_button -= top.tag == T_BUTTON;
        s->open_tables -= top.tag == T_TABLE;
    }
    if (top.link) {
        scan_link *link = &s->out->links[s->open_links[--s->open_link_count]];
        link->text.size = s->out->text.size - link->text.at;
    }
    boundary(s);
}

static void template_start(scan_state *s);

/* ---- which elements are which (the HTML standard, 13.2.6.4.7 "in body") ---- */

static int
is_heading(uintptr_t tag)
{
    return tag >= T_H1 && tag <= T_H6;
}

/* Start tags that close a <p> in button scope. */
static int
closes_p(uintptr_t tag)
{
    switch (tag) {
    case T_ADDRESS: case T_ARTICLE: case T_ASIDE: case T_BLOCKQUOTE: case T_CENTER:
    case T_DETAILS: case T_DIALOG: case T_DIR: case T_DIV: case T_DL: case T_FIELDSET:
    case T_FIGCAPTION: case T_FIGURE: case T_FOOTER: case T_HEADER: case T_HGROUP:
    case T_MAIN: case T_MENU: case T_NAV: case T_OL: case T_P: case T_SEARCH: case T_SECTION:
    case T_SUMMARY: case T_UL: case T_PRE: case T_LISTING: case T_FORM: case T_TABLE:
    case T_DD: case T_DT: case T_LI: case T_XMP: case T_PLAINTEXT: case T_HR:
        return 1;
    default:
        return is_heading(tag);
    }
}

/* Void in the body: inserted and popped at once (area, br, embed, img, keygen, wbr, input,
   param, source, track, hr; base, basefont, bgsound, link, meta by the "in head" rules). */
static int
is_void(uintptr_t tag)
{
    switch (tag) {
    case T_AREA: case T_BR: case T_EMBED: case T_IMG: case T_KEYGEN: case T_WBR: case T_INPUT:
    case T_PARAM: case T_SOURCE: case T_TRACK: case T_HR: case T_BASE: case T_BASEFONT:
    case T_BGSOUND: case T_LINK: case T_META:
        return 1;
    default:
        return 0;
    }
}

/* Start tags whose handling in the body this scan does not follow: ignored ones (they add
   no node, so text around them joins), ones that reopen or reconstruct elements, and ones
   that change how the document parses from there. */
static int
not_followed(uintptr_t tag)
{
    switch (tag) {
    case T_HTML: case T_BODY: case T_HEAD: case T_FRAMESET: case T_FRAME:
    case T_CAPTION: case T_COL: case T_COLGROUP: case T_TBODY: case T_TD: case T_TFOOT:
    case T_TH: case T_THEAD: case T_TR: case T_IMAGE: case T_ISINDEX: case T_PLAINTEXT:
    case T_NOBR: case T_SELECT: case T_MATH: case T_APPLET: case T_MARQUEE: case T_OBJECT:
    case T_RB: case T_RTC: case T_RP: case T_RT:
        return 1;
    default:
        return 0;
    }
}

/* The "special" category, for the <li>/<dd>/<dt> steps. */
static int
is_special(uintptr_t tag)
{
    switch (tag) {
    case T_ADDRESS: case T_APPLET: case T_AREA: case T_ARTICLE: case T_ASIDE: case T_BASE:
    case T_BASEFONT: case T_BGSOUND: case T_BLOCKQUOTE: case T_BODY: case T_BR: case T_BUTTON:
    case T_CAPTION: case T_CENTER: case T_COL: case T_COLGROUP: case T_DD: case T_DETAILS:
    case T_DIR: case T_DIV: case T_DL: case T_DT: case T_EMBED: case T_FIELDSET:
    case T_FIGCAPTION: case T_FIGURE: case T_FOOTER: case T_FORM: case T_FRAME:
    case T_FRAMESET: case T_HEAD: case T_HEADER: case T_HGROUP: case T_HR: case T_HTML:
    case T_IFRAME: case T_IMG: case T_INPUT: case T_KEYGEN: case T_LI: case T_LINK:
    case T_LISTING: case T_MAIN: case T_MARQUEE: case T_MENU: case T_META: case T_NAV:
    case T_NOEMBED: case T_NOFRAMES: case T_NOSCRIPT: case T_OBJECT: case T_OL: case T_P:
    case T_PARAM: case T_PLAINTEXT: case T_PRE: case T_SCRIPT: case T_SEARCH: case T_SECTION:
    case T_SELECT: case T_SOURCE: case T_STYLE: case T_SUMMARY: case T_TABLE: case T_TBODY:
    case T_TD: case T_TEMPLATE: case T_TEXTAREA: case T_TFOOT: case T_TH: case T_THEAD:
    case T_TITLE: case T_TR: case T_TRACK: case T_UL: case T_WBR: case T_XMP:
        return 1;
    default:
        return is_heading(tag);
    }
}

/* HTML start tags that end SVG content (and <font>, which may), and the SVG elements whose
   content is HTML again or raw text, or that are links: none is followed here. */
static int
svg_not_followed(uintptr_t tag)
{
    switch (tag) {
    case T_B: case T_BIG: case T_BLOCKQUOTE: case T_BODY: case T_BR: case T_CENTER:
    case T_CODE: case T_DD: case T_DIV: case T_DL: case T_DT: case T_EM: case T_EMBED:
    case T_HEAD: case T_HR: case T_I: case T_IMG: case T_LI: case T_LISTING: case T_MENU:
    case T_META: case T_NOBR: case T_OL: case T_P: case T_PRE: case T_RUBY: case T_S:
    case T_SMALL: case T_SPAN: case T_STRONG: case T_STRIKE: case T_SUB: case T_SUP:
    case T_TABLE: case T_TT: case T_U: case T_UL: case T_VAR: case T_FONT:
    case T_FOREIGNOBJECT: case T_DESC: case T_TITLE: case T_SCRIPT: case T_STYLE: case T_A:
    case T_AREA: case T_IFRAME: case T_FRAME: case T_MATH: case T_TEMPLATE: case T_NOSCRIPT:
    case T_HTML: case T_MI: case T_MO: case T_MN: case T_MS: case T_MTEXT:
    case T_ANNOTATION_XML:
        return 1;
    default:
        return is_heading(tag);
    }
}

/* Where text and most start tags would be foster-parented out of the table. */
static int
table_context(uintptr_t tag)
{
    return tag == T_TABLE || tag == T_TBODY || tag == T_THEAD || tag == T_TFOOT || tag == T_TR;
}

/* ---- tokens ---- */

static int
all_space(const unsigned char *data, size_t size)
{
    for (size_t i = 0; i < size; i++) {
        if (!is_space(data[i])) {
            return 0;
        }
    }
    return 1;
}

/* The head's elements that parsers/html.py's _head reads: the first of each. */
static void
head_element(scan_state *s, const lx_token *token)
{
    scan_result *out = s->out;
    const unsigned char *value;
    size_t size;
    if (token->tag_id == T_BASE && !s->base_seen) {
        const lx_token_attr *href = attr_by_id(token, A_HREF);
        if (href != NULL) {
            s->base_seen = 1;
            size = attr_value(href, &value);
            out->base = keep(s, &out->strings, value, size);
        }
    }
    else if (token->tag_id == T_META && !s->robots_seen) {
        size = attr_value(attr_by_name(token, "name", 4), &value);
        if (size == 6) {
            char lower[6];
            for (int i = 0; i < 6; i++) {
                unsigned char c = value[i];
                lower[i] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
            }
            if (memcmp(lower, "robots", 6) == 0) {
                s->robots_seen = 1;
                size = attr_value(attr_by_id(token, A_CONTENT), &value);
                out->robots = keep(s, &out->strings, value, size);
            }
        }
        else if (size != 0) {
            /* Another name: no robots meta. A name whose lower case takes other bytes
               (non-ASCII) could still fold to "robots" in Python: not followed. */
            for (size_t i = 0; i < size; i++) {
                if (value[i] >= 0x80) {
                    stop(s, 0);
                }
            }
        }
    }
    else if (token->tag_id == T_LINK && !s->canonical_seen) {
        size = attr_value(attr_by_id(token, A_REL), &value);
        /* "canonical" among rel's ASCII-whitespace-separated words, any case */
        for (size_t i = 0; i < size;) {
            while (i < size && is_space(value[i])) {
                i++;
            }
            size_t j = i;
            while (j < size && !is_space(value[j])) {
                if (value[j] >= 0x80) {
                    stop(s, 0); /* Python's lower() of a non-ASCII word: not followed */
                }
                j++;
            }
            if (j - i == 9) {
                char lower[9];
                for (int k = 0; k < 9; k++) {
                    unsigned char c = value[i + (size_t)k];
                    lower[k] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
                }
                if (memcmp(lower, "canonical", 9) == 0) {
                    s->canonical_seen = 1;
                    size_t href_size = attr_value(attr_by_id(token, A_HREF), &value);
                    out->canonical = keep(s, &out->strings, value, href_size);
                    break;
                }
            }
            i = j;
        }
    }
}

/* A start tag of a link element: recorded (its first `most`), and read while open. */
static int
link_start(scan_state *s, const lx_token *token, int is_open)
{
    uintptr_t name = token->tag_id == T_A || token->tag_id == T_AREA ? A_HREF : A_SRC;
    const unsigned char *value;
    size_t size = attr_value(attr_by_id(token, name), &value);
    scan_result *out = s->out;
    if (size == 0 || out->link_count >= s->most) {
        return 0;
    }
    if (grow((void **)&out->links, &out->link_capacity, out->link_count + 1,
             sizeof(scan_link)) < 0) {
        stop(s, -1);
        return 0;
    }
    scan_link link = {{0, 0}, {0, SCAN_NONE}, {out->text.size, 0}, 0};
    link.href = keep(s, &out->strings, value, size);
    const unsigned char *rel;
    size_t rel_size = attr_value(attr_by_id(token, A_REL), &rel);
    if (rel_size) {
        link.rel = keep(s, &out->strings, rel, rel_size);
    }
    out->links[out->link_count++] = link;
    if (!is_open) {
        return 0;
    }
    if (s->open_link_count == MOST_OPEN_LINKS) {
        stop(s, 0);
        return 0;
    }
    s->open_links[s->open_link_count++] = out->link_count - 1;
    return 1;
}

/* Elements "generate implied end tags" pops. */
static int
implied_end(uintptr_t tag)
{
    return tag == T_DD || tag == T_DT || tag == T_LI || tag == T_OPTGROUP || tag == T_OPTION ||
           tag == T_P;
}

static uintptr_t
current_tag(const scan_state *s)
{
    return s->depth && !s->stack[s->depth - 1].svg ? s->stack[s->depth - 1].tag : 0;
}

/* "Generate implied end tags" except for `except`, then pop `tag`, which must be the
   current node then (else: the tree builder would pop other elements as well, whose
   formatting it may reconstruct later: not followed). */
static void
close_element(scan_state *s, uintptr_t tag, uintptr_t except)
{
    while (s->depth && !s->stack[s->depth - 1].svg && implied_end(current_tag(s)) &&
           current_tag(s) != except && current_tag(s) != tag) {
        pop(s);
    }
    if (current_tag(s) != tag) {
        stop(s, 0);
        return;
    }
    pop(s);
}

/* Whether a <p> is open in button scope (what "close a p element" needs). */
static int
p_in_button_scope(scan_state *s)
{
    for (size_t k = s->depth; k > 0 && s->open_p; k--) {
        if (s->depth - k >= MOST_SEARCHED) {
            stop(s, 0);
            return 0;
        }
        const open_element *e = &s->stack[k - 1];
        if (e->svg) {
            continue;
        }
        switch (e->tag) {
        case T_P:
            return 1;
        case T_APPLET: case T_CAPTION: case T_TABLE: case T_TD: case T_TH: case T_MARQUEE:
        case T_OBJECT: case T_TEMPLATE: case T_BUTTON:
            return 0;
        default:
            break;
        }
    }
    return 0;
}

static int
is_cell(uintptr_t tag)
{
    return tag == T_TD || tag == T_TH;
}

static int
is_section(uintptr_t tag)
{
    return tag == T_TBODY || tag == T_THEAD || tag == T_TFOOT;
}

/* "Close the cell": everything above the innermost cell popped with it (the formatting
   elements opened in the cell leave the list of active ones at its marker: none is
   reconstructed after). Not followed past a table or SVG content. */
static void
close_cell(scan_state *s)
{
    while (s->depth) {
        open_element *top = &s->stack[s->depth - 1];
        if (top->svg || top->tag == T_TABLE) {
            stop(s, 0);
            return;
        }
        int cell = is_cell(top->tag);
        pop(s);
        if (cell) {
            return;
        }
    }
    stop(s, 0);
}

/* An element the tree builder inserts though no tag says so (a table's <tbody>, <tr>). */
static void
implied_element(scan_state *s, uintptr_t tag)
{
    boundary(s);
    count_node(s);
    push(s, tag, 0, 0);
}

/* The innermost open table part (cell, row, section, caption, colgroup, table), or 0:
   which of the table's insertion modes the tree builder is in. */
static uintptr_t
table_part_open(scan_state *s)
{
    for (size_t k = s->depth; k > 0; k--) {
        if (s->depth - k >= MOST_SEARCHED) {
            stop(s, 0);
            return 0;
        }
        uintptr_t tag = s->stack[k - 1].tag;
        if (!s->stack[k - 1].svg && (is_cell(tag) || is_section(tag) || tag == T_TR ||
                                     tag == T_TABLE || tag == T_CAPTION || tag == T_COLGROUP)) {
            return tag;
        }
    }
    return 0;
}

/* A table part's start tag where the tree builder closes or implies parts first: the
   cell, row or section it ends, the section or row it needs. 1: push it; 0: not followed. */
static int
table_part(scan_state *s, uintptr_t tag)
{
    uintptr_t part = table_part_open(s);
    if (part == T_CAPTION || part == T_COLGROUP || part == 0) {
        return 0;
    }
    if (is_cell(part)) {
        close_cell(s);
        if (s->status != 1) {
            return 0;
        }
    }
    uintptr_t current = current_tag(s);
    if (current == T_TR && !is_cell(tag)) {
        pop(s); /* <tr>, a section: the row ends */
        current = current_tag(s);
    }
    if (is_section(current) && is_section(tag)) {
        pop(s);
        current = current_tag(s);
    }
    if (current == T_TABLE && (tag == T_TR || is_cell(tag))) {
        implied_element(s, T_TBODY);
        current = T_TBODY;
    }
    if (is_section(current) && is_cell(tag)) {
        implied_element(s, T_TR);
        current = T_TR;
    }
    return (current == T_TABLE && is_section(tag)) || (is_section(current) && tag == T_TR) ||
           (current == T_TR && is_cell(tag));
}

static void
body_start(scan_state *s, const lx_token *token)
{
    uintptr_t tag = token->tag_id;
    int self_closing = (token->type & TOKEN_CLOSE_SELF) != 0;
    open_element *current = s->depth ? &s->stack[s->depth - 1] : NULL;
    if (current != NULL && current->svg) {
        if (svg_not_followed(tag)) {
            stop(s, 0);
            return;
        }
        boundary(s);
        count_node(s);
        if (!self_closing) {
            push(s, tag, 1, 0);
        }
        return;
    }
    if (tag == T_TEMPLATE) { /* by the "in head" rules, in a table too */
        template_start(s);
        return;
    }
    if ((is_section(tag) || tag == T_TR || is_cell(tag)) && s->open_tables) {
        if (!table_part(s, tag)) {
            stop(s, 0);
            return;
        }
        boundary(s);
        count_node(s);
        push(s, tag, 0, 0);
        return;
    }
    if (current != NULL && table_context(current->tag)) {
        /* In a table only its own parts and script or style (foster parenting else). */
        int fits = tag == T_SCRIPT || tag == T_STYLE ||
                   (current->tag == T_TABLE && (tag == T_CAPTION || tag == T_COLGROUP));
        if (!fits) {
            stop(s, 0);
            return;
        }
        boundary(s);
        count_node(s);
        push(s, tag, 0, 0);
        if (tag == T_SCRIPT || tag == T_STYLE) {
            tkz_state_by_tag(tokenizer, 0, tag, NS_HTML);
        }
        return;
    }
    if (current != NULL && current->tag == T_COLGROUP) {
        if (tag != T_COL) {
            stop(s, 0);
            return;
        }
        boundary(s);
        count_node(s); /* a <col>: void */
        return;
    }
    if (closes_p(tag) && p_in_button_scope(s)) {
        if (tag == T_TABLE) {
            stop(s, 0); /* (a quirks-mode document keeps the table in the <p>) */
            return;
        }
        close_element(s, T_P, T_P); /* "close a p element" */
    }
    if (tag == T_LI || tag == T_DD || tag == T_DT) {
        /* The open <li> (<dd>, <dt>) it ends, unless a special element is in between. */
        for (size_t k = s->depth; k > 0 && s->status == 1; k--) {
            if (s->depth - k >= MOST_SEARCHED) {
                stop(s, 0);
                return;
            }
            uintptr_t below = s->stack[k - 1].tag;
            if (s->stack[k - 1].svg) {
                break;
            }
            if (below == tag || ((tag == T_DD || tag == T_DT) && (below == T_DD || below == T_DT))) {
                close_element(s, below, below);
                break;
            }
            if (is_special(below) && below != T_ADDRESS && below != T_DIV && below != T_P) {
                break;
            }
        }
    }
    if (s->status != 1) {
        return;
    }
    current = s->depth ? &s->stack[s->depth - 1] : NULL;
    if (not_followed(tag) || (tag == T_A && s->open_a) || (tag == T_FORM && s->open_form) ||
        (tag == T_BUTTON && s->open_button) || (closes_p(tag) && p_in_button_scope(s)) ||
        (is_heading(tag) && current != NULL && is_heading(current->tag)) ||
        ((tag == T_OPTION || tag == T_OPTGROUP) && current != NULL &&
         current->tag == T_OPTION)) {
        stop(s, 0);
        return;
    }
    boundary(s);
    count_node(s);
    if (tag == T_SVG) {
        if (!self_closing) {
            push(s, tag, 1, 0);
        }
        return;
    }
    if (is_void(tag)) {
        if (tag == T_AREA) {
            link_start(s, token, 0);
        }
        return;
    }
    int link = (tag == T_A || tag == T_IFRAME) && link_start(s, token, 1);
    push(s, tag, 0, link);
    switch (tag) {
    case T_SCRIPT: case T_STYLE: case T_TITLE: case T_TEXTAREA: case T_XMP: case T_IFRAME:
    case T_NOEMBED: case T_NOFRAMES:
        tkz_state_by_tag(tokenizer, 0, tag, NS_HTML);
        break;
    default:
        break;
    }
    s->skip_newline = tag == T_PRE || tag == T_LISTING || tag == T_TEXTAREA;
}

/* End tags that "generate implied end tags" once their element is in scope. */
static int
closes_implied(uintptr_t tag)
{
    switch (tag) {
    case T_ADDRESS: case T_ARTICLE: case T_ASIDE: case T_BLOCKQUOTE: case T_BUTTON:
    case T_CENTER: case T_DETAILS: case T_DIALOG: case T_DIR: case T_DIV: case T_DL:
    case T_FIELDSET: case T_FIGCAPTION: case T_FIGURE: case T_FOOTER: case T_HEADER:
    case T_HGROUP: case T_LISTING: case T_MAIN: case T_MENU: case T_NAV: case T_OL:
    case T_PRE: case T_SEARCH: case T_SECTION: case T_SUMMARY: case T_UL: case T_FORM:
    case T_P: case T_LI: case T_DD: case T_DT:
        return 1;
    default:
        return is_heading(tag);
    }
}

static void
body_end(scan_state *s, const lx_token *token)
{
    uintptr_t tag = token->tag_id;
    if (tag == T_BODY || tag == T_HTML) {
        if (s->svg) {
            stop(s, 0);
            return;
        }
        s->mode = AFTER_BODY; /* nothing is popped: what follows is in the body still */
        return;
    }
    if (s->depth && s->stack[s->depth - 1].svg) {
        /* Foreign content: the nearest SVG element of that name is popped, with those
           above it; past the SVG elements the HTML rules would decide: not followed. */
        size_t k = s->depth;
        while (k > 0 && s->stack[k - 1].svg && s->stack[k - 1].tag != tag &&
               s->depth - k < MOST_SEARCHED) {
            k--;
        }
        if (k == 0 || !s->stack[k - 1].svg || s->stack[k - 1].tag != tag) {
            stop(s, 0);
            return;
        }
        while (s->depth >= k) {
            pop(s);
        }
        return;
    }
    if (s->open_tables && (tag == T_TABLE || tag == T_TR || is_section(tag) || is_cell(tag))) {
        /* The parts a table's end tags close: the cell, the row, the section. */
        uintptr_t part = table_part_open(s);
        if (is_cell(part) && (!is_cell(tag) || part == tag)) {
            close_cell(s);
            if (is_cell(tag)) {
                return;
            }
        }
        else if (is_cell(tag)) {
            stop(s, 0);
            return;
        }
        if (s->status == 1 && tag != T_TR && current_tag(s) == T_TR) {
            pop(s);
        }
        if (s->status == 1 && tag == T_TABLE && is_section(current_tag(s))) {
            pop(s);
        }
        if (s->status == 1) {
            if (current_tag(s) != tag) {
                stop(s, 0);
                return;
            }
            pop(s);
        }
        return;
    }
    if (tag == T_P && !p_in_button_scope(s)) {
        boundary(s); /* an empty <p> inserted and closed */
        count_node(s);
        boundary(s);
        return;
    }
    if (closes_implied(tag)) {
        close_element(s, tag, tag);
        return;
    }
    if (s->depth == 0 || current_tag(s) != tag || tag == T_BR) {
        stop(s, 0); /* misnesting, an ignored end tag, or one that makes an element */
        return;
    }
    pop(s);
}

/* The implied <html>, <head> or </head> before `token`, where it is not one they allow. */
static void
imply_body(scan_state *s)
{
    s->started = 1;
    s->mode = IN_BODY;
}

static void
text_token(scan_state *s, const lx_token *token)
{
    const unsigned char *data = token->text_start, *end = token->text_end;
    if (token->null_count) {
        stop(s, 0);
        return;
    }
    if (s->skip_newline) {
        s->skip_newline = 0;
        if (data < end && *data == '\n') {
            data++;
        }
    }
    size_t size = (size_t)(end - data);
    switch (s->mode) {
    case IN_HEAD:
        if (s->head_raw) {
            if (s->title_open) {
                s->out->title.size += size;
                keep(s, &s->out->text, data, size);
            }
            return;
        }
        if (s->head_noscript && !all_space(data, size)) {
            stop(s, 0); /* (it would end the noscript, then the head) */
            return;
        }
        /* fall through: whitespace stays in the head, the rest makes the body */
    case BEFORE_HEAD:
    case AFTER_HEAD:
        while (data < end && is_space(*data)) {
            data++;
        }
        if (data == end) {
            return;
        }
        imply_body(s);
        body_text(s, data, (size_t)(end - data));
        return;
    case IN_BODY:
        if (s->depth && !all_space(data, size) &&
            (table_context(s->stack[s->depth - 1].tag) || s->stack[s->depth - 1].tag == T_COLGROUP)) {
            stop(s, 0); /* foster parenting */
            return;
        }
        body_text(s, data, size);
        return;
    case AFTER_BODY:
        if (!all_space(data, size)) {
            stop(s, 0);
            return;
        }
        body_text(s, data, size); /* whitespace after </body> goes into the body */
        return;
    }
}

static void
head_start(scan_state *s, const lx_token *token)
{
    uintptr_t tag = token->tag_id;
    if (s->head_noscript && tag != T_BASEFONT && tag != T_BGSOUND && tag != T_LINK &&
        tag != T_META && tag != T_STYLE && tag != T_NOFRAMES) {
        stop(s, 0); /* what "in head noscript" allows, the rest ends it: not followed */
        return;
    }
    switch (tag) {
    case T_BASE: case T_BASEFONT: case T_BGSOUND: case T_LINK: case T_META:
        head_element(s, token);
        return;
    case T_TITLE:
        if (!s->title_seen) {
            s->title_seen = s->title_open = 1;
            s->out->title = (scan_span){s->out->text.size, 0};
        }
        /* fall through */
    case T_SCRIPT: case T_STYLE: case T_NOFRAMES:
        s->head_raw = tag;
        tkz_state_by_tag(tokenizer, 0, tag, NS_HTML);
        return;
    case T_NOSCRIPT:
        s->head_noscript = 1; /* its links and metas are the head's (scripting is off) */
        return;
    case T_TEMPLATE:
        template_start(s);
        return;
    case T_HTML: case T_HEAD:
        stop(s, 0);
        return;
    default: /* </head> implied: after the head, a body implied for this tag */
        s->mode = AFTER_HEAD;
        return;
    }
}

/* A <template> start tag, in the head or the body: the element is a node of the tree, and
   what follows up to its end tag goes into its content, a fragment no walk reads. */
static void
template_start(scan_state *s)
{
    if (s->mode == IN_BODY) {
        boundary(s);
        count_node(s);
    }
    s->template_depth = 1;
}

/* A token of template content: only what the tokenizer's state and the template's end
   depend on is followed (raw text elements, nested templates). Foreign content in it
   (whose raw text is not raw) and <plaintext> are not followed. */
static void
template_content(scan_state *s, const lx_token *token)
{
    uintptr_t tag = token->tag_id;
    if (tag == T__TEXT || tag == T__COMMENT || tag == T__DOCTYPE || tag < T_A) {
        return;
    }
    if (token->type & TOKEN_CLOSE) {
        if (tag == T_TEMPLATE) {
            s->template_svg = 0; /* (the end tag closes what is open in the template) */
            if (--s->template_depth == 0) {
                boundary(s); /* the template element ends */
            }
        }
        else if (tag == T_SVG && s->template_svg) {
            s->template_svg--;
        }
        return;
    }
    if (s->template_svg) { /* SVG: its elements are not raw text; HTML in it is not followed */
        if (svg_not_followed(tag) && tag != T_A) {
            stop(s, 0);
        }
        else if (tag == T_SVG && !(token->type & TOKEN_CLOSE_SELF)) {
            s->template_svg++;
        }
        return;
    }
    switch (tag) {
    case T_TEMPLATE:
        s->template_depth++;
        break;
    case T_SVG:
        s->template_svg += !(token->type & TOKEN_CLOSE_SELF);
        break;
    case T_MATH: case T_PLAINTEXT:
        stop(s, 0);
        break;
    case T_SCRIPT: case T_STYLE: case T_TITLE: case T_TEXTAREA: case T_XMP: case T_IFRAME:
    case T_NOEMBED: case T_NOFRAMES:
        tkz_state_by_tag(tokenizer, 0, tag, NS_HTML);
        break;
    default:
        break;
    }
}

static void *
on_token(void *tkz, lx_token *token, void *ctx)
{
    scan_state *s = ctx;
    (void)tkz;
    if (s->status != 1) {
        return NULL; /* (the tokenizer stops at once) */
    }
    uintptr_t tag = token->tag_id;
    int close = (token->type & TOKEN_CLOSE) != 0;
    if (tag == T__EOF) {
        return token;
    }
    if (s->template_depth) {
        template_content(s, token);
        return s->status == 1 ? token : NULL;
    }
    if (tag == T__TEXT) {
        text_token(s, token);
        return s->status == 1 ? token : NULL;
    }
    s->skip_newline = 0;
    if (tag == T__COMMENT) {
        if (s->mode == IN_BODY) {
            /* In SVG a <![CDATA[ section is text, which this tokenizer (no tree to ask)
               reads as a bogus comment of "[CDATA[...": not followed. */
            size_t size = (size_t)(token->text_end - token->text_start);
            if (s->svg && token->text_start != NULL && size >= 7 &&
                memcmp(token->text_start, "[CDATA[", 7) == 0) {
                stop(s, 0);
            }
            boundary(s);
            count_node(s);
        }
        return s->status == 1 ? token : NULL;
    }
    if (tag == T__DOCTYPE) {
        if (s->started || s->mode != BEFORE_HEAD) {
            stop(s, 0);
        }
        return s->status == 1 ? token : NULL;
    }
    if (tag == T__PI || tag < T_A) {
        stop(s, 0);
        return NULL;
    }
    /* An element's start or end tag, by the mode it comes in. */
    for (int again = 1; again && s->status == 1;) {
        again = 0;
        switch (s->mode) {
        case BEFORE_HEAD:
            if (close) {
                stop(s, 0);
            }
            else if (tag == T_HTML && !s->started) {
                s->started = 1;
                const unsigned char *value;
                size_t size = attr_value(attr_by_id(token, A_LANG), &value);
                s->out->lang = keep(s, &s->out->strings, value, size);
            }
            else if (tag == T_HTML) {
                stop(s, 0);
            }
            else {
                s->started = 1;
                s->mode = IN_HEAD;
                again = tag != T_HEAD;
            }
            break;
        case IN_HEAD:
            if (close) {
                if (s->head_raw && tag == s->head_raw) {
                    s->head_raw = 0;
                    s->title_open = 0;
                }
                else if (tag == T_NOSCRIPT && s->head_noscript && !s->head_raw) {
                    s->head_noscript = 0;
                }
                else if (tag == T_HEAD && !s->head_raw && !s->head_noscript) {
                    s->mode = AFTER_HEAD;
                }
                else {
                    stop(s, 0);
                }
            }
            else {
                head_start(s, token);
                again = s->mode == AFTER_HEAD;
            }
            break;
        case AFTER_HEAD:
            if (close) {
                stop(s, 0);
            }
            else if (tag == T_BODY) {
                s->mode = IN_BODY;
            }
            else if (tag == T_HTML || tag == T_FRAMESET || tag == T_HEAD || tag == T_BASE ||
                     tag == T_BASEFONT || tag == T_BGSOUND || tag == T_LINK || tag == T_META ||
                     tag == T_NOFRAMES || tag == T_SCRIPT || tag == T_STYLE ||
                     tag == T_TEMPLATE || tag == T_TITLE) {
                stop(s, 0); /* (into the head after all, or a frameset) */
            }
            else {
                imply_body(s);
                again = 1;
            }
            break;
        case IN_BODY:
            if (close) {
                body_end(s, token);
            }
            else {
                body_start(s, token);
            }
            break;
        case AFTER_BODY:
            if (!close || tag != T_HTML) {
                stop(s, 0);
            }
            break;
        }
    }
    return s->status == 1 ? token : NULL;
}

int
scan_document(const unsigned char *data, size_t size, size_t most, scan_result *out)
{
    memset(out, 0, sizeof(*out));
    out->title = out->base = out->robots = out->canonical = out->lang =
        (scan_span){0, SCAN_NONE};
    if (tokenizer == NULL) {
        return 0;
    }
    if (tokenized > TOKENIZER_BYTES) {
        void *fresh = tkz_create();
        if (fresh == NULL || tkz_init(fresh) != 0) {
            return 0; /* this page as a tree; the next one tries again */
        }
        tkz_destroy(tokenizer);
        tokenizer = fresh;
        tokenized = 0;
    }
    tokenized += size;
    scan_state s;
    memset(&s, 0, sizeof(s));
    s.out = out;
    s.most = most;
    s.status = 1;
    s.mode = BEFORE_HEAD;
    tkz_clean(tokenizer);
    tkz_callback_set(tokenizer, (token_f)on_token, &s);
    if (tkz_begin(tokenizer) != 0) {
        s.status = 0;
    }
    else {
        tkz_chunk(tokenizer, data, size);
        if (s.status == 1) {
            tkz_end(tokenizer);
        }
    }
    /* Link elements still open at the end hold everything after their start. */
    while (s.status == 1 && s.open_link_count) {
        scan_link *link = &out->links[s.open_links[--s.open_link_count]];
        link->text.size = out->text.size - link->text.at;
    }
    tkz_clean(tokenizer);
    free(s.stack);
    if (s.status != 1) {
        int status = s.status;
        scan_result_free(out);
        return status;
    }
    return 1;
}

void
scan_result_free(scan_result *out)
{
    free(out->text.data);
    free(out->strings.data);
    free(out->links);
    free(out->pieces);
    memset(out, 0, sizeof(*out));
}
