/* SPDX-License-Identifier: MIT */
/*
 * marukvmodule.c -- marukv._marukv, the CPython binding of libmarukv.
 *
 * Three types wrap the C API one to one: Pool (struct mkv_pool), View (a
 * struct mkv_view, read-only buffer protocol) and Buffer (a struct mkv_buf,
 * writable buffer protocol).  The package marukv (python/marukv/) re-exports
 * them and defines the exceptions (_errors.py), which this module looks up
 * by name at import.
 *
 * Safety rules, all checked with the GIL held:
 *  - Every library call runs with the GIL released, counted in pool->calls;
 *    close() takes the handle away first (pool->pool = NULL, so new calls
 *    fail) and waits for the running ones before mkv_pool_close().
 *  - The pages behind a View or Buffer stay mapped while the pool is open,
 *    so a buffer export is safe exactly as long as the pool is: release(),
 *    publish(), abort() and close() refuse with BufferError while an export
 *    of theirs is alive (pool->exports counts all of a pool's).
 *  - A View or Buffer is taken out of its object (a local copy, the object
 *    marked released or busy) before the GIL is dropped, so two threads
 *    never hand the same struct to the library.
 *  - In a child after fork() the library refuses the inherited handle with
 *    MKV_E_INVAL; close() and deallocation there skip the wait for calls
 *    that were running in the parent's threads.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <marukv.h>

typedef struct {
	PyObject_HEAD
	struct mkv_pool *pool;	/* NULL once closed */
	pid_t pid;		/* the process that opened it */
	int readonly;
	Py_ssize_t calls;	/* library calls running with the GIL released */
	Py_ssize_t exports;	/* live buffer exports of its views and buffers */
} PoolObject;

typedef struct {
	PyObject_HEAD
	PoolObject *pool;
	struct mkv_view view;
	int live;
	Py_ssize_t exports;
} ViewObject;

enum buf_state { BUF_LIVE, BUF_BUSY, BUF_DONE };

typedef struct {
	PyObject_HEAD
	PoolObject *pool;
	struct mkv_buf buf;
	enum buf_state state;
	Py_ssize_t exports;
} BufferObject;

enum ticket_state { TICKET_PENDING, TICKET_BUSY, TICKET_DONE };

typedef struct {
	PyObject_HEAD
	PoolObject *pool;
	struct mkv_ticket ticket;
	enum ticket_state state;
} TicketObject;

static PyTypeObject Pool_Type;
static PyTypeObject View_Type;
static PyTypeObject Buffer_Type;
static PyTypeObject Ticket_Type;

/* Errors */

/*
 * Every code marukv.h documents, its constant's name and the exception for
 * it (a class of marukv._errors, looked up at import and kept for good).
 */
static struct {
	int code;
	const char *name;	/* the constant, E_<name> */
	const char *exc;
	PyObject *cls;
} codes[] = {
	{ MKV_E_INVAL, "INVAL", "InvalidArgument", NULL },
	{ MKV_E_NOMEM, "NOMEM", "NoMemory", NULL },
	{ MKV_E_NOSPC, "NOSPC", "NoSpace", NULL },
	{ MKV_E_EXISTS, "EXISTS", "Exists", NULL },
	{ MKV_E_NOENT, "NOENT", "NoPool", NULL },
	{ MKV_E_USERS, "USERS", "TooManyClients", NULL },
	{ MKV_E_IO, "IO", "IOFailure", NULL },
	{ MKV_E_TIMEDOUT, "TIMEDOUT", "TimedOut", NULL },
	{ MKV_E_PERM, "PERM", "Permission", NULL },
	{ MKV_E_NOTFOUND, "NOTFOUND", "NotFound", NULL },
	{ MKV_E_RDONLY, "RDONLY", "ReadOnly", NULL },
	{ MKV_E_NOTPOOL, "NOTPOOL", "NotPool", NULL },
	{ MKV_E_CORRUPT, "CORRUPT", "Corrupt", NULL },
	{ MKV_E_VERSION, "VERSION", "VersionMismatch", NULL },
	{ MKV_E_INTERNAL, "INTERNAL", "Internal", NULL },
	{ MKV_E_EXPIRED, "EXPIRED", "Expired", NULL },
	{ MKV_E_FRAME_MAGIC, "FRAME_MAGIC", "FrameMagic", NULL },
	{ MKV_E_FRAME_VERSION, "FRAME_VERSION", "FrameVersion", NULL },
	{ MKV_E_FRAME_SHORT, "FRAME_SHORT", "FrameShort", NULL },
	{ MKV_E_FRAME_CHECKSUM, "FRAME_CHECKSUM", "FrameChecksum", NULL },
	{ MKV_E_FRAME_BODY, "FRAME_BODY", "FrameBody", NULL },
	{ MKV_E_REMOTE, "REMOTE", "RemoteFailed", NULL },
};
#define NCODES (sizeof(codes) / sizeof(codes[0]))
static PyObject *Error;

/* Raise the exception for @code with the message @msg; returns NULL. */
static PyObject *
raise_code(int code, const char *msg)
{
	PyObject *cls = Error, *exc;

	for (size_t i = 0; i < NCODES; i++)
		if (codes[i].code == code)
			cls = codes[i].cls;
	/* The message may hold a path in any encoding. */
	exc = PyObject_CallFunction(cls, "iN", code,
			PyUnicode_DecodeUTF8(msg, (Py_ssize_t)strlen(msg), "replace"));
	if (exc) {
		PyErr_SetObject(cls, exc);
		Py_DECREF(exc);
	}
	return NULL;
}

/*
 * Raise the exception for @code, with the calling thread's message from the
 * library (it must be the thread's last mkv_* call); returns NULL.
 */
static PyObject *
raise_mkv(int code)
{
	const char *msg = mkv_errormsg();

	return raise_code(code, *msg ? msg : mkv_strerror(code));
}

static PyObject *
raise_closed(void)
{
	PyErr_SetString(PyExc_ValueError, "operation on a closed pool");
	return NULL;
}

/* Pool calls */

/* Count a call that will drop the GIL; fails (ValueError) on a closed pool. */
static int
call_enter(PoolObject *p)
{
	if (p->pool == NULL) {
		raise_closed();
		return -1;
	}
	p->calls++;
	return 0;
}

static void
call_leave(PoolObject *p)
{
	p->calls--;
}

/*
 * Take the handle away and close it: no new call starts, the running ones
 * (in this process) finish first.  Nothing to do if closed already.
 */
static void
pool_shut(PoolObject *self)
{
	struct mkv_pool *h = self->pool;

	if (h == NULL)
		return;
	self->pool = NULL;
	if (self->pid == getpid()) {
		while (self->calls > 0) {
			Py_BEGIN_ALLOW_THREADS
			usleep(1000);
			Py_END_ALLOW_THREADS
		}
	}
	Py_BEGIN_ALLOW_THREADS
	mkv_pool_close(&h);
	Py_END_ALLOW_THREADS
}

/* Keys */

/* Keys of a sequence as buffers, and as the struct mkv_key array over them. */
struct keyset {
	Py_ssize_t n;
	Py_buffer *bufs;
	struct mkv_key *keys;
};

static void
keyset_release(struct keyset *ks)
{
	for (Py_ssize_t i = 0; i < ks->n; i++)
		PyBuffer_Release(&ks->bufs[i]);
	PyMem_Free(ks->bufs);
	PyMem_Free(ks->keys);
	ks->n = 0;
	ks->bufs = NULL;
	ks->keys = NULL;
}

static int
keyset_get(PyObject *seq, struct keyset *ks)
{
	PyObject *fast = PySequence_Fast(seq, "keys must be a sequence of bytes-like objects");
	Py_ssize_t n;

	ks->n = 0;
	ks->bufs = NULL;
	ks->keys = NULL;
	if (fast == NULL)
		return -1;
	n = PySequence_Fast_GET_SIZE(fast);
	ks->bufs = PyMem_New(Py_buffer, n ? n : 1);
	ks->keys = PyMem_New(struct mkv_key, n ? n : 1);
	if (ks->bufs == NULL || ks->keys == NULL) {
		PyErr_NoMemory();
		goto fail;
	}
	for (; ks->n < n; ks->n++) {
		Py_buffer *b = &ks->bufs[ks->n];

		if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(fast, ks->n), b, PyBUF_SIMPLE) < 0)
			goto fail;
		ks->keys[ks->n] = (struct mkv_key){ .data = b->buf, .len = (size_t)b->len };
	}
	Py_DECREF(fast);
	return 0;
fail:
	Py_DECREF(fast);
	keyset_release(ks);
	return -1;
}

/* An optional key (None: none) as a buffer; b->buf is NULL for None. */
static int
optkey_get(PyObject *obj, Py_buffer *b)
{
	if (obj == NULL || obj == Py_None) {
		memset(b, 0, sizeof(*b));
		return 0;
	}
	return PyObject_GetBuffer(obj, b, PyBUF_SIMPLE);
}

static void
optkey_release(Py_buffer *b)
{
	if (b->obj)
		PyBuffer_Release(b);
}

/* View */

static PyObject *
view_wrap(PoolObject *pool, const struct mkv_view *v)
{
	ViewObject *self = PyObject_New(ViewObject, &View_Type);

	if (self == NULL)
		return NULL;
	Py_INCREF(pool);
	self->pool = pool;
	self->view = *v;
	self->live = 1;
	self->exports = 0;
	return (PyObject *)self;
}

/* Give one view back to the library, with the GIL released. */
static int
view_give_back(PoolObject *pool, struct mkv_view *v)
{
	int rc;

	if (call_enter(pool) < 0)
		return -1;
	Py_BEGIN_ALLOW_THREADS
	rc = mkv_release(pool->pool, v);
	Py_END_ALLOW_THREADS
	call_leave(pool);
	if (rc < 0) {
		raise_mkv(rc);
		return -1;
	}
	return 0;
}

/* A live view of an open pool, or ValueError. */
static int
view_check(ViewObject *self)
{
	if (!self->live || self->pool->pool == NULL) {
		PyErr_SetString(PyExc_ValueError, self->live ? "view of a closed pool"
				: "operation on a released view");
		return -1;
	}
	return 0;
}

static PyObject *
View_release(ViewObject *self, PyObject *Py_UNUSED(ignored))
{
	struct mkv_view v;

	if (self->exports > 0) {
		PyErr_SetString(PyExc_BufferError,
				"cannot release a view while it is exported (a memoryview or array over it is alive)");
		return NULL;
	}
	if (!self->live)
		Py_RETURN_NONE;
	self->live = 0;
	if (self->pool->pool == NULL)	/* close() released it */
		Py_RETURN_NONE;
	v = self->view;
	memset(&self->view, 0, sizeof(self->view));
	if (view_give_back(self->pool, &v) < 0)
		return NULL;
	Py_RETURN_NONE;
}

