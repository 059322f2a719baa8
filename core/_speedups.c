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
 *   unlink_runs(body, first, wanted, replies) -> bytes
 *                                 stores.sqlite._unlink_runs (or declines: ValueError)
 *
 * Nothing here keeps a reference to its input; the only state is what is registered once
 * (the two frozen types through set_types(), core.log.Event through set_event_type()),
 * interned attribute names and the reads block's cache of short object keys.
 *
 * The "reads" block further down decodes stored JSON and the SQLite store's packs
 * straight into frozen values and events (see there).
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

/* ------------------------------------------------------------- has_surrogate */

/* Blocks of 64 code units tested with a branch-free loop the compiler vectorises. */
#define SURROGATE_SCAN(NAME, TYPE)                                                    \
    static int NAME(const TYPE *p, Py_ssize_t n)                                      \
    {                                                                                 \
        Py_ssize_t i = 0;                                                             \
        for (; i + 64 <= n; i += 64) {                                                \
            int any = 0;                                                              \
            for (int k = 0; k < 64; k++) {                                            \
                any |= (uint32_t)(p[i + k] - 0xD800) < 0x800;                         \
            }                                                                         \
            if (any) {                                                                \
                return 1;                                                             \
            }                                                                         \
        }                                                                             \
        for (; i < n; i++) {                                                          \
            if ((uint32_t)(p[i] - 0xD800) < 0x800) {                                  \
                return 1;                                                             \
            }                                                                         \
        }                                                                             \
        return 0;                                                                     \
    }
SURROGATE_SCAN(surrogate_ucs2, Py_UCS2)
SURROGATE_SCAN(surrogate_ucs4, Py_UCS4)

