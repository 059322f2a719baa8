/* Part of core._speedups (search: fold_counts, core.search's counts of ASCII terms). Not
 * compiled on its own: core/_speedups.c includes it, so that the module stays one
 * translation unit. */

/* The non-ASCII characters that re.IGNORECASE matches with an ASCII one, or whose lower()
 * holds one (core.search._INTO_ASCII: İ ı ſ K). Every other one folds to no ASCII
 * character, so an ASCII term's matches in a text without these are its matches with
 * ASCII letters folded, which is what count_folded counts. */
static inline int
into_ascii(Py_UCS4 c)
{
    return c == 0x130 || c == 0x131 || c == 0x17f || c == 0x212a;
}

/* Whether a text of 2- or 4-byte characters holds one of into_ascii's. */
static int
holds_into_ascii(int kind, const void *data, Py_ssize_t n)
{
    if (kind == PyUnicode_2BYTE_KIND) {
        const Py_UCS2 *p = (const Py_UCS2 *)data;
        for (Py_ssize_t j = 0; j < n; j++) {
            if (p[j] >= 0x130 && into_ascii(p[j])) {
                return 1;
            }
        }
        return 0;
    }
    const Py_UCS4 *p = (const Py_UCS4 *)data;
    for (Py_ssize_t j = 0; j < n; j++) {
        if (p[j] >= 0x130 && into_ascii(p[j])) {
            return 1;
        }
    }
    return 0;
}

/* Occurrences of ``key`` (``m`` > 0 characters: lower-case ASCII letters, and characters
 * without case) in the text, non-overlapping and leftmost first (as str.count and
 * re.findall count a literal), the text's A-Z folded to a-z.
 * One loop per kind of str, so that each reads its array directly. */
#define FOLD(c) ((c) >= 'A' && (c) <= 'Z' ? (c) + 32 : (c))
#define COUNT_FOLDED(TYPE)                                                            \
    do {                                                                              \
        const TYPE *p = (const TYPE *)data;                                           \
        const Py_UCS4 *q = key;                                                       \
        Py_UCS4 first = q[0];                                                         \
        Py_UCS4 upper = first >= 'a' && first <= 'z' ? first - 32 : first;           \
        Py_ssize_t j = 0;                                                             \
        while (j + m <= n) {                                                          \
            Py_UCS4 c = p[j];                                                         \
            if (c != first && c != upper) {                                           \
                j++;                                                                  \
                continue;                                                             \
            }                                                                         \
            Py_ssize_t k = 1;                                                         \
            while (k < m && (Py_UCS4)FOLD((Py_UCS4)p[j + k]) == q[k]) {               \
                k++;                                                                  \
            }                                                                         \
            if (k == m) {                                                             \
                count++;                                                              \
                j += m;                                                               \
            }                                                                         \
            else {                                                                    \
                j++;                                                                  \
            }                                                                         \
        }                                                                             \
    } while (0)

static Py_ssize_t
count_folded(int kind, const void *data, Py_ssize_t n, const Py_UCS4 *key, Py_ssize_t m)
{
    Py_ssize_t count = 0;
    if (kind == PyUnicode_1BYTE_KIND) {
        COUNT_FOLDED(Py_UCS1);
    }
    else if (kind == PyUnicode_2BYTE_KIND) {
        COUNT_FOLDED(Py_UCS2);
    }
    else {
        COUNT_FOLDED(Py_UCS4);
    }
    return count;
}

#define FOLD_MAX_KEYS 64

/* fold_counts(texts, keys, start, need) -> (kept, counts, stop): from texts[start] on,
 * the indices of the texts that hold every key (each a str of lower-case ASCII letters
 * and characters without case: core.search's terms of ASCII or uncased characters, lower
 * cased) and, for each, its count of each key (core.search._counter's counts), until
 * ``need`` are kept or a text holds one of into_ascii's characters (left to the caller:
 * ``stop`` is its index) or the texts end (``stop`` is their number). */
