/* parsers._walk: a page's links and visible text, read from selectolax's lexbor tree in C.
And the loop of a worker's memo of the links it offered (offer), which needs no tree.

What parsers/html.py does in Python for every page (a CSS query, a LexborNode and an
attribute dict for each link, the invisible elements removed before the text is read), done
as one walk of lexbor's nodes. The results are the same (parsers/tree_walk.py checks them
against the Python walk on a probe page before this module is used; the tests compare the two
on many pages). What this walk reads:

- lexbor's node, element, attribute and character-data structs, as declared in the lexbor
  sources that selectolax bundles (lexbor/source/lexbor/dom/interfaces/{node,element,attr,
  character_data}.h). Only fields are read: no lexbor function is called (selectolax links
  lexbor statically; its symbols are not ours to call);
- selectolax's LexborNode object, for its node pointer: PyObject_HEAD, Cython's vtable
  pointer, then `lxb_dom_node_t *node` (the `cdef class LexborNode` of selectolax/lexbor.pxd).

Both are layouts of one selectolax release, not an API: parsers/tree_walk.py uses this module
only with the selectolax versions whose layout was checked, and only if its probe agrees.

Nothing here is bounded by the page but the tree itself: one pre-order walk of the nodes for
the links (stopping at `most` hrefs) and the text (resolved_links_text: a large page's tree
outgrows the caches, and a second walk of it cost as much as the first), or one for each;
anchor text is read per link on request, under a budget of node visits and one of text bytes
per tree (nested anchors would make both quadratic: n anchors around one long text hold it n
times).

Only a document's nodes are walked: selectolax reads a fragment's root, and template content,
through the nodes around it, which this walk does not do (node_of refuses them).
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "_resolve.h"
#include "_scan.h"

/* lexbor: dom/interfaces/{node,element,attr,character_data}.h and core/str.h */
typedef struct {
    unsigned char *data;
    size_t length;
} lx_str;

typedef struct lx_node lx_node;
struct lx_node {
    void *events;            /* lxb_dom_event_target_t */
    uintptr_t local_name;    /* an element's tag id; an attribute's name id */
    uintptr_t prefix;
    uintptr_t ns;
    void *owner_document;
    lx_node *next;
    lx_node *prev;
    lx_node *parent;
    lx_node *first_child;
    lx_node *last_child;
    void *user;
    int type;                /* lxb_dom_node_type_t */
};

typedef struct lx_attr lx_attr;
typedef struct {
    lx_node node;
    uintptr_t upper_name;
    uintptr_t qualified_name;
    lx_str *is_value;
    lx_attr *first_attr;
} lx_element;

struct lx_attr {
    lx_node node;
    uintptr_t upper_name;
    uintptr_t qualified_name; /* set only where the markup's name differs from local_name */
    lx_str *value;
    void *owner;
    lx_attr *next;
};

typedef struct {
    lx_node node;
    lx_str data;
} lx_character_data;

enum { NODE_ELEMENT = 1, NODE_TEXT = 3 };
enum { TAG__TEXT = 0x02, TAG_A = 0x07, TAG_AREA = 0x13, TAG_FRAME = 0x59, TAG_IFRAME = 0x68,
       TAG_NOSCRIPT = 0x8c, TAG_SCRIPT = 0xa2, TAG_STYLE = 0xae, TAG_TEMPLATE = 0xb6 };
enum { ATTR_HREF = 0x1d, ATTR_REL = 0x32, ATTR_SRC = 0x3d };

/* selectolax: cdef class LexborNode (lexbor.pxd) */
typedef struct {
    PyObject_HEAD
    void *vtab;
    lx_node *node;
    PyObject *parser;        /* the LexborHTMLParser: it owns the tree */
    int is_fragment_root;    /* Cython's bint */
    int is_template_content;
} selectolax_node;

static PyTypeObject *lexbor_node_type; /* selectolax.lexbor.LexborNode, set by bind() */

static lx_node *
node_of(PyObject *obj)
{
    if (lexbor_node_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "parsers._walk.bind() was not called");
        return NULL;
    }
    if (!PyObject_TypeCheck(obj, lexbor_node_type)) {
        PyErr_SetString(PyExc_TypeError, "a selectolax LexborNode is needed");
        return NULL;
    }
    const selectolax_node *wrapper = (const selectolax_node *)obj;
    if (wrapper->node == NULL) {
        PyErr_SetString(PyExc_ValueError, "the LexborNode holds no node");
        return NULL;
    }
    if (wrapper->is_fragment_root || wrapper->is_template_content) {
        PyErr_SetString(PyExc_ValueError, "a fragment's or template content's node: walk it in Python");
        return NULL;
    }
    return wrapper->node;
}

/* The pre-order successor of `node` within `root`'s subtree, skipping `node`'s children
   when `skip` (lxb_dom_node_simple_walk's order: what selectolax's queries and text use). */
static inline lx_node *
step(lx_node *node, lx_node *root, int skip)
{
    if (!skip && node->first_child != NULL) {
        return node->first_child;
    }
    while (node != root && node->next == NULL) {
        node = node->parent;
    }
    return node == root ? NULL : node->next;
}

/* The value of `element`'s attribute named exactly `name` (no prefix, as selectolax's
   `attributes` dict keys it), or NULL if it has none or an empty one. */
static const lx_str *
attribute(const lx_node *element, uintptr_t name)
{
    for (const lx_attr *attr = ((const lx_element *)element)->first_attr; attr != NULL;
         attr = attr->next) {
        if (attr->node.local_name == name && attr->qualified_name == 0) {
            const lx_str *value = attr->value;
            if (value == NULL || value->data == NULL || value->length == 0) {
                return NULL;
            }
            return value;
        }
    }
    return NULL;
}

static PyObject *
decode(const lx_str *value)
{
    return PyUnicode_DecodeUTF8((const char *)value->data, (Py_ssize_t)value->length,
                                "replace");
}

static inline int
invisible(uintptr_t tag)
{
    return tag == TAG_SCRIPT || tag == TAG_STYLE || tag == TAG_NOSCRIPT || tag == TAG_TEMPLATE;
}

/* ---- Anchors: the link elements of one walk, for their text on request ---- */