/* Whether a str holds a surrogate code point (core.surrogates: the scan before a merge). */
static PyObject *
has_surrogate(PyObject *module, PyObject *arg)
{
    (void)module;
    if (expect(PyUnicode_Check(arg), arg, "has_surrogate", "str") < 0 || ready(arg) < 0) {
        return NULL;
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(arg);
    int found;
    switch (PyUnicode_KIND(arg)) {
    case PyUnicode_1BYTE_KIND:
        found = 0; /* nothing above U+00FF */
        break;
    case PyUnicode_2BYTE_KIND:
        found = surrogate_ucs2(PyUnicode_2BYTE_DATA(arg), n);
        break;
    default:
        found = surrogate_ucs4(PyUnicode_4BYTE_DATA(arg), n);
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

/* ====================================================================== reads
 * Decoding stored JSON straight into frozen values, and a pack's events straight into
 * Event objects: the read path of a large session (issue 15). Each function is exact or
 * declines: on anything but the plain, strict JSON the store writes it raises
 * ValueError, and its caller runs the pure-Python path instead (which then gives the
 * very value, or the very error, it always gave):
 *
 *   loads_frozen(text)   -> value  core.jsoncodec.loads_exact(text) (frozen containers,
 *                                  escaped surrogate pairs merged); text a str or
 *                                  UTF-8 bytes
 *   set_event_type(Event)          register core.log.Event (its six slots)
 *   unpack_events(first, n, body, wanted) -> list[Event]
 *                                  stores.sqlite._unpack_events on the pack's inflated
 *                                  bytes ``body`` (a chunk run's line is rebuilt into
 *                                  the JSON text stores.sqlite._chunk_line gives, then
 *                                  parsed like any other line)
 *
 * The parser reads UTF-8 bytes. Outside strings it accepts only ASCII JSON syntax; a
 * string's raw runs are decoded with Python's strict UTF-8 decoder, so every byte it
 * accepts is one ``bytes.decode("utf-8")`` accepts too.
 */

#include <structmember.h>

#define JSON_MAX_DEPTH 200 /* deeper: declined (the Python path has the recursion limit) */

typedef struct {
    const unsigned char *p;
    const unsigned char *end;
    int depth;
} Scan;

static PyObject *
decline(const char *why)
{
    PyErr_SetString(PyExc_ValueError, why);
    return NULL;
}

static inline void
skip_ws(Scan *s)
{
    while (s->p < s->end &&
           (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r')) {
        s->p++;
    }
}

/* Object keys: a few distinct short ASCII names repeated in every event, kept (with
 * their hash) between calls instead of being built again each time. */
#define KEY_SLOTS 256
#define KEY_MAX 32
static PyObject *key_cache[KEY_SLOTS];

static PyObject *
ascii_str(const unsigned char *s, Py_ssize_t n)
{
    PyObject *text = PyUnicode_New(n, 127);
    if (text != NULL) {
        memcpy(PyUnicode_1BYTE_DATA(text), s, (size_t)n);
    }
    return text;
}

static PyObject *
cached_key(const unsigned char *s, Py_ssize_t n)
{
    uint32_t h = 2166136261u;
    for (Py_ssize_t i = 0; i < n; i++) {
        h = (h ^ s[i]) * 16777619u;
    }
    PyObject **slot = &key_cache[(h ^ (h >> 16)) & (KEY_SLOTS - 1)];
    PyObject *key = *slot;
    if (key != NULL && PyUnicode_GET_LENGTH(key) == n &&
        memcmp(PyUnicode_1BYTE_DATA(key), s, (size_t)n) == 0) {
        return Py_NewRef(key);
    }
    key = ascii_str(s, n);
    if (key == NULL || PyObject_Hash(key) == -1) {
        Py_XDECREF(key);
        return NULL;
    }
    Py_XSETREF(*slot, Py_NewRef(key));
    return key;
}

static inline int
hex_value(unsigned char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

/* A string holding escapes, from s->p (after the opening quote) to ``close`` (its
 * closing quote): each \uXXXX is one code point, except that an escaped high surrogate
 * directly followed by an escaped low one is their astral character (the raw runs are
 * strict UTF-8: they hold no surrogate to pair with). */
static PyObject *
escaped_string(Scan *s, const unsigned char *close)
{
    const unsigned char *r = s->p;
    Py_UCS4 *buf = PyMem_New(Py_UCS4, (size_t)(close - r));
    if (buf == NULL) {
        return PyErr_NoMemory();
    }
    Py_ssize_t m = 0;
    while (r < close) {
        if (*r == '\\') {
            Py_UCS4 c;
            switch (r[1]) {
            case '"': c = '"'; break;
            case '\\': c = '\\'; break;
            case '/': c = '/'; break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'n': c = '\n'; break;
            case 'r': c = '\r'; break;
            case 't': c = '\t'; break;
            case 'u': {
                if (close - r < 6) {
                    goto bad;
                }
                int a = hex_value(r[2]), b = hex_value(r[3]), d = hex_value(r[4]),
                    e = hex_value(r[5]);
                if ((a | b | d | e) < 0) {
                    goto bad;
                }
                c = (Py_UCS4)((a << 12) | (b << 8) | (d << 4) | e);
                r += 4;
                break;
            }
            default:
                goto bad;
            }
            if (c >= 0xDC00 && c <= 0xDFFF && m > 0 && buf[m - 1] >= 0xD800 &&
                buf[m - 1] <= 0xDBFF) {
                /* a high surrogate then a low one is the astral character (SPEC 4.1) */
                buf[m - 1] = 0x10000 + ((buf[m - 1] - 0xD800) << 10) + (c - 0xDC00);
            }
            else {
                buf[m++] = c;
            }
            r += 2;
            continue;
        }
        const unsigned char *run = r;
        unsigned char high = 0;
        while (r < close && *r != '\\') {
            high |= *r++;
        }
        if (!(high & 0x80)) {
            for (; run < r; run++) {
                buf[m++] = *run;
            }
            continue;
        }
        PyObject *part = PyUnicode_DecodeUTF8((const char *)run, r - run, NULL);
        if (part == NULL) {
            PyMem_Free(buf);
            return NULL;
        }
        Py_ssize_t len = PyUnicode_GET_LENGTH(part);
        int kind = PyUnicode_KIND(part);
        const void *data = PyUnicode_DATA(part);
        for (Py_ssize_t k = 0; k < len; k++) {
            buf[m++] = PyUnicode_READ(kind, data, k);
        }
        Py_DECREF(part);
    }
    PyObject *text = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, buf, m);
    PyMem_Free(buf);
    if (text != NULL) {
        s->p = close + 1;
    }
    return text;
bad:
    PyMem_Free(buf);
    return decline("an invalid escape");
}

/* A string from s->p (after its opening quote). */
static PyObject *
scan_string(Scan *s, int is_key)
{
    const unsigned char *start = s->p, *q = start, *end = s->end;
    unsigned char high = 0;
    while (q < end && *q != '"') {
        if (*q == '\\') {
            /* find the closing quote, then decode the escapes */
            while (q < end && *q != '"') {
                if (*q == '\\') {
                    q += 2;
                    continue;
                }
                if (*q < 0x20) {
                    return decline("a control character in a string");
                }
                q++;
            }
            if (q >= end) {
                return decline("an unterminated string");
            }
            return escaped_string(s, q);
        }
        if (*q < 0x20) {
            return decline("a control character in a string");
        }
        high |= *q++;
    }
    if (q >= end) {
        return decline("an unterminated string");
    }
    s->p = q + 1;
    Py_ssize_t n = q - start;
    if (high & 0x80) {
        return PyUnicode_DecodeUTF8((const char *)start, n, NULL);
    }
    if (is_key && n <= KEY_MAX) {
        return cached_key(start, n);
    }
    return ascii_str(start, n);
}

static PyObject *
scan_number(Scan *s)
{
    const unsigned char *start = s->p, *p = s->p, *end = s->end;
    int is_float = 0;
    if (p < end && *p == '-') {
        p++;
    }
    if (p < end && *p == '0') {
        p++;
    }
    else if (p < end && *p >= '1' && *p <= '9') {
        while (p < end && *p >= '0' && *p <= '9') {
            p++;
        }
    }
    else {
        return decline("not a JSON value");
    }
    if (p < end && *p == '.') {
        p++;
        if (p >= end || *p < '0' || *p > '9') {
            return decline("a malformed number");
        }
        while (p < end && *p >= '0' && *p <= '9') {
            p++;
        }
        is_float = 1;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-')) {
            p++;
        }
        if (p >= end || *p < '0' || *p > '9') {
            return decline("a malformed number");
        }
        while (p < end && *p >= '0' && *p <= '9') {
            p++;
        }
        is_float = 1;
    }
    s->p = p;
    Py_ssize_t n = p - start;
    if (!is_float && n <= 18) {
        int negative = *start == '-';
        long long value = 0;
        for (const unsigned char *d = start + negative; d < p; d++) {
            value = value * 10 + (*d - '0');
        }
        return PyLong_FromLongLong(negative ? -value : value);
    }
    char small[64];
    char *buf = n < (Py_ssize_t)sizeof(small) ? small : PyMem_Malloc((size_t)n + 1);
    if (buf == NULL) {
        return PyErr_NoMemory();
    }
    memcpy(buf, start, (size_t)n);
    buf[n] = '\0';
    PyObject *value;
    if (is_float) {
        char *stop;
        /* overflow gives an infinity, as the json module's float(text) does */
        double d = PyOS_string_to_double(buf, &stop, NULL);
        if (d == -1.0 && PyErr_Occurred()) {
            value = NULL;
        }
        else if (stop != buf + n) {
            value = decline("a malformed number");
        }
        else {
            value = PyFloat_FromDouble(d);
        }
    }
    else {
        value = PyLong_FromString(buf, NULL, 10); /* ValueError past the digit limit */
    }
    if (buf != small) {
        PyMem_Free(buf);
    }
    return value;
}

static PyObject *scan_value(Scan *s);

static PyObject *
empty_frozen(PyObject *type, int direct)
{
    if (!direct) {
        return PyObject_CallNoArgs(type);
    }
    return ((PyTypeObject *)type)->tp_new((PyTypeObject *)type, empty_tuple, NULL);
}

static PyObject *
scan_object(Scan *s)
{
    s->p++; /* '{' */
    PyObject *obj = empty_frozen(frozen_dict_type, dict_direct);
    if (obj == NULL) {
        return NULL;
    }
    skip_ws(s);
    if (s->p < s->end && *s->p == '}') {
        s->p++;
        return obj;
    }
    for (;;) {
        if (s->p >= s->end || *s->p != '"') {
            goto bad;
        }
        s->p++;
        PyObject *key = scan_string(s, 1);
        if (key == NULL) {
            goto fail;
        }
        skip_ws(s);
        if (s->p >= s->end || *s->p != ':') {
            Py_DECREF(key);
            goto bad;
        }
        s->p++;
        skip_ws(s);
        PyObject *value = scan_value(s);
        if (value == NULL) {
            Py_DECREF(key);
            goto fail;
        }
        int failed = PyDict_SetItem(obj, key, value);
        Py_DECREF(key);
        Py_DECREF(value);
        if (failed) {
            goto fail;
        }
        skip_ws(s);
        if (s->p < s->end && *s->p == ',') {
            s->p++;
            skip_ws(s);
            continue;
        }
        if (s->p < s->end && *s->p == '}') {
            s->p++;
            return obj;
        }
        goto bad;
    }
bad:
    decline("malformed JSON");
fail:
    Py_DECREF(obj);
    return NULL;
}

static PyObject *
scan_array(Scan *s)
{
    s->p++; /* '[' */
    PyObject *list = empty_frozen(frozen_list_type, list_direct);
    if (list == NULL) {
        return NULL;
    }
    skip_ws(s);
    if (s->p < s->end && *s->p == ']') {
        s->p++;
        return list;
    }
    for (;;) {
        PyObject *item = scan_value(s);
        if (item == NULL) {
            goto fail;
        }
        int failed = PyList_Append(list, item);
        Py_DECREF(item);
        if (failed) {
            goto fail;
        }
        skip_ws(s);
        if (s->p < s->end && *s->p == ',') {
            s->p++;
            skip_ws(s);
            continue;
        }
        if (s->p < s->end && *s->p == ']') {
            s->p++;
            return list;
        }
        decline("malformed JSON");
        goto fail;
    }
fail:
    Py_DECREF(list);
    return NULL;
}

static PyObject *
scan_literal(Scan *s, const char *word, size_t len, PyObject *value)
{
    if ((size_t)(s->end - s->p) >= len && memcmp(s->p, word, len) == 0) {
        s->p += len;
        return Py_NewRef(value);
    }
    return decline("not a JSON value");
}

static PyObject *
scan_value(Scan *s)
{
    if (s->p >= s->end) {
        return decline("a missing JSON value");
    }
    switch (*s->p) {
    case '"':
        s->p++;
        return scan_string(s, 0);
    case '{':
    case '[': {
        if (++s->depth > JSON_MAX_DEPTH) {
            return decline("JSON nested too deeply");
        }
        PyObject *value = *s->p == '{' ? scan_object(s) : scan_array(s);
        s->depth--;
        return value;
    }
    case 't':
        return scan_literal(s, "true", 4, Py_True);
    case 'f':
        return scan_literal(s, "false", 5, Py_False);
    case 'n':
        return scan_literal(s, "null", 4, Py_None);
    default:
        return scan_number(s);
    }
}

/* Exactly one JSON value in [p, end), whitespace around it allowed. */
static PyObject *
scan_whole(const unsigned char *p, const unsigned char *end)
{
    Scan s = {p, end, 0};
    skip_ws(&s);
    PyObject *value = scan_value(&s);
    if (value == NULL) {
        return NULL;
    }
    skip_ws(&s);
    if (s.p != s.end) {
        Py_DECREF(value);
        return decline("extra data after a JSON value");
    }
    return value;
}

static PyObject *
loads_frozen(PyObject *module, PyObject *arg)
{
    (void)module;
    if (check_types() < 0) {
        return NULL;
    }
    if (PyBytes_Check(arg)) {
        const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(arg);
        return scan_whole(p, p + PyBytes_GET_SIZE(arg));
    }
    if (expect(PyUnicode_Check(arg), arg, "loads_frozen", "str or bytes") < 0 ||
        ready(arg) < 0) {
        return NULL;
    }
    if (PyUnicode_IS_ASCII(arg)) {
        const unsigned char *p = PyUnicode_1BYTE_DATA(arg);
        return scan_whole(p, p + PyUnicode_GET_LENGTH(arg));
    }
    /* A str with lone surrogates cannot be encoded: UnicodeEncodeError, a ValueError. */
    PyObject *bytes = PyUnicode_AsUTF8String(arg);
    if (bytes == NULL) {
        return NULL;
    }
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(bytes);
    PyObject *value = scan_whole(p, p + PyBytes_GET_SIZE(bytes));
    Py_DECREF(bytes);
    return value;
}

/* Whether p[0..n) is what Python's strict UTF-8 decoder accepts (well-formed UTF-8: no
 * overlong forms, no surrogates, nothing past U+10FFFF). */
static int
utf8_valid(const unsigned char *p, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    while (i < n) {
        if (i + 8 <= n) {
            uint64_t word;
            memcpy(&word, p + i, 8);
            if (!(word & 0x8080808080808080ULL)) {
                i += 8;
                continue;
            }
        }
        unsigned char c = p[i];
        if (c < 0x80) {
            i++;
        }
        else if (c >= 0xC2 && c <= 0xDF) {
            if (i + 1 >= n || (p[i + 1] & 0xC0) != 0x80) {
                return 0;
            }
            i += 2;
        }
        else if (c >= 0xE0 && c <= 0xEF) {
            if (i + 2 >= n || (p[i + 1] & 0xC0) != 0x80 || (p[i + 2] & 0xC0) != 0x80 ||
                (c == 0xE0 && p[i + 1] < 0xA0) || (c == 0xED && p[i + 1] > 0x9F)) {
                return 0;
            }
            i += 3;
        }
        else if (c >= 0xF0 && c <= 0xF4) {
            if (i + 3 >= n || (p[i + 1] & 0xC0) != 0x80 || (p[i + 2] & 0xC0) != 0x80 ||
                (p[i + 3] & 0xC0) != 0x80 || (c == 0xF0 && p[i + 1] < 0x90) ||
                (c == 0xF4 && p[i + 1] > 0x8F)) {
                return 0;
            }
            i += 4;
        }
        else {
            return 0;
        }
    }
    return 1;
}

/* core.log.Event: a slots class built as build_event does (object.__new__, then each
 * slot set), here by writing its six slots directly. */
#define EVENT_FIELDS 6
static PyTypeObject *event_type = NULL;
static Py_ssize_t event_offsets[EVENT_FIELDS];

static PyObject *
set_event_type(PyObject *module, PyObject *cls)
{
    (void)module;
    static const char *names[EVENT_FIELDS] = {"seq",  "type",       "time",
                                              "data", "surface_op", "source_event_seqs"};
    if (expect(PyType_Check(cls), cls, "set_event_type", "class") < 0) {
        return NULL;
    }
    PyTypeObject *type = (PyTypeObject *)cls;
    if (type->tp_new != PyBaseObject_Type.tp_new || type->tp_alloc == NULL) {
        PyErr_SetString(PyExc_TypeError, "set_event_type() needs a class built by object.__new__");
        return NULL;
    }
    Py_ssize_t offsets[EVENT_FIELDS];
    for (int i = 0; i < EVENT_FIELDS; i++) {
        PyObject *descr =
            type->tp_dict == NULL ? NULL : PyDict_GetItemString(type->tp_dict, names[i]);
        if (descr == NULL || !Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
            PyErr_Format(PyExc_TypeError, "set_event_type(): %s is not a slot", names[i]);
            return NULL;
        }
        PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
        if (member->type != T_OBJECT_EX || (member->flags & READONLY) ||
            member->offset < (Py_ssize_t)sizeof(PyObject) ||
            member->offset + (Py_ssize_t)sizeof(PyObject *) > type->tp_basicsize) {
            PyErr_Format(PyExc_TypeError, "set_event_type(): %s is not an object slot",
                         names[i]);
            return NULL;
        }
        offsets[i] = member->offset;
    }
    memcpy(event_offsets, offsets, sizeof(offsets));
    Py_INCREF(cls);
    Py_XSETREF(event_type, type);
    Py_RETURN_NONE;
}

/* build_event(seq, type, time, data, None, None); steals nothing. */
static PyObject *
new_event(PyObject *seq, PyObject *type, PyObject *time, PyObject *data)
{
    PyObject *event = event_type->tp_alloc(event_type, 0);
    if (event == NULL) {
        return NULL;
    }
    PyObject *values[EVENT_FIELDS] = {seq, type, time, data, Py_None, Py_None};
    for (int i = 0; i < EVENT_FIELDS; i++) {
        *(PyObject **)((char *)event + event_offsets[i]) = Py_NewRef(values[i]);
    }
    return event;
}

/* A chunk run of a pack (stores.sqlite._pack): lines start .. start + count - 1 hold
 * the escaped text of chunks whose JSON is the run's ``prefix`` (up to the index), the
 * index (``index`` + k on the k-th line), RUN_MIDDLE, the line, RUN_SUFFIX. */
#define RUN_PREFIX_MAX 128
#define RUN_MIDDLE ",\"text\":\""
#define RUN_SUFFIX "\"}}"
typedef struct {
    Py_ssize_t start;
    Py_ssize_t count;
    long long index;
    Py_ssize_t prefix_len;
    char prefix[RUN_PREFIX_MAX];
} ChunkRun;

/* The header's runs [[start, count, turn, step, index], ...] checked (each an exact
 * int fitting a long long, in order, none empty, inside the n lines, every index of a
 * run a long long) into ``*runs``; 0, or -1 with the error set (a ValueError declines). */
static int
read_runs(PyObject *list, Py_ssize_t n, ChunkRun **runs, Py_ssize_t *run_count)
{
    if (!PyList_Check(list)) {
        goto bad;
    }
    Py_ssize_t count = PyList_GET_SIZE(list);
    *runs = PyMem_New(ChunkRun, (size_t)(count > 0 ? count : 1));
    if (*runs == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    long long reached = 0; /* the end of the run before */
    for (Py_ssize_t r = 0; r < count; r++) {
        PyObject *run = PyList_GET_ITEM(list, r);
        long long v[5];
        if (!PyList_Check(run) || PyList_GET_SIZE(run) != 5) {
            goto bad;
        }
        for (int k = 0; k < 5; k++) {
            PyObject *x = PyList_GET_ITEM(run, k);
            int overflow = 0;
            if (!PyLong_CheckExact(x)) {
                goto bad;
            }
            v[k] = PyLong_AsLongLongAndOverflow(x, &overflow);
            if (overflow || (v[k] == -1 && PyErr_Occurred())) {
                PyErr_Clear();
                goto bad;
            }
        }
        if (v[0] < reached || v[1] < 1 || v[1] > (long long)n || v[0] > (long long)n - v[1] ||
            (v[4] > 0 && v[4] > LLONG_MAX - (v[1] - 1))) {
            goto bad;
        }
        reached = v[0] + v[1];
        ChunkRun *out = &(*runs)[r];
        out->start = (Py_ssize_t)v[0];
        out->count = (Py_ssize_t)v[1];
        out->index = v[4];
        int len = snprintf(out->prefix, RUN_PREFIX_MAX,
                           "{\"turn\":%lld,\"step\":%lld,\"chunk\":{\"type\":\"text-delta\","
                           "\"index\":",
                           v[2], v[3]);
        if (len < 0 || len >= RUN_PREFIX_MAX) {
            goto bad;
        }
        out->prefix_len = len;
    }
    *run_count = count;
    return 0;
bad:
    decline("an unexpected chunk run in a pack");
    return -1;
}

/* ``v`` in decimal at ``out`` (room for 20 characters); how many. */
static Py_ssize_t
put_decimal(char *out, long long v)
{
    char digits[20];
    int k = 0;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        digits[k++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    Py_ssize_t m = 0;
    if (v < 0) {
        out[m++] = '-';
    }
    while (k) {
        out[m++] = digits[--k];
    }
    return m;
}

/* The pack's header line [types, index, deltas] or [types, index, deltas, runs] (see
 * stores.sqlite._pack) checked and turned into each event's type (borrowed from
 * ``*header``) and time, and its chunk runs (none for a header of three). */
static int
read_header(const unsigned char *p, const unsigned char *end, Py_ssize_t n,
            PyObject **header, PyObject ***types, long long **times, ChunkRun **runs,
            Py_ssize_t *run_count)
{
    if (memchr(p, '\\', (size_t)(end - p)) != NULL) {
        /* json.loads merges escaped surrogate pairs in the header: left to it */
        decline("an escape in a pack's header");
        return -1;
    }
    PyObject *h = scan_whole(p, end);
    if (h == NULL) {
        return -1;
    }
    *header = h;
    if (!PyList_Check(h) || (PyList_GET_SIZE(h) != 3 && PyList_GET_SIZE(h) != 4)) {
        goto bad;
    }
    *run_count = 0;
    if (PyList_GET_SIZE(h) == 4 && read_runs(PyList_GET_ITEM(h, 3), n, runs, run_count) < 0) {
        return -1;
    }
    PyObject *table = PyList_GET_ITEM(h, 0), *index = PyList_GET_ITEM(h, 1),
             *deltas = PyList_GET_ITEM(h, 2);
    if (!PyList_Check(table) || PyList_GET_SIZE(table) < 1 || !PyList_Check(deltas) ||
        PyList_GET_SIZE(deltas) != n) {
        goto bad;
    }
    Py_ssize_t kinds = PyList_GET_SIZE(table);
    for (Py_ssize_t i = 0; i < kinds; i++) {
        if (!PyUnicode_CheckExact(PyList_GET_ITEM(table, i))) {
            goto bad;
        }
    }
    int one = PyLong_CheckExact(index);
    if (one) {
        int overflow;
        if (PyLong_AsLongLongAndOverflow(index, &overflow) != 0 || overflow) {
            goto bad;
        }
    }
    else if (!PyList_Check(index) || PyList_GET_SIZE(index) != n) {
        goto bad;
    }
    *types = PyMem_New(PyObject *, (size_t)n);
    *times = PyMem_New(long long, (size_t)n);
    if (*types == NULL || *times == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    long long time = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *delta = PyList_GET_ITEM(deltas, i);
        int overflow;
        long long d = PyLong_CheckExact(delta) ? PyLong_AsLongLongAndOverflow(delta, &overflow)
                                               : (overflow = 1, 0);
        if (overflow || (d == -1 && PyErr_Occurred()) || (d > 0 && time > LLONG_MAX - d) ||
            (d < 0 && time < LLONG_MIN - d)) {
            PyErr_Clear();
            goto bad;
        }
        time += d;
        (*times)[i] = time;
        long long k = 0;
        if (!one) {
            PyObject *at = PyList_GET_ITEM(index, i);
            k = PyLong_CheckExact(at) ? PyLong_AsLongLongAndOverflow(at, &overflow)
                                      : (overflow = 1, -1);
            if (overflow || k < 0 || k >= kinds) {
                PyErr_Clear();
                goto bad;
            }
        }
        (*types)[i] = PyList_GET_ITEM(table, k);
    }
    return 0;
bad:
    decline("an unexpected pack header");
    return -1;
}

/* Which of the pack's n events (seqs first..first+n-1) are in ``wanted``. */
static int
mark_wanted(PyObject *wanted, long long first, Py_ssize_t n, char *mask)
{
    if (PyAnySet_Check(wanted) && PySet_GET_SIZE(wanted) < n) {
        /* only exact ints: another key equal to an int (True, 3.0) takes the loop below */
        PyObject *iter = PyObject_GetIter(wanted), *item;
        int exact = 1;
        if (iter == NULL) {
            return -1;
        }
        while (exact && (item = PyIter_Next(iter)) != NULL) {
            if (!PyLong_CheckExact(item)) {
                exact = 0;
            }
            else {
                int overflow;
                long long seq = PyLong_AsLongLongAndOverflow(item, &overflow);
                if (!overflow && seq >= first && seq - first < n) {
                    mask[seq - first] = 1;
                }
            }
            Py_DECREF(item);
        }
        Py_DECREF(iter);
        if (PyErr_Occurred()) {
            return -1;
        }
        if (exact) {
            return 0;
        }
        memset(mask, 0, (size_t)n);
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *seq = PyLong_FromLongLong(first + i);
        if (seq == NULL) {
            return -1;
        }
        int found = PySequence_Contains(wanted, seq);
        Py_DECREF(seq);
        if (found < 0) {
            return -1;
        }
        mask[i] = (char)found;
    }
    return 0;
}

static PyObject *
unpack_events(PyObject *module, PyObject *args)
{
    (void)module;
    long long first;
    Py_ssize_t n;
    PyObject *body, *wanted;
    if (!PyArg_ParseTuple(args, "LnO!O:unpack_events", &first, &n, &PyBytes_Type, &body,
                          &wanted)) {
        return NULL;
    }
    if (check_types() < 0) {
        return NULL;
    }
    if (event_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "core._speedups.set_event_type() was not called");
        return NULL;
    }
    if (n < 1 || first < 0 || first > LLONG_MAX - n) {
        return decline("an unexpected pack size");
    }
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(body);
    const unsigned char *end = p + PyBytes_GET_SIZE(body);
    const unsigned char *newline = memchr(p, '\n', (size_t)(end - p));
    if (newline == NULL) {
        return decline("a pack without lines");
    }
    /* n lines after the header, no more, no fewer */
    Py_ssize_t lines = 1;
    for (const unsigned char *q = newline + 1;
         (q = memchr(q, '\n', (size_t)(end - q))) != NULL; q++) {
        lines++;
    }
    if (lines != n) {
        return decline("a pack holding another count of events");
    }
    PyObject *header = NULL, **types = NULL, *out = NULL;
    long long *times = NULL;
    char *mask = NULL, *scratch = NULL;
    ChunkRun *runs = NULL;
    Py_ssize_t run_count = 0;
    if (read_header(p, newline, n, &header, &types, &times, &runs, &run_count) < 0) {
        goto done;
    }
    if (run_count > 0) {
        /* a run's line rebuilt: its prefix, index, the middle, the line, the suffix */
        scratch = PyMem_Malloc((size_t)(end - newline) + RUN_PREFIX_MAX + 32);
        if (scratch == NULL) {
            PyErr_NoMemory();
            goto done;
        }
    }
    Py_ssize_t count = n;
    if (wanted != Py_None) {
        /* What is not decoded must still be valid UTF-8, as decoding the whole pack
         * checks (what is decoded is checked as it is parsed). */
        if (!utf8_valid(newline + 1, end - newline - 1)) {
            decline("a pack that is not UTF-8");
            goto done;
        }
        mask = PyMem_Malloc((size_t)n);
        if (mask == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        memset(mask, 0, (size_t)n);
        if (mark_wanted(wanted, first, n, mask) < 0) {
            goto done;
        }
        count = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            count += mask[i];
        }
    }
    out = PyList_New(count);
    if (out == NULL) {
        goto done;
    }
    const unsigned char *line = newline + 1;
    Py_ssize_t k = 0, r = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        const unsigned char *stop = memchr(line, '\n', (size_t)(end - line));
        if (stop == NULL) {
            stop = end;
        }
        while (r < run_count && i >= runs[r].start + runs[r].count) {
            r++;
        }
        if (mask == NULL || mask[i]) {
            const unsigned char *text = line, *text_end = stop;
            if (r < run_count && i >= runs[r].start) {
                /* the very JSON text stores.sqlite._chunk_line rebuilds, then parsed */
                const ChunkRun *run = &runs[r];
                char *w = scratch;
                memcpy(w, run->prefix, (size_t)run->prefix_len);
                w += run->prefix_len;
                w += put_decimal(w, run->index + (long long)(i - run->start));
                memcpy(w, RUN_MIDDLE, sizeof(RUN_MIDDLE) - 1);
                w += sizeof(RUN_MIDDLE) - 1;
                memcpy(w, line, (size_t)(stop - line));
                w += stop - line;
                memcpy(w, RUN_SUFFIX, sizeof(RUN_SUFFIX) - 1);
                w += sizeof(RUN_SUFFIX) - 1;
                text = (const unsigned char *)scratch;
                text_end = (const unsigned char *)w;
            }
            PyObject *data = scan_whole(text, text_end), *event = NULL;
            if (data != NULL) {
                PyObject *seq = PyLong_FromLongLong(first + i);
                PyObject *time = PyLong_FromLongLong(times[i]);
                if (seq != NULL && time != NULL) {
                    event = new_event(seq, types[i], time, data);
                }
                Py_XDECREF(seq);
                Py_XDECREF(time);
                Py_DECREF(data);
            }
            if (event == NULL) {
                Py_CLEAR(out);
                goto done;
            }
            PyList_SET_ITEM(out, k++, event);
        }
        line = stop + 1;
    }
done:
    Py_XDECREF(header);
    PyMem_Free(types);
    PyMem_Free(times);
    PyMem_Free(mask);
    PyMem_Free(runs);
    PyMem_Free(scratch);
    return out;
}
/* ================================================================== end of reads */

/* ------------------------------------------------------------- encode_frozen */

/* Exactly core.jsoncodec.dumps_js for the values its C path takes (c_safe ones), and
 * optionally the detached frozen copy loads_exact of that text gives, without the text
 * being parsed. Values it does not take (anything c_safe refuses, ints beyond 64 bits)
 * make it return None: the caller then takes the plain path. Like c_safe_at, it runs no
 * Python code, so the borrowed items it walks stay valid. */

#define ENC_UNSUPPORTED 1

static Py_ssize_t
int_digits(unsigned long long u)
{
    Py_ssize_t n = 1;
    while (u >= 10) {
        u /= 10;
        n++;
    }
    return n;
}

/* The magnitude and sign of an exact int, or ENC_UNSUPPORTED beyond 64 bits. */
static int
int_parts(PyObject *v, unsigned long long *mag, int *neg)
{
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow) {
        return ENC_UNSUPPORTED;
    }
    if (x == -1 && PyErr_Occurred()) {
        return -1;
    }
    *neg = x < 0;
    *mag = x < 0 ? (unsigned long long)0 - (unsigned long long)x : (unsigned long long)x;
    return 0;
}

/* Characters JSON.stringify writes for ch inside a string, and whether it is written
 * raw (then it counts for the string's widest character). */
static inline Py_ssize_t
char_width(Py_UCS4 ch, int *raw)
{
    *raw = 0;
    if (ch == '"' || ch == '\\' || ch == '\b' || ch == '\f' || ch == '\n' || ch == '\r' ||
        ch == '\t') {
        return 2;
    }
    if (ch < 0x20 || (ch >= 0xD800 && ch <= 0xDFFF)) {
        return 6;
    }
    *raw = 1;
    return 1;
}

/* Pass 1: the encoded length and widest character of v (0), ENC_UNSUPPORTED, or -1. */
static int
enc_measure(PyObject *v, int depth, Py_ssize_t *len, Py_UCS4 *maxchar)
{
    PyTypeObject *t = Py_TYPE(v);
    if (t == &PyUnicode_Type) {
        if (ready(v) < 0) {
            return -1;
        }
        Py_ssize_t n = PyUnicode_GET_LENGTH(v);
        int kind = PyUnicode_KIND(v);
        const void *data = PyUnicode_DATA(v);
        Py_ssize_t total = 2;
        int raw;
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_UCS4 ch = PyUnicode_READ(kind, data, i);
            if (ch >= 0xD800 && ch <= 0xDBFF && i + 1 < n) {
                Py_UCS4 next = PyUnicode_READ(kind, data, i + 1);
                if (next >= 0xDC00 && next <= 0xDFFF) {
                    /* a raw pair: written as its character, and its copy must be
                     * merged too: left to the Python path (rare) */
                    return ENC_UNSUPPORTED;
                }
            }
            total += char_width(ch, &raw);
            if (raw && ch > *maxchar) {
                *maxchar = ch;
            }
        }
        *len += total;
        return 0;
    }
    if (v == Py_None) {
        *len += 4;
        return 0;
    }
    if (t == &PyBool_Type) {
        *len += v == Py_True ? 4 : 5;
        return 0;
    }
    if (t == &PyLong_Type) {
        unsigned long long mag;
        int neg;
        int r = int_parts(v, &mag, &neg);
        if (r != 0) {
            return r;
        }
        *len += neg + int_digits(mag);
        return 0;
    }
    if (depth >= C_SAFE_DEPTH) {
        return ENC_UNSUPPORTED;
    }
    if (t == &PyDict_Type || (PyObject *)t == frozen_dict_type) {
        Py_ssize_t pos = 0, count = 0;
        PyObject *key, *item;
        *len += 2;
        while (PyDict_Next(v, &pos, &key, &item)) {
            if (Py_TYPE(key) != &PyUnicode_Type) {
                return ENC_UNSUPPORTED;
            }
            int r = enc_measure(key, depth + 1, len, maxchar);
            if (r == 0) {
                r = enc_measure(item, depth + 1, len, maxchar);
            }
            if (r != 0) {
                return r;
            }
            count++;
        }
        *len += count ? 2 * count - 1 : 0; /* the colons and commas */
        return 0;
    }
    if (t == &PyList_Type || (PyObject *)t == frozen_list_type || t == &PyTuple_Type) {
        Py_ssize_t n = t == &PyTuple_Type ? PyTuple_GET_SIZE(v) : PyList_GET_SIZE(v);
        *len += 2 + (n ? n - 1 : 0);
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *item = t == &PyTuple_Type ? PyTuple_GET_ITEM(v, i) : PyList_GET_ITEM(v, i);
            int r = enc_measure(item, depth + 1, len, maxchar);
            if (r != 0) {
                return r;
            }
        }
        return 0;
    }
    return ENC_UNSUPPORTED;
}

