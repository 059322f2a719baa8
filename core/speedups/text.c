/* Part of core._speedups (UTF-8 and surrogates: utf8_len, escaped_pair, has_surrogate, join_utf8). Not compiled on its own: core/_speedups.c
 * includes it, so that the module stays one translation unit (its statics and inlining
 * as before). */

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