static PyObject *
View_enter(ViewObject *self, PyObject *Py_UNUSED(ignored))
{
	if (view_check(self) < 0)
		return NULL;
	Py_INCREF(self);
	return (PyObject *)self;
}

static PyObject *
View_exit(ViewObject *self, PyObject *Py_UNUSED(args))
{
	return View_release(self, NULL);
}

static void
View_dealloc(ViewObject *self)
{
	PoolObject *pool = self->pool;

	/* No export can be alive: each holds a reference to the view. */
	if (self->live && pool->pool != NULL && pool->pid == getpid()) {
		PyObject *type, *value, *tb;

		PyErr_Fetch(&type, &value, &tb);
		if (view_give_back(pool, &self->view) < 0)
			PyErr_WriteUnraisable((PyObject *)self);
		PyErr_Restore(type, value, tb);
	}
	Py_DECREF(pool);
	PyObject_Free(self);
}

static Py_ssize_t
View_len(ViewObject *self)
{
	if (view_check(self) < 0)
		return -1;
	return (Py_ssize_t)self->view.len;
}

static int
View_getbuffer(ViewObject *self, Py_buffer *view, int flags)
{
	if (view_check(self) < 0) {
		view->obj = NULL;
		return -1;
	}
	if (PyBuffer_FillInfo(view, (PyObject *)self, (void *)self->view.data,
			(Py_ssize_t)self->view.len, 1, flags) < 0)
		return -1;
	self->exports++;
	self->pool->exports++;
	return 0;
}

static void
View_releasebuffer(ViewObject *self, Py_buffer *Py_UNUSED(view))
{
	self->exports--;
	self->pool->exports--;
}

static PyObject *
View_get_released(ViewObject *self, void *Py_UNUSED(closure))
{
	return PyBool_FromLong(!self->live || self->pool->pool == NULL);
}

static PyObject *
View_get_address(ViewObject *self, void *Py_UNUSED(closure))
{
	if (view_check(self) < 0)
		return NULL;
	return PyLong_FromVoidPtr((void *)self->view.data);
}

static PyObject *
View_repr(ViewObject *self)
{
	if (!self->live || self->pool->pool == NULL)
		return PyUnicode_FromString("<marukv.View released>");
	return PyUnicode_FromFormat("<marukv.View of %zu bytes>", self->view.len);
}

/*
 * memmove with the GIL released, counted meanwhile as one more export of
 * the view or buffer whose count is @exports and of its pool: release(),
 * publish(), abort() and close() refuse (BufferError) in other threads
 * until it is done.
 */
static void
copy_exported(Py_ssize_t *exports, PoolObject *pool, void *dst, const void *src, size_t n)
{
	(*exports)++;
	pool->exports++;
	Py_BEGIN_ALLOW_THREADS
	memmove(dst, src, n);
	Py_END_ALLOW_THREADS
	(*exports)--;
	pool->exports--;
}

/*
 * Copy the view's bytes into the start of @dst with the GIL released.  The
 * copy counts as an export of the view for its duration, so release() and
 * the pool's close() refuse (BufferError) while it runs in another thread.
 */
static PyObject *
View_copy_into(ViewObject *self, PyObject *dst)
{
	Py_buffer b;
	size_t n;

	/* Before the checks: a buffer export could run code that changes the view. */
	if (PyObject_GetBuffer(dst, &b, PyBUF_WRITABLE) < 0)
		return NULL;
	if (view_check(self) < 0) {
		PyBuffer_Release(&b);
		return NULL;
	}
	n = self->view.len;
	if ((size_t)b.len < n) {
		PyErr_Format(PyExc_ValueError,
				"destination of %zd bytes is shorter than the view (%zu bytes)", b.len, n);
		PyBuffer_Release(&b);
		return NULL;
	}
	copy_exported(&self->exports, self->pool, b.buf, self->view.data, n);
	PyBuffer_Release(&b);
	return PyLong_FromSize_t(n);
}

static PyMethodDef View_methods[] = {
	{ "release", (PyCFunction)View_release, METH_NOARGS,
	  "release()\n--\n\n"
	  "End the view: the pool may reuse its pages once no other reader holds\n"
	  "them.  Does nothing if the view is released already (or its pool is\n"
	  "closed).  Raises BufferError, and keeps the view, while a memoryview,\n"
	  "numpy array or tensor made from it is alive (as mmap.close() does):\n"
	  "drop those first.  Raises Expired if this process's client was judged\n"
	  "dead while the view was held: whatever was read from it may be wrong." },
	{ "copy_into", (PyCFunction)View_copy_into, METH_O,
	  "copy_into(dst)\n--\n\n"
	  "Copy the value into the start of dst, any writable C-contiguous buffer\n"
	  "(bytearray, memoryview, numpy array...) of at least len(view) bytes, and\n"
	  "return the number of bytes copied.  The copy runs with the GIL released,\n"
	  "so other threads go on meanwhile; unlike memoryview slice assignment it\n"
	  "ignores the buffer's format.  Raises ValueError if dst is too short or\n"
	  "the view released, BufferError if dst is read-only, TypeError if it is\n"
	  "not a buffer." },
	{ "__enter__", (PyCFunction)View_enter, METH_NOARGS, "Return the view itself." },
	{ "__exit__", (PyCFunction)View_exit, METH_VARARGS, "Release the view." },
	{ NULL, NULL, 0, NULL }
};

static PyGetSetDef View_getset[] = {
	{ "released", (getter)View_get_released, NULL,
	  "True once the view is released or its pool closed.", NULL },
	{ "address", (getter)View_get_address, NULL,
	  "The address of the value's first byte in this process, for an array\n"
	  "over it that does not export the view (so release() is not refused\n"
	  "while it lives): the caller must end every use of such an array\n"
	  "before release().  ValueError once released.", NULL },
	{ NULL, NULL, NULL, NULL, NULL }
};

static PySequenceMethods View_as_sequence = {
	.sq_length = (lenfunc)View_len,
};

static PyBufferProcs View_as_buffer = {
	.bf_getbuffer = (getbufferproc)View_getbuffer,
	.bf_releasebuffer = (releasebufferproc)View_releasebuffer,
};

static PyTypeObject View_Type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "marukv.View",
	.tp_basicsize = sizeof(ViewObject),
	.tp_dealloc = (destructor)View_dealloc,
	.tp_repr = (reprfunc)View_repr,
	.tp_as_sequence = &View_as_sequence,
	.tp_as_buffer = &View_as_buffer,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc =
	"A zero-copy, read-only view of a published value, from Pool.get() or\n"
	"Pool.get_batch().\n\n"
	"It supports the buffer protocol: bytes(v), memoryview(v),\n"
	"numpy.frombuffer(v, dtype) and torch.frombuffer(v, dtype=...) read the\n"
	"value in the pool's shared memory without copying it.  Its bytes stay\n"
	"valid and unchanged until release(), even if another process deletes or\n"
	"evicts the key meanwhile.  len(v) is the value's length.  Use it as a\n"
	"context manager (with pool.get(key) as v: ...) to release it at the end\n"
	"of the block; a view that is garbage collected is released too, but\n"
	"holding views pins pages, so release them promptly.  Any use of a\n"
	"released view, or of a view of a closed pool, raises ValueError.",
	.tp_methods = View_methods,
	.tp_getset = View_getset,
};

/* Buffer */

static int
buf_check(BufferObject *self)
{
	if (self->pool->pool == NULL) {
		raise_closed();
		return -1;
	}
	if (self->state != BUF_LIVE) {
		PyErr_SetString(PyExc_ValueError, self->state == BUF_BUSY
				? "buffer is being published or aborted by another thread"
				: "buffer was published or aborted already");
		return -1;
	}
	return 0;
}

/* A live buffer of @pool with no export, marked busy; else an exception. */
static int
buf_take(PoolObject *pool, PyObject *obj, struct mkv_buf *out)
{
	BufferObject *b = (BufferObject *)obj;

	if (!PyObject_TypeCheck(obj, &Buffer_Type)) {
		PyErr_Format(PyExc_TypeError, "expected a marukv.Buffer, not %.100s",
				Py_TYPE(obj)->tp_name);
		return -1;
	}
	if (b->pool != pool) {
		PyErr_SetString(PyExc_ValueError, "buffer of another pool");
		return -1;
	}
	if (buf_check(b) < 0)
		return -1;
	if (b->exports > 0) {
		PyErr_SetString(PyExc_BufferError,
				"buffer is still exported (a memoryview or array over it is alive): drop it before publishing or aborting");
		return -1;
	}
	b->state = BUF_BUSY;
	*out = b->buf;
	return 0;
}

/* After the library had it: consumed (zeroed by the library) or the caller's again. */
static void
buf_settle(PyObject *obj, const struct mkv_buf *after)
{
	BufferObject *b = (BufferObject *)obj;

	if (after->data == NULL) {
		b->state = BUF_DONE;
		memset(&b->buf, 0, sizeof(b->buf));
	} else {
		b->state = BUF_LIVE;
		b->buf = *after;
	}
}

static void
Buffer_dealloc(BufferObject *self)
{
	PoolObject *pool = self->pool;

	if (self->state == BUF_LIVE && pool->pool != NULL && pool->pid == getpid()) {
		pool->calls++;
		Py_BEGIN_ALLOW_THREADS
		mkv_abort(pool->pool, &self->buf);
		Py_END_ALLOW_THREADS
		pool->calls--;
	}
	Py_DECREF(pool);
	PyObject_Free(self);
}

static Py_ssize_t
Buffer_len(BufferObject *self)
{
	if (buf_check(self) < 0)
		return -1;
	return (Py_ssize_t)self->buf.len;
}

static int
Buffer_getbuffer(BufferObject *self, Py_buffer *view, int flags)
{
	if (buf_check(self) < 0) {
		view->obj = NULL;
		return -1;
	}
	if (PyBuffer_FillInfo(view, (PyObject *)self, self->buf.data,
			(Py_ssize_t)self->buf.len, 0, flags) < 0)
		return -1;
	self->exports++;
	self->pool->exports++;
	return 0;
}

static void
Buffer_releasebuffer(BufferObject *self, Py_buffer *Py_UNUSED(view))
{
	self->exports--;
	self->pool->exports--;
}

static PyObject *Pool_abort(PoolObject *self, PyObject *buf);