typedef struct {
    PyObject_HEAD
    PyObject *parser;  /* the walked node's LexborHTMLParser, held: the tree lives as long */
    lx_node **nodes;
    Py_ssize_t count;
    Py_ssize_t budget; /* node visits left for anchor text */
    Py_ssize_t bytes;  /* text bytes left for anchor text */
    /* Or, from a scan (no tree): each link's text span and node count, and the text. */
    scan_link *links;
    unsigned char *text;
} Anchors;

static void
anchors_dealloc(Anchors *self)
{
    Py_XDECREF(self->parser);
    PyMem_Free(self->nodes);
    free(self->links);
    free(self->text);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static Py_ssize_t
anchors_len(Anchors *self)
{
    return self->count;
}

/* Link i's text as UTF-8 bytes in a new buffer (*out, *length; free it with PyMem_Free):
   1; 0 with no buffer once the tree's budget of visits is spent, or for a text longer (in
   bytes) than what is left of the tree's budget of bytes (a shorter one after it is still
   read); -1 with an exception set. */
static int
anchor_bytes(Anchors *self, Py_ssize_t i, char **out, size_t *length)
{
    if (i < 0 || i >= self->count) {
        PyErr_SetString(PyExc_IndexError, "no such link");
        return -1;
    }
    if (self->links != NULL) { /* a scan's: the same budgets, spent the same way */
        const scan_link *link = &self->links[i];
        if ((Py_ssize_t)link->visits > self->budget) {
            self->budget = 0;
            return 0;
        }
        self->budget -= (Py_ssize_t)link->visits;
        if (link->text.size > (size_t)self->bytes) {
            return 0;
        }
        self->bytes -= (Py_ssize_t)link->text.size;
        char *copy = PyMem_Malloc(link->text.size ? link->text.size : 1);
        if (copy == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        if (link->text.size) {
            memcpy(copy, self->text + link->text.at, link->text.size);
        }
        *out = copy;
        *length = link->text.size;
        return 1;
    }
    lx_node *root = self->nodes[i];
    /* One pass to size the text, one to copy it: no text node is read twice. */
    size_t size = 0;
    Py_ssize_t visits = 0;
    for (lx_node *node = step(root, root, 0); node != NULL; node = step(node, root, 0)) {
        if (++visits > self->budget) {
            self->budget = 0;
            return 0;
        }
        if (node->local_name == TAG__TEXT) {
            const lx_str *data = &((lx_character_data *)node)->data;
            if (data->data != NULL) {
                size += data->length;
            }
        }
    }
    self->budget -= visits;
    if (size > (size_t)self->bytes) {
        return 0;
    }
    self->bytes -= (Py_ssize_t)size;
    char *buffer = PyMem_Malloc(size ? size : 1);
    if (buffer == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    size_t at = 0;
    for (lx_node *node = step(root, root, 0); node != NULL; node = step(node, root, 0)) {
        if (node->local_name == TAG__TEXT) {
            const lx_str *data = &((lx_character_data *)node)->data;
            if (data->data != NULL && data->length) {
                memcpy(buffer + at, data->data, data->length);
                at += data->length;
            }
        }
    }
    *out = buffer;
    *length = at;
    return 1;
}

/* text(i): the text of link i's element, as selectolax's `node.text()` (every text node
   below it, in order, decoded as one); "" once the tree's budget of visits is spent, and ""
   for a text longer (in bytes) than what is left of the tree's budget of bytes. */
static PyObject *
anchors_text(Anchors *self, PyObject *arg)
{
    Py_ssize_t i = PyLong_AsSsize_t(arg);
    if (i == -1 && PyErr_Occurred()) {
        return NULL;
    }
    char *buffer = NULL;
    size_t at = 0;
    int got = anchor_bytes(self, i, &buffer, &at);
    if (got <= 0) {
        return got < 0 ? NULL : PyUnicode_FromStringAndSize("", 0);
    }
    PyObject *text = PyUnicode_DecodeUTF8(buffer, (Py_ssize_t)at, "replace");
    PyMem_Free(buffer);
    return text;
}

/* Whether `text` (ASCII) holds `needle` (lower-case ASCII), ASCII letters in any case. */
static int
holds(const char *text, size_t length, const char *needle, size_t size)
{
    if (size == 0) {
        return 1;
    }
    for (size_t at = 0; at + size <= length; at++) {
        size_t k = 0;
        while (k < size) {
            char c = text[at + k];
            if (c >= 'A' && c <= 'Z') {
                c = (char)(c + ('a' - 'A'));
            }
            if (c != needle[k]) {
                break;
            }
            k++;
        }
        if (k == size) {
            return 1;
        }
    }
    return 0;
}

/* text_if(i, needles): text(i), or None where that text is all ASCII and holds none of
   `needles` (a tuple of lower-case ASCII bytes), its letters in any case: for ASCII text
   that is what `any(n in text.lower() ...)` says, so a query's words are looked for in the
   anchors without a str for those that hold none (most). Text with any other byte is
   returned for the caller to look in (str.lower() folds some non-ASCII letters to ASCII
   ones: K, the Kelvin sign, to k). The budgets are spent as text(i) spends them. */
static int
check_needles(PyObject *needles)
{
    Py_ssize_t count = PyTuple_GET_SIZE(needles);
    for (Py_ssize_t n = 0; n < count; n++) {
        if (!PyBytes_Check(PyTuple_GET_ITEM(needles, n))) {
            PyErr_SetString(PyExc_TypeError, "text_if: needles must be bytes");
            return -1;
        }
    }
    return 0;
}

/* text_if's work, on needles already checked. */
static PyObject *
text_if_at(Anchors *self, Py_ssize_t i, PyObject *needles)
{
    Py_ssize_t count = PyTuple_GET_SIZE(needles);
    char *buffer = NULL;
    size_t at = 0;
    int got = anchor_bytes(self, i, &buffer, &at);
    if (got <= 0) {
        if (got < 0) {
            return NULL;
        }
        for (Py_ssize_t n = 0; n < count; n++) { /* "": only an empty needle is in it */
            if (PyBytes_GET_SIZE(PyTuple_GET_ITEM(needles, n)) == 0) {
                return PyUnicode_FromStringAndSize("", 0);
            }
        }
        Py_RETURN_NONE;
    }
    int ascii = 1;
    for (size_t k = 0; k < at; k++) {
        if ((unsigned char)buffer[k] & 0x80) {
            ascii = 0;
            break;
        }
    }
    if (ascii) {
        int found = 0;
        for (Py_ssize_t n = 0; n < count && !found; n++) {
            PyObject *needle = PyTuple_GET_ITEM(needles, n);
            found = holds(buffer, at, PyBytes_AS_STRING(needle), (size_t)PyBytes_GET_SIZE(needle));
        }
        if (!found) {
            PyMem_Free(buffer);
            Py_RETURN_NONE;
        }
    }
    PyObject *text = PyUnicode_DecodeUTF8(buffer, (Py_ssize_t)at, "replace");
    PyMem_Free(buffer);
    return text;
}

static PyObject *
anchors_text_if(Anchors *self, PyObject *args)
{
    Py_ssize_t i;
    PyObject *needles;
    if (!PyArg_ParseTuple(args, "nO!:text_if", &i, &PyTuple_Type, &needles)) {
        return NULL;
    }
    if (check_needles(needles) < 0) {
        return NULL;
    }
    return text_if_at(self, i, needles);
}

static PyTypeObject AnchorsType; /* defined below, with the methods it lists */

/* Whether parsers.html._links' query loop skips urls[i] before reading its anchor text:
   it resolved to nothing, this worker offered it at `depth` or less (`offered`: hash(url)
   -> the smallest depth, or None), it is not among the links kept (`found`), or it has
   every query word already (`hits`: url -> distinct query words, `most_hits`). 1: skip,
   0: read it, -1: an exception. */
static int
anchor_skipped(PyObject *url, PyObject *offered, long depth, PyObject *found, PyObject *hits,
               long most_hits)
{
    if (url == Py_None) {
        return 1;
    }
    if (offered != Py_None) {
        Py_hash_t hash = PyObject_Hash(url);
        if (hash == -1) {
            return -1;
        }
        PyObject *key = PyLong_FromSsize_t(hash);
        if (key == NULL) {
            return -1;
        }
        PyObject *at = PyDict_GetItemWithError(offered, key); /* borrowed */
        Py_DECREF(key);
        if (at == NULL && PyErr_Occurred()) {
            return -1;
        }
        if (at != NULL) {
            long offered_at = PyLong_AsLong(at);
            if (offered_at == -1 && PyErr_Occurred()) {
                return -1;
            }
            if (offered_at <= depth) {
                return 1;
            }
        }
    }
    int kept = PyDict_Contains(found, url);
    if (kept <= 0) {
        return kept < 0 ? -1 : 1;
    }
    PyObject *count = PyDict_GetItemWithError(hits, url); /* borrowed */
    if (count == NULL) {
        return PyErr_Occurred() ? -1 : most_hits == 0;
    }
    long words = PyLong_AsLong(count);
    if (words == -1 && PyErr_Occurred()) {
        return -1;
    }
    return words == most_hits;
}

/* next_anchor(anchors, urls, start, offered, depth, found, hits, most_hits, needles):
   (i, text) for the first i >= start whose anchor text parsers.html._links' query loop
   reads (see anchor_skipped) and looks in: text(i) with needles None, else text_if(i,
   needles) where that is not None; None past the last. The loop's own checks, in its
   order, with one call a link read instead of Python's steps for every link: the budgets
   of visits and bytes are spent exactly as that loop spent them, and `hits` is read at
   each link, so what the caller adds to it between calls counts. */
static PyObject *
next_anchor(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "next_anchor takes 9 arguments");
        return NULL;
    }
    PyObject *urls = args[1], *offered = args[3], *found = args[5], *hits = args[6];
    PyObject *needles = args[8];
    if (!PyObject_TypeCheck(args[0], &AnchorsType) || !PyList_Check(urls) ||
        !(offered == Py_None || PyDict_Check(offered)) || !PyDict_Check(found) ||
        !PyDict_Check(hits) || !(needles == Py_None || PyTuple_Check(needles))) {
        PyErr_SetString(PyExc_TypeError,
                        "next_anchor(Anchors, list, int, dict | None, int, dict, dict, int, "
                        "tuple | None)");
        return NULL;
    }
    if (needles != Py_None && check_needles(needles) < 0) {
        return NULL;
    }
    Anchors *anchors = (Anchors *)args[0];
    Py_ssize_t start = PyLong_AsSsize_t(args[2]);
    long depth = PyLong_AsLong(args[4]);
    long most_hits = PyLong_AsLong(args[7]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    for (Py_ssize_t i = start < 0 ? 0 : start; i < PyList_GET_SIZE(urls); i++) {
        PyObject *url = PyList_GET_ITEM(urls, i);
        Py_INCREF(url); /* a dict lookup may run an __eq__ that changes the list */
        int skipped = anchor_skipped(url, offered, depth, found, hits, most_hits);
        Py_DECREF(url);
        if (skipped < 0) {
            return NULL;
        }
        if (skipped) {
            continue;
        }
        PyObject *text;
        if (needles == Py_None) {
            PyObject *index = PyLong_FromSsize_t(i);
            if (index == NULL) {
                return NULL;
            }
            text = anchors_text(anchors, index);
            Py_DECREF(index);
        } else {
            text = text_if_at(anchors, i, needles);
        }
        if (text == NULL) {
            return NULL;
        }
        if (text == Py_None) {
            Py_DECREF(text);
            continue;
        }
        return Py_BuildValue("(nN)", i, text);
    }
    Py_RETURN_NONE;
}

static PyMethodDef anchors_methods[] = {
    {"text", (PyCFunction)anchors_text, METH_O, "The text of link i's element."},
    {"text_if", (PyCFunction)anchors_text_if, METH_VARARGS,
     "text_if(i, needles): text(i), or None if it is ASCII and holds no needle."},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods anchors_sequence = {.sq_length = (lenfunc)anchors_len};

static PyTypeObject AnchorsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "parsers._walk.Anchors",
    .tp_basicsize = sizeof(Anchors),
    .tp_dealloc = (destructor)anchors_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The link elements of one links() walk, for their text on request.",
    .tp_methods = anchors_methods,
    .tp_as_sequence = &anchors_sequence,
};

/* ---- links(root, most, visits, text_bytes) and resolved_links(..., base) ---- */

/* Room for one href's resolution (parsers/_resolve.h), grown as hrefs need. */
typedef struct {
    unsigned char *out;
    size_t out_size;
    size_t *stack;
    size_t stack_size;
} scratch;

static int
scratch_fit(scratch *room, const resolve_base *base, size_t size)
{
    size_t out_size = resolve_out_bytes(base, size), stack_size = resolve_stack_entries(base, size);
    if (out_size > room->out_size) {
        unsigned char *out = PyMem_Realloc(room->out, out_size);
        if (out == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        room->out = out;
        room->out_size = out_size;
    }
    if (stack_size > room->stack_size) {
        size_t *stack = PyMem_Realloc(room->stack, stack_size * sizeof(size_t));
        if (stack == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        room->stack = stack;
        room->stack_size = stack_size;
    }
    return 0;
}

/* An href's entry in the first list: with no `base`, the href; else its URL (an ASCII str),
   None for another scheme than http(s), or the href, its index added to `fallbacks`, where
   Resolver.resolve must decide. A new reference, or NULL with an exception set. */
static PyObject *
link_entry(const lx_str *value, const resolve_base *base, scratch *room, Py_ssize_t index,
           PyObject *fallbacks)
{
    if (base == NULL) {
        return decode(value);
    }
    if (scratch_fit(room, base, value->length) < 0) {
        return NULL;
    }
    ssize_t size = resolve_href(value->data, value->length, base, room->out, room->stack);
    if (size >= 0) {
        PyObject *url = PyUnicode_New(size, 127);
        if (url != NULL) {
            memcpy(PyUnicode_DATA(url), room->out, (size_t)size);
        }
        return url;
    }
    if (size == RESOLVE_NOT_HTTP) {
        Py_RETURN_NONE;
    }
    PyObject *number = PyLong_FromSsize_t(index);
    int failed = number == NULL || PyList_Append(fallbacks, number) < 0;
    Py_XDECREF(number);
    return failed ? NULL : decode(value);
}

/* ---- text(root) ---- */

static int
ascii_space_only(const lx_str *data)
{
    if (data->data == NULL) {
        return 1;
    }
    for (size_t i = 0; i < data->length; i++) {
        unsigned char c = data->data[i];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\f' && c != '\r') {
            return 0;
        }
    }
    return 1;
}

/* `str.strip()` of `text` (whose reference it takes): the same whitespace, Py_UNICODE_ISSPACE,
   without a method call. */
static PyObject *
strip(PyObject *text)
{
    Py_ssize_t end = PyUnicode_GET_LENGTH(text), start = 0, length = end;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    while (start < end && Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, start))) {
        start++;
    }
    while (end > start && Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, end - 1))) {
        end--;
    }
    if (start == 0 && end == length) {
        return text;
    }
    PyObject *part = PyUnicode_Substring(text, start, end);
    Py_DECREF(text);
    return part;
}

