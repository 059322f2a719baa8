/* core._speedups: the three per-character or per-object loops of reading a large
 * session, in C. Each function is an exact drop-in for a pure-Python one in
 * core/jsoncodec.py (which stays the reference, is used when this module is not built,
 * and is checked against it by property tests):
 *
 *   utf8_len(text)       -> int   len(text.encode("utf-8", "surrogatepass")), no copy
 *   escaped_pair(text)   -> bool  _ESCAPED_PAIR.search(text) is not None
 *   freeze_object(dict)  -> FrozenDict, the JSON decoder's object_hook
 *   c_safe(value)        -> bool  _c_safe(value, 0): may the C encoder write it
 *   join_utf8(parts)     -> str   b"".join(parts).decode("utf-8"), allocated once
 *
 * Nothing here keeps a reference to its input; the only state is the two frozen types,
 * set once by core.jsoncodec through set_types().
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

#define BLOCK 4096 /* characters per inner loop: small enough for 32-bit counts */

static PyObject *frozen_dict_type = NULL;
static PyObject *frozen_list_type = NULL;
/* Whether the frozen types construct exactly as dict and list do (no __new__ or
 * __init__ of their own): then they are built without the generic call machinery. */
static int dict_direct = 0;
static int list_direct = 0;
static PyObject *empty_tuple = NULL;

static int
ready(PyObject *text)
{
#if PY_VERSION_HEX < 0x030C0000
    return PyUnicode_READY(text);  /* legacy strings only exist before 3.12 */
#else
    (void)text;
    return 0;
#endif
}

/* 0 if ``ok``, else -1 with a TypeError saying what ``func`` needs instead of ``arg``. */
static int
expect(int ok, PyObject *arg, const char *func, const char *what)
{
    if (ok) {
        return 0;
    }
    PyErr_Format(PyExc_TypeError, "%s() needs a %s, not %.100s", func, what,
                 Py_TYPE(arg)->tp_name);
    return -1;
}

/* ------------------------------------------------------------------ utf8_len */

static PyObject *
utf8_len(PyObject *module, PyObject *arg)
{
    (void)module;
    if (expect(PyUnicode_Check(arg), arg, "utf8_len", "str") < 0 || ready(arg) < 0) {
        return NULL;
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(arg);
    if (PyUnicode_IS_ASCII(arg)) {
        return PyLong_FromSsize_t(n);
    }
    Py_ssize_t total = n;  /* one byte each, plus the extra bytes counted below */
    int kind = PyUnicode_KIND(arg);
    const void *data = PyUnicode_DATA(arg);
    /* Counted in blocks with a 32-bit accumulator: loops the compiler vectorises. */
    Py_ssize_t i = 0;
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *p = (const Py_UCS1 *)data;
        while (i < n) {
            Py_ssize_t stop = n - i > BLOCK ? i + BLOCK : n;
            uint32_t extra = 0;
            for (; i < stop; i++) {
                extra += p[i] >> 7;
            }
            total += extra;
        }
    }
    else if (kind == PyUnicode_2BYTE_KIND) {
        const Py_UCS2 *p = (const Py_UCS2 *)data;
        while (i < n) {
            Py_ssize_t stop = n - i > BLOCK ? i + BLOCK : n;
            uint32_t extra = 0;
            for (; i < stop; i++) {
                /* surrogates count 3 bytes, as surrogatepass encodes them */
                extra += (uint32_t)(p[i] >= 0x80) + (uint32_t)(p[i] >= 0x800);
            }
            total += extra;
        }
    }
    else {
        const Py_UCS4 *p = (const Py_UCS4 *)data;
        while (i < n) {
            Py_ssize_t stop = n - i > BLOCK ? i + BLOCK : n;
            uint32_t extra = 0;
            for (; i < stop; i++) {
                extra += (uint32_t)(p[i] >= 0x80) + (uint32_t)(p[i] >= 0x800) +
                         (uint32_t)(p[i] >= 0x10000);
            }
            total += extra;
        }
    }
    return PyLong_FromSsize_t(total);
}

/* -------------------------------------------------------------- escaped_pair */

static inline int
is_hex(Py_UCS4 c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* The regex \\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2} matches at
 * p[0..11], p[0] being a backslash. */