static PyObject *
Buffer_enter(BufferObject *self, PyObject *Py_UNUSED(ignored))
{
	if (buf_check(self) < 0)
		return NULL;
	Py_INCREF(self);
	return (PyObject *)self;
}

static PyObject *
Buffer_exit(BufferObject *self, PyObject *Py_UNUSED(args))
{
	if (self->state != BUF_LIVE || self->pool->pool == NULL)
		Py_RETURN_NONE;
	return Pool_abort(self->pool, (PyObject *)self);
}

static PyObject *
Buffer_get_consumed(BufferObject *self, void *Py_UNUSED(closure))
{
	return PyBool_FromLong(self->state == BUF_DONE || self->pool->pool == NULL);
}

static PyObject *
Buffer_get_address(BufferObject *self, void *Py_UNUSED(closure))
{
	if (buf_check(self) < 0)
		return NULL;
	return PyLong_FromVoidPtr(self->buf.data);
}

static PyObject *
Buffer_repr(BufferObject *self)
{
	if (self->state == BUF_DONE || self->pool->pool == NULL)
		return PyUnicode_FromString("<marukv.Buffer consumed>");
	return PyUnicode_FromFormat("<marukv.Buffer of %zu bytes>", self->buf.len);
}

/*
 * Copy @src's bytes into the start of the buffer with the GIL released; an
 * export of the buffer meanwhile, so publish() and abort() refuse.
 */
static PyObject *
Buffer_fill_from(BufferObject *self, PyObject *src)
{
	Py_buffer b;
	Py_ssize_t n;

	if (PyObject_GetBuffer(src, &b, PyBUF_SIMPLE) < 0)
		return NULL;
	if (buf_check(self) < 0) {
		PyBuffer_Release(&b);
		return NULL;
	}
	if ((size_t)b.len > self->buf.len) {
		PyErr_Format(PyExc_ValueError,
				"source of %zd bytes is longer than the buffer (%zu bytes)", b.len,
				self->buf.len);
		PyBuffer_Release(&b);
		return NULL;
	}
	n = b.len;
	copy_exported(&self->exports, self->pool, self->buf.data, b.buf, (size_t)n);
	PyBuffer_Release(&b);
	return PyLong_FromSsize_t(n);
}

static PyMethodDef Buffer_methods[] = {
	{ "fill_from", (PyCFunction)Buffer_fill_from, METH_O,
	  "fill_from(src)\n--\n\n"
	  "Copy the bytes of src, any C-contiguous buffer (bytes, memoryview, numpy\n"
	  "array...) no longer than the buffer, into its start and return their\n"
	  "number.  The copy runs with the GIL released, so other threads go on\n"
	  "meanwhile; unlike memoryview slice assignment it ignores the source's\n"
	  "format.  Raises ValueError if src is too long or the buffer consumed,\n"
	  "TypeError if src is not a buffer." },
	{ "__enter__", (PyCFunction)Buffer_enter, METH_NOARGS, "Return the buffer itself." },
	{ "__exit__", (PyCFunction)Buffer_exit, METH_VARARGS,
	  "Abort the buffer unless it was published (or aborted) in the block." },
	{ NULL, NULL, 0, NULL }
};

static PyGetSetDef Buffer_getset[] = {
	{ "consumed", (getter)Buffer_get_consumed, NULL,
	  "True once the buffer is published or aborted, or its pool closed.", NULL },
	{ "address", (getter)Buffer_get_address, NULL,
	  "The address of the buffer's first byte in this process, for an array\n"
	  "over it that does not export the buffer (so publish() and abort() are\n"
	  "not refused while it lives): the caller must write through it only\n"
	  "before publish(), and end every use of it before the value is\n"
	  "deleted or evicted, or the buffer aborted.  ValueError once consumed.",
	  NULL },
	{ NULL, NULL, NULL, NULL, NULL }
};

static PySequenceMethods Buffer_as_sequence = {
	.sq_length = (lenfunc)Buffer_len,
};

static PyBufferProcs Buffer_as_buffer = {
	.bf_getbuffer = (getbufferproc)Buffer_getbuffer,
	.bf_releasebuffer = (releasebufferproc)Buffer_releasebuffer,
};

static PyTypeObject Buffer_Type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "marukv.Buffer",
	.tp_basicsize = sizeof(BufferObject),
	.tp_dealloc = (destructor)Buffer_dealloc,
	.tp_repr = (reprfunc)Buffer_repr,
	.tp_as_sequence = &Buffer_as_sequence,
	.tp_as_buffer = &Buffer_as_buffer,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc =
	"A writable buffer of pool pages, from Pool.alloc(n); len(b) == n.\n\n"
	"Fill it in place through the buffer protocol, e.g.\n"
	"  memoryview(b)[:] = data\n"
	"  numpy.copyto(numpy.frombuffer(b, numpy.uint8), array)\n"
	"  torch.frombuffer(b, dtype=torch.uint8).copy_(tensor)\n"
	"(each writes straight into shared memory), then hand it to\n"
	"Pool.publish() or Pool.publish_chain(), or give it back with\n"
	"Pool.abort().  Those refuse with BufferError while a memoryview or array\n"
	"over the buffer is alive: once published, the pages belong to the value,\n"
	"which must not change, so drop them first (del, or a with block on the\n"
	"memoryview).  Publishing or aborting consumes the buffer; any later use\n"
	"raises ValueError.  As a context manager it is aborted at the end of the\n"
	"block unless it was published there; a buffer that is garbage collected\n"
	"unpublished is aborted too.",
	.tp_methods = Buffer_methods,
	.tp_getset = Buffer_getset,
};

/* Ticket */

/* A ticket never waited for is waited for here, so its request entry comes free. */
static void
Ticket_dealloc(TicketObject *self)
{
	PoolObject *pool = self->pool;

	if (self->state == TICKET_PENDING && pool->pool != NULL && pool->pid == getpid()) {
		pool->calls++;
		Py_BEGIN_ALLOW_THREADS
		mkv_wait(pool->pool, &self->ticket);
		Py_END_ALLOW_THREADS
		pool->calls--;
	}
	Py_DECREF(pool);
	PyObject_Free(self);
}

static PyObject *
Ticket_get_done(TicketObject *self, void *Py_UNUSED(closure))
{
	return PyBool_FromLong(self->state == TICKET_DONE || self->pool->pool == NULL);
}

static PyGetSetDef Ticket_getset[] = {
	{ "done", (getter)Ticket_get_done, NULL,
	  "True once the ticket was waited for, or its pool closed.", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

static PyTypeObject Ticket_Type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "marukv.Ticket",
	.tp_basicsize = sizeof(TicketObject),
	.tp_dealloc = (destructor)Ticket_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc =
	"A publish in flight, from Pool.publish_async(): Pool.wait(ticket) gives\n"
	"its result.  Wait for it once; after TimedOut it may be waited for\n"
	"again.  A ticket garbage collected unwaited is waited for then, its\n"
	"result dropped.  Closing the pool gives up on its pending tickets (the\n"
	"publishes may still commit), and waiting for one then raises ValueError.",
	.tp_getset = Ticket_getset,
};

/* Pool: opening */

/* A PyArg "O&" converter to unsigned int: TypeError, OverflowError when negative or too large. */
static int
to_uint(PyObject *obj, void *out)
{
	unsigned long v;

	if (!PyLong_Check(obj)) {
		PyErr_Format(PyExc_TypeError, "expected an int, not %.100s", Py_TYPE(obj)->tp_name);
		return 0;
	}
	v = PyLong_AsUnsignedLong(obj);
	if (v == (unsigned long)-1 && PyErr_Occurred())
		return 0;
	if (v > UINT_MAX) {
		PyErr_SetString(PyExc_OverflowError, "int too large");
		return 0;
	}
	*(unsigned int *)out = (unsigned int)v;
	return 1;
}

/* An unsigned integer option no larger than @max into *out. */
static int
opt_uint(PyObject *obj, const char *name, uint64_t max, uint64_t *out)
{
	unsigned long long v;

	if (!PyLong_Check(obj)) {
		PyErr_Format(PyExc_TypeError, "%s must be an int, not %.100s", name,
				Py_TYPE(obj)->tp_name);
		return -1;
	}
	v = PyLong_AsUnsignedLongLong(obj);
	if (v == (unsigned long long)-1 && PyErr_Occurred())
		return -1;
	if (v > max) {
		PyErr_Format(PyExc_OverflowError, "%s is too large", name);
		return -1;
	}
	*out = v;
	return 0;
}

/* Creation and open options, as mkv_opts; an exception on error. */
struct popts {
	PyObject *data_size, *page_size, *max_clients, *registry_size, *lease_period_ms,
		*watermarks, *client_timeout_ms, *node, *group, *max_nodes, *coherence;
};

static int
opts_fill(struct mkv_opts *o, const struct popts *p)
{
	static const struct {
		size_t off;
		const char *name;
		uint64_t max;
		int kind;
	} ints[] = {
		{ offsetof(struct popts, data_size), "data_size", UINT64_MAX, 0 },
		{ offsetof(struct popts, page_size), "page_size", UINT32_MAX, 1 },
		{ offsetof(struct popts, max_clients), "max_clients", UINT32_MAX, 2 },
		{ offsetof(struct popts, registry_size), "registry_size", UINT64_MAX, 3 },
		{ offsetof(struct popts, lease_period_ms), "lease_period_ms", UINT32_MAX, 4 },
		{ offsetof(struct popts, client_timeout_ms), "client_timeout_ms", UINT32_MAX, 5 },
		{ offsetof(struct popts, group), "group", (gid_t)-1, 6 },
		{ offsetof(struct popts, max_nodes), "max_nodes", UINT32_MAX, 7 },
	};
	unsigned int low, high;
	uint64_t v;
	int rc = 0;

	for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++) {
		PyObject *obj = *(PyObject **)((const char *)p + ints[i].off);

		if (obj == NULL || obj == Py_None)
			continue;
		if (opt_uint(obj, ints[i].name, ints[i].max, &v) < 0)
			return -1;
		switch (ints[i].kind) {
		case 0: rc = mkv_opts_set_data_size(o, v); break;
		case 1: rc = mkv_opts_set_page_size(o, (uint32_t)v); break;
		case 2: rc = mkv_opts_set_max_clients(o, (uint32_t)v); break;
		case 3: rc = mkv_opts_set_registry_size(o, v); break;
		case 4: rc = mkv_opts_set_lease_period(o, (uint32_t)v); break;
		case 5: rc = mkv_opts_set_client_timeout(o, (uint32_t)v); break;
		case 6: rc = mkv_opts_set_group(o, (gid_t)v); break;
		case 7: rc = mkv_opts_set_max_nodes(o, (uint32_t)v); break;
		}
		if (rc < 0) {
			raise_mkv(rc);
			return -1;
		}
	}
	if (p->watermarks && p->watermarks != Py_None) {
		if (!PyTuple_Check(p->watermarks) || PyTuple_GET_SIZE(p->watermarks) != 2) {
			PyErr_SetString(PyExc_TypeError, "watermarks must be a (low, high) tuple");
			return -1;
		}
		if (!to_uint(PyTuple_GET_ITEM(p->watermarks, 0), &low) ||
		    !to_uint(PyTuple_GET_ITEM(p->watermarks, 1), &high))
			return -1;
		if ((rc = mkv_opts_set_watermarks(o, low, high)) < 0) {
			raise_mkv(rc);
			return -1;
		}
	}
	if (p->coherence && p->coherence != Py_None) {
		const char *name = PyUnicode_Check(p->coherence) ?
				PyUnicode_AsUTF8(p->coherence) : NULL;
		enum mkv_coherence c;

		if (name == NULL) {
			if (!PyErr_Occurred())
				PyErr_SetString(PyExc_TypeError, "coherence must be a str");
			return -1;
		}
		/* the names the stat dict gives */
		if (strcmp(name, mkv_coherence_name(MKV_COHERENT)) == 0) {
			c = MKV_COHERENT;
		} else if (strcmp(name, mkv_coherence_name(MKV_NONCOHERENT)) == 0) {
			c = MKV_NONCOHERENT;
		} else {
			PyErr_Format(PyExc_ValueError, "coherence must be '%s' or '%s', not '%s'",
					mkv_coherence_name(MKV_COHERENT),
					mkv_coherence_name(MKV_NONCOHERENT), name);
			return -1;
		}
		if ((rc = mkv_opts_set_coherence(o, c)) < 0) {
			raise_mkv(rc);
			return -1;
		}
	}
	if (p->node && p->node != Py_None) {
		const char *name;

		if (!PyUnicode_Check(p->node)) {
			PyErr_SetString(PyExc_TypeError, "node must be a str");
			return -1;
		}
		if ((name = PyUnicode_AsUTF8(p->node)) == NULL)
			return -1;
		if ((rc = mkv_opts_set_node(o, name)) < 0) {
			raise_mkv(rc);
			return -1;
		}
	}
	return 0;
}