typedef struct {
    int kind;
    void *data;
    Py_ssize_t pos;
} enc_out;

static inline void
put(enc_out *out, Py_UCS4 ch)
{
    PyUnicode_WRITE(out->kind, out->data, out->pos, ch);
    out->pos++;
}

static void
put_ascii(enc_out *out, const char *s)
{
    while (*s) {
        put(out, (Py_UCS4)(unsigned char)*s++);
    }
}

static const char hexdigits[] = "0123456789abcdef";

/* What follows the backslash of a two-character escape (char_width 2) of ch. */
static inline Py_UCS4
short_escape(Py_UCS4 ch)
{
    switch (ch) {
    case '\b':
        return 'b';
    case '\f':
        return 'f';
    case '\n':
        return 'n';
    case '\r':
        return 'r';
    case '\t':
        return 't';
    default: /* '"' and '\\' */
        return ch;
    }
}

static void
put_str(enc_out *out, PyObject *s)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    put(out, '"');
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 ch = PyUnicode_READ(kind, data, i);
        int raw;
        Py_ssize_t width = char_width(ch, &raw);
        if (raw) {
            put(out, ch);
            continue;
        }
        put(out, '\\');
        if (width == 6) {
            put(out, 'u');
            put(out, hexdigits[(ch >> 12) & 0xF]);
            put(out, hexdigits[(ch >> 8) & 0xF]);
            put(out, hexdigits[(ch >> 4) & 0xF]);
            put(out, hexdigits[ch & 0xF]);
            continue;
        }
        put(out, short_escape(ch));
    }
    put(out, '"');
}