/* A growable byte buffer. */
typedef struct {
    char *data;
    size_t size, capacity;
} buffer;

static int
append(buffer *out, const char *data, size_t length)
{
    if (out->size + length > out->capacity) {
        size_t grown = out->capacity ? out->capacity : 4096;
        while (grown < out->size + length) {
            grown *= 2;
        }
        char *data_grown = PyMem_Realloc(out->data, grown);
        if (data_grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        out->data = data_grown;
        out->capacity = grown;
    }
    memcpy(out->data + out->size, data, length);
    out->size += length;
    return 0;
}

/* What `str.strip()` strips among ASCII characters (Py_UNICODE_ISSPACE below 0x80). */
static inline int
ascii_strippable(unsigned char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
}

/* The visible text as it is gathered: its UTF-8 bytes and how many pieces it holds. */
typedef struct {
    buffer bytes;
    size_t pieces;
} text_out;

/* Add a text node's piece to `out`, as text() joins them: stripped of ASCII whitespace as
   bytes; a piece that then starts or ends with a non-ASCII byte (which may be a Unicode
   space, or invalid UTF-8) is decoded and stripped as a str, then joined as its UTF-8. The
   separators are ASCII, so an invalid sequence decodes as it would alone in its piece.
   Whitespace-only text nodes add nothing. 0, or -1 with an exception set. */
static int text_piece(text_out *out, const lx_str *data, int is_text);

static int
text_node(text_out *out, lx_node *node)
{
    return text_piece(out, &((lx_character_data *)node)->data, node->type == NODE_TEXT);
}

/* text_node's work on a node's data (`is_text`: a text node, not another character data). */
static int
text_piece(text_out *out, const lx_str *data, int is_text)
{
    if (data->data == NULL || (is_text && ascii_space_only(data))) {
        return 0;
    }
    const unsigned char *bytes = data->data;
    size_t start = 0, end = data->length;
    while (start < end && ascii_strippable(bytes[start])) {
        start++;
    }
    while (end > start && ascii_strippable(bytes[end - 1])) {
        end--;
    }
    if (out->pieces++ && append(&out->bytes, " ", 1) < 0) {
        return -1;
    }
    if (start < end && (bytes[start] >= 0x80 || bytes[end - 1] >= 0x80)) {
        PyObject *piece = decode(data);
        PyObject *clean = piece ? strip(piece) : NULL;
        Py_ssize_t length;
        const char *utf8 = clean ? PyUnicode_AsUTF8AndSize(clean, &length) : NULL;
        int failed = utf8 == NULL || append(&out->bytes, utf8, (size_t)length) < 0;
        Py_XDECREF(clean);
        return failed ? -1 : 0;
    }
    return append(&out->bytes, (const char *)bytes + start, end - start);
}

/* The text of `root`'s descendants into `out`, the subtrees of invisible elements skipped
   (what text() reads where the links walk does not read it too). */
static int
walk_text(lx_node *root, text_out *out)
{
    for (lx_node *node = step(root, root, 0); node != NULL;) {
        int skip = node->type == NODE_ELEMENT && invisible(node->local_name);
        if (!skip && node->local_name == TAG__TEXT && text_node(out, node) < 0) {
            return -1;
        }
        node = step(node, root, skip);
    }
    return 0;
}

/* The text gathered in `out`, decoded once and stripped as str.strip() would. */
static PyObject *
finish_text(const text_out *out)
{
    PyObject *result =
        PyUnicode_DecodeUTF8(out->bytes.data ? out->bytes.data : "", (Py_ssize_t)out->bytes.size,
                             "replace");
    return result != NULL ? strip(result) : NULL;
}

/* step(node, root, 0) for walk_links, keeping its text state: `reading` from text_root's
   first child on, until the walk leaves text_root (`read`: done); `hidden`, the invisible
   element below text_root whose subtree the walk is in. */
static inline lx_node *
next_node(lx_node *node, lx_node *root, int *reading, lx_node **hidden, lx_node *text_root,
          int *read)
{
    if (node->first_child != NULL) {
        if (node == text_root && !*read) {
            *reading = 1;
        }
        else if (*reading && *hidden == NULL && node->type == NODE_ELEMENT &&
                 invisible(node->local_name)) {
            *hidden = node;
        }
        return node->first_child;
    }
    while (node != root && node->next == NULL) {
        node = node->parent;
        if (node == *hidden) {
            *hidden = NULL;
        }
        if (node == text_root && *reading) {
            *reading = 0;
            *read = 1;
        }
    }
    return node == root ? NULL : node->next;
}

/* Whether `node` is `ancestor` or below it. */
static int
within(const lx_node *node, const lx_node *ancestor)
{
    for (; node != NULL; node = node->parent) {
        if (node == ancestor) {
            return 1;
        }
    }
    return 0;
}

/* The walk they all share: (entries, rels, anchors) as links() documents them, the entries
   resolved where `base` is given (link_entry), the indices to resolve in Python appended to
   `fallbacks`. With `text`, the visible text of `text_root` too (as text() reads it), in
   the same pass where `text_root` is in the walked tree: one walk of a large page's nodes
   instead of two (a documentation page's tree outgrows the caches), else after it. */
static PyObject *
walk_links(PyObject *owner, Py_ssize_t most, Py_ssize_t budget, Py_ssize_t bytes,
           const resolve_base *base, PyObject *fallbacks, lx_node *text_root, text_out *text)
{
    lx_node *root = node_of(owner);
    if (root == NULL) {
        return NULL;
    }
    PyObject *parser = ((selectolax_node *)owner)->parser;
    if (parser == NULL || parser == Py_None) {
        PyErr_SetString(PyExc_ValueError, "the LexborNode holds no parser");
        return NULL;
    }
    PyObject *hrefs = PyList_New(0), *rels = PyList_New(0);
    Anchors *anchors = PyObject_New(Anchors, &AnchorsType);
    if (anchors != NULL) {
        anchors->parser = NULL;
        anchors->nodes = NULL;
        anchors->links = NULL;
        anchors->text = NULL;
        anchors->count = 0;
        anchors->budget = budget;
        anchors->bytes = bytes > 0 ? bytes : 0;
    }
    scratch room = {NULL, 0, NULL, 0};
    Py_ssize_t capacity = 0;
    if (hrefs == NULL || rels == NULL || anchors == NULL) {
        goto failed;
    }
    /* The text: `reading` while below text_root (entered once, left once) and not below an
       invisible element (`hidden`, the outermost one) in it. */
    int outside = text != NULL && !within(text_root, root);
    int reading = 0, read = text == NULL || outside;
    lx_node *hidden = NULL;
    for (lx_node *node = root; node != NULL; node = next_node(node, root, &reading, &hidden,
                                                              text_root, &read)) {
        if (reading && hidden == NULL && node->local_name == TAG__TEXT &&
            text_node(text, node) < 0) {
            goto failed;
        }
        if (anchors->count >= most) {
            if (read) {
                break;  /* no link nor text left to read */
            }
            continue;
        }
        if (node->type != NODE_ELEMENT) {
            continue;
        }
        uintptr_t tag = node->local_name, name;
        if (tag == TAG_A || tag == TAG_AREA) {
            name = ATTR_HREF;
        }
        else if (tag == TAG_FRAME || tag == TAG_IFRAME) {
            name = ATTR_SRC;
        }
        else {
            continue;
        }
        const lx_str *value = attribute(node, name);
        if (value == NULL) {
            continue;
        }
        if (anchors->count == capacity) {
            Py_ssize_t grown = capacity ? 2 * capacity : 64;
            lx_node **nodes = PyMem_Realloc(anchors->nodes, (size_t)grown * sizeof(lx_node *));
            if (nodes == NULL) {
                PyErr_NoMemory();
                goto failed;
            }
            anchors->nodes = nodes;
            capacity = grown;
        }
        PyObject *href = link_entry(value, base, &room, anchors->count, fallbacks);
        if (href == NULL || PyList_Append(hrefs, href) < 0) {
            Py_XDECREF(href);
            goto failed;
        }
        Py_DECREF(href);
        const lx_str *rel = attribute(node, ATTR_REL);
        if (rel != NULL) {
            PyObject *pair = Py_BuildValue("(nN)", anchors->count, decode(rel));
            if (pair == NULL || PyList_Append(rels, pair) < 0) {
                Py_XDECREF(pair);
                goto failed;
            }
            Py_DECREF(pair);
        }
        anchors->nodes[anchors->count++] = node;
    }
    if (outside && walk_text(text_root, text) < 0) {
        goto failed;
    }
    PyMem_Free(room.out);
    PyMem_Free(room.stack);
    Py_INCREF(parser);
    anchors->parser = parser;
    return Py_BuildValue("(NNN)", hrefs, rels, (PyObject *)anchors);

failed:
    PyMem_Free(room.out);
    PyMem_Free(room.stack);
    Py_XDECREF(hrefs);
    Py_XDECREF(rels);
    Py_XDECREF((PyObject *)anchors);
    return NULL;
}

static PyObject *
links(PyObject *module, PyObject *args)
{
    PyObject *owner;
    Py_ssize_t most, budget, bytes;
    if (!PyArg_ParseTuple(args, "Onnn", &owner, &most, &budget, &bytes)) {
        return NULL;
    }
    return walk_links(owner, most, budget, bytes, NULL, NULL, NULL, NULL);
}

/* The base a context names (its origin, directory and whole URL, concatenated: ASCII bytes,
   as parsers.links.Resolver splits a plain normalised base): 0, or -1 with ValueError. */
static int
base_of(const char *context, Py_ssize_t context_size, Py_ssize_t origin_size,
        Py_ssize_t directory_size, resolve_base *base)
{
    if (origin_size < 0 || directory_size < 0 || origin_size + directory_size > context_size) {
        PyErr_SetString(PyExc_ValueError, "the sizes do not fit the context");
        return -1;
    }
    const unsigned char *data = (const unsigned char *)context;
    *base = (resolve_base){
        data, (size_t)origin_size,
        data + origin_size, (size_t)directory_size,
        data + origin_size + directory_size, (size_t)(context_size - origin_size - directory_size),
    };
    return 0;
}

/* resolved_links(root, most, visits, text_bytes, context, origin_size, directory_size):
   (urls, fallbacks, rels, anchors); `context` the base's origin, directory and whole URL,
   concatenated (ASCII bytes, as parsers.links.Resolver splits a plain normalised base).
   With `text_root` (resolved_links_text), text(text_root) after them, read in the same walk. */
static PyObject *
resolved(PyObject *owner, PyObject *text_owner, Py_ssize_t most, Py_ssize_t budget,
         Py_ssize_t bytes, const char *context, Py_ssize_t context_size, Py_ssize_t origin_size,
         Py_ssize_t directory_size)
{
    resolve_base base;
    if (base_of(context, context_size, origin_size, directory_size, &base) < 0) {
        return NULL;
    }
    lx_node *text_root = NULL;
    if (text_owner != NULL && (text_root = node_of(text_owner)) == NULL) {
        return NULL;
    }
    PyObject *fallbacks = PyList_New(0);
    if (fallbacks == NULL) {
        return NULL;
    }
    text_out text = {{NULL, 0, 0}, 0};
    PyObject *walked = walk_links(owner, most, budget, bytes, &base, fallbacks, text_root,
                                  text_root != NULL ? &text : NULL);
    PyObject *result = NULL;
    if (walked == NULL) {
        Py_DECREF(fallbacks);
    }
    else if (text_root == NULL) {
        result = Py_BuildValue("(ONOO)", PyTuple_GET_ITEM(walked, 0), fallbacks,
                               PyTuple_GET_ITEM(walked, 1), PyTuple_GET_ITEM(walked, 2));
    }
    else {
        PyObject *visible = finish_text(&text);
        result = visible == NULL ? NULL : Py_BuildValue(
            "(ONOON)", PyTuple_GET_ITEM(walked, 0), fallbacks, PyTuple_GET_ITEM(walked, 1),
            PyTuple_GET_ITEM(walked, 2), visible);
        if (visible == NULL) {
            Py_DECREF(fallbacks);
        }
    }
    Py_XDECREF(walked);
    PyMem_Free(text.bytes.data);
    return result;
}

static PyObject *
resolved_links(PyObject *module, PyObject *args)
{
    PyObject *owner;
    Py_ssize_t most, budget, bytes, origin_size, directory_size, context_size;
    const char *context;
    if (!PyArg_ParseTuple(args, "Onnny#nn", &owner, &most, &budget, &bytes, &context,
                          &context_size, &origin_size, &directory_size)) {
        return NULL;
    }
    return resolved(owner, NULL, most, budget, bytes, context, context_size, origin_size,
                    directory_size);
}

static PyObject *
resolved_links_text(PyObject *module, PyObject *args)
{
    PyObject *owner, *text_owner;
    Py_ssize_t most, budget, bytes, origin_size, directory_size, context_size;
    const char *context;
    if (!PyArg_ParseTuple(args, "OOnnny#nn", &owner, &text_owner, &most, &budget, &bytes,
                          &context, &context_size, &origin_size, &directory_size)) {
        return NULL;
    }
    return resolved(owner, text_owner, most, budget, bytes, context, context_size, origin_size,
                    directory_size);
}

/* text(root): `root.text(separator=" ", strip=True, skip_empty=True).strip()` of the tree
   with its script, style, noscript and template elements removed: their subtrees are
   skipped instead (the tree is not changed). */
static PyObject *
text(PyObject *module, PyObject *owner)
{
    lx_node *root = node_of(owner);
    if (root == NULL) {
        return NULL;
    }
    text_out out = {{NULL, 0, 0}, 0};
    PyObject *result = walk_text(root, &out) < 0 ? NULL : finish_text(&out);
    PyMem_Free(out.bytes.data);
    return result;
}

/* ---- offer(urls, depth, offered, again, most_again): a worker's memo of offered links ---- */

/* The int at `key` in `dict`: 1 and *value; 0 where there is none; -1 with an exception. */
static int
dict_long(PyObject *dict, PyObject *key, long *value)
{
    PyObject *found = PyDict_GetItemWithError(dict, key); /* borrowed */
    if (found == NULL) {
        return PyErr_Occurred() ? -1 : 0;
    }
    *value = PyLong_AsLong(found);
    return *value == -1 && PyErr_Occurred() ? -1 : 1;
}

static int
dict_set_long(PyObject *dict, PyObject *key, long value)
{
    PyObject *number = PyLong_FromLong(value);
    int failed = number == NULL || PyDict_SetItem(dict, key, number) < 0;
    Py_XDECREF(number);
    return failed ? -1 : 0;
}

/* offer(urls, depth, offered, again, most_again): the tuple of urls (a sequence) this worker
   offers the frontier, in order, as parsers.html.new_links and ranked_new_links decide:
   one not in `offered` (hash(url) -> the smallest depth offered at) at `depth` or less is
   offered and recorded at `depth`; else, with `again` (a dict: hash(url) -> the times
   offered again; None: never), it is offered again while that count is below
   `most_again`, which it then adds one to. */
static PyObject *
offer(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "offer takes 5 arguments");
        return NULL;
    }
    PyObject *urls = args[0], *offered = args[2], *again = args[3];
    long depth = PyLong_AsLong(args[1]), most_again = PyLong_AsLong(args[4]);
    if ((depth == -1 || most_again == -1) && PyErr_Occurred()) {
        return NULL;
    }
    if (!PyDict_Check(offered) || (again != Py_None && !PyDict_Check(again))) {
        PyErr_SetString(PyExc_TypeError, "offer(urls, int, dict, dict | None, int)");
        return NULL;
    }
    PyObject *items = PySequence_Fast(urls, "offer: urls must be a sequence");
    if (items == NULL) {
        return NULL;
    }
    Py_ssize_t count = PySequence_Fast_GET_SIZE(items), kept = 0;
    PyObject *fresh = PyTuple_New(count);
    if (fresh == NULL) {
        Py_DECREF(items);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *url = PySequence_Fast_GET_ITEM(items, i);
        Py_hash_t hash = PyObject_Hash(url);
        PyObject *key = hash == -1 ? NULL : PyLong_FromSsize_t(hash);
        if (key == NULL) {
            goto failed;
        }
        long previous = 0, times = 0;
        int known = dict_long(offered, key, &previous), take = 0;
        if (known < 0) {
            Py_DECREF(key);
            goto failed;
        }
        if (!known || depth < previous) {
            take = dict_set_long(offered, key, depth) < 0 ? -1 : 1;
        }
        else if (again != Py_None) {
            int counted = dict_long(again, key, &times);
            take = counted < 0 ? -1 : times < most_again;
            if (take == 1 && dict_set_long(again, key, times + 1) < 0) {
                take = -1;
            }
        }
        Py_DECREF(key);
        if (take < 0) {
            goto failed;
        }
        if (take) {
            Py_INCREF(url);
            PyTuple_SET_ITEM(fresh, kept++, url);
        }
    }
    Py_DECREF(items);
    if (_PyTuple_Resize(&fresh, kept) < 0) {
        return NULL;
    }
    return fresh;