static PyObject *
Pool_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = { "path", "create", "readonly", "verify", "nochecksum",
		"data_size", "page_size", "max_clients", "registry_size", "lease_period_ms",
		"watermarks", "client_timeout_ms", "node", "group", "max_nodes", "coherence", NULL };
	PyObject *path = NULL, *fspath = NULL;
	int create = 0, readonly = 0, verify = 0, nochecksum = 0, rc;
	struct popts po = { 0 };
	struct mkv_opts *opts = NULL;
	struct mkv_pool *h = NULL;
	const char *cpath = NULL;
	unsigned flags;
	PoolObject *self;

	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|Opppp$OOOOOOOOOOO:Pool", kwlist,
			&path, &create, &readonly, &verify, &nochecksum,
			&po.data_size, &po.page_size, &po.max_clients, &po.registry_size,
			&po.lease_period_ms, &po.watermarks, &po.client_timeout_ms, &po.node,
			&po.group, &po.max_nodes, &po.coherence))
		return NULL;
	if (path && path != Py_None) {
		if (!PyUnicode_FSConverter(path, &fspath))
			return NULL;
		cpath = PyBytes_AS_STRING(fspath);
	}
	if ((rc = mkv_opts_new(&opts)) < 0) {
		Py_XDECREF(fspath);
		return raise_mkv(rc);
	}
	if (opts_fill(opts, &po) < 0) {
		mkv_opts_delete(&opts);
		Py_XDECREF(fspath);
		return NULL;
	}
	flags = (create ? MKV_CREATE : 0) | (readonly ? MKV_RDONLY : 0) |
		(verify ? MKV_VERIFY : 0) | (nochecksum ? MKV_NOCHECKSUM : 0);
	Py_BEGIN_ALLOW_THREADS
	rc = mkv_pool_open(cpath, flags, opts, &h);
	Py_END_ALLOW_THREADS
	mkv_opts_delete(&opts);
	Py_XDECREF(fspath);
	if (rc < 0)
		return raise_mkv(rc);
	self = (PoolObject *)type->tp_alloc(type, 0);
	if (self == NULL) {
		Py_BEGIN_ALLOW_THREADS
		mkv_pool_close(&h);
		Py_END_ALLOW_THREADS
		return NULL;
	}
	self->pool = h;
	self->pid = getpid();
	self->readonly = readonly;
	return (PyObject *)self;
}

static void
Pool_dealloc(PoolObject *self)
{
	/* Views and buffers hold references: none is left, nor any export. */
	pool_shut(self);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
Pool_close(PoolObject *self, PyObject *Py_UNUSED(ignored))
{
	if (self->pool != NULL && self->exports > 0) {
		PyErr_SetString(PyExc_BufferError,
				"cannot close a pool while its views or buffers are exported (memoryviews or arrays over them are alive)");
		return NULL;
	}
	pool_shut(self);
	Py_RETURN_NONE;
}

static PyObject *
Pool_enter(PoolObject *self, PyObject *Py_UNUSED(ignored))
{
	if (self->pool == NULL)
		return raise_closed();
	Py_INCREF(self);
	return (PyObject *)self;
}

static PyObject *
Pool_exit(PoolObject *self, PyObject *Py_UNUSED(args))
{
	return Pool_close(self, NULL);
}

/* Pool: writing */

static PyObject *
Pool_put(PoolObject *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = { "key", "value", NULL };
	Py_buffer key, val;
	int rc;

	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*y*:put", kwlist, &key, &val))
		return NULL;
	if (call_enter(self) < 0) {
		PyBuffer_Release(&key);
		PyBuffer_Release(&val);
		return NULL;
	}
	Py_BEGIN_ALLOW_THREADS
	rc = mkv_put(self->pool, key.buf, (size_t)key.len, val.buf, (size_t)val.len);
	Py_END_ALLOW_THREADS
	call_leave(self);
	PyBuffer_Release(&key);
	PyBuffer_Release(&val);
	if (rc < 0)
		return raise_mkv(rc);
	Py_RETURN_NONE;
}

static PyObject *
Pool_alloc(PoolObject *self, PyObject *arg)
{
	struct mkv_buf buf;
	BufferObject *b;
	PyObject *idx = PyNumber_Index(arg);
	size_t n;
	int rc;

	if (idx == NULL)
		return NULL;
	n = PyLong_AsSize_t(idx);
	Py_DECREF(idx);
	if (n == (size_t)-1 && PyErr_Occurred())
		return NULL;
	if (call_enter(self) < 0)
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	rc = mkv_alloc(self->pool, n, &buf);
	Py_END_ALLOW_THREADS
	call_leave(self);
	if (rc < 0)
		return raise_mkv(rc);
	b = PyObject_New(BufferObject, &Buffer_Type);
	if (b == NULL) {
		if (call_enter(self) == 0) {
			Py_BEGIN_ALLOW_THREADS
			mkv_abort(self->pool, &buf);
			Py_END_ALLOW_THREADS
			call_leave(self);
		}
		return NULL;
	}
	Py_INCREF(self);
	b->pool = self;
	b->buf = buf;
	b->state = BUF_LIVE;
	b->exports = 0;
	return (PyObject *)b;
}

static PyObject *
Pool_publish(PoolObject *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = { "key", "buf", "parent", NULL };
	PyObject *bufobj, *parentobj = NULL;
	Py_buffer key, parent;
	struct mkv_buf buf;
	struct mkv_key k;
	int rc;

	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*O|O:publish", kwlist, &key, &bufobj,
			&parentobj))
		return NULL;
	if (optkey_get(parentobj, &parent) < 0) {
		PyBuffer_Release(&key);
		return NULL;
	}
	if (buf_take(self, bufobj, &buf) < 0) {
		optkey_release(&parent);
		PyBuffer_Release(&key);
		return NULL;
	}
	k = (struct mkv_key){ .data = key.buf, .len = (size_t)key.len };
	/* ours while the GIL is let go, whatever holds the arguments */
	Py_INCREF(bufobj);
	call_enter(self);	/* cannot fail: buf_take() found the pool open */
	Py_BEGIN_ALLOW_THREADS
	if (parent.obj)
		rc = mkv_publish_chain(self->pool, parent.buf, (size_t)parent.len, &k, &buf, 1);
	else
		rc = mkv_publish(self->pool, k.data, k.len, &buf);
	Py_END_ALLOW_THREADS
	call_leave(self);
	buf_settle(bufobj, &buf);
	Py_DECREF(bufobj);
	optkey_release(&parent);
	PyBuffer_Release(&key);
	if (rc < 0)
		return raise_mkv(rc);
	Py_RETURN_NONE;
}

/*
 * publish_async(key, buf, parent=None): the Ticket is made first, so that
 * a publish once started always has one to wait for.
 */
static PyObject *
Pool_publish_async(PoolObject *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = { "key", "buf", "parent", NULL };
	PyObject *bufobj, *parentobj = NULL;
	Py_buffer key, parent;
	struct mkv_buf buf;
	TicketObject *t = NULL;
	int rc;

	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*O|O:publish_async", kwlist, &key,
			&bufobj, &parentobj))
		return NULL;
	if (optkey_get(parentobj, &parent) < 0) {
		PyBuffer_Release(&key);
		return NULL;
	}
	if ((t = PyObject_New(TicketObject, &Ticket_Type)) == NULL)
		goto out;
	t->pool = (PoolObject *)Py_NewRef(self);
	t->state = TICKET_DONE;
	memset(&t->ticket, 0, sizeof(t->ticket));
	if (buf_take(self, bufobj, &buf) < 0)
		goto out;
	Py_INCREF(bufobj);
	call_enter(self);	/* cannot fail: buf_take() found the pool open */
	Py_BEGIN_ALLOW_THREADS
	rc = mkv_publish_child_async(self->pool, parent.obj ? parent.buf : NULL,
			parent.obj ? (size_t)parent.len : 0, key.buf, (size_t)key.len, &buf,
			&t->ticket);
	Py_END_ALLOW_THREADS
	call_leave(self);
	buf_settle(bufobj, &buf);
	Py_DECREF(bufobj);
	if (rc < 0)
		raise_mkv(rc);
	else
		t->state = TICKET_PENDING;
out:
	optkey_release(&parent);
	PyBuffer_Release(&key);
	if (t && t->state != TICKET_PENDING)
		Py_CLEAR(t);
	return (PyObject *)t;
}

