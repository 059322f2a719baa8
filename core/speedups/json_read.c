/* Part of core._speedups (reads: stored JSON decoded straight into frozen values, loads_frozen). Not compiled on its own: core/_speedups.c
 * includes it, so that the module stays one translation unit (its statics and inlining
 * as before). */

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
