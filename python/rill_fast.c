/* SPDX-License-Identifier: MIT */
/* _rill_fast: the parts of rill.Tensor that every element-wise op runs, in
 * C. The Python package keeps the rest (rill/_tensor.py and the modules it
 * builds on), and runs without this module where the build could not
 * compile it (python/CMakeLists.txt), with the same semantics through
 * Python code (rill/_fastpath.py).
 *
 * TensorBase holds a tensor's fields: the device address and the event
 * recorded after the op that wrote the tensor as C pointers, the others as
 * Python objects. Its number slots run `a + b`, `a - b`, `a * b`, a tensor
 * with a number (either side) and `-a` on float32 tensors of one shape and
 * class on the current device with one call of rill_op_*_f32_new (a
 * product with a number, a number minus a tensor and `-a` are maps:
 * rill_op_map_f32_new), and hand every other case to the Python
 * functions that configure() names (which raise the errors; a view with
 * strides and a tensor of another device go there too); its finalizer
 * frees the memory in stream order (a view's is its base's: left alone)
 * and gives the event back to its pool. new() makes the tensors of
 * rill.empty, zeros, ones and full in one pass. EventPool is a stack of
 * events a device's tensors reuse. capsule_destructor is the address of
 * the destructor of rill's DLPack capsules.
 *
 * The package passes cffi pointers (cdata) where the C code needs
 * addresses: configure() takes Python callables that make one from an
 * address and read the address of one. They run off the fast path only (a
 * tensor that Python code allocated, a `t._ptr` read); the fast path moves
 * no cdata at all.
 *
 * Every call into librill that may block (an allocation that waits for
 * memory) runs with the GIL released, as cffi's calls do: a host function
 * in Python that the wait depends on needs it. Frees and event creation
 * never wait, and keep the GIL. The module links no library: the package
 * loads librill with RTLD_GLOBAL first. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <stdbool.h>

#include "rill.h"

/* ---------------------------------------------------------------- state */

/* What configure() set, and the stream that the fast path found last. The
 * GIL guards it all. */
static struct {
    PyObject *float32;        /* rill.float32 */
    PyObject *cast_ptr;       /* address -> void * cdata */
    PyObject *cast_event;     /* address -> rill_event * cdata */
    PyObject *address_of;     /* cdata -> int */
    PyObject *check;          /* status -> raises its exception */
    PyObject *current;        /* () -> the current rill.Stream */
    PyObject *active;         /* list: [captures under way] */
    PyObject *general[6];     /* add, radd, sub, rsub, mul, rmul */
    PyObject *neg;            /* -a off the fast path */
    PyObject *finalize_other; /* a tensor with an owner: Python releases it */
    long generation;
    rill_stream *last_handle; /* the current stream's handle when last looked up */
    rill_device *last_device; /* its device */
    PyObject *last_stream;    /* its rill.Stream */
    PyObject *last_pool;      /* and that stream's EventPool */
} st = {.generation = -1};

static PyObject *str_closed, *str_events, *str_addr, *str_dev;

/* The exception being raised, kept aside while a finalizer or destructor
 * runs Python code, and raised again after it (PyErr_Fetch and
 * PyErr_Restore before Python 3.12, which deprecates them). */
typedef struct saved_error {
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *raised;
#else
    PyObject *type, *value, *tb;
#endif
} saved_error;

static saved_error save_error(void) {
    saved_error e;
#if PY_VERSION_HEX >= 0x030C0000
    e.raised = PyErr_GetRaisedException();
#else
    PyErr_Fetch(&e.type, &e.value, &e.tb);
#endif
    return e;
}

static void restore_error(saved_error e) {
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(e.raised);
#else
    PyErr_Restore(e.type, e.value, e.tb);
#endif
}

/* -------------------------------------------------------------- EventPool */

typedef struct {
    PyObject ob_base;
    rill_event **items;
    Py_ssize_t count, capacity;
} EventPool;

static PyTypeObject EventPool_Type;