#define PAIR_AT(p)                                                                   \
    ((p)[1] == 'u' && ((p)[2] == 'd' || (p)[2] == 'D') &&                            \
     (((p)[3] >= '8' && (p)[3] <= '9') || ((p)[3] >= 'a' && (p)[3] <= 'b') ||        \
      ((p)[3] >= 'A' && (p)[3] <= 'B')) &&                                           \
     is_hex((p)[4]) && is_hex((p)[5]) && (p)[6] == '\\' && (p)[7] == 'u' &&           \
     ((p)[8] == 'd' || (p)[8] == 'D') &&                                             \
     (((p)[9] >= 'c' && (p)[9] <= 'f') || ((p)[9] >= 'C' && (p)[9] <= 'F')) &&        \
     is_hex((p)[10]) && is_hex((p)[11]))

#define MATCH_LEN 12

/* Blocks of 32 start positions are first tested for a backslash followed by 'u' (rare in
 * what dumps_js writes: only control characters and surrogates are \u-escaped) with a
 * branch-free loop the compiler vectorises; only such blocks are looked at closely. */
#define PAIR_SCAN(NAME, TYPE)                                                         \
    static int NAME(const TYPE *p, Py_ssize_t n)                                      \
    {                                                                                 \
        Py_ssize_t last = n - MATCH_LEN; /* the last possible start */                \
        Py_ssize_t i = 0;                                                             \
        for (; i + 32 <= last + 1; i += 32) {                                         \
            int any = 0;                                                              \
            for (int k = 0; k < 32; k++) {                                            \
                any |= (p[i + k] == '\\') & (p[i + k + 1] == 'u');                    \
            }                                                                         \
            if (any) {                                                                \
                for (int k = 0; k < 32; k++) {                                        \
                    if (p[i + k] == '\\' && PAIR_AT(p + i + k)) {                     \
                        return 1;                                                     \
                    }                                                                 \
                }                                                                     \
            }                                                                         \
        }                                                                             \
        for (; i <= last; i++) {                                                      \
            if (p[i] == '\\' && PAIR_AT(p + i)) {                                     \
                return 1;                                                             \
            }                                                                         \
        }                                                                             \
        return 0;                                                                     \
    }
PAIR_SCAN(pair_ucs1, Py_UCS1)
PAIR_SCAN(pair_ucs2, Py_UCS2)
PAIR_SCAN(pair_ucs4, Py_UCS4)

static PyObject *
escaped_pair(PyObject *module, PyObject *arg)
{
    (void)module;
    if (expect(PyUnicode_Check(arg), arg, "escaped_pair", "str") < 0 || ready(arg) < 0) {
        return NULL;
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(arg);
    int found;
    switch (PyUnicode_KIND(arg)) {
    case PyUnicode_1BYTE_KIND:
        found = pair_ucs1(PyUnicode_1BYTE_DATA(arg), n);
        break;
    case PyUnicode_2BYTE_KIND:
        found = pair_ucs2(PyUnicode_2BYTE_DATA(arg), n);
        break;
    default:
        found = pair_ucs4(PyUnicode_4BYTE_DATA(arg), n);
        break;
    }
    return PyBool_FromLong(found);
}

/* ------------------------------------------------------------- freeze_object */

static int check_types(void);

/* FrozenDict(src): a new frozen dict holding src's items. */
static PyObject *
new_frozen_dict(PyObject *src)
{
    if (!dict_direct) {
        return PyObject_CallOneArg(frozen_dict_type, src);
    }
    PyTypeObject *type = (PyTypeObject *)frozen_dict_type;
    PyObject *frozen = type->tp_new(type, empty_tuple, NULL);
    if (frozen != NULL && PyDict_Merge(frozen, src, 1) < 0) {
        Py_CLEAR(frozen);
    }
    return frozen;
}

/* FrozenList(src): a new frozen list holding src's items. */
static PyObject *
new_frozen_list(PyObject *src)
{
    if (!list_direct) {
        return PyObject_CallOneArg(frozen_list_type, src);
    }
    PyTypeObject *type = (PyTypeObject *)frozen_list_type;
    PyObject *frozen = type->tp_new(type, empty_tuple, NULL);
    if (frozen != NULL && PyList_SetSlice(frozen, 0, 0, src) < 0) {
        Py_CLEAR(frozen);
    }
    return frozen;
}

/* Freeze the list values of ``list`` (in place), then return it as a FrozenList. */
static PyObject *
freeze_list(PyObject *list)
{
    if (Py_EnterRecursiveCall(" while freezing a JSON array")) {
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(list);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(list, i);
        if (PyList_CheckExact(item)) {
            PyObject *frozen = freeze_list(item);
            if (frozen == NULL) {
                Py_LeaveRecursiveCall();
                return NULL;
            }
            PyList_SetItem(list, i, frozen);  /* steals frozen, releases item */
        }
    }
    Py_LeaveRecursiveCall();
    return new_frozen_list(list);
}

static PyObject *
freeze_object(PyObject *module, PyObject *obj)
{
    (void)module;
    if (check_types() < 0 || expect(PyDict_CheckExact(obj), obj, "freeze_object", "dict") < 0) {
        return NULL;
    }
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(obj, &pos, &key, &value)) {
        if (PyList_CheckExact(value)) {
            if (!PyUnicode_CheckExact(key)) {
                /* JSON keys are str; any other could run code that resizes the dict */
                PyErr_SetString(PyExc_TypeError, "freeze_object() needs str keys");
                return NULL;
            }
            PyObject *frozen = freeze_list(value);
            if (frozen == NULL) {
                return NULL;
            }
            /* replacing the value of an existing key: allowed during PyDict_Next */
            int failed = PyDict_SetItem(obj, key, frozen);
            Py_DECREF(frozen);
            if (failed) {
                return NULL;
            }
        }
    }
    return new_frozen_dict(obj);
}