failed:
    /* Slots past `kept` are NULL, which a tuple's dealloc skips. */
    Py_DECREF(items);
    Py_DECREF(fresh);
    return NULL;
}

/* ---- scan(html, most, visits, text_bytes): the same, from lexbor's tokens (parsers/_scan.c) ---- */

static PyObject *
span_str(const scan_bytes *bytes, scan_span span)
{
    if (span.size == SCAN_NONE) {
        Py_RETURN_NONE;
    }
    return PyUnicode_DecodeUTF8((const char *)bytes->data + span.at, (Py_ssize_t)span.size,
                                "replace");
}

/* bind_scan(path): find lexbor's tokenizer in selectolax's module at `path`; whether found. */
static PyObject *
bind_scan(PyObject *module, PyObject *arg)
{
    PyObject *encoded;
    if (!PyUnicode_FSConverter(arg, &encoded)) {
        return NULL;
    }
    int found = scan_bind(PyBytes_AS_STRING(encoded)) == 0;
    Py_DECREF(encoded);
    return PyBool_FromLong(found);
}

/* scan(html, most, visits, text_bytes) -> None, or (hrefs, rels, anchors, text, head): what
   links() and text() read from the tree of `html` (UTF-8 bytes), the hrefs unresolved (see
   resolve_hrefs), and head = (title, base href, meta robots, canonical href, lang), each
   None where the document has none; None where the tree must be built (parsers/_scan.c). */
