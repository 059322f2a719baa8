/* Part of core._speedups (packs: unlink_runs, a pack's linked runs made text runs). Not compiled on its own: core/_speedups.c
 * includes it, so that the module stays one translation unit (its statics and inlining
 * as before). */

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
