/* Part of core._speedups (reads: a pack's events straight into core.log.Event, unpack_events). Not compiled on its own: core/_speedups.c
 * includes it, so that the module stays one translation unit (its statics and inlining
 * as before). */

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