static PyObject *
Pool_wait(PoolObject *self, PyObject *obj)
{
	TicketObject *t = (TicketObject *)obj;
	struct mkv_ticket tk;
	int rc;

	if (!PyObject_TypeCheck(obj, &Ticket_Type)) {
		PyErr_Format(PyExc_TypeError, "expected a marukv.Ticket, not %.100s",
				Py_TYPE(obj)->tp_name);
		return NULL;
	}
	if (t->pool != self) {
		PyErr_SetString(PyExc_ValueError, "ticket of another pool");
		return NULL;
	}
	if (t->state != TICKET_PENDING) {
		PyErr_SetString(PyExc_ValueError, t->state == TICKET_BUSY
				? "ticket is being waited for by another thread"
				: "ticket was waited for already");
		return NULL;
	}
	if (call_enter(self) < 0)
		return NULL;
	t->state = TICKET_BUSY;
	tk = t->ticket;
	Py_INCREF(t);
	Py_BEGIN_ALLOW_THREADS
	rc = mkv_wait(self->pool, &tk);
	Py_END_ALLOW_THREADS
	call_leave(self);
	/* only a timeout leaves it pending, to wait for again */
	t->ticket = tk;
	t->state = rc == MKV_E_TIMEDOUT ? TICKET_PENDING : TICKET_DONE;
	Py_DECREF(t);
	if (rc < 0)
		return raise_mkv(rc);
	Py_RETURN_NONE;
}

static PyObject *
Pool_data_mapping(PoolObject *self, PyObject *Py_UNUSED(ignored))
{
	void *addr;
	size_t len;
	int rc;

	if (call_enter(self) < 0)
		return NULL;
	rc = mkv_pool_data(self->pool, &addr, &len);
	call_leave(self);
	if (rc < 0)
		return raise_mkv(rc);
	return Py_BuildValue("(Nn)", PyLong_FromVoidPtr(addr), (Py_ssize_t)len);
}

/*
 * publish_chain(parent, items): every object the call needs is taken, with
 * a reference, into the call's own arrays before the GIL is dropped; the
 * caller's list is not looked at again, whatever other threads do to it
 * meanwhile.
 */
static PyObject *
Pool_publish_chain(PoolObject *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = { "parent", "items", NULL };
	PyObject *parentobj, *itemsobj, *items = NULL, *keys = NULL, **objs = NULL;
	Py_buffer parent;
	struct keyset ks = { 0 };
	struct mkv_buf *bufs = NULL;
	Py_ssize_t n = 0, held = 0, taken = 0;
	PyObject *ret = NULL;
	int rc;

	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO:publish_chain", kwlist, &parentobj,
			&itemsobj))
		return NULL;
	if (optkey_get(parentobj, &parent) < 0)
		return NULL;
	/* a copy, not the caller's list: PySequence_Fast() would return that itself */
	if ((items = PySequence_Tuple(itemsobj)) == NULL)
		goto out;
	n = PyTuple_GET_SIZE(items);
	keys = PyList_New(n);
	objs = PyMem_New(PyObject *, n ? n : 1);
	bufs = PyMem_New(struct mkv_buf, n ? n : 1);
	if (keys == NULL || objs == NULL || bufs == NULL) {
		if (!PyErr_Occurred())
			PyErr_NoMemory();
		goto out;
	}
	/* the pairs split into the keys, for keyset_get(), and the buffers */
	for (; held < n; held++) {
		PyObject *it = PyTuple_GET_ITEM(items, held);

		if (!PyTuple_Check(it) || PyTuple_GET_SIZE(it) != 2) {
			PyErr_SetString(PyExc_TypeError, "items must be (key, buffer) pairs");
			goto out;
		}
		PyList_SET_ITEM(keys, held, Py_NewRef(PyTuple_GET_ITEM(it, 0)));
		objs[held] = Py_NewRef(PyTuple_GET_ITEM(it, 1));
	}
	if (keyset_get(keys, &ks) < 0)
		goto out;
	for (; taken < n; taken++)
		if (buf_take(self, objs[taken], &bufs[taken]) < 0)
			goto out;
	if (call_enter(self) < 0)
		goto out;
	Py_BEGIN_ALLOW_THREADS
	rc = mkv_publish_chain(self->pool, parent.buf, (size_t)parent.len, ks.keys, bufs,
			(size_t)n);
	Py_END_ALLOW_THREADS
	call_leave(self);
	for (Py_ssize_t i = 0; i < n; i++)
		buf_settle(objs[i], &bufs[i]);
	taken = 0;
	if (rc < 0)
		raise_mkv(rc);
	else
		ret = Py_NewRef(Py_None);
out:
	/* Buffers marked busy before a failed check go back to the caller. */
	for (Py_ssize_t i = 0; i < taken; i++)
		buf_settle(objs[i], &bufs[i]);
	for (Py_ssize_t i = 0; i < held; i++)
		Py_DECREF(objs[i]);
	PyMem_Free(objs);
	PyMem_Free(bufs);
	keyset_release(&ks);
	Py_XDECREF(keys);
	Py_XDECREF(items);
	optkey_release(&parent);
	return ret;
}

static PyObject *
Pool_abort(PoolObject *self, PyObject *bufobj)
{
	struct mkv_buf buf;
	int rc;

	if (buf_take(self, bufobj, &buf) < 0)
		return NULL;
	Py_INCREF(bufobj);
	call_enter(self);	/* cannot fail: buf_take() found the pool open */
	Py_BEGIN_ALLOW_THREADS
	rc = mkv_abort(self->pool, &buf);
	Py_END_ALLOW_THREADS
	call_leave(self);
	if (rc == 0)
		memset(&buf, 0, sizeof(buf));
	buf_settle(bufobj, &buf);
	Py_DECREF(bufobj);
	if (rc < 0)
		return raise_mkv(rc);
	Py_RETURN_NONE;
}

/* A call on one key: mkv_del, mkv_exists or mkv_fetch. */
static int
one_key(PoolObject *self, PyObject *keyobj, int (*fn)(struct mkv_pool *, const void *, size_t))
{
	Py_buffer key;
	int rc;

	if (PyObject_GetBuffer(keyobj, &key, PyBUF_SIMPLE) < 0)
		return INT_MIN;
	if (call_enter(self) < 0) {
		PyBuffer_Release(&key);
		return INT_MIN;
	}
	Py_BEGIN_ALLOW_THREADS
	rc = fn(self->pool, key.buf, (size_t)key.len);
	Py_END_ALLOW_THREADS
	call_leave(self);
	PyBuffer_Release(&key);
	if (rc < 0)
		raise_mkv(rc);
	return rc;
}

static PyObject *
Pool_delete(PoolObject *self, PyObject *key)
{
	if (one_key(self, key, mkv_del) < 0)
		return NULL;
	Py_RETURN_NONE;
}

/* Pool: reading */

static PyObject *
Pool_exists(PoolObject *self, PyObject *key)
{
	int rc = one_key(self, key, mkv_exists);

	if (rc < 0)
		return NULL;
	return PyBool_FromLong(rc);
}

static PyObject *
Pool_get(PoolObject *self, PyObject *keyobj)
{
	struct mkv_view v;
	Py_buffer key;
	PyObject *view;
	int rc;

	if (PyObject_GetBuffer(keyobj, &key, PyBUF_SIMPLE) < 0)
		return NULL;
	if (call_enter(self) < 0) {
		PyBuffer_Release(&key);
		return NULL;
	}
	Py_BEGIN_ALLOW_THREADS
	rc = mkv_get(self->pool, key.buf, (size_t)key.len, &v);
	Py_END_ALLOW_THREADS
	call_leave(self);
	PyBuffer_Release(&key);
	if (rc < 0)
		return raise_mkv(rc);
	if ((view = view_wrap(self, &v)) == NULL) {
		PyObject *type, *value, *tb;

		PyErr_Fetch(&type, &value, &tb);
		view_give_back(self, &v);
		PyErr_Restore(type, value, tb);
	}
	return view;
}

static PyObject *
Pool_get_batch(PoolObject *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = { "keys", "prefix", NULL };
	PyObject *keysobj, *list = NULL;
	struct mkv_view *views;
	struct keyset ks;
	int prefix = 0, rc;
	size_t found;
	Py_ssize_t i, n;

	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|p:get_batch", kwlist, &keysobj, &prefix))
		return NULL;
	if (keyset_get(keysobj, &ks) < 0)
		return NULL;
	n = ks.n;
	if ((views = PyMem_New(struct mkv_view, n ? n : 1)) == NULL) {
		keyset_release(&ks);
		return PyErr_NoMemory();
	}
	if (call_enter(self) < 0) {
		keyset_release(&ks);
		PyMem_Free(views);
		return NULL;
	}
	Py_BEGIN_ALLOW_THREADS
	rc = mkv_get_batch(self->pool, ks.keys, (size_t)n, prefix ? MKV_BATCH_PREFIX : 0,
			views, &found);
	Py_END_ALLOW_THREADS
	call_leave(self);
	keyset_release(&ks);
	if (rc < 0) {
		PyMem_Free(views);
		return raise_mkv(rc);
	}
	if (prefix)
		n = (Py_ssize_t)found;	/* the views of the leading keys found */
	list = PyList_New(n);
	for (i = 0; list && i < n; i++) {
		PyObject *v = views[i].data ? view_wrap(self, &views[i]) : Py_NewRef(Py_None);

		if (v == NULL)
			break;
		PyList_SET_ITEM(list, i, v);
	}
	if (i < n) {	/* out of memory: the list's views go with it, then the rest */
		PyObject *type, *value, *tb;

		Py_CLEAR(list);
		PyErr_Fetch(&type, &value, &tb);
		for (; i < n; i++)
			if (views[i].data)
				view_give_back(self, &views[i]);
		PyErr_Restore(type, value, tb);
	}
	PyMem_Free(views);
	return list;
}

typedef int (*keys_fn)(struct mkv_pool *pool, const struct mkv_key *keys, size_t n,
		size_t *out);

/* fn over the sequence keysobj, without the GIL: its count, or NULL with the error raised. */
static PyObject *
keys_call(PoolObject *self, PyObject *keysobj, keys_fn fn)
{
	struct keyset ks;
	size_t out = 0;
	int rc;

	if (keyset_get(keysobj, &ks) < 0)
		return NULL;
	if (call_enter(self) < 0) {
		keyset_release(&ks);
		return NULL;
	}
	Py_BEGIN_ALLOW_THREADS
	rc = fn(self->pool, ks.keys, (size_t)ks.n, &out);
	Py_END_ALLOW_THREADS
	call_leave(self);
	keyset_release(&ks);
	if (rc < 0)
		return raise_mkv(rc);
	return PyLong_FromSize_t(out);
}