static int pool_push(EventPool *p, rill_event *ev) {
    if (p->count == p->capacity) {
        Py_ssize_t capacity = p->capacity ? p->capacity * 2 : 16;
        rill_event **items = PyMem_Realloc(p->items, (size_t)capacity * sizeof *items);
        if (items == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        p->items = items;
        p->capacity = capacity;
    }
    p->items[p->count++] = ev;
    return 0;
}

static void pool_dealloc(EventPool *p) {
    PyMem_Free(p->items); /* the events themselves go with the runtime */
    Py_TYPE(p)->tp_free((PyObject *)p);
}

/* fn(address): a cdata made by one of configure()'s callables. */
static PyObject *cast(PyObject *fn, void *addr) {
    PyObject *n = PyLong_FromVoidPtr(addr);
    if (n == NULL)
        return NULL;
    PyObject *r = PyObject_CallOneArg(fn, n);
    Py_DECREF(n);
    return r;
}

/* The event is off the pool before cast() runs Python code, during which
 * another thread may take the GIL and pop or push: each event goes to one
 * taker, and count never falls below 0. */
static PyObject *pool_pop(EventPool *p, PyObject *unused) {
    (void)unused;
    if (p->count == 0) {
        PyErr_SetString(PyExc_IndexError, "pop from an empty EventPool");
        return NULL;
    }
    rill_event *addr = p->items[--p->count];
    PyObject *ev = cast(st.cast_event, addr);
    if (ev == NULL)
        (void)pool_push(p, addr); /* back; an exception is set either way */
    return ev;
}

static void *address_of(PyObject *cdata) {
    PyObject *n = PyObject_CallOneArg(st.address_of, cdata);
    if (n == NULL)
        return NULL;
    void *addr = PyLong_AsVoidPtr(n);
    Py_DECREF(n);
    return addr;
}

static PyObject *pool_append(EventPool *p, PyObject *ev) {
    void *addr = address_of(ev);
    if (addr == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "EventPool.append: a NULL event");
        return NULL;
    }
    if (pool_push(p, addr) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *pool_clear(EventPool *p, PyObject *unused) {
    (void)unused;
    p->count = 0;
    Py_RETURN_NONE;
}

static Py_ssize_t pool_len(EventPool *p) {
    return p->count;
}

static PyMethodDef pool_methods[] = {
    {"pop", (PyCFunction)pool_pop, METH_NOARGS, "The event pushed last, taken off the pool."},
    {"append", (PyCFunction)pool_append, METH_O, "Pushes an event (a rill_event * cdata)."},
    {"clear", (PyCFunction)pool_clear, METH_NOARGS, "Forgets every event."},
    {NULL, NULL, 0, NULL},
};

static int pool_contains(EventPool *p, PyObject *ev) {
    void *addr = address_of(ev);
    if (addr == NULL)
        return PyErr_Occurred() ? -1 : 0;
    for (Py_ssize_t i = 0; i < p->count; i++)
        if (p->items[i] == addr)
            return 1;
    return 0;
}

static PySequenceMethods pool_as_sequence = {
    .sq_length = (lenfunc)pool_len,
    .sq_contains = (objobjproc)pool_contains,
};

static PyTypeObject EventPool_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "rill._rill_fast.EventPool",
    .tp_doc = "The events that a device's tensors reuse: deque's pop, append, len and in.",
    .tp_basicsize = sizeof(EventPool),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_dealloc = (destructor)pool_dealloc,
    .tp_methods = pool_methods,
    .tp_as_sequence = &pool_as_sequence,
};

/* ------------------------------------------------------------- TensorBase */

typedef struct {
    PyObject ob_base;
    void *addr;          /* the device memory; NULL before it is allocated and once freed */
    rill_event *event;   /* recorded after the last op that wrote the tensor, or NULL */
    rill_stream *handle; /* the handle of stream, when the fast path made the tensor */
    rill_device *dev;    /* stream's device, once looked up (tensor_on) */
    long gen;            /* the runtime generation the tensor belongs to */
    PyObject *ptr;       /* the cdata that _ptr returned or was set to, or NULL */
    PyObject *shape, *numel, *dtype, *stream, *owner;
    PyObject *base;    /* a view's: the tensor whose memory it shows, kept alive; or NULL/None */
    PyObject *strides; /* a view's strides in elements, when not contiguous; or NULL/None */
    PyObject *weakrefs;
} Tensor;

static PyTypeObject TensorBase_Type;

static int tensor_traverse(Tensor *t, visitproc visit, void *arg) {
    Py_VISIT(t->ptr);
    Py_VISIT(t->shape);
    Py_VISIT(t->numel);
    Py_VISIT(t->dtype);
    Py_VISIT(t->stream);
    Py_VISIT(t->owner);
    Py_VISIT(t->base);
    Py_VISIT(t->strides);
    return 0;
}

static int tensor_clear(Tensor *t) {
    Py_CLEAR(t->ptr);
    Py_CLEAR(t->shape);
    Py_CLEAR(t->numel);
    Py_CLEAR(t->dtype);
    Py_CLEAR(t->stream);
    Py_CLEAR(t->owner);
    Py_CLEAR(t->base);
    Py_CLEAR(t->strides);
    return 0;
}

static rill_stream *stream_handle(Tensor *t) {
    if (t->handle != NULL)
        return t->handle;
    PyObject *n = PyObject_GetAttr(t->stream, str_addr);
    if (n == NULL)
        return NULL;
    t->handle = PyLong_AsVoidPtr(n);
    Py_DECREF(n);
    return t->handle;
}

/* Frees the memory at the end of the work submitted to the tensor's stream
 * so far (rill_free_async; rill_free once the stream is closed) and gives
 * its event back to the stream's pool, as rill.Tensor's __del__ does in the
 * package's pure Python form. The memory of a tensor with an owner (a
 * graph's, or another library's through DLPack) is the owner's to release:
 * Python code decides (finalize_other). */
static int tensor_release(Tensor *t) {
    if (t->addr == NULL || t->gen != st.generation || t->stream == NULL)
        return 0;
    if (t->owner != NULL && t->owner != Py_None) {
        PyObject *r = PyObject_CallOneArg(st.finalize_other, (PyObject *)t);
        Py_XDECREF(r);
        return r == NULL ? -1 : 0;
    }
    PyObject *closed = PyObject_GetAttr(t->stream, str_closed);
    if (closed == NULL)
        return -1;
    int is_closed = PyObject_IsTrue(closed);
    Py_DECREF(closed);
    if (is_closed < 0)
        return -1;
    rill_stream *h = is_closed ? NULL : stream_handle(t);
    if (!is_closed && h == NULL)
        return -1;
    void *addr = t->addr;
    t->addr = NULL;
    Py_CLEAR(t->ptr);
    if (t->base != NULL && t->base != Py_None) {
        /* A view: the memory is its base's, freed with the base. */
    } else if (is_closed) { /* neither call waits: both free at the end of work submitted */
        rill_free(addr);
    } else {
        rill_free_async(addr, h);
    }
    if (t->event != NULL) {
        rill_event *ev = t->event;
        t->event = NULL;
        PyObject *pool = PyObject_GetAttr(t->stream, str_events);
        if (pool == NULL)
            return -1;
        int rc = PyObject_TypeCheck(pool, &EventPool_Type) ? pool_push((EventPool *)pool, ev) : 0;
        Py_DECREF(pool);
        return rc;
    }
    return 0;
}

static void tensor_finalize(PyObject *self) {
    saved_error e = save_error();
    if (tensor_release((Tensor *)self) < 0)
        PyErr_WriteUnraisable(self);
    restore_error(e);
}

static void tensor_dealloc(Tensor *t) {
    if (PyObject_CallFinalizerFromDealloc((PyObject *)t) < 0)
        return; /* resurrected */
    PyObject_GC_UnTrack(t);
    if (t->weakrefs != NULL)
        PyObject_ClearWeakRefs((PyObject *)t);
    tensor_clear(t);
    /* A subclass's instance: subtype_dealloc releases the type after this. */
    Py_TYPE(t)->tp_free((PyObject *)t);
}

/* ---- _ptr, _event, _gen: C fields seen as the package's objects */

static PyObject *get_ptr(Tensor *t, void *closure) {
    (void)closure;
    if (t->addr == NULL)
        Py_RETURN_NONE;
    if (t->ptr == NULL) {
        t->ptr = cast(st.cast_ptr, t->addr);
        if (t->ptr == NULL)
            return NULL;
    }
    return Py_NewRef(t->ptr);
}

/* The address of a pointer field's new value: a cdata pointer, or None
 * (or a deletion) for NULL. -1 with an exception for anything else. */
static int field_address(PyObject *value, void **out) {
    *out = NULL;
    if (value == NULL || value == Py_None)
        return 0;
    *out = address_of(value);
    return *out == NULL && PyErr_Occurred() ? -1 : 0;
}

static int set_ptr(Tensor *t, PyObject *value, void *closure) {
    (void)closure;
    void *addr;
    if (field_address(value, &addr) < 0)
        return -1;
    t->addr = addr;
    Py_XSETREF(t->ptr, addr != NULL ? Py_NewRef(value) : NULL);
    return 0;
}

static PyObject *get_event(Tensor *t, void *closure) {
    (void)closure;
    if (t->event == NULL)
        Py_RETURN_NONE;
    return cast(st.cast_event, t->event);
}

static int set_event(Tensor *t, PyObject *value, void *closure) {
    (void)closure;
    void *addr;
    if (field_address(value, &addr) < 0)
        return -1;
    t->event = addr;
    return 0;
}

static PyObject *get_gen(Tensor *t, void *closure) {
    (void)closure;
    return PyLong_FromLong(t->gen);
}

static int set_gen(Tensor *t, PyObject *value, void *closure) {
    (void)closure;
    long gen = value == NULL ? -1 : PyLong_AsLong(value);
    if (gen == -1 && PyErr_Occurred())
        return -1;
    t->gen = gen;
    return 0;
}

static int set_stream(Tensor *t, PyObject *value, void *closure) {
    (void)closure;
    t->handle = NULL; /* read from the stream when needed */
    t->dev = NULL;
    Py_XSETREF(t->stream, Py_XNewRef(value));
    return 0;
}

static PyObject *get_stream(Tensor *t, void *closure) {
    (void)closure;
    if (t->stream == NULL) {
        PyErr_SetString(PyExc_AttributeError, "_stream");
        return NULL;
    }
    return Py_NewRef(t->stream);
}

static PyGetSetDef tensor_getset[] = {
    {"_ptr", (getter)get_ptr, (setter)set_ptr, "The device memory (void *), or None.", NULL},
    {"_event", (getter)get_event, (setter)set_event, "The event of the last write, or None.", NULL},
    {"_gen", (getter)get_gen, (setter)set_gen, "The runtime generation of the tensor.", NULL},
    {"_stream", (getter)get_stream, (setter)set_stream, "The stream the memory belongs to.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef tensor_members[] = {
    {"_shape", T_OBJECT_EX, offsetof(Tensor, shape), 0, NULL},
    {"_numel", T_OBJECT_EX, offsetof(Tensor, numel), 0, NULL},
    {"_dtype", T_OBJECT_EX, offsetof(Tensor, dtype), 0, NULL},
    {"_owner", T_OBJECT_EX, offsetof(Tensor, owner), 0, NULL},
    {"_base", T_OBJECT, offsetof(Tensor, base), 0, NULL},
    {"_strides", T_OBJECT, offsetof(Tensor, strides), 0, NULL},
    {NULL, 0, 0, 0, NULL},
};

/* A new tensor of type on the memory addr, with event ev (or NULL), of
 * stream (handle h, device dev) and runtime generation gen: float32, of
 * shape and numel, with no owner, base or strides. The one place where
 * the module sets a tensor's fields, as rill._core.build does in Python.
 * NULL with an exception when the object cannot be allocated: addr and ev
 * stay the caller's. */
static Tensor *tensor_make(PyTypeObject *type, void *addr, rill_event *ev, rill_stream *h,
                           rill_device *dev, long gen, PyObject *shape, PyObject *numel,
                           PyObject *stream) {
    Tensor *t = (Tensor *)type->tp_alloc(type, 0);
    if (t == NULL)
        return NULL;
    t->addr = addr;
    t->event = ev;
    t->handle = h;
    t->dev = dev;
    t->gen = gen;
    t->shape = Py_NewRef(shape);
    t->numel = Py_NewRef(numel);
    t->dtype = Py_NewRef(st.float32);
    t->stream = Py_NewRef(stream);
    t->owner = Py_NewRef(Py_None);
    return t;
}

/* ---- the element-wise fast path */

enum { OP_ADD, OP_SUB, OP_MUL };

/* A float32 tensor of this runtime, contiguous (a view with strides takes
 * the general path, which reads them). */
static bool is_fast_f32(Tensor *t) {
    return t->dtype == st.float32 && t->addr != NULL && t->gen == st.generation &&
           (t->strides == NULL || t->strides == Py_None);
}

/* Whether a capture is under way in any thread (the package's count):
 * then every op takes the general path, which records what graphs need. */
static bool capture_active(void) {
    PyObject *n = PyList_GET_ITEM(st.active, 0);
    return n != NULL && PyObject_IsTrue(n) != 0;
}

/* The rill.Stream whose handle is h, and its event pool, as new
 * references: the last ones unless the current stream changed (handles
 * are not reused within a runtime; reset() forgets them at shutdown). The
 * cache is whole before the old entries are released: their release may
 * run Python code, and another thread with it, which must not find a new
 * stream under an old handle. */
static PyObject *stream_of(rill_stream *h, EventPool **pool) {
    if (h != st.last_handle || st.last_stream == NULL) {
        PyObject *s = PyObject_CallNoArgs(st.current);
        if (s == NULL)
            return NULL;
        PyObject *p = PyObject_GetAttr(s, str_events);
        if (p == NULL) {
            Py_DECREF(s);
            return NULL;
        }
        if (!PyObject_TypeCheck(p, &EventPool_Type)) {
            Py_DECREF(s);
            Py_DECREF(p);
            PyErr_SetString(PyExc_TypeError, "rill: a stream's event pool is not an EventPool");
            return NULL;
        }
        rill_device *dev = NULL;
        if (rill_stream_get_device(h, &dev) != RILL_OK) {
            Py_DECREF(s);
            Py_DECREF(p);
            return NULL; /* the general path says why */
        }
        PyObject *old_stream = st.last_stream, *old_pool = st.last_pool;
        Py_INCREF(s);
        Py_INCREF(p);
        st.last_stream = s;
        st.last_pool = p;
        st.last_handle = h;
        st.last_device = dev;
        Py_XDECREF(old_stream);
        Py_XDECREF(old_pool);
        *pool = (EventPool *)p;
        return s;
    }
    Py_INCREF(st.last_stream);
    Py_INCREF(st.last_pool);
    *pool = (EventPool *)st.last_pool;
    return st.last_stream;
}

/* Whether tensor t lives on device dev: an op runs on its operands' device
 * (PyTorch's device guard), so one whose operand is on another device
 * than the current stream's takes the general path, which makes that
 * device current or refuses operands on two devices. -1 with an exception
 * when the stream's device cannot be read. */
static int tensor_on(Tensor *t, rill_device *dev) {
    if (t->dev == NULL) {
        if (t->stream == NULL)
            return 0;
        PyObject *d = PyObject_GetAttr(t->stream, str_dev);
        if (d == NULL)
            return -1;
        void *addr = address_of(d);
        Py_DECREF(d);
        if (addr == NULL)
            return PyErr_Occurred() ? -1 : 0;
        t->dev = addr;
    }
    return t->dev == dev;
}

/* a (op) other, or other (op) a when reflected (other is then a number);
 * other NULL: -a. Out of memory, the general path tries again: it waits
 * for pending frees where it may. */
static PyObject *fast_op(Tensor *a, PyObject *other, int op, bool reflected) {
    PyTypeObject *type = Py_TYPE(a);
    bool tensors = other != NULL && Py_TYPE(other) == type;
    float value = 0;
    /* A number and a tensor: a + number and number + a add the number;
     * the others are maps. */
    int map = -1;
    if (other == NULL) {
        if (!is_fast_f32(a) || capture_active())
            return Py_NotImplemented;
        map = RILL_MAP_NEG;
    } else if (tensors) {
        Tensor *b = (Tensor *)other;
        if (!is_fast_f32(a) || !is_fast_f32(b) || capture_active())
            return Py_NotImplemented; /* borrowed: the general path decides */
        if (a->shape != b->shape) {
            int same = PyObject_RichCompareBool(a->shape, b->shape, Py_EQ);
            if (same <= 0)
                return same < 0 ? NULL : Py_NotImplemented;
        }
    } else if ((PyFloat_CheckExact(other) || PyLong_CheckExact(other)) && is_fast_f32(a) &&
               !capture_active()) {
        double v = PyFloat_CheckExact(other) ? PyFloat_AS_DOUBLE(other) : PyLong_AsDouble(other);
        if (v == -1.0 && PyErr_Occurred())
            return NULL; /* OverflowError for a huge int, as the general path raises */
        if (op == OP_MUL)
            map = RILL_MAP_SCALE;
        else if (op == OP_SUB && reflected)
            map = RILL_MAP_RSUB;
        value = (float)(op == OP_SUB && !reflected ? -v : v);
    } else {
        return Py_NotImplemented;
    }
    Py_ssize_t n = PyLong_AsSsize_t(a->numel);
    if (n <= 0)
        return n < 0 && PyErr_Occurred() ? NULL : Py_NotImplemented;

    rill_stream *h = rill_current_stream(NULL);
    EventPool *pool;
    PyObject *s = h == NULL ? NULL : stream_of(h, &pool);
    if (s == NULL)
        return PyErr_Occurred() ? NULL : Py_NotImplemented; /* the general path says why */
    /* Read before tensor_on, which may run Python code (and other threads). */
    rill_device *dev = st.last_device;
    int on = tensor_on(a, dev);
    if (on == 1 && tensors)
        on = tensor_on((Tensor *)other, dev);
    if (on != 1) {
        Py_DECREF(pool);
        Py_DECREF(s);
        return on < 0 ? NULL : Py_NotImplemented;
    }
    /* stream_of's references are strong: another thread may look up
     * another stream while this one runs the op without the GIL. */
    Tensor *t = NULL;
    rill_event *ev = NULL;
    rill_status status = RILL_OK;
    if (pool->count > 0)
        ev = pool->items[--pool->count];
    else
        status = rill_event_create(RILL_EVENT_DEFAULT, &ev);
    float *out = NULL;
    if (status == RILL_OK) {
        const float *x = a->addr, *y = tensors ? ((Tensor *)other)->addr : NULL;
        PyThreadState *ts = PyEval_SaveThread(); /* the GIL: see the top of the file */
        if (map >= 0)
            status = rill_op_map_f32_new(h, (rill_map_op)map, x, value, (size_t)n, ev, &out);
        else if (!tensors)
            status = rill_op_add_scalar_f32_new(h, x, value, (size_t)n, ev, &out);
        else if (op == OP_MUL)
            status = rill_op_mul_f32_new(h, x, y, (size_t)n, ev, &out);
        else
            status = rill_op_add_f32_new(h, x, y, op == OP_SUB ? -1.0f : 1.0f, (size_t)n, ev, &out);
        PyEval_RestoreThread(ts);
        if (status != RILL_OK && pool_push(pool, ev) < 0)
            goto done;
    }
    if (status == RILL_ERROR_OUT_OF_MEMORY) {
        /* The general path allocates after waiting for pending frees. */
        Py_DECREF(pool);
        Py_DECREF(s);
        return Py_NotImplemented;
    }
    if (status != RILL_OK) {
        PyObject *code = PyLong_FromLong(status);
        PyObject *r = code == NULL ? NULL : PyObject_CallOneArg(st.check, code);
        Py_XDECREF(code);
        Py_XDECREF(r);
        goto done;
    }
    t = tensor_make(type, out, ev, h, dev, a->gen, a->shape, a->numel, s);
    if (t == NULL) {
        rill_free_async(out, h);
        pool_push(pool, ev);
    }
done:
    Py_DECREF(pool);
    Py_DECREF(s);
    return (PyObject *)t;
}

/* a (op) b: the fast path when it applies, else the general Python
 * function of the operator (reflected when only b is a tensor). */
static PyObject *binary(PyObject *a, PyObject *b, int op) {
    if (PyObject_TypeCheck(a, &TensorBase_Type)) {
        PyObject *r = fast_op((Tensor *)a, b, op, false);
        if (r != Py_NotImplemented)
            return r;
        return PyObject_CallFunctionObjArgs(st.general[2 * op], a, b, NULL);
    }
    PyObject *r = fast_op((Tensor *)b, a, op, true);
    if (r != Py_NotImplemented)
        return r;
    return PyObject_CallFunctionObjArgs(st.general[2 * op + 1], b, a, NULL);
}

static PyObject *tensor_add(PyObject *a, PyObject *b) {
    return binary(a, b, OP_ADD);
}

static PyObject *tensor_sub(PyObject *a, PyObject *b) {
    return binary(a, b, OP_SUB);
}

static PyObject *tensor_mul(PyObject *a, PyObject *b) {
    return binary(a, b, OP_MUL);
}

static PyObject *tensor_neg(PyObject *a) {
    PyObject *r = fast_op((Tensor *)a, NULL, OP_MUL, false);
    if (r != Py_NotImplemented)
        return r;
    return PyObject_CallOneArg(st.neg, a);
}

static PyNumberMethods tensor_as_number = {
    .nb_add = tensor_add,
    .nb_subtract = tensor_sub,
    .nb_multiply = tensor_mul,
    .nb_negative = tensor_neg,
};

static PyTypeObject TensorBase_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "rill._rill_fast.TensorBase",
    .tp_doc = "The C fields and element-wise fast path of rill.Tensor.",
    .tp_basicsize = sizeof(Tensor),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_traverse = (traverseproc)tensor_traverse,
    .tp_clear = (inquiry)tensor_clear,
    .tp_dealloc = (destructor)tensor_dealloc,
    .tp_finalize = tensor_finalize,
    .tp_weaklistoffset = offsetof(Tensor, weakrefs),
    .tp_as_number = &tensor_as_number,
    .tp_getset = tensor_getset,
    .tp_members = tensor_members,
};

/* ---- new tensors: rill.empty, rill.zeros, rill.ones, rill.full */

/* The shape of new(): a tuple of ints at least 0, as a new reference, and
 * its number of elements; NULL (no exception) when it is not such a tuple
 * or has no elements: the general path decides. */
static PyObject *shape_of(PyObject *shape, Py_ssize_t *numel) {
    if (!PyTuple_CheckExact(shape))
        return NULL;
    Py_ssize_t nd = PyTuple_GET_SIZE(shape), n = 1;
    for (Py_ssize_t i = 0; i < nd; i++) {
        PyObject *d = PyTuple_GET_ITEM(shape, i);
        if (!PyLong_CheckExact(d))
            return NULL;
        Py_ssize_t v = PyLong_AsSsize_t(d);
        if (v <= 0 || v > (PY_SSIZE_T_MAX >> 3) / n) { /* 0, negative, overflow: general */
            PyErr_Clear();
            return NULL;
        }
        n *= v;
    }
    *numel = n;
    return Py_NewRef(shape);
}

/* new(cls, shape, value): a new float32 tensor of class cls (a subclass
 * of TensorBase) and shape (a tuple of ints) on the current stream, as
 * rill.empty makes one (value None) or rill.full (filled with the number
 * value by rill_op_fill_f32, its event recorded after the fill); None when
 * the general path must make it (no elements, a shape or value of another
 * kind, a capture under way, no memory without a wait for pending frees). */
static PyObject *new_tensor(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 3 || !PyType_Check(args[0]) ||
        !PyType_IsSubtype((PyTypeObject *)args[0], &TensorBase_Type)) {
        PyErr_SetString(PyExc_TypeError, "new: pass (a TensorBase subclass, shape, value)");
        return NULL;
    }
    PyTypeObject *type = (PyTypeObject *)args[0];
    PyObject *value = args[2];
    bool fill = value != Py_None;
    if ((fill && !PyFloat_CheckExact(value) && !PyLong_CheckExact(value)) || capture_active())
        Py_RETURN_NONE;
    float fvalue = 0;
    if (fill) {
        double v = PyFloat_CheckExact(value) ? PyFloat_AS_DOUBLE(value) : PyLong_AsDouble(value);
        if (v == -1.0 && PyErr_Occurred()) {
            PyErr_Clear(); /* a huge int: the general path raises */
            Py_RETURN_NONE;
        }
        fvalue = (float)v;
    }
    Py_ssize_t n = 0;
    PyObject *shape = shape_of(args[1], &n);
    if (shape == NULL)
        Py_RETURN_NONE;
    rill_stream *h = rill_current_stream(NULL);
    EventPool *pool;
    PyObject *s = h == NULL ? NULL : stream_of(h, &pool);
    if (s == NULL) {
        Py_DECREF(shape);
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_NONE;
    }
    rill_device *dev = st.last_device; /* other threads may look up another meanwhile */
    Tensor *t = NULL;
    void *mem = NULL;
    rill_event *ev = NULL;
    PyThreadState *ts = PyEval_SaveThread(); /* the GIL: see the top of the file */
    rill_status status = rill_malloc_async((size_t)n * sizeof(float), h, &mem);
    if (status == RILL_OK && fill)
        status = rill_op_fill_f32(h, mem, fvalue, (size_t)n);
    PyEval_RestoreThread(ts);
    if (status == RILL_OK && fill) {
        if (pool->count > 0)
            ev = pool->items[--pool->count];
        else
            status = rill_event_create(RILL_EVENT_DEFAULT, &ev);
        if (status == RILL_OK && (status = rill_event_record(ev, h)) != RILL_OK) {
            pool_push(pool, ev);
            ev = NULL;
        }
    }
    if (status == RILL_ERROR_OUT_OF_MEMORY && mem == NULL) {
        /* The general path allocates after waiting for pending frees. */
        Py_DECREF(shape);
        Py_DECREF(pool);
        Py_DECREF(s);
        Py_RETURN_NONE;
    }
    if (status != RILL_OK) {
        if (mem != NULL)
            rill_free_async(mem, h);
        PyObject *code = PyLong_FromLong(status);
        PyObject *r = code == NULL ? NULL : PyObject_CallOneArg(st.check, code);
        Py_XDECREF(code);
        Py_XDECREF(r);
        goto done;
    }
    PyObject *numel = PyLong_FromSsize_t(n);
    t = numel == NULL ? NULL : tensor_make(type, mem, ev, h, dev, st.generation, shape, numel, s);
    Py_XDECREF(numel);
    if (t == NULL) {
        rill_free_async(mem, h);
        if (ev != NULL)
            pool_push(pool, ev);
    }
done:
    Py_DECREF(shape);
    Py_DECREF(pool);
    Py_DECREF(s);
    return (PyObject *)t;
}