static PyObject *
freeze_list_entry(PyObject *module, PyObject *list)
{
    (void)module;
    if (check_types() < 0 || expect(PyList_CheckExact(list), list, "freeze_list", "list") < 0) {
        return NULL;
    }
    return freeze_list(list);
}

/* -------------------------------------------------------------------- c_safe */

#define C_SAFE_DEPTH 64 /* as core.jsoncodec._C_SAFE_DEPTH */

/* Exactly core.jsoncodec._c_safe(value, depth): only exact str, int, bool and None
 * atoms; dict and FrozenDict with exact str keys; list, tuple and FrozenList; nothing
 * deeper than C_SAFE_DEPTH. Runs no Python code, so the borrowed items stay valid. */
static int
c_safe_at(PyObject *v, int depth)
{
    PyTypeObject *t = Py_TYPE(v);
    if (t == &PyUnicode_Type || t == &PyLong_Type || t == &PyBool_Type || v == Py_None) {
        return 1;
    }
    if (depth >= C_SAFE_DEPTH) {
        return 0;
    }
    if (t == &PyDict_Type || (PyObject *)t == frozen_dict_type) {
        Py_ssize_t pos = 0;
        PyObject *key, *item;
        while (PyDict_Next(v, &pos, &key, &item)) {
            if (Py_TYPE(key) != &PyUnicode_Type || !c_safe_at(item, depth + 1)) {
                return 0;
            }
        }
        return 1;
    }
    if (t == &PyList_Type || (PyObject *)t == frozen_list_type) {
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(v); i++) {
            if (!c_safe_at(PyList_GET_ITEM(v, i), depth + 1)) {
                return 0;
            }
        }
        return 1;
    }
    if (t == &PyTuple_Type) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(v); i++) {
            if (!c_safe_at(PyTuple_GET_ITEM(v, i), depth + 1)) {
                return 0;
            }
        }
        return 1;
    }
    return 0;
}

static PyObject *
c_safe(PyObject *module, PyObject *value)
{
    (void)module;
    if (check_types() < 0) {
        return NULL;
    }
    return PyBool_FromLong(c_safe_at(value, 0));
}

/* ------------------------------------------------------------------ set_types */

static int
check_types(void)
{
    if (frozen_dict_type == NULL || frozen_list_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "core._speedups.set_types() was not called");
        return -1;
    }
    return 0;
}

