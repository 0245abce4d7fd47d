/* crawler.frontier._seen: crawler.frontier.seen's set of 64-bit URL hashes, in C.

The same layout and the same steps as the Python class it stands in for (seen.PySeenSet):
the keys in sorted runs of at most 2 * load keys, in key order, with each run's largest key
in `maxes`; a lookup is a binary search of `maxes`, then of one run; an addition inserts
into one run (a memmove of 16 KB at most) and splits a run that grows past 2 * load in two.
What C saves is the Python around each step: bisect on an array('q') makes an int object of
every key it compares (two searches of ~11 probes a lookup), and each call of `missing`
walks the page's links in a Python loop. Here a lookup is two searches of machine ints.

Bounded whatever the keys: no run holds more than 2 * load + 1 keys at any time, so an
insertion moves 16 KB at most and a lookup takes ~2 log2(n) comparisons; nothing depends on
how the keys are spread (a site cannot choose URLs whose hashes make a run longer).
Memory: 8 bytes a key, a run's slack (a sixteenth), and 24 bytes of run record and 8 of max
for every 1,024 keys or so: a million keys take ~8.6 MB, as the Python class's do.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    int64_t *keys;
    Py_ssize_t length, capacity;
} run;

typedef struct {
    PyObject_HEAD
    run *runs;
    int64_t *maxes; /* maxes[i] == runs[i].keys[runs[i].length - 1] */
    Py_ssize_t count, room; /* runs in use; runs (and maxes) allocated */
    Py_ssize_t size;        /* keys in all */
    Py_ssize_t load;        /* a run splits in two of `load` keys past 2 * load */
} SeenSet;

/* The first i with maxes[i] >= key, or count if none. */
static inline Py_ssize_t
lower_bound(const int64_t *items, Py_ssize_t count, int64_t key)
{
    Py_ssize_t low = 0, high = count;
    while (low < high) {
        Py_ssize_t mid = low + (high - low) / 2;
        if (items[mid] < key) {
            low = mid + 1;
        }
        else {
            high = mid;
        }
    }
    return low;
}