static PyObject *
Pool_prefix_len(PoolObject *self, PyObject *keysobj)
{
	return keys_call(self, keysobj, mkv_prefix_len);
}

static PyObject *
Pool_hold(PoolObject *self, PyObject *keysobj)
{
	return keys_call(self, keysobj, mkv_hold);
}

static int
unhold_keys(struct mkv_pool *pool, const struct mkv_key *keys, size_t n, size_t *out)
{
	*out = n;
	return mkv_unhold(pool, keys, n);
}

static PyObject *
Pool_unhold(PoolObject *self, PyObject *keysobj)
{
	PyObject *n = keys_call(self, keysobj, unhold_keys);

	if (!n)
		return NULL;
	Py_DECREF(n);
	Py_RETURN_NONE;
}

/* Pool: administration */

/* d[name] = value, stealing @value; a NULL value (a failed conversion) fails. */
static int
dict_put(PyObject *d, const char *name, PyObject *value)
{
	int rc;

	if (value == NULL)
		return -1;
	rc = PyDict_SetItemString(d, name, value);
	Py_DECREF(value);
	return rc;
}

#define PUT_U(d, s, f) dict_put(d, #f, PyLong_FromUnsignedLongLong((s)->f))
#define PUT_I(d, s, f) dict_put(d, #f, PyLong_FromLongLong((s)->f))
#define PUT_S(d, s, f) dict_put(d, #f, PyUnicode_DecodeUTF8((s)->f, \
		(Py_ssize_t)strnlen((s)->f, sizeof((s)->f)), "replace"))

static PyObject *
Pool_stat(PoolObject *self, PyObject *Py_UNUSED(ignored))
{
	struct mkv_stat st;
	const uint8_t *u = st.uuid;
	PyObject *d;
	int rc;

	if (call_enter(self) < 0)
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	rc = mkv_pool_stat(self->pool, &st);
	Py_END_ALLOW_THREADS
	call_leave(self);
	if (rc < 0)
		return raise_mkv(rc);
	if ((d = PyDict_New()) == NULL)
		return NULL;
	if (PUT_U(d, &st, format_version) || PUT_U(d, &st, page_size) ||
	    PUT_U(d, &st, pages_total) || PUT_U(d, &st, pages_used) ||
	    PUT_U(d, &st, pages_free) || PUT_U(d, &st, pages_quarantined) ||
	    PUT_U(d, &st, pages_granted) || PUT_U(d, &st, entries) ||
	    PUT_U(d, &st, bytes_stored) || PUT_U(d, &st, registry_size) ||
	    PUT_U(d, &st, registry_used) || PUT_U(d, &st, max_clients) ||
	    PUT_U(d, &st, clients) ||
	    dict_put(d, "uuid", PyUnicode_FromFormat(
		"%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11],
		u[12], u[13], u[14], u[15])) ||
	    PUT_U(d, &st, lease_generation) || PUT_U(d, &st, lease_period_ms) ||
	    PUT_U(d, &st, lease_holder_pid) || PUT_U(d, &st, lease_holder_slot) ||
	    PUT_U(d, &st, lease_holder_node_idx) || PUT_S(d, &st, lease_holder_node) ||
	    PUT_I(d, &st, lease_heartbeat_age_ms) || PUT_U(d, &st, requests_pending) ||
	    PUT_U(d, &st, hits) || PUT_U(d, &st, misses) || PUT_U(d, &st, evictions) ||
	    dict_put(d, "backing", PyUnicode_FromString(mkv_backing_name(st.backing))) ||
	    dict_put(d, "coherence", PyUnicode_FromString(mkv_coherence_name(st.coherence))) ||
	    PUT_U(d, &st, client_timeout_ms) || PUT_S(d, &st, dax_device) ||
	    PUT_U(d, &st, dax_align) || PUT_U(d, &st, low_watermark) ||
	    PUT_U(d, &st, high_watermark) || PUT_U(d, &st, max_nodes) ||
	    PUT_U(d, &st, nodes) || PUT_U(d, &st, mode) || PUT_U(d, &st, gid) ||
	    PUT_U(d, &st, registry_fresh_logged) || PUT_U(d, &st, registry_fresh_whole) ||
	    PUT_S(d, &st, remote_servers) || PUT_U(d, &st, remote_spills) ||
	    PUT_U(d, &st, remote_spill_bytes) || PUT_U(d, &st, remote_drops) ||
	    PUT_U(d, &st, remote_spill_errors) || PUT_U(d, &st, remote_fetches) ||
	    PUT_U(d, &st, remote_fetch_hits) || PUT_U(d, &st, remote_fetch_misses) ||
	    PUT_U(d, &st, remote_fetch_errors))
		Py_CLEAR(d);
	return d;
}

static PyObject *
Pool_verify(PoolObject *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = { "deep", NULL };
	struct mkv_verify r;
	int deep = 0, rc;
	PyObject *d;

	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|p:verify", kwlist, &deep))
		return NULL;
	if (call_enter(self) < 0)
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	rc = mkv_pool_verify(self->pool, deep ? MKV_VERIFY_DEEP : 0, &r);
	Py_END_ALLOW_THREADS
	call_leave(self);
	if (rc < 0 && rc != MKV_E_CORRUPT)
		return raise_mkv(rc);
	if ((d = PyDict_New()) == NULL)
		return NULL;
	if (PUT_U(d, &r, entries) || PUT_U(d, &r, pages_used) ||
	    PUT_U(d, &r, pages_quarantined) || PUT_U(d, &r, pages_leaked) ||
	    PUT_U(d, &r, checksums_checked) || PUT_U(d, &r, checksums_bad) ||
	    PUT_U(d, &r, problems) || PUT_S(d, &r, first_problem))
		Py_CLEAR(d);
	return d;
}

static PyObject *
Pool_reclaim(PoolObject *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = { "dry_run", NULL };
	struct mkv_reclaim r;
	int dry = 0, rc;
	PyObject *d;

	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$p:reclaim", kwlist, &dry))
		return NULL;
	if (call_enter(self) < 0)
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	rc = mkv_pool_reclaim(self->pool, dry ? MKV_DRY_RUN : 0, &r);
	Py_END_ALLOW_THREADS
	call_leave(self);
	if (rc < 0)
		return raise_mkv(rc);
	if ((d = PyDict_New()) == NULL)
		return NULL;
	if (PUT_U(d, &r, clients) || PUT_U(d, &r, readers) || PUT_U(d, &r, pins) ||
	    PUT_U(d, &r, pages) || PUT_U(d, &r, requests) || PUT_U(d, &r, nodes))
		Py_CLEAR(d);
	return d;
}

static PyObject *
Pool_evict(PoolObject *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = { "free_pct", "dry_run", NULL };
	struct mkv_evict r;
	unsigned int pct;
	int dry = 0, rc;
	PyObject *d;

	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O&|$p:evict", kwlist, to_uint, &pct, &dry))
		return NULL;
	if (call_enter(self) < 0)
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	rc = mkv_pool_evict(self->pool, pct, dry ? MKV_DRY_RUN : 0, &r);
	Py_END_ALLOW_THREADS
	call_leave(self);
	if (rc < 0)
		return raise_mkv(rc);
	if ((d = PyDict_New()) == NULL)
		return NULL;
	if (PUT_U(d, &r, keys) || PUT_U(d, &r, pages) || PUT_U(d, &r, pages_free))
		Py_CLEAR(d);
	return d;
}

static PyObject *
Pool_set_watermarks(PoolObject *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = { "low", "high", NULL };
	unsigned int low, high;
	int rc;

	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O&O&:set_watermarks", kwlist, to_uint, &low,
			to_uint, &high))
		return NULL;
	if (call_enter(self) < 0)
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	rc = mkv_pool_set_watermarks(self->pool, low, high);
	Py_END_ALLOW_THREADS
	call_leave(self);
	if (rc < 0)
		return raise_mkv(rc);
	Py_RETURN_NONE;
}

static PyObject *
Pool_clients(PoolObject *self, PyObject *Py_UNUSED(ignored))
{
	struct mkv_client *cl = NULL;
	size_t max = 16, n = 0;
	PyObject *list;
	int rc;

	/* The count can grow between two calls: ask again until it fits. */
	for (;;) {
		struct mkv_client *more = PyMem_Resize(cl, struct mkv_client, max);

		if (more == NULL) {
			PyMem_Free(cl);
			return PyErr_NoMemory();
		}
		cl = more;
		if (call_enter(self) < 0) {
			PyMem_Free(cl);
			return NULL;
		}
		Py_BEGIN_ALLOW_THREADS
		rc = mkv_pool_clients(self->pool, cl, max, &n);
		Py_END_ALLOW_THREADS
		call_leave(self);
		if (rc < 0) {
			PyMem_Free(cl);
			return raise_mkv(rc);
		}
		if (n <= max)
			break;
		max = n;
	}
	list = PyList_New((Py_ssize_t)n);
	for (size_t i = 0; list && i < n; i++) {
		PyObject *d = PyDict_New();

		if (d == NULL || PUT_U(d, &cl[i], slot) || PUT_U(d, &cl[i], pid) ||
		    PUT_S(d, &cl[i], node) ||
		    dict_put(d, "alive", PyBool_FromLong(cl[i].alive)) ||
		    dict_put(d, "rdonly", PyBool_FromLong(cl[i].rdonly)) ||
		    dict_put(d, "holder", PyBool_FromLong(cl[i].holder)) ||
		    PUT_U(d, &cl[i], pin) || PUT_U(d, &cl[i], pages_granted) ||
		    PUT_I(d, &cl[i], heartbeat_age_ms)) {
			Py_XDECREF(d);
			Py_CLEAR(list);
		} else {
			PyList_SET_ITEM(list, (Py_ssize_t)i, d);
		}
	}
	PyMem_Free(cl);
	return list;
}

/* Pool: the remote tier */

/*
 * A string argument of set_remote(), @len bytes, into @dst (@max + 1 bytes);
 * InvalidArgument if it is longer than @max or holds a NUL.
 */
static int
remote_str(char *dst, size_t max, const char *name, const char *src, Py_ssize_t len)
{
	char msg[128];

	if ((size_t)len > max) {
		snprintf(msg, sizeof(msg), "set_remote: %s is %zd bytes in UTF-8, at most %zu", name,
				len, max);
		raise_code(MKV_E_INVAL, msg);
		return -1;
	}
	if (len > 0 && memchr(src, '\0', (size_t)len)) {
		snprintf(msg, sizeof(msg), "set_remote: %s holds a NUL character", name);
		raise_code(MKV_E_INVAL, msg);
		return -1;
	}
	memcpy(dst, src, (size_t)len);
	dst[len] = '\0';
	return 0;
}