/* Pass 2: write v (which pass 1 measured, so nothing here can fail). */
static void
enc_write(PyObject *v, enc_out *out)
{
    PyTypeObject *t = Py_TYPE(v);
    if (t == &PyUnicode_Type) {
        put_str(out, v);
    }
    else if (v == Py_None) {
        put_ascii(out, "null");
    }
    else if (t == &PyBool_Type) {
        put_ascii(out, v == Py_True ? "true" : "false");
    }
    else if (t == &PyLong_Type) {
        unsigned long long mag = 0;
        int neg = 0;
        (void)int_parts(v, &mag, &neg);
        char digits[24];
        int k = 0;
        do {
            digits[k++] = (char)('0' + mag % 10);
            mag /= 10;
        } while (mag);
        if (neg) {
            put(out, '-');
        }
        while (k) {
            put(out, (Py_UCS4)digits[--k]);
        }
    }
    else if (t == &PyDict_Type || (PyObject *)t == frozen_dict_type) {
        Py_ssize_t pos = 0;
        PyObject *key, *item;
        int first = 1;
        put(out, '{');
        while (PyDict_Next(v, &pos, &key, &item)) {
            if (!first) {
                put(out, ',');
            }
            first = 0;
            put_str(out, key);
            put(out, ':');
            enc_write(item, out);
        }
        put(out, '}');
    }
    else {
        Py_ssize_t n = t == &PyTuple_Type ? PyTuple_GET_SIZE(v) : PyList_GET_SIZE(v);
        put(out, '[');
        for (Py_ssize_t i = 0; i < n; i++) {
            if (i) {
                put(out, ',');
            }
            enc_write(t == &PyTuple_Type ? PyTuple_GET_ITEM(v, i) : PyList_GET_ITEM(v, i), out);
        }
        put(out, ']');
    }
}