static PyObject *
fold_counts(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *texts;
    PyObject *keys;
    Py_ssize_t start;
    Py_ssize_t need;
    if (!PyArg_ParseTuple(args, "O!O!nn:fold_counts", &PyList_Type, &texts, &PyTuple_Type,
                          &keys, &start, &need)) {
        return NULL;
    }
    Py_ssize_t nkeys = PyTuple_GET_SIZE(keys);
    if (nkeys < 1 || nkeys > FOLD_MAX_KEYS || start < 0) {
        PyErr_SetString(PyExc_ValueError, "fold_counts() needs 1 to 64 keys, start >= 0");
        return NULL;
    }
    Py_UCS4 *key[FOLD_MAX_KEYS] = {NULL};
    Py_ssize_t key_len[FOLD_MAX_KEYS];
    Py_ssize_t found[FOLD_MAX_KEYS];
    PyObject *kept = NULL;
    PyObject *counts = NULL;
    for (Py_ssize_t k = 0; k < nkeys; k++) {
        PyObject *item = PyTuple_GET_ITEM(keys, k);
        if (expect(PyUnicode_Check(item), item, "fold_counts", "tuple of str") < 0 ||
            ready(item) < 0) {
            goto fail;
        }
        key_len[k] = PyUnicode_GET_LENGTH(item);
        key[k] = key_len[k] > 0 ? PyUnicode_AsUCS4Copy(item) : NULL;
        if (key[k] == NULL) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_ValueError, "fold_counts() keys are not empty");
            }
            goto fail;
        }
        for (Py_ssize_t b = 0; b < key_len[k]; b++) {
            Py_UCS4 c = key[k][b];
            int ok = c < 0x80 ? !(c >= 'A' && c <= 'Z')
                              : Py_UNICODE_TOLOWER(c) == c && Py_UNICODE_TOUPPER(c) == c;
            if (!ok) {
                PyErr_SetString(PyExc_ValueError,
                                "fold_counts() keys are lower-case ASCII or without case");
                goto fail;
            }
        }
    }
    kept = PyList_New(0);
    counts = PyList_New(0);
    if (kept == NULL || counts == NULL) {
        goto fail;
    }
    Py_ssize_t n = PyList_GET_SIZE(texts);
    Py_ssize_t i = start;
    for (; i < n && PyList_GET_SIZE(kept) < need; i++) {
        PyObject *text = PyList_GET_ITEM(texts, i);
        if (expect(PyUnicode_Check(text), text, "fold_counts", "list of str") < 0 ||
            ready(text) < 0) {
            goto fail;
        }
        int kind = PyUnicode_KIND(text);
        const void *data = PyUnicode_DATA(text);
        Py_ssize_t len = PyUnicode_GET_LENGTH(text);
        if (kind != PyUnicode_1BYTE_KIND && holds_into_ascii(kind, data, len)) {
            break;
        }
        int all = 1;
        for (Py_ssize_t k = 0; k < nkeys && all; k++) {
            found[k] = count_folded(kind, data, len, key[k], key_len[k]);
            all = found[k] > 0;
        }
        if (!all) {
            continue;
        }
        PyObject *row = PyList_New(nkeys);
        if (row == NULL) {
            goto fail;
        }
        for (Py_ssize_t k = 0; k < nkeys; k++) {
            PyObject *value = PyLong_FromSsize_t(found[k]);
            if (value == NULL) {
                Py_DECREF(row);
                goto fail;
            }
            PyList_SET_ITEM(row, k, value);
        }
        PyObject *index = PyLong_FromSsize_t(i);
        if (index == NULL || PyList_Append(kept, index) < 0 || PyList_Append(counts, row) < 0) {
            Py_XDECREF(index);
            Py_DECREF(row);
            goto fail;
        }
        Py_DECREF(index);
        Py_DECREF(row);
    }
    for (Py_ssize_t k = 0; k < nkeys; k++) {
        PyMem_Free(key[k]);
    }
    return Py_BuildValue("(NNn)", kept, counts, i);
fail:
    for (Py_ssize_t k = 0; k < nkeys; k++) {
        PyMem_Free(key[k]);
    }
    Py_XDECREF(kept);
    Py_XDECREF(counts);
    return NULL;
}