static int
run_reserve(run *r, Py_ssize_t length)
{
    if (length <= r->capacity) {
        return 0;
    }
    Py_ssize_t capacity = length + length / 16 + 4; /* as array('q') grows: a sixteenth */
    int64_t *keys = PyMem_Realloc(r->keys, (size_t)capacity * sizeof(int64_t));
    if (keys == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    r->keys = keys;
    r->capacity = capacity;
    return 0;
}

/* Room for one more run record (and max). */
static int
runs_reserve(SeenSet *self)
{
    if (self->count < self->room) {
        return 0;
    }
    Py_ssize_t room = self->room ? self->room + self->room / 8 + 4 : 4;
    run *runs = PyMem_Realloc(self->runs, (size_t)room * sizeof(run));
    if (runs == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    self->runs = runs;
    int64_t *maxes = PyMem_Realloc(self->maxes, (size_t)room * sizeof(int64_t));
    if (maxes == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    self->maxes = maxes;
    self->room = room;
    return 0;
}

static int
contains_key(const SeenSet *self, int64_t key)
{
    Py_ssize_t i = lower_bound(self->maxes, self->count, key);
    if (i == self->count) {
        return 0;
    }
    const run *r = &self->runs[i];
    Py_ssize_t j = lower_bound(r->keys, r->length, key);
    return r->keys[j] == key; /* j < length: the run's last key, its max, is >= key */
}

/* Add `key`: 1 if it was new, 0 if it was there, -1 with an exception set. */
static int
add_key(SeenSet *self, int64_t key)
{
    Py_ssize_t i = lower_bound(self->maxes, self->count, key);
    run *r;
    if (i == self->count) { /* above every key: the end of the last run */
        if (self->count == 0) { /* the first run, counted once it holds its key */
            run first = {NULL, 0, 0};
            if (runs_reserve(self) < 0 || run_reserve(&first, 1) < 0) {
                return -1;
            }
            first.keys[0] = key;
            first.length = 1;
            self->runs[0] = first;
            self->maxes[0] = key;
            self->count = 1;
            self->size = 1;
            return 1;
        }
        i = self->count - 1;
        r = &self->runs[i];
        if (run_reserve(r, r->length + 1) < 0) {
            return -1;
        }
        r->keys[r->length++] = key;
        self->maxes[i] = key;
    }
    else {
        r = &self->runs[i];
        Py_ssize_t j = lower_bound(r->keys, r->length, key);
        if (r->keys[j] == key) {
            return 0;
        }
        if (run_reserve(r, r->length + 1) < 0) {
            return -1;
        }
        memmove(r->keys + j + 1, r->keys + j, (size_t)(r->length - j) * sizeof(int64_t));
        r->keys[j] = key;
        r->length++;
    }
    self->size++;
    if (r->length > 2 * self->load) { /* split: [:load] stays, [load:] is the next run */
        if (runs_reserve(self) < 0) {
            /* The key is in; the run stays one key too long until a later split works. */
            return -1;
        }
        r = &self->runs[i]; /* the records may have moved */
        run upper = {NULL, 0, 0};
        Py_ssize_t moved = r->length - self->load;
        if (run_reserve(&upper, moved) < 0) {
            return -1;
        }
        memcpy(upper.keys, r->keys + self->load, (size_t)moved * sizeof(int64_t));
        upper.length = moved;
        r->length = self->load;
        int64_t *kept = PyMem_Realloc(r->keys, (size_t)(self->load + self->load / 16 + 4) *
                                                   sizeof(int64_t));
        if (kept != NULL) { /* else the run keeps its larger block: no harm */
            r->keys = kept;
            r->capacity = self->load + self->load / 16 + 4;
        }
        memmove(self->runs + i + 2, self->runs + i + 1,
                (size_t)(self->count - i - 1) * sizeof(run));
        memmove(self->maxes + i + 1, self->maxes + i,
                (size_t)(self->count - i) * sizeof(int64_t));
        self->runs[i + 1] = upper;
        self->maxes[i] = r->keys[r->length - 1];
        self->count++;
    }
    return 1;
}

static int
key_of(PyObject *obj, int64_t *key)
{
    long long value = PyLong_AsLongLong(obj);
    if (value == -1 && PyErr_Occurred()) {
        return -1;
    }
    *key = (int64_t)value;
    return 0;
}

/* For a lookup: 1 and the key, 0 for an int outside 64 bits (which no set holds: absent,
   as the Python class answers), -1 with an exception set for anything but an int. */
static int
lookup_key_of(PyObject *obj, int64_t *key)
{
    if (key_of(obj, key) == 0) {
        return 1;
    }
    if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
        PyErr_Clear();
        return 0;
    }
    return -1;
}

static PyObject *
seen_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"load", NULL};
    Py_ssize_t load = 1024;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|n:SeenSet", names, &load)) {
        return NULL;
    }
    if (load < 1 || load > ((Py_ssize_t)1 << 24)) {
        PyErr_SetString(PyExc_ValueError, "load must be from 1 to 2**24");
        return NULL;
    }
    SeenSet *self = (SeenSet *)type->tp_alloc(type, 0);
    if (self != NULL) {
        self->load = load;
    }
    return (PyObject *)self;
}

