/* Part of core._speedups (appends: build_events and validate_common). Not compiled on its own: core/_speedups.c
 * includes it, so that the module stays one translation unit (its statics and inlining
 * as before). */

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
