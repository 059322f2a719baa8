/* core._speedups: the hot per-character and per-object loops of reading, appending and
 * preparing a large session, in C. Each function is an exact drop-in for a pure-Python one in
 * core/jsoncodec.py (which stays the reference, is used when this module is not built,
 * and is checked against it by property tests):
 *
 *   utf8_len(text)       -> int   len(text.encode("utf-8", "surrogatepass")), no copy
 *   escaped_pair(text)   -> bool  _ESCAPED_PAIR.search(text) is not None
 *   has_surrogate(text)  -> bool  core.surrogates._py_has_surrogate(text)
 *   freeze_object(dict)  -> FrozenDict, the JSON decoder's object_hook
 *   c_safe(value)        -> bool  _c_safe(value, 0): may the C encoder write it
 *   encode_frozen(value, freeze)     dumps_js(value) (and loads_exact of it) or None
 *   build_events(Event, setters, first, batch)  core.log.build_event for a whole batch
 *   validate_common(events, ...)     stores.validation._validate_common's loop
 *   join_utf8(parts)     -> str   b"".join(parts).decode("utf-8"), allocated once
 *   fold_counts(texts, keys, start, need)  core.search's counts of ASCII terms
 *   unlink_runs(body, first, wanted, replies) -> bytes
 *                                 stores.sqlite._unlink_runs (or declines: ValueError)
 *
 * Nothing here keeps a reference to its input; the only state is what is registered once
 * (the two frozen types through set_types(), core.log.Event through set_event_type()),
 * interned attribute names and the reads block's cache of short object keys.
 *
 * The "reads" block (speedups/json_read.c, speedups/packs.c) decodes stored JSON and the
 * SQLite store's packs straight into frozen values and events (see there).
 *
 * One concern per file under core/speedups/, each included below rather than compiled
 * alone, so the module stays one translation unit (its statics and inlining as they
 * were): text.c (UTF-8 and surrogates), frozen.c (frozen values), json_read.c and
 * packs.c (reads), encode.c (c_safe, encode_frozen), unlink.c (linked runs) and
 * appends.c (build_events, validate_common), search.c (fold_counts). This file holds the shared state, the
 * method table and the module's init.
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

/* The functions, one concern per file (each included here, not compiled alone). */
#include "speedups/text.c"
#include "speedups/frozen.c"
#include "speedups/json_read.c"
#include "speedups/packs.c"
#include "speedups/encode.c"
#include "speedups/unlink.c"
#include "speedups/appends.c"
#include "speedups/search.c"

static PyMethodDef methods[] = {
    {"utf8_len", utf8_len, METH_O,
     "UTF-8 byte length of a str, a lone surrogate counting 3 bytes (surrogatepass)."},
    {"has_surrogate", has_surrogate, METH_O,
     "Whether a str holds a surrogate code point."},
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
    /* reads (issue 15) */
    {"loads_frozen", loads_frozen, METH_O,
     "loads_exact(text) for a str or UTF-8 bytes; ValueError where it declines."},
    {"set_event_type", set_event_type, METH_O, "Register the core.log.Event class."},
    {"unpack_events", unpack_events, METH_VARARGS,
     "A pack's events (stores.sqlite._unpack_events) from its inflated bytes."},
    /* end of reads */
    {"unlink_runs", unlink_runs, METH_VARARGS,
     "stores.sqlite._unlink_runs(body, first, wanted, replies): a pack's linked runs made "
     "text runs; ValueError where it declines."},
    {"encode_frozen", encode_frozen, METH_VARARGS,
     "dumps_js(value) of a c_safe value within 64-bit ints (else None); with freeze, the "
     "pair of it and loads_exact of it."},
    {"build_events", build_events, METH_VARARGS,
     "core.log.build_event for each ValidatedEvent of a batch, seqs from first."},
    {"validate_common", validate_common, METH_VARARGS,
     "stores.validation._validate_common's loop over a batch (a list of ValidatedEvent "
     "or None)."},
    {"set_types", set_types, METH_VARARGS, "Register the FrozenDict and FrozenList types."},
    {"fold_counts", fold_counts, METH_VARARGS,
     "core.search's counts of lower-case ASCII keys in texts from start on, of those that "
     "hold every key, until need are kept or a text holds İ ı ſ K: (kept, counts, stop)."},
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
    attr_type = PyUnicode_InternFromString("type");
    attr_data = PyUnicode_InternFromString("data");
    attr_surface_op = PyUnicode_InternFromString("surface_op");
    attr_source_event_seqs = PyUnicode_InternFromString("source_event_seqs");
    attr_time = PyUnicode_InternFromString("time");
    str_append = PyUnicode_InternFromString("append");
    if (attr_type == NULL || attr_data == NULL || attr_surface_op == NULL ||
        attr_source_event_seqs == NULL || attr_time == NULL || str_append == NULL) {
        return NULL;
    }
    return PyModule_Create(&module_def);
}