static PyObject *
Pool_set_remote(PoolObject *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = { "servers", "prefix", "ttl_s", "queue_mib", "timeout_ms", "tier",
		NULL };
	const char *servers, *prefix = "";
	Py_ssize_t slen = 0, plen = 0;
	unsigned int ttl = 0, queue = 0, timeout = 0, tier = 0;
	struct mkv_remote r = { 0 };
	int rc;

	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "z#|$s#O&O&O&O&:set_remote", kwlist,
			&servers, &slen, &prefix, &plen, to_uint, &ttl, to_uint, &queue, to_uint,
			&timeout, to_uint, &tier))
		return NULL;
	if (servers == NULL)	/* None: off, as "" */
		servers = "";
	if (remote_str(r.servers, MKV_REMOTE_SERVERS_MAX, "servers", servers, slen) < 0 ||
	    remote_str(r.prefix, MKV_REMOTE_PREFIX_MAX, "prefix", prefix, plen) < 0)
		return NULL;
	r.ttl_s = ttl;
	r.queue_mib = queue;
	r.timeout_ms = timeout;
	r.tier = tier;
	if (call_enter(self) < 0)
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	rc = mkv_remote_set(self->pool, &r);
	Py_END_ALLOW_THREADS
	call_leave(self);
	if (rc < 0)
		return raise_mkv(rc);
	Py_RETURN_NONE;
}

static PyObject *
Pool_remote(PoolObject *self, PyObject *Py_UNUSED(ignored))
{
	struct mkv_remote r;
	PyObject *d;
	int rc;

	if (call_enter(self) < 0)
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	rc = mkv_remote_get(self->pool, &r);
	Py_END_ALLOW_THREADS
	call_leave(self);
	if (rc < 0)
		return raise_mkv(rc);
	if ((d = PyDict_New()) == NULL)
		return NULL;
	if (PUT_S(d, &r, servers) || PUT_S(d, &r, prefix) || PUT_U(d, &r, ttl_s) ||
	    PUT_U(d, &r, queue_mib) || PUT_U(d, &r, timeout_ms) || PUT_U(d, &r, tier))
		Py_CLEAR(d);
	return d;
}

static PyObject *
Pool_fetch(PoolObject *self, PyObject *key)
{
	if (one_key(self, key, mkv_fetch) < 0)
		return NULL;
	Py_RETURN_NONE;
}

static PyObject *
Pool_get_path(PoolObject *self, void *Py_UNUSED(closure))
{
	if (self->pool == NULL)
		return raise_closed();
	return PyUnicode_DecodeFSDefault(mkv_pool_path(self->pool));
}

static PyObject *
Pool_get_closed(PoolObject *self, void *Py_UNUSED(closure))
{
	return PyBool_FromLong(self->pool == NULL);
}

static PyObject *
Pool_get_readonly(PoolObject *self, void *Py_UNUSED(closure))
{
	return PyBool_FromLong(self->readonly);
}

static PyObject *
Pool_repr(PoolObject *self)
{
	if (self->pool == NULL)
		return PyUnicode_FromString("<marukv.Pool closed>");
	return PyUnicode_FromFormat("<marukv.Pool %s%s>", mkv_pool_path(self->pool),
			self->readonly ? " readonly" : "");
}

static PyMethodDef Pool_methods[] = {
	{ "close", (PyCFunction)Pool_close, METH_NOARGS,
	  "close()\n--\n\n"
	  "Close the handle: unpublished buffers are given back, views and buffers\n"
	  "become unusable (their use raises ValueError), the client slot is freed.\n"
	  "Waits for calls running in other threads.  Closing twice does nothing.\n"
	  "Raises BufferError, and stays open, while a memoryview, array or tensor\n"
	  "over one of its views or buffers is alive." },
	{ "__enter__", (PyCFunction)Pool_enter, METH_NOARGS, "Return the pool itself." },
	{ "__exit__", (PyCFunction)Pool_exit, METH_VARARGS, "Close the pool." },
	{ "put", (PyCFunction)(void (*)(void))Pool_put, METH_VARARGS | METH_KEYWORDS,
	  "put(key, value)\n--\n\n"
	  "Store a copy of value (any bytes-like object, at least 1 byte) under key;\n"
	  "returns once it is durable and visible to every process.  Values are\n"
	  "write-once: raises Exists if key is published already, NoSpace if the\n"
	  "pool is full even after eviction, ReadOnly on a read-only pool." },
	{ "alloc", (PyCFunction)Pool_alloc, METH_O,
	  "alloc(n)\n--\n\n"
	  "A writable Buffer of n bytes (n >= 1) of pool pages, to fill in place and\n"
	  "then publish() or abort().  The pool evicts cold values to make room if\n"
	  "it must.  Raises InvalidArgument (n == 0), NoSpace, ReadOnly, Expired,\n"
	  "TimedOut; OverflowError for a negative n." },
	{ "publish", (PyCFunction)(void (*)(void))Pool_publish, METH_VARARGS | METH_KEYWORDS,
	  "publish(key, buf, parent=None)\n--\n\n"
	  "Make Buffer buf's bytes durable and visible under key.  With parent (a\n"
	  "key), key is declared the next block of parent's chain (see\n"
	  "publish_chain()).  On success, on Exists and on TimedOut the buffer is\n"
	  "consumed; on other errors it stays usable, to retry or abort().  Raises\n"
	  "BufferError while a memoryview or array over buf is alive." },
	{ "publish_chain", (PyCFunction)(void (*)(void))Pool_publish_chain,
	  METH_VARARGS | METH_KEYWORDS,
	  "publish_chain(parent, items)\n--\n\n"
	  "Publish a chain of blocks: items is a sequence of (key, Buffer) pairs;\n"
	  "each key becomes the child of the key before it, the first the child\n"
	  "of parent (None for a chain's head).  Eviction then takes a chain's\n"
	  "blocks tail first, so prefix_len() finds the longest cached prefix.  A\n"
	  "key published already counts as done and its buffer is given back.\n"
	  "Every buffer published or given back is consumed; on error the others\n"
	  "stay usable.  Raises the first error (InvalidArgument, NoSpace,\n"
	  "ReadOnly, Expired, TimedOut)." },
	{ "publish_async", (PyCFunction)(void (*)(void))Pool_publish_async,
	  METH_VARARGS | METH_KEYWORDS,
	  "publish_async(key, buf, parent=None)\n--\n\n"
	  "Start publishing buf under key (the child of parent, as publish() makes\n"
	  "it) and return a Ticket without waiting for the registration: its\n"
	  "bytes are durable already.  The buffer is consumed.  Pool.wait(ticket)\n"
	  "gives the result.  A chain published a block at a time this way, each\n"
	  "with the one before as parent, links as publish_chain() links it.  At\n"
	  "most 32 are in flight on a handle; past that, the call waits for the\n"
	  "oldest.  Raises as publish() does for its arguments (InvalidArgument,\n"
	  "ReadOnly, Expired), TimedOut if no request entry came free." },
	{ "wait", (PyCFunction)Pool_wait, METH_O,
	  "wait(ticket)\n--\n\n"
	  "Wait for a publish_async() and raise its error, as publish() would\n"
	  "(Exists: the key was published already, which for a shared chain means\n"
	  "done).  A ticket is waited for once (ValueError after); after TimedOut\n"
	  "it may be waited for again." },
	{ "data_mapping", (PyCFunction)Pool_data_mapping, METH_NOARGS,
	  "data_mapping()\n--\n\n"
	  "(address, length) of the data arena's mapping in this process: every\n"
	  "Buffer's and View's bytes lie in it while the pool is open; read-only\n"
	  "for a read-only pool.  For registering the arena with a DMA engine,\n"
	  "e.g. torch.cuda.cudart().cudaHostRegister() in pieces, so copies\n"
	  "between a GPU and the pool go straight to its pages.  Never write\n"
	  "into it except through a Buffer." },
	{ "abort", (PyCFunction)Pool_abort, METH_O,
	  "abort(buf)\n--\n\n"
	  "Give an unpublished Buffer's pages back; consumes it.  Raises BufferError\n"
	  "while a memoryview or array over it is alive, ValueError if it was\n"
	  "consumed already." },
	{ "delete", (PyCFunction)Pool_delete, METH_O,
	  "delete(key)\n--\n\n"
	  "Delete key.  Views of it, here or in other processes, stay valid until\n"
	  "released; its pages are reused only then.  Raises NotFound (a KeyError),\n"
	  "ReadOnly." },
	{ "get", (PyCFunction)Pool_get, METH_O,
	  "get(key)\n--\n\n"
	  "A zero-copy View of key's value; release it when done (or use it in a\n"
	  "with block).  Raises NotFound (a KeyError) if key is not published,\n"
	  "Corrupt if its entry is damaged (with verify=True: if its bytes do not\n"
	  "match their checksum)." },
	{ "get_batch", (PyCFunction)(void (*)(void))Pool_get_batch, METH_VARARGS | METH_KEYWORDS,
	  "get_batch(keys, prefix=False)\n--\n\n"
	  "Views of several keys, looked up in one snapshot of the registry.\n"
	  "Returns a list with one entry per key, a View or None where the key is\n"
	  "missing; with prefix=True, only the Views of the leading keys that are\n"
	  "all present (the lookup stops at the first missing key)." },
	{ "exists", (PyCFunction)Pool_exists, METH_O,
	  "exists(key)\n--\n\n"
	  "True if key is published." },
	{ "prefix_len", (PyCFunction)Pool_prefix_len, METH_O,
	  "prefix_len(keys)\n--\n\n"
	  "How many leading keys of the sequence keys are published, looked up in\n"
	  "one registry snapshot: i such that keys[:i] all exist and keys[i] does\n"
	  "not (or len(keys))." },
	{ "hold", (PyCFunction)Pool_hold, METH_O,
	  "hold(keys)\n--\n\n"
	  "prefix_len(keys), holding the leading keys it finds against eviction\n"
	  "until unhold(), close() or the process's end; returns how many.  A hold\n"
	  "keeps no view and holds back no other page; delete() still deletes.\n"
	  "Holds nest.  Raises TimedOut when an eviction has been under way for a\n"
	  "lease period (nothing is held then)." },
	{ "unhold", (PyCFunction)Pool_unhold, METH_O,
	  "unhold(keys)\n--\n\n"
	  "Undo one hold of each key, in order.  NotFound for a key not held\n"
	  "(the keys before it are unheld)." },
	{ "stat", (PyCFunction)Pool_stat, METH_NOARGS,
	  "stat()\n--\n\n"
	  "The pool's figures as a dict: the fields of struct mkv_stat in\n"
	  "marukv(3) (pages_total, pages_used, pages_free, pages_quarantined,\n"
	  "pages_granted, entries, bytes_stored, clients, hits, misses,\n"
	  "evictions, lease_*, remote_*, ...); uuid as a str, backing as 'file',\n"
	  "'tmpfs', 'fsdax' or 'devdax', remote_servers as a str ('' without a\n"
	  "remote tier)." },
	{ "verify", (PyCFunction)(void (*)(void))Pool_verify, METH_VARARGS | METH_KEYWORDS,
	  "verify(deep=False)\n--\n\n"
	  "Check the registry against the page table (with deep=True, also every\n"
	  "value's checksum) and return the report as a dict: entries, pages_used,\n"
	  "pages_quarantined, pages_leaked, checksums_checked, checksums_bad,\n"
	  "problems, first_problem.  problems == 0 means the pool is sound; an\n"
	  "exception means the check could not run." },
	{ "reclaim", (PyCFunction)(void (*)(void))Pool_reclaim, METH_VARARGS | METH_KEYWORDS,
	  "reclaim(*, dry_run=False)\n--\n\n"
	  "Reclaim now what dead clients left (slots, pins, granted pages, pending\n"
	  "requests, stale registry readers), which the lease holder also does on\n"
	  "its own.  Returns a dict: clients, readers, pins, pages, requests,\n"
	  "nodes.  Raises ReadOnly on a read-only pool unless dry_run." },
	{ "evict", (PyCFunction)(void (*)(void))Pool_evict, METH_VARARGS | METH_KEYWORDS,
	  "evict(free_pct, *, dry_run=False)\n--\n\n"
	  "Evict least recently read keys (chains tail first) until free_pct\n"
	  "percent of the pages are free or quarantined.  Views of evicted keys\n"
	  "stay valid.  Returns a dict: keys, pages, pages_free.  Raises\n"
	  "InvalidArgument (free_pct > 100), ReadOnly unless dry_run." },
	{ "set_watermarks", (PyCFunction)(void (*)(void))Pool_set_watermarks,
	  METH_VARARGS | METH_KEYWORDS,
	  "set_watermarks(low, high)\n--\n\n"
	  "Change the automatic eviction watermarks, in percent (0 < low <= high\n"
	  "<= 90; low 0 turns automatic eviction off)." },
	{ "clients", (PyCFunction)Pool_clients, METH_NOARGS,
	  "clients()\n--\n\n"
	  "The pool's client slots in use, a list of dicts: slot, pid, node,\n"
	  "alive, rdonly, holder, pin (the registry txn its oldest view may have\n"
	  "seen; 0 when it holds no view), pages_granted, heartbeat_age_ms." },
	{ "set_remote", (PyCFunction)(void (*)(void))Pool_set_remote, METH_VARARGS | METH_KEYWORDS,
	  "set_remote(servers, *, prefix='', ttl_s=0, queue_mib=0, timeout_ms=0, tier=0)\n--\n\n"
	  "Set the pool's remote tier, a Redis Cluster that evicted values spill\n"
	  "to and fetch() brings back: servers is 'host:port[,host:port...]', 1 to\n"
	  "16 seed nodes, at most 255 bytes; None or '' turns the tier off.\n"
	  "prefix (at most 63 bytes) starts every Redis key; ttl_s: stored values\n"
	  "expire after it (0: never); queue_mib: bound on evicted bytes waiting to\n"
	  "spill (0: 64); timeout_ms: bound on each exchange with a node (0: 1000);\n"
	  "tier: the label the frames carry (0 to 255).  The setting is the pool's,\n"
	  "for every process; the list is checked for its form, no node is\n"
	  "reached.  Raises InvalidArgument (a malformed list, a string too long,\n"
	  "a number out of range), ReadOnly, TimedOut." },
	{ "remote", (PyCFunction)Pool_remote, METH_NOARGS,
	  "remote()\n--\n\n"
	  "The pool's remote tier as a dict: servers ('' if none), prefix, ttl_s,\n"
	  "queue_mib, timeout_ms, tier, the defaults filled in." },
	{ "fetch", (PyCFunction)Pool_fetch, METH_O,
	  "fetch(key)\n--\n\n"
	  "Make sure key is in the pool: return None at once if it is, else bring\n"
	  "its value back from the remote tier and publish it.  The only call that\n"
	  "reaches the network; it runs with the GIL released, each exchange with\n"
	  "a node bounded by the tier's timeout_ms.  Raises NotFound (a KeyError:\n"
	  "no tier, or the tier has no value for key), RemoteFailed (no answer in\n"
	  "time, or an error from the node), a BadFrame subclass (the stored frame\n"
	  "was refused), ReadOnly, and the errors of put().  Nothing is published\n"
	  "on error." },
	{ NULL, NULL, 0, NULL }
};

