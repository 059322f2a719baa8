/* Part of core._speedups (encoding: c_safe and encode_frozen). Not compiled on its own: core/_speedups.c
 * includes it, so that the module stays one translation unit (its statics and inlining
 * as before). */

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