/* Pass 3: the detached frozen copy of v (which pass 1 accepted): every dict a
 * FrozenDict, every list or tuple a FrozenList, atoms shared (they are immutable). */
static PyObject *
enc_copy(PyObject *v)
{
    PyTypeObject *t = Py_TYPE(v);
    if (t == &PyDict_Type || (PyObject *)t == frozen_dict_type) {
        /* Filled in place when FrozenDict constructs as dict does (its own __setitem__,
         * which refuses, is not what PyDict_SetItem calls). */
        PyTypeObject *ft = (PyTypeObject *)frozen_dict_type;
        PyObject *plain = dict_direct ? ft->tp_new(ft, empty_tuple, NULL) : PyDict_New();
        if (plain == NULL) {
            return NULL;
        }
        Py_ssize_t pos = 0;
        PyObject *key, *item;
        while (PyDict_Next(v, &pos, &key, &item)) {
            PyObject *copy = enc_copy(item);
            if (copy == NULL || PyDict_SetItem(plain, key, copy) < 0) {
                Py_XDECREF(copy);
                Py_DECREF(plain);
                return NULL;
            }
            Py_DECREF(copy);
        }
        if (dict_direct) {
            return plain;
        }
        PyObject *frozen = new_frozen_dict(plain);
        Py_DECREF(plain);
        return frozen;
    }
    if (t == &PyList_Type || (PyObject *)t == frozen_list_type || t == &PyTuple_Type) {
        Py_ssize_t n = t == &PyTuple_Type ? PyTuple_GET_SIZE(v) : PyList_GET_SIZE(v);
        PyObject *plain = PyList_New(n);
        if (plain == NULL) {
            return NULL;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *copy =
                enc_copy(t == &PyTuple_Type ? PyTuple_GET_ITEM(v, i) : PyList_GET_ITEM(v, i));
            if (copy == NULL) {
                Py_DECREF(plain);
                return NULL;
            }
            PyList_SET_ITEM(plain, i, copy);
        }
        PyObject *frozen = new_frozen_list(plain);
        Py_DECREF(plain);
        return frozen;
    }
    Py_INCREF(v);
    return v;
}

static PyObject *
encode_frozen(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *value;
    int freeze;
    if (check_types() < 0 || !PyArg_ParseTuple(args, "Op:encode_frozen", &value, &freeze)) {
        return NULL;
    }
    Py_ssize_t len = 0;
    Py_UCS4 maxchar = 0x7F;
    int r = enc_measure(value, 0, &len, &maxchar);
    if (r < 0) {
        return NULL;
    }
    if (r == ENC_UNSUPPORTED) {
        Py_RETURN_NONE;
    }
    PyObject *text = PyUnicode_New(len, maxchar);
    if (text == NULL) {
        return NULL;
    }
    enc_out out = {PyUnicode_KIND(text), PyUnicode_DATA(text), 0};
    enc_write(value, &out);
    assert(out.pos == len);
    if (!freeze) {
        return text;
    }
    PyObject *copy = enc_copy(value);
    if (copy == NULL) {
        Py_DECREF(text);
        return NULL;
    }
    PyObject *pair = PyTuple_Pack(2, text, copy);
    Py_DECREF(text);
    Py_DECREF(copy);
    return pair;
}