static PyGetSetDef Pool_getset[] = {
	{ "path", (getter)Pool_get_path, NULL, "The pool's directory.", NULL },
	{ "closed", (getter)Pool_get_closed, NULL, "True once close() was called.", NULL },
	{ "readonly", (getter)Pool_get_readonly, NULL, "True if opened readonly=True.", NULL },
	{ NULL, NULL, NULL, NULL, NULL }
};

static PyTypeObject Pool_Type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "marukv.Pool",
	.tp_basicsize = sizeof(PoolObject),
	.tp_dealloc = (destructor)Pool_dealloc,
	.tp_repr = (reprfunc)Pool_repr,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc =
	"Pool(path=None, create=False, readonly=False, verify=False,\n"
	"     nochecksum=False, **options)\n--\n\n"
	"Open the marukv pool at path (a directory; None: $MARUKV_POOL, else\n"
	MKV_DEFAULT_POOL ").  create=True creates it if absent; readonly=True opens\n"
	"it for lookups only (write calls raise ReadOnly); verify=True checks each\n"
	"value's checksum on get(); nochecksum=True publishes values without one.\n\n"
	"Creation options (used only when this call creates the pool), keyword\n"
	"only: data_size (bytes, default 256 MiB), page_size (a power of two,\n"
	"4 KiB to 1 GiB, default 64 KiB), max_clients (default 64), registry_size\n"
	"(bytes; 0 sizes it from the pages), lease_period_ms (default 1000),\n"
	"watermarks (a (low, high) pair of percents, default (1, 1)),\n"
	"client_timeout_ms (default 10000), group (a gid to share the pool with),\n"
	"max_nodes (default 32).  Open option: node (this host's name in the\n"
	"pool; default $MARUKV_NODE or the host name).  See marukv(3) for each.\n\n"
	"Raises NoPool (absent, create=False), NotPool, Corrupt, VersionMismatch,\n"
	"TooManyClients, Permission (an unsafe directory), NoSpace,\n"
	"InvalidArgument (an option out of range, create with readonly).\n\n"
	"A Pool is a context manager (close() at the end of the block) and may be\n"
	"used from several threads at once; every call that can wait drops the\n"
	"GIL.  It cannot be used in a child process after fork() (calls raise\n"
	"InvalidArgument there): open the pool again in the child.",
	.tp_methods = Pool_methods,
	.tp_getset = Pool_getset,
	.tp_new = Pool_new,
};

/* Module */

static PyObject *
mod_version(PyObject *Py_UNUSED(mod), PyObject *Py_UNUSED(ignored))
{
	return PyUnicode_FromString(mkv_version());
}

static PyObject *
mod_strerror(PyObject *Py_UNUSED(mod), PyObject *arg)
{
	long code = PyLong_AsLong(arg);

	if (code == -1 && PyErr_Occurred())
		return NULL;
	return PyUnicode_FromString(mkv_strerror(code < INT_MIN || code > INT_MAX ? INT_MIN
			: (int)code));
}

static PyMethodDef mod_methods[] = {
	{ "version", mod_version, METH_NOARGS,
	  "version()\n--\n\nThe version of libmarukv in use, \"MAJOR.MINOR.PATCH\"." },
	{ "strerror", mod_strerror, METH_O,
	  "strerror(code)\n--\n\nThe library's text for an error code (Error.code)." },
	{ NULL, NULL, 0, NULL }
};

static struct PyModuleDef marukv_module = {
	PyModuleDef_HEAD_INIT,
	.m_name = "marukv._marukv",
	.m_doc = "The C part of the marukv package; import marukv instead.",
	.m_size = -1,
	.m_methods = mod_methods,
};

/* The exception classes of marukv._errors, by the names in codes[]. */
static int
load_errors(PyObject *mod)
{
	PyObject *errors = PyImport_ImportModule("marukv._errors");
	char name[32];

	if (errors == NULL)
		return -1;
	Error = PyObject_GetAttrString(errors, "Error");
	for (size_t i = 0; Error && i < NCODES; i++) {
		PyObject *cls = PyObject_GetAttrString(errors, codes[i].exc);

		codes[i].cls = cls;
		snprintf(name, sizeof(name), "E_%s", codes[i].name);
		if (cls == NULL || PyModule_AddIntConstant(mod, name, codes[i].code) < 0) {
			Py_DECREF(errors);
			return -1;
		}
	}
	Py_DECREF(errors);
	return Error ? 0 : -1;
}

PyMODINIT_FUNC PyInit__marukv(void);

PyMODINIT_FUNC
PyInit__marukv(void)
{
	PyObject *mod;

	if (PyType_Ready(&Pool_Type) < 0 || PyType_Ready(&View_Type) < 0 ||
	    PyType_Ready(&Buffer_Type) < 0 || PyType_Ready(&Ticket_Type) < 0)
		return NULL;
	if ((mod = PyModule_Create(&marukv_module)) == NULL)
		return NULL;
	if (load_errors(mod) < 0 ||
	    PyModule_AddObjectRef(mod, "Pool", (PyObject *)&Pool_Type) < 0 ||
	    PyModule_AddObjectRef(mod, "View", (PyObject *)&View_Type) < 0 ||
	    PyModule_AddObjectRef(mod, "Buffer", (PyObject *)&Buffer_Type) < 0 ||
	    PyModule_AddObjectRef(mod, "Ticket", (PyObject *)&Ticket_Type) < 0 ||
	    PyModule_AddIntConstant(mod, "KEY_MAX", MKV_KEY_MAX) < 0) {
		Py_DECREF(mod);
		return NULL;
	}
	return mod;
}