static PyObject *
scan(PyObject *module, PyObject *args)
{
    Py_buffer html;
    Py_ssize_t most, budget, bytes;
    if (!PyArg_ParseTuple(args, "y*nnn", &html, &most, &budget, &bytes)) {
        return NULL;
    }
    scan_result found;
    int status = scan_document(html.buf, (size_t)html.len, most > 0 ? (size_t)most : 0, &found);
    PyBuffer_Release(&html);
    if (status <= 0) {
        if (status < 0) {
            return PyErr_NoMemory();
        }
        Py_RETURN_NONE;
    }
    PyObject *hrefs = PyList_New((Py_ssize_t)found.link_count), *rels = PyList_New(0);
    PyObject *head = NULL, *visible = NULL;
    Anchors *anchors = PyObject_New(Anchors, &AnchorsType);
    if (anchors != NULL) {
        anchors->parser = NULL;
        anchors->nodes = NULL;
        anchors->links = found.links;
        anchors->text = found.text.data;
        anchors->count = (Py_ssize_t)found.link_count;
        anchors->budget = budget;
        anchors->bytes = bytes > 0 ? bytes : 0;
        found.links = NULL; /* the anchors' now */
    }
    if (hrefs == NULL || rels == NULL || anchors == NULL) {
        goto failed;
    }
    const scan_link *links = anchors->links;
    for (size_t i = 0; i < found.link_count; i++) {
        PyObject *href = span_str(&found.strings, links[i].href);
        if (href == NULL) {
            goto failed;
        }
        PyList_SET_ITEM(hrefs, (Py_ssize_t)i, href);
        if (links[i].rel.size != SCAN_NONE) {
            PyObject *pair = Py_BuildValue("(nN)", (Py_ssize_t)i,
                                           span_str(&found.strings, links[i].rel));
            if (pair == NULL || PyList_Append(rels, pair) < 0) {
                Py_XDECREF(pair);
                goto failed;
            }
            Py_DECREF(pair);
        }
    }
    text_out out = {{NULL, 0, 0}, 0};
    for (size_t k = 0; k < found.piece_count; k++) {
        const scan_piece *piece = &found.pieces[k];
        if (!piece->visible) {
            continue;
        }
        lx_str data = {found.text.data + piece->span.at, piece->span.size};
        if (text_piece(&out, &data, 1) < 0) {
            PyMem_Free(out.bytes.data);
            goto failed;
        }
    }
    visible = finish_text(&out);
    PyMem_Free(out.bytes.data);
    if (visible == NULL) {
        goto failed;
    }
    scan_bytes text = {anchors->text, found.text.size, found.text.capacity};
    head = Py_BuildValue("(NNNNN)", span_str(&text, found.title), span_str(&found.strings, found.base),
                         span_str(&found.strings, found.robots),
                         span_str(&found.strings, found.canonical),
                         span_str(&found.strings, found.lang));
    if (head == NULL) {
        goto failed;
    }
    found.text.data = NULL; /* the anchors' */
    scan_result_free(&found);
    return Py_BuildValue("(NNNNN)", hrefs, rels, (PyObject *)anchors, visible, head);

failed:
    if (anchors != NULL) {
        found.text.data = NULL; /* freed with the anchors */
    }
    scan_result_free(&found);
    Py_XDECREF(hrefs);
    Py_XDECREF(rels);
    Py_XDECREF((PyObject *)anchors);
    Py_XDECREF(visible);
    Py_XDECREF(head);
    return NULL;
}