/* ---------------------------------------------------------------- module */

static PyObject *configure(PyObject *module, PyObject *args, PyObject *kwargs) {
    (void)module;
    static char *names[] = {"float32", "cast_ptr", "cast_event", "address_of",     "check",
                            "current", "active",   "add",        "radd",           "sub",
                            "rsub",    "mul",      "rmul",       "finalize_other", "neg",
                            NULL};
    PyObject *v[15];
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "$OOOOOOO!OOOOOOOO:configure", names, &v[0],
                                     &v[1], &v[2], &v[3], &v[4], &v[5], &PyList_Type, &v[6], &v[7],
                                     &v[8], &v[9], &v[10], &v[11], &v[12], &v[13], &v[14]))
        return NULL;
    if (PyList_GET_SIZE(v[6]) != 1) {
        PyErr_SetString(PyExc_ValueError, "configure: active must be a list of one item");
        return NULL;
    }
    PyObject **slots[] = {&st.float32,    &st.cast_ptr,       &st.cast_event, &st.address_of,
                          &st.check,      &st.current,        &st.active,     &st.general[0],
                          &st.general[1], &st.general[2],     &st.general[3], &st.general[4],
                          &st.general[5], &st.finalize_other, &st.neg};
    for (size_t i = 0; i < sizeof slots / sizeof *slots; i++)
        Py_XSETREF(*slots[i], Py_NewRef(v[i]));
    Py_RETURN_NONE;
}