/* -------------------------------------------------------------- unlink_runs */

/* stores.sqlite._unlink_runs(body, first, wanted, replies): the very bytes it returns, in
 * one pass over the pack, or it declines (ValueError) and the caller runs the Python
 * version (which then gives its value or names the damage). Each text of a linked run
 * is its slice of the reply's text (by code points), escaped as dumps_js escapes a str
 * (char_width, short_escape: the encoder's own rules) straight into UTF-8.
 *
 * The header is read as text, never parsed into objects: it is taken only as the
 * encoder writes it (_pack_header: no whitespace, canonical ints of at most 18 digits,
 * strings with nothing to escape), which is then also what writing its values again
 * gives, so everything but the linked runs' last four fields is copied as it is. It
 * declines anything else the store never writes (lengths that are not canonical
 * decimals, linked runs out of order, runs of other sizes) and all damage. */

typedef struct {
    char *data;
    Py_ssize_t len;
    Py_ssize_t cap;
} ByteBuf;

/* Room for ``more`` bytes at the end of ``b``; 0, or -1 with MemoryError. */
static int
buf_room(ByteBuf *b, Py_ssize_t more)
{
    if (b->cap - b->len >= more) {
        return 0;
    }
    if (more > PY_SSIZE_T_MAX / 2 - b->len) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t cap = 2 * (b->len + more);
    char *data = PyMem_Realloc(b->data, (size_t)cap);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->data = data;
    b->cap = cap;
    return 0;
}

/* [s, e) at the end of ``b``; 0, or -1 with MemoryError. */
static int
buf_put(ByteBuf *b, const void *s, Py_ssize_t n)
{
    if (buf_room(b, n) < 0) {
        return -1;
    }
    memcpy(b->data + b->len, s, (size_t)n);
    b->len += n;
    return 0;
}