/* resolve_hrefs(hrefs, context, origin_size, directory_size) -> (urls, fallbacks): each href
   (a str) resolved as resolved_links() resolves the hrefs it finds. */
static PyObject *
resolve_hrefs(PyObject *module, PyObject *args)
{
    PyObject *hrefs;
    const char *context;
    Py_ssize_t context_size, origin_size, directory_size;
    if (!PyArg_ParseTuple(args, "O!y#nn", &PyList_Type, &hrefs, &context, &context_size,
                          &origin_size, &directory_size)) {
        return NULL;
    }
    resolve_base base;
    if (base_of(context, context_size, origin_size, directory_size, &base) < 0) {
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(hrefs);
    PyObject *urls = PyList_New(count), *fallbacks = PyList_New(0);
    scratch room = {NULL, 0, NULL, 0};
    if (urls == NULL || fallbacks == NULL) {
        goto failed;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *href = PyList_GET_ITEM(hrefs, i);
        Py_ssize_t size;
        const char *utf8 = PyUnicode_Check(href) ? PyUnicode_AsUTF8AndSize(href, &size) : NULL;
        if (utf8 == NULL) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_TypeError, "resolve_hrefs: hrefs must be str");
            }
            goto failed;
        }
        lx_str value = {(unsigned char *)utf8, (size_t)size};
        PyObject *url = link_entry(&value, &base, &room, i, fallbacks);
        if (url == NULL) {
            goto failed;
        }
        PyList_SET_ITEM(urls, i, url);
    }
    PyMem_Free(room.out);
    PyMem_Free(room.stack);
    return Py_BuildValue("(NN)", urls, fallbacks);

