/* Part of core._speedups (frozen values: freeze_object, freeze_list and the registered types). Not compiled on its own: core/_speedups.c
 * includes it, so that the module stays one translation unit (its statics and inlining
 * as before). */

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