static PyObject *set_generation(PyObject *module, PyObject *arg) {
    (void)module;
    long gen = PyLong_AsLong(arg);
    if (gen == -1 && PyErr_Occurred())
        return NULL;
    st.generation = gen;
    st.last_handle = NULL;
    st.last_device = NULL;
    Py_CLEAR(st.last_stream);
    Py_CLEAR(st.last_pool);
    Py_RETURN_NONE;
}

/* DLPack's tensor as rill's exports lay it out (rill/_cdef.py). */
typedef struct DLManagedTensor {
    void *data;
    int32_t device_type, device_id;
    int32_t ndim;
    uint8_t code, bits;
    uint16_t lanes;
    int64_t *shape, *strides;
    uint64_t byte_offset;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensor *);
} DLManagedTensor;

/* The destructor of rill's DLPack capsules: one still named "dltensor" was
 * never consumed, so the producer's deleter runs. A consumer that refused
 * the capsule has its exception set: it is kept aside meanwhile, as the
 * deleter (Python code) must run without one. */
static void dlpack_capsule_destructor(PyObject *capsule) {
    if (!PyCapsule_IsValid(capsule, "dltensor"))
        return;
    saved_error e = save_error();
    DLManagedTensor *m = PyCapsule_GetPointer(capsule, "dltensor");
    if (m != NULL && m->deleter != NULL)
        m->deleter(m);
    restore_error(e);
}