failed:
    PyMem_Free(room.out);
    PyMem_Free(room.stack);
    Py_XDECREF(urls);
    Py_XDECREF(fallbacks);
    return NULL;
}

/* bind(LexborNode): the type whose objects links() and text() read: selectolax's, of exactly
   the instance size of the layout above (a cheap first check of the selectolax release). */
static PyObject *
bind(PyObject *module, PyObject *type)
{
    if (!PyType_Check(type)) {
        PyErr_SetString(PyExc_TypeError, "a type is needed");
        return NULL;
    }
    const PyTypeObject *node_type = (const PyTypeObject *)type;
    if (node_type->tp_basicsize != (Py_ssize_t)sizeof(selectolax_node) ||
        strcmp(node_type->tp_name, "selectolax.lexbor.LexborNode") != 0) {
        PyErr_SetString(PyExc_ImportError, "this LexborNode is not the layout parsers._walk reads");
        return NULL;
    }
    Py_INCREF(type);
    Py_XSETREF(lexbor_node_type, (PyTypeObject *)type);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"bind", bind, METH_O, "Set the LexborNode type links() and text() read."},
    {"links", links, METH_VARARGS,
     "links(root, most, visits, text_bytes) -> (hrefs, rels, anchors): the href of every "
     "<a>/<area> and "
     "src of every <frame>/<iframe> below root, in document order, the first `most`; rels: "
     "(index, rel) of those with a rel; anchors: their elements, for anchors.text(i), which "
     "reads at most `visits` nodes and `text_bytes` bytes in all."},
    {"resolved_links", resolved_links, METH_VARARGS,
     "resolved_links(root, most, visits, text_bytes, context, origin_size, directory_size) -> "
     "(urls, fallbacks, rels, anchors): links() with each href resolved against the base in "
     "context (parsers/_resolve.c): its URL, None for another scheme than http(s), or the "
     "href itself where its index is in fallbacks (for parsers.links.Resolver)."},
    {"resolved_links_text", resolved_links_text, METH_VARARGS,
     "resolved_links_text(root, text_root, most, visits, text_bytes, context, origin_size, "
     "directory_size) -> (urls, fallbacks, rels, anchors, text): resolved_links() and "
     "text(text_root), in one walk of the tree where text_root is in it."},
    {"text", text, METH_O, "The visible text below root (no script/style/noscript/template)."},
    {"next_anchor", (PyCFunction)(void (*)(void))next_anchor, METH_FASTCALL,
     "next_anchor(anchors, urls, start, offered, depth, found, hits, most_hits, needles) -> "
     "(i, text) | None: the next link from start whose anchor text a query's loop reads."},
    {"bind_scan", bind_scan, METH_O,
     "bind_scan(path): find lexbor's tokenizer in selectolax's module; whether found."},
    {"scan", scan, METH_VARARGS,
     "scan(html, most, visits, text_bytes) -> (hrefs, rels, anchors, text, head) | None: "
     "what the tree would give, from lexbor's tokens alone; None: build the tree."},
    {"resolve_hrefs", resolve_hrefs, METH_VARARGS,
     "resolve_hrefs(hrefs, context, origin_size, directory_size) -> (urls, fallbacks)."},
    {"offer", (PyCFunction)(void (*)(void))offer, METH_FASTCALL,
     "offer(urls, depth, offered, again, most_again) -> tuple: the links a worker offers the "
     "frontier, its memo of offered ones updated (parsers.html.new_links)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "parsers._walk",
    "A page's links and visible text, read from selectolax's lexbor tree in C.", -1, methods,
};

PyMODINIT_FUNC
PyInit__walk(void)
{
    if (PyType_Ready(&AnchorsType) < 0) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL) {
        return NULL;
    }
    if (PyModule_AddIntConstant(module, "NODE_OBJECT_SIZE", (long)sizeof(selectolax_node)) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