static PyObject *
set_types(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *dict_type, *list_type;
    if (!PyArg_ParseTuple(args, "O!O!:set_types", &PyType_Type, &dict_type, &PyType_Type,
                          &list_type)) {
        return NULL;
    }
    if (!PyType_IsSubtype((PyTypeObject *)dict_type, &PyDict_Type) ||
        !PyType_IsSubtype((PyTypeObject *)list_type, &PyList_Type)) {
        PyErr_SetString(PyExc_TypeError, "set_types() needs a dict and a list subclass");
        return NULL;
    }
    PyTypeObject *d = (PyTypeObject *)dict_type, *l = (PyTypeObject *)list_type;
    Py_INCREF(dict_type);
    Py_INCREF(list_type);
    Py_XSETREF(frozen_dict_type, dict_type);
    Py_XSETREF(frozen_list_type, list_type);
    dict_direct = d->tp_new == PyDict_Type.tp_new && d->tp_init == PyDict_Type.tp_init;
    list_direct = l->tp_new == PyList_Type.tp_new && l->tp_init == PyList_Type.tp_init;
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ join_utf8 */

#define JOIN_SLICE 256 /* bytes decoded at a time: the only transient copy */

/* The str of the UTF-8 parts (a list of bytes, each valid UTF-8 on its own), in one
 * allocation of exactly its size and kind: bytes.decode builds a non-ASCII result in a
 * full-size ASCII buffer first and widens it, and would need the parts joined first. */
static PyObject *
join_utf8(PyObject *module, PyObject *parts)
{
    (void)module;
    if (expect(PyList_CheckExact(parts), parts, "join_utf8", "list of bytes") < 0) {
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(parts), chars = 0;
    unsigned char lead = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *part = PyList_GET_ITEM(parts, i);
        if (expect(PyBytes_CheckExact(part), part, "join_utf8", "list of bytes") < 0) {
            return NULL;
        }
        const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(part);
        Py_ssize_t n = PyBytes_GET_SIZE(part);
        for (Py_ssize_t j = 0; j < n; j++) {
            unsigned char c = p[j];
            if ((c & 0xC0) != 0x80) { /* not a continuation byte: one character */
                chars++;
                if (c > lead) {
                    lead = c;
                }
            }
        }
    }
    /* In valid UTF-8 the highest lead byte says the widest character's kind. */
    Py_UCS4 maxchar = lead < 0x80 ? 0x7F : lead < 0xC4 ? 0xFF : lead < 0xF0 ? 0xFFFF : 0x10FFFF;
    PyObject *out = PyUnicode_New(chars, maxchar);
    if (out == NULL) {
        return NULL;
    }
    Py_ssize_t pos = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *part = PyList_GET_ITEM(parts, i);
        const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(part);
        Py_ssize_t n = PyBytes_GET_SIZE(part), start = 0;
        while (start < n) {
            Py_ssize_t end = start + JOIN_SLICE;
            if (end >= n) {
                end = n;
            } else {
                while (end > start && (p[end] & 0xC0) == 0x80) {
                    end--; /* cut between characters */
                }
                if (end == start) {
                    end = start + JOIN_SLICE; /* not UTF-8: the decoder says so */
                }
            }
            PyObject *piece = PyUnicode_DecodeUTF8((const char *)p + start, end - start, "strict");
            if (piece == NULL) {
                Py_DECREF(out);
                return NULL;
            }
            Py_ssize_t len = PyUnicode_GET_LENGTH(piece);
            if (len > chars - pos || PyUnicode_CopyCharacters(out, pos, piece, 0, len) < 0) {
                Py_DECREF(piece);
                Py_DECREF(out);
                if (!PyErr_Occurred()) {
                    PyErr_SetString(PyExc_ValueError, "join_utf8() parts are not UTF-8");
                }
                return NULL;
            }
            Py_DECREF(piece);
            pos += len;
            start = end;
        }
    }
    if (pos != chars) {
        Py_DECREF(out);
        PyErr_SetString(PyExc_ValueError, "join_utf8() parts are not UTF-8");
        return NULL;
    }
    return out;
}

static PyMethodDef methods[] = {
    {"utf8_len", utf8_len, METH_O,
     "UTF-8 byte length of a str, a lone surrogate counting 3 bytes (surrogatepass)."},
    {"escaped_pair", escaped_pair, METH_O,
     "Whether JSON text holds an escaped high surrogate directly followed by a low one."},
    {"freeze_object", freeze_object, METH_O,
     "JSON object_hook: the dict's list values frozen (deeply), as a FrozenDict."},
    {"freeze_list", freeze_list_entry, METH_O,
     "A list with its nested lists frozen, as a FrozenList."},
    {"c_safe", c_safe, METH_O,
     "Whether the C JSON encoder writes the value exactly as JSON.stringify does."},
    {"join_utf8", join_utf8, METH_O,
     "b''.join(parts).decode('utf-8') for a list of bytes each valid UTF-8, allocated once."},
    {"set_types", set_types, METH_VARARGS, "Register the FrozenDict and FrozenList types."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "core._speedups",
    "C versions of the hot loops of core.jsoncodec (see that module).",
    -1,
    methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    empty_tuple = PyTuple_New(0);
    if (empty_tuple == NULL) {
        return NULL;
    }
    return PyModule_Create(&module_def);
}