static PyMethodDef module_methods[] = {
    {"configure", (PyCFunction)(void (*)(void))configure, METH_VARARGS | METH_KEYWORDS,
     "Names the package's objects and functions that the fast path uses."},
    {"new", (PyCFunction)(void (*)(void))new_tensor, METH_FASTCALL,
     "new(cls, shape, value): a new float32 tensor, or None for the general path."},
    {"set_generation", set_generation, METH_O,
     "The runtime generation (rill.shutdown starts a new one); forgets the current stream."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_rill_fast",
    .m_doc = "rill.Tensor's element-wise fast path and fields, in C.",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__rill_fast(void); /* the one symbol the module exports */

PyMODINIT_FUNC PyInit__rill_fast(void) {
    str_closed = PyUnicode_InternFromString("_closed");
    str_events = PyUnicode_InternFromString("_events");
    str_addr = PyUnicode_InternFromString("_addr");
    str_dev = PyUnicode_InternFromString("_dev");
    if (str_closed == NULL || str_events == NULL || str_addr == NULL || str_dev == NULL)
        return NULL;
    if (PyType_Ready(&EventPool_Type) < 0 || PyType_Ready(&TensorBase_Type) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL)
        return NULL;
    PyObject *destructor = PyLong_FromVoidPtr((void *)(uintptr_t)dlpack_capsule_destructor);
    if (destructor == NULL || PyModule_AddObject(m, "capsule_destructor", destructor) < 0) {
        Py_XDECREF(destructor);
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddObjectRef(m, "EventPool", (PyObject *)&EventPool_Type) < 0 ||
        PyModule_AddObjectRef(m, "TensorBase", (PyObject *)&TensorBase_Type) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