/* ch as UTF-8 at ``out`` (ch no surrogate); how many bytes. */
static inline Py_ssize_t
put_utf8(char *out, Py_UCS4 ch)
{
    if (ch < 0x80) {
        out[0] = (char)ch;
        return 1;
    }
    if (ch < 0x800) {
        out[0] = (char)(0xC0 | (ch >> 6));
        out[1] = (char)(0x80 | (ch & 0x3F));
        return 2;
    }
    if (ch < 0x10000) {
        out[0] = (char)(0xE0 | (ch >> 12));
        out[1] = (char)(0x80 | ((ch >> 6) & 0x3F));
        out[2] = (char)(0x80 | (ch & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (ch >> 18));
    out[1] = (char)(0x80 | ((ch >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((ch >> 6) & 0x3F));
    out[3] = (char)(0x80 | (ch & 0x3F));
    return 4;
}

/* Code points a..stop of the str ``text`` escaped as dumps_js escapes them (without the
 * quotes), in UTF-8 at the end of ``b``; the escaped text's length in code points (what
 * a linked run's size adds up), or -1 with MemoryError. */
static Py_ssize_t
put_escaped(ByteBuf *b, PyObject *text, Py_ssize_t a, Py_ssize_t stop)
{
    if (buf_room(b, 6 * (stop - a)) < 0) { /* the widest: \udxxx, 6 bytes for 1 */
        return -1;
    }
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    char *w = b->data + b->len;
    Py_ssize_t chars = 0;
    for (Py_ssize_t i = a; i < stop; i++) {
        Py_UCS4 ch = PyUnicode_READ(kind, data, i);
        int raw;
        Py_ssize_t width = char_width(ch, &raw);
        chars += width;
        if (raw) {
            w += put_utf8(w, ch);
        }
        else if (width == 6) {
            *w++ = '\\';
            *w++ = 'u';
            *w++ = hexdigits[(ch >> 12) & 0xF];
            *w++ = hexdigits[(ch >> 8) & 0xF];
            *w++ = hexdigits[(ch >> 4) & 0xF];
            *w++ = hexdigits[ch & 0xF];
        }
        else {
            *w++ = '\\';
            *w++ = (char)short_escape(ch);
        }
    }
    b->len = w - b->data;
    return chars;
}

/* The int at *q as the encoder writes one (no "-0", no leading zero; at most 18 digits,
 * so it fits a long long) into *v, *q moved past it; 0, or -1 when there is none. */
static int
read_int(const unsigned char **q, const unsigned char *end, long long *v)
{
    const unsigned char *s = *q;
    int neg = s < end && *s == '-';
    const unsigned char *digits = s + neg;
    long long x = 0;
    for (s = digits; s < end && *s >= '0' && *s <= '9'; s++) {
        if (s - digits == 18) {
            return -1;
        }
        x = 10 * x + (*s - '0');
    }
    if (s == digits || (s - digits > 1 && *digits == '0') || (neg && x == 0)) {
        return -1;
    }
    *v = neg ? -x : x;
    *q = s;
    return 0;
}

/* A list of such ints at *q ("[1,-2,3]", or "[]"): how many (up to ``max`` kept in
 * ``v`` when given), *q moved past it; -1 when there is none. */
static Py_ssize_t
read_ints(const unsigned char **q, const unsigned char *end, long long *v, Py_ssize_t max)
{
    const unsigned char *s = *q;
    if (s >= end || *s++ != '[') {
        return -1;
    }
    Py_ssize_t n = 0;
    if (s < end && *s == ']') {
        *q = s + 1;
        return 0;
    }
    for (;;) {
        long long x;
        if (read_int(&s, end, &x) < 0) {
            return -1;
        }
        if (v != NULL && n < max) {
            v[n] = x;
        }
        n++;
        if (s < end && *s == ',') {
            s++;
        }
        else if (s < end && *s == ']') {
            *q = s + 1;
            return n;
        }
        else {
            return -1;
        }
    }
}

/* A list of strings at *q with nothing to escape (no control character; the header
 * holds no backslash), *q moved past it; 0, or -1 when there is none. */
static int
read_strs(const unsigned char **q, const unsigned char *end)
{
    const unsigned char *s = *q;
    if (s >= end || *s++ != '[') {
        return -1;
    }
    if (s < end && *s == ']') {
        *q = s + 1;
        return 0;
    }
    for (;;) {
        if (s >= end || *s++ != '"') {
            return -1;
        }
        while (s < end && *s != '"' && *s >= 0x20) {
            s++;
        }
        if (s >= end || *s++ != '"') {
            return -1;
        }
        if (s < end && *s == ',') {
            s++;
        }
        else if (s < end && *s == ']') {
            *q = s + 1;
            return 0;
        }
        else {
            return -1;
        }
    }
}

/* A run of the header's runs: where its text is, and for a linked one [start, count,
 * turn, step, index, seq, block, offset, size] its fields and where its fifth ends. */
typedef struct {
    const unsigned char *text;
    const unsigned char *end;
    const unsigned char *cut;
    int linked;
    long long v[9];
} HeaderRun;

/* The header [p, end) read as the encoder writes it: [types, index, deltas, runs], each
 * run of five or nine ints. Its runs into ``*runs`` (``*count``), where the runs field
 * begins into ``*field``; 1, 0 when it holds no linked run, -1 declining. */
static int
read_pack_header(const unsigned char *p, const unsigned char *end, HeaderRun **runs,
                 Py_ssize_t *count, const unsigned char **field)
{
    const unsigned char *q = p;
    long long index;
    if (q >= end || *q++ != '[' || read_strs(&q, end) < 0 || q >= end || *q++ != ',') {
        goto bad;
    }
    if (q < end && *q == '[' ? read_ints(&q, end, NULL, 0) < 0 : read_int(&q, end, &index) < 0) {
        goto bad;
    }
    if (q >= end || *q++ != ',' || read_ints(&q, end, NULL, 0) < 0 || q >= end || *q++ != ',') {
        goto bad;
    }
    *field = q;
    if (q >= end || *q++ != '[') {
        goto bad;
    }
    *runs = PyMem_New(HeaderRun, (size_t)((end - q) / 12 + 1)); /* a run: at least 11 */
    if (*runs == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t n = 0;
    int linked = 0;
    while (q < end && *q != ']') {
        HeaderRun *run = &(*runs)[n];
        run->text = q;
        Py_ssize_t fields = read_ints(&q, end, run->v, 9);
        if (fields != 5 && fields != 9) {
            goto bad;
        }
        run->end = q;
        run->linked = fields == 9;
        if (run->linked) {
            const unsigned char *c = run->text;
            for (int commas = 0; commas < 5; c++) {
                commas += *c == ',';
            }
            run->cut = c - 1;
            linked = 1;
        }
        n++;
        if (q < end && *q == ',' && q + 1 < end && q[1] == '[') {
            q++;
        }
        else if (q >= end || *q != ']') {
            goto bad;
        }
    }
    if (q + 2 != end || q[0] != ']' || q[1] != ']') {
        goto bad;
    }
    *count = n;
    return linked;
bad:
    decline("a pack header the encoder does not write");
    return -1;
}

/* The header with each linked run cut to its first five fields, the rest as it is, at
 * the end of ``b``; 0, or -1 with MemoryError. */
static int
put_unlinked_header(ByteBuf *b, const unsigned char *p, const unsigned char *field,
                    const HeaderRun *runs, Py_ssize_t count)
{
    if (buf_put(b, p, field + 1 - p) < 0) { /* up to the runs' "[" */
        return -1;
    }
    for (Py_ssize_t r = 0; r < count; r++) {
        const HeaderRun *run = &runs[r];
        if ((r && buf_put(b, ",", 1) < 0) ||
            buf_put(b, run->text, (run->linked ? run->cut : run->end) - run->text) < 0 ||
            (run->linked && buf_put(b, "]", 1) < 0)) {
            return -1;
        }
    }
    return buf_put(b, "]]\n", 3);
}

/* The end of the line at *q (the line is [*q, its end)), *q moved to the next one;
 * NULL past the last line (*q at ``end + 1``: the bytes object's own trailing NUL). */
static const unsigned char *
next_line(const unsigned char **q, const unsigned char *end)
{
    const unsigned char *s = *q;
    if (s > end) {
        return NULL;
    }
    const unsigned char *stop = memchr(s, '\n', (size_t)(end - s));
    if (stop == NULL) {
        stop = end;
    }
    *q = stop + 1;
    return stop;
}

/* Whether any of seqs from .. from + count - 1 is ``wanted`` (None: all are); ``mask``
 * has room for ``count``. 1, 0, or -1 with the error set. */
static int
any_wanted(PyObject *wanted, long long from, Py_ssize_t count, char *mask)
{
    if (wanted == Py_None) {
        return 1;
    }
    memset(mask, 0, (size_t)count);
    if (mark_wanted(wanted, from, count, mask) < 0) {
        return -1;
    }
    return memchr(mask, 1, (size_t)count) != NULL;
}

/* The texts of the linked run ``run`` written at the end of ``b``, one per line with a
 * newline between them: its lines (at *q, moved past them) hold their lengths, each
 * text sliced out of the reply's text that ``replies(seq, block)`` gives. 0, or -1
 * (declined, or its error). */
static int
put_run_texts(ByteBuf *b, const HeaderRun *run, const unsigned char **q,
              const unsigned char *end, PyObject *replies, long long *lengths)
{
    long long count = run->v[1], offset = run->v[7], at = offset, chars = 0;
    for (long long k = 0; k < count; k++) {
        const unsigned char *line = *q, *stop = next_line(q, end);
        if (stop == NULL || read_int(&line, stop, &lengths[k]) < 0 || line != stop ||
            lengths[k] < 0) {
            decline("a chunk run's lengths are not lengths");
            return -1;
        }
        if (lengths[k] > LLONG_MAX - at) {
            decline("a chunk run reaches past its text");
            return -1;
        }
        at += lengths[k];
    }
    PyObject *seq = PyLong_FromLongLong(run->v[5]), *block = PyLong_FromLongLong(run->v[6]);
    PyObject *text = seq == NULL || block == NULL
                         ? NULL
                         : PyObject_CallFunctionObjArgs(replies, seq, block, NULL);
    Py_XDECREF(seq);
    Py_XDECREF(block);
    if (text == NULL) {
        return -1;
    }
    int ok = -1;
    if (!PyUnicode_CheckExact(text) || ready(text) < 0) {
        decline("a reply's text that is not a str");
        goto done;
    }
    if (at > (long long)PyUnicode_GET_LENGTH(text)) {
        decline("a chunk run reaches past its text");
        goto done;
    }
    at = offset;
    for (long long k = 0; k < count; k++) {
        Py_ssize_t escaped = put_escaped(b, text, (Py_ssize_t)at, (Py_ssize_t)(at + lengths[k]));
        if (escaped < 0 || (k + 1 < count && buf_put(b, "\n", 1) < 0)) {
            goto done;
        }
        chars += escaped;
        at += lengths[k];
    }
    if (chars != run->v[8]) {
        decline("a chunk run's texts are not the size it says");
        goto done;
    }
    ok = 0;
done:
    Py_DECREF(text);
    return ok;
}

/* The linked run ``run`` at *q (its lines, *q moved past them) unlinked at the end of
 * ``b``: its texts, or empty lines when none of its seqs is wanted. 0, or -1. */
static int
put_linked_run(ByteBuf *b, const HeaderRun *run, const unsigned char **q,
               const unsigned char *end, long long first, PyObject *wanted, PyObject *replies,
               char *scratch)
{
    Py_ssize_t count = (Py_ssize_t)run->v[1];
    int seen = any_wanted(wanted, first + run->v[0], count, scratch);
    if (seen < 0) {
        return -1;
    }
    if (seen) {
        if (replies == Py_None) {
            decline("a chunk run points at an event this read cannot see");
            return -1;
        }
        return put_run_texts(b, run, q, end, replies, (long long *)scratch);
    }
    for (Py_ssize_t k = 0; k < count; k++) {
        if (next_line(q, end) == NULL) {
            decline("a chunk run past the lines");
            return -1;
        }
    }
    if (buf_room(b, count - 1) < 0) {
        return -1;
    }
    memset(b->data + b->len, '\n', (size_t)(count - 1));
    b->len += count - 1;
    return 0;
}

/* The linked runs of ``runs`` checked as the Python version checks them (none of their
 * fields negative, none empty) and, further, in order and apart, reaching no further
 * than ``first`` allows; the most lines one holds, or -1 declining. */
static Py_ssize_t
check_linked_runs(const HeaderRun *runs, Py_ssize_t count, long long first,
                  Py_ssize_t lines_max)
{
    long long reached = 0, widest = 1;
    for (Py_ssize_t r = 0; r < count; r++) {
        const long long *v = runs[r].v;
        if (!runs[r].linked) {
            continue;
        }
        if (v[0] < reached || v[1] < 1 || v[1] > lines_max || v[0] > lines_max - v[1] ||
            v[5] < 0 || v[6] < 0 || v[7] < 0 || v[8] < 0 || first > LLONG_MAX - v[0] - v[1]) {
            decline("an unexpected linked chunk run");
            return -1;
        }
        reached = v[0] + v[1];
        widest = v[1] > widest ? v[1] : widest;
    }
    return (Py_ssize_t)widest;
}

static PyObject *
unlink_runs(PyObject *module, PyObject *args)
{
    (void)module;
    long long first;
    PyObject *body, *wanted, *replies;
    if (!PyArg_ParseTuple(args, "O!LOO:unlink_runs", &PyBytes_Type, &body, &first, &wanted,
                          &replies)) {
        return NULL;
    }
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(body);
    const unsigned char *end = p + PyBytes_GET_SIZE(body);
    const unsigned char *newline = memchr(p, '\n', (size_t)(end - p));
    if (newline == NULL || newline - p < 3 || memcmp(newline - 3, "]]]", 3) != 0) {
        return Py_NewRef(body); /* no chunk runs */
    }
    if (memchr(p, '\\', (size_t)(newline - p)) != NULL) {
        return decline("an escape in a pack's header");
    }
    HeaderRun *runs = NULL;
    Py_ssize_t count = 0;
    const unsigned char *field = NULL;
    int linked = read_pack_header(p, newline, &runs, &count, &field);
    PyObject *out = NULL;
    char *scratch = NULL;
    ByteBuf b = {NULL, 0, 0};
    if (linked < 0) {
        goto done;
    }
    /* the Python version decodes the header, and the lines too when it has linked runs */
    if (!utf8_valid(p, (linked ? end : newline) - p)) {
        decline("a pack that is not UTF-8");
        goto done;
    }
    if (!linked) {
        out = Py_NewRef(body);
        goto done;
    }
    Py_ssize_t widest = check_linked_runs(runs, count, first, end - newline);
    if (widest < 0) {
        goto done;
    }
    scratch = PyMem_Malloc((size_t)widest * sizeof(long long)); /* a mask, or lengths */
    if (scratch == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (buf_room(&b, (end - p) + 64) < 0 || put_unlinked_header(&b, p, field, runs, count) < 0) {
        goto done;
    }
    const unsigned char *q = newline + 1; /* the next line to write */
    long long i = 0;                      /* its index */
    for (Py_ssize_t r = 0; r < count; r++) {
        const HeaderRun *run = &runs[r];
        if (!run->linked) {
            continue;
        }
        const unsigned char *from = q;
        for (; i < run->v[0]; i++) { /* the lines before it, as they are */
            if (next_line(&q, end) == NULL) {
                decline("a chunk run past the lines");
                goto done;
            }
        }
        if (buf_put(&b, from, q - from) < 0 ||
            put_linked_run(&b, run, &q, end, first, wanted, replies, scratch) < 0) {
            goto done;
        }
        i += run->v[1];
        if (q <= end && buf_put(&b, "\n", 1) < 0) {
            goto done;
        }
    }
    if (q <= end && buf_put(&b, q, end - q) < 0) {
        goto done;
    }
    out = PyBytes_FromStringAndSize(b.data, b.len);
done:
    PyMem_Free(runs);
    PyMem_Free(scratch);
    PyMem_Free(b.data);
    return out;
}

/* -------------------------------------------------------------- build_events */

/* core.log.build_events(first, batch): [Event(first + i, v.type, v.time, v.data,
 * v.surface_op, v.source_event_seqs) for i, v in enumerate(batch)], each built as
 * core.log.build_event does (object.__new__, then the six slots set through their own
 * descriptors), without a Python frame per event. ``setters`` is the Event slots'
 * descriptors in the order seq, type, time, data, surface_op, source_event_seqs. */
static PyObject *
build_events(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *cls, *setters, *batch;
    Py_ssize_t first;
    if (!PyArg_ParseTuple(args, "O!O!nO!:build_events", &PyType_Type, &cls, &PyTuple_Type,
                          &setters, &first, &PyList_Type, &batch)) {
        return NULL;
    }
    if (PyTuple_GET_SIZE(setters) != 6) {
        PyErr_SetString(PyExc_TypeError, "build_events() needs the six slot descriptors");
        return NULL;
    }
    for (Py_ssize_t k = 0; k < 6; k++) {
        if (Py_TYPE(PyTuple_GET_ITEM(setters, k))->tp_descr_set == NULL) {
            PyErr_SetString(PyExc_TypeError, "build_events() needs data descriptors");
            return NULL;
        }
    }
    Py_ssize_t n = PyList_GET_SIZE(batch);
    PyObject *out = PyList_New(n);
    if (out == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = PyList_GET_ITEM(batch, i);
        if (!PyTuple_Check(v) || PyTuple_GET_SIZE(v) != 6) {
            PyErr_SetString(PyExc_TypeError, "build_events() needs ValidatedEvent items");
            goto fail;
        }
        PyObject *event = PyBaseObject_Type.tp_new((PyTypeObject *)cls, empty_tuple, NULL);
        if (event == NULL) {
            goto fail;
        }
        PyList_SET_ITEM(out, i, event);
        PyObject *seq = PyLong_FromSsize_t(first + i);
        if (seq == NULL) {
            goto fail;
        }
        /* ValidatedEvent: type, data, data_json, surface_op, source_event_seqs, time */
        PyObject *values[6] = {seq,
                               PyTuple_GET_ITEM(v, 0),
                               PyTuple_GET_ITEM(v, 5),
                               PyTuple_GET_ITEM(v, 1),
                               PyTuple_GET_ITEM(v, 3),
                               PyTuple_GET_ITEM(v, 4)};
        for (Py_ssize_t k = 0; k < 6; k++) {
            PyObject *descr = PyTuple_GET_ITEM(setters, k);
            if (Py_TYPE(descr)->tp_descr_set(descr, event, values[k]) < 0) {
                Py_DECREF(seq);
                goto fail;
            }
        }
        Py_DECREF(seq);
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

/* ----------------------------------------------------------- validate_common */

/* stores.validation._validate_common's loop (its Python version is the reference):
 * validate_common(events, NewEvent, ValidatedEvent, surface_types, limit, now_ms) ->
 * a list of ValidatedEvent, or None when an event is not of a common shape (an exact
 * NewEvent; a non-empty exact str type; an exact "append" op on a surface type, none
 * on any other; no source seqs; an exact int time in 0..limit, or None: now_ms() is
 * then called; data an exact dict or FrozenDict that encode_frozen takes). ``events``
 * is a list or a tuple. Reading the NewEvent slots runs no Python code. */
static PyObject *attr_type, *attr_data, *attr_surface_op, *attr_source_event_seqs,
    *attr_time, *str_append;

static PyObject *
validate_common(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *events, *new_event, *validated, *surface_types, *now_ms;
    long long limit;
    if (check_types() < 0 ||
        !PyArg_ParseTuple(args, "OO!O!O!LO:validate_common", &events, &PyType_Type, &new_event,
                          &PyType_Type, &validated, &PyFrozenSet_Type, &surface_types, &limit,
                          &now_ms)) {
        return NULL;
    }
    if (!PyType_IsSubtype((PyTypeObject *)validated, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "validate_common() needs a tuple type");
        return NULL;
    }
    if (!PyList_CheckExact(events) && !PyTuple_CheckExact(events)) {
        Py_RETURN_NONE;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(events);
    PyObject *out = PyList_New(0);
    if (out == NULL) {
        return NULL;
    }
    PyObject *type = NULL, *op = NULL, *seqs = NULL, *time = NULL, *data = NULL;
    for (Py_ssize_t i = 0; i < n && i < PySequence_Fast_GET_SIZE(events); i++) {
        PyObject *event = PySequence_Fast_GET_ITEM(events, i);
        if ((PyObject *)Py_TYPE(event) != new_event) {
            goto unsupported;
        }
        Py_INCREF(event);
        seqs = PyObject_GetAttr(event, attr_source_event_seqs);
        type = PyObject_GetAttr(event, attr_type);
        op = PyObject_GetAttr(event, attr_surface_op);
        time = PyObject_GetAttr(event, attr_time);
        data = PyObject_GetAttr(event, attr_data);
        Py_DECREF(event);
        if (seqs == NULL || type == NULL || op == NULL || time == NULL || data == NULL) {
            goto fail;
        }
        if (seqs != Py_None || !PyUnicode_CheckExact(type) || PyUnicode_GET_LENGTH(type) == 0) {
            goto unsupported;
        }
        int surface = PySet_Contains(surface_types, type); /* exact str: runs no code */
        if (surface < 0) {
            goto fail;
        }
        if (surface) {
            if (!PyUnicode_CheckExact(op) || PyUnicode_Compare(op, str_append) != 0) {
                goto unsupported; /* exact strs compare without raising */
            }
        }
        else if (op != Py_None) {
            goto unsupported;
        }
        if (time == Py_None) {
            Py_DECREF(time);
            time = PyObject_CallNoArgs(now_ms);
            if (time == NULL) {
                goto fail;
            }
        }
        else {
            if (!PyLong_CheckExact(time)) {
                goto unsupported;
            }
            int overflow = 0;
            long long t = PyLong_AsLongLongAndOverflow(time, &overflow);
            if (overflow || t < 0 || t > limit) {
                goto unsupported;
            }
        }
        if (Py_TYPE(data) != &PyDict_Type && (PyObject *)Py_TYPE(data) != frozen_dict_type) {
            goto unsupported;
        }
        Py_ssize_t len = 0;
        Py_UCS4 maxchar = 0x7F;
        int r = enc_measure(data, 0, &len, &maxchar);
        if (r < 0) {
            goto fail;
        }
        if (r == ENC_UNSUPPORTED) {
            goto unsupported;
        }
        PyObject *text = PyUnicode_New(len, maxchar);
        if (text == NULL) {
            goto fail;
        }
        enc_out w = {PyUnicode_KIND(text), PyUnicode_DATA(text), 0};
        enc_write(data, &w);
        PyObject *copy = enc_copy(data);
        if (copy == NULL) {
            Py_DECREF(text);
            goto fail;
        }
        Py_DECREF(data);
        data = NULL;
        /* ValidatedEvent(type, data, data_json, surface_op, source_event_seqs, time) */
        PyObject *item = ((PyTypeObject *)validated)->tp_alloc((PyTypeObject *)validated, 6);
        if (item == NULL) {
            Py_DECREF(text);
            Py_DECREF(copy);
            goto fail;
        }
        PyTuple_SET_ITEM(item, 0, type);
        PyTuple_SET_ITEM(item, 1, copy);
        PyTuple_SET_ITEM(item, 2, text);
        PyTuple_SET_ITEM(item, 3, op);
        PyTuple_SET_ITEM(item, 4, seqs);
        PyTuple_SET_ITEM(item, 5, time);
        type = op = seqs = time = NULL;
        int failed = PyList_Append(out, item);
        Py_DECREF(item);
        if (failed) {
            goto fail;
        }
    }
    return out;
unsupported:
    Py_XDECREF(type);
    Py_XDECREF(op);
    Py_XDECREF(seqs);
    Py_XDECREF(time);
    Py_XDECREF(data);
    Py_DECREF(out);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(type);
    Py_XDECREF(op);
    Py_XDECREF(seqs);
    Py_XDECREF(time);
    Py_XDECREF(data);
    Py_DECREF(out);
    return NULL;
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