static void
seen_dealloc(SeenSet *self)
{
    for (Py_ssize_t i = 0; i < self->count; i++) {
        PyMem_Free(self->runs[i].keys);
    }
    PyMem_Free(self->runs);
    PyMem_Free(self->maxes);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static Py_ssize_t
seen_len(SeenSet *self)
{
    return self->size;
}

static int
seen_contains(SeenSet *self, PyObject *obj)
{
    int64_t key;
    int got = lookup_key_of(obj, &key);
    return got <= 0 ? got : contains_key(self, key);
}

static PyObject *
seen_add(SeenSet *self, PyObject *obj)
{
    int64_t key;
    if (key_of(obj, &key) < 0) {
        return NULL;
    }
    int added = add_key(self, key);
    if (added < 0) {
        return NULL;
    }
    return PyBool_FromLong(added);
}

static PyObject *
seen_missing(SeenSet *self, PyObject *keys)
{
    PyObject *iterator = PyObject_GetIter(keys);
    if (iterator == NULL) {
        return NULL;
    }
    PyObject *out = PyList_New(0);
    PyObject *item;
    while (out != NULL && (item = PyIter_Next(iterator)) != NULL) {
        int64_t key;
        int got = lookup_key_of(item, &key);
        Py_DECREF(item);
        if (got < 0 ||
            PyList_Append(out, got && contains_key(self, key) ? Py_False : Py_True) < 0) {
            Py_CLEAR(out);
        }
    }
    Py_DECREF(iterator);
    if (out != NULL && PyErr_Occurred()) {
        Py_CLEAR(out);
    }
    return out;
}

/* The runs as lists of ints, in order: for the tests' checks of the layout. */
static PyObject *
seen_runs(SeenSet *self, void *closure)
{
    (void)closure;
    PyObject *out = PyList_New(self->count);
    for (Py_ssize_t i = 0; out != NULL && i < self->count; i++) {
        const run *r = &self->runs[i];
        PyObject *keys = PyList_New(r->length);
        for (Py_ssize_t j = 0; keys != NULL && j < r->length; j++) {
            PyObject *key = PyLong_FromLongLong(r->keys[j]);
            if (key == NULL) {
                Py_CLEAR(keys);
                break;
            }
            PyList_SET_ITEM(keys, j, key);
        }
        if (keys == NULL) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, i, keys);
    }
    return out;
}

static PyObject *
seen_maxes(SeenSet *self, void *closure)
{
    (void)closure;
    PyObject *out = PyList_New(self->count);
    for (Py_ssize_t i = 0; out != NULL && i < self->count; i++) {
        PyObject *key = PyLong_FromLongLong(self->maxes[i]);
        if (key == NULL) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, i, key);
    }
    return out;
}

static PyMethodDef seen_methods[] = {
    {"add", (PyCFunction)seen_add, METH_O, "Add key; whether it was not there before."},
    {"missing", (PyCFunction)seen_missing, METH_O, "For each key, whether it is absent."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef seen_getset[] = {
    {"_runs", (getter)seen_runs, NULL, "The runs, as lists (a copy: for tests).", NULL},
    {"_maxes", (getter)seen_maxes, NULL, "Each run's largest key (a copy: for tests).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods seen_sequence = {
    .sq_length = (lenfunc)seen_len,
    .sq_contains = (objobjproc)seen_contains,
};

static PyTypeObject SeenSetType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "crawler.frontier._seen.SeenSet",
    .tp_basicsize = sizeof(SeenSet),
    .tp_dealloc = (destructor)seen_dealloc,
    .tp_as_sequence = &seen_sequence,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "key in s, s.add(key) (True if it was new), s.missing(keys), len(s): signed "
              "64-bit ints.",
    .tp_methods = seen_methods,
    .tp_getset = seen_getset,
    .tp_new = seen_new,
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "crawler.frontier._seen",
    "crawler.frontier.seen's set of 64-bit URL hashes, in C.", -1, NULL,
};

PyMODINIT_FUNC
PyInit__seen(void)
{
    if (PyType_Ready(&SeenSetType) < 0) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL) {
        return NULL;
    }
    Py_INCREF(&SeenSetType);
    if (PyModule_AddObject(module, "SeenSet", (PyObject *)&SeenSetType) < 0) {
        Py_DECREF(&SeenSetType);
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
