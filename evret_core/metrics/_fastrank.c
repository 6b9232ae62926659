/* Optional accelerator of evret_core.metrics.engine: reads a chunk of queries' run and qrels dicts directly.
 *
 * rank_chunk(runs, judged[, scan_limit]) takes two lists of the same length, each query's run dict and qrels dict
 * (the caller looks the queries up in Python), walks each run dict once (PyDict_Next), then each judged document,
 * and returns four bytearrays that numpy wraps without copying:
 *   num_ret (int64 per query), qrel_lengths (int64 per query),
 *   ranks (int64 per judgment, qrels order: 0-based trec_eval rank, -1 when not retrieved),
 *   grades (float64 per judgment).
 * The rank is the number of documents with a higher score plus the tied ones with a larger id (trec_eval: score
 * descending, ties by document id in descending string order; str comparison as Python's `>`).
 *
 * Memory safety: no Python code can run while this module works. It reads only exact dicts, exact lists/tuples,
 * exact str ids and exact float/int values (or numpy.float64, read from the float struct without a call); str
 * hashing, str comparison and dict lookups of exact str keys in dicts whose keys are all exact str call no Python
 * code, and no object is created or released between the sizing pass and the filling pass. Anything else (dict or
 * str subclasses, bools, values with __float__, non-str ids, NaN scores, ints too big for a double) makes it
 * return None: the caller then runs the numpy path, which gives the same numbers and raises the same errors. Every
 * write in the filling pass is still checked against the sizes of the first pass. Built without
 * Py_mod_gil support, so a free-threaded interpreter re-enables the GIL on import rather than sharing the dicts.
 *
 * rank_lists_chunk(lists, judged) does the same for already ranked lists: each query's list (or tuple) is read
 * once into a small open-addressing table (the str's cached hash, then str equality), which rejects a document
 * listed twice (None: the pure path raises its error naming query and document) and gives each judged document's
 * 0-based position (-1 when not listed). Same buffers as rank_chunk.
 *
 * resample_sums(index, matrix, out) is the bootstrap's inner loop (evret_core.statistics.inference): for each row of drawn
 * indexes it counts how often each of the n rows was drawn, then sums count x value per metric, in row order. It
 * reads only native int64/float64 C-contiguous 2-D buffers (anything else is a TypeError), checks the shapes, and
 * runs without the GIL while it holds the buffers (so they cannot be resized); each index is read once and checked
 * against n before it is used, so another thread writing the arrays meanwhile gives wrong sums or a ValueError,
 * never a write out of bounds.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* above this many judged documents per query, ranks come from one sort of the run instead of a scan each */
#define SCAN_LIMIT 48

typedef struct {
    double score;
    PyObject *key;
} entry;

/* a score or grade as numpy's float64 conversion reads it; 0 when the type is not one of the plain ones */
static int
as_double(PyObject *v, double *out)
{
    if (PyFloat_CheckExact(v)) {
        *out = PyFloat_AS_DOUBLE(v);
        return 1;
    }
    if (PyLong_CheckExact(v)) {
        double d = PyLong_AsDouble(v);
        if (d == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        *out = d;
        return 1;
    }
    /* numpy.float64 subclasses float and keeps its value where a float does; a static (C) type, so a Python
     * class given the same name is not taken for it */
    if (PyFloat_Check(v) && !(Py_TYPE(v)->tp_flags & Py_TPFLAGS_HEAPTYPE)
        && strcmp(Py_TYPE(v)->tp_name, "numpy.float64") == 0) {
        *out = PyFloat_AS_DOUBLE(v);
        return 1;
    }
    return 0;
}

/* trec_eval order: higher score first, then larger id first */
static int
entry_order(const void *pa, const void *pb)
{
    const entry *a = (const entry *)pa, *b = (const entry *)pb;
    if (a->score > b->score) return -1;
    if (a->score < b->score) return 1;
    if (a->key == b->key) return 0;
    return -PyUnicode_Compare(a->key, b->key);
}

/* the four output buffers both readers fill; numpy wraps them without copying */
typedef struct {
    PyObject *num_ret, *qlen, *ranks, *grades;
} outputs;

/* allocate them for n queries and total_judged judgments; 0 with an exception set on failure */
static int
outputs_alloc(outputs *o, Py_ssize_t n, Py_ssize_t total_judged)
{
    o->num_ret = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)sizeof(int64_t) * n);
    o->qlen = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)sizeof(int64_t) * n);
    o->ranks = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)sizeof(int64_t) * total_judged);
    o->grades = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)sizeof(double) * total_judged);
    return o->num_ret && o->qlen && o->ranks && o->grades;
}

/* the (num_ret, qrel_lengths, ranks, grades) tuple, or NULL; the buffers stay owned by o */
static PyObject *
outputs_pack(outputs *o)
{
    return PyTuple_Pack(4, o->num_ret, o->qlen, o->ranks, o->grades);
}

static void
outputs_free(outputs *o)
{
    Py_XDECREF(o->num_ret);
    Py_XDECREF(o->qlen);
    Py_XDECREF(o->ranks);
    Py_XDECREF(o->grades);
}

/* the per-query containers of one chunk: two exact lists of the same length, or 0 (decline) */
static int
chunk_lists(PyObject *a, PyObject *b, Py_ssize_t *n)
{
    if (!PyList_CheckExact(a) || !PyList_CheckExact(b) || PyList_GET_SIZE(a) != PyList_GET_SIZE(b)) return 0;
    *n = PyList_GET_SIZE(a);
    return 1;
}

/* room for count items of size bytes, or NULL with MemoryError set (overflow included) */
static void *
alloc_items(Py_ssize_t count, size_t size)
{
    size_t c = count > 0 ? (size_t)count : 1;
    if (c > (size_t)PY_SSIZE_T_MAX / size) {
        PyErr_NoMemory();
        return NULL;
    }
    void *p = PyMem_Malloc(c * size);
    if (!p) PyErr_NoMemory();
    return p;
}

static PyObject *
rank_chunk(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *runs, *judged;
    Py_ssize_t scan_limit = SCAN_LIMIT, n = 0;
    if (!PyArg_ParseTuple(args, "OO|n", &runs, &judged, &scan_limit)) return NULL;
    if (!chunk_lists(runs, judged, &n)) Py_RETURN_NONE;

    entry *buf = NULL;
    double *scores = NULL;
    PyObject **keys = NULL;
    outputs out = {NULL, NULL, NULL, NULL};
    PyObject *result = NULL;
    int bail = 0;

    /* first pass: only exact dicts, and their sizes; nothing here or below can run Python code */
    Py_ssize_t total_judged = 0, longest = 0;
    for (Py_ssize_t q = 0; q < n; q++) {
        PyObject *r = PyList_GET_ITEM(runs, q), *j = PyList_GET_ITEM(judged, q);
        if (!PyDict_CheckExact(r) || !PyDict_CheckExact(j)) { bail = 1; goto done; }
        if (PyDict_GET_SIZE(r) > longest) longest = PyDict_GET_SIZE(r);
        total_judged += PyDict_GET_SIZE(j);
    }
    if (!outputs_alloc(&out, n, total_judged)) goto done;
    buf = alloc_items(longest, sizeof(entry));
    scores = alloc_items(longest, sizeof(double));
    keys = alloc_items(longest, sizeof(PyObject *));
    if (!buf || !scores || !keys) goto done;
    int64_t *num_ret = (int64_t *)PyByteArray_AS_STRING(out.num_ret);
    int64_t *qlen = (int64_t *)PyByteArray_AS_STRING(out.qlen);
    int64_t *ranks = (int64_t *)PyByteArray_AS_STRING(out.ranks);
    double *grades = (double *)PyByteArray_AS_STRING(out.grades);

    /* second pass: every write is checked against the sizes above (they cannot change, but a miss must not
     * turn into a write out of bounds) */
    Py_ssize_t at = 0;
    for (Py_ssize_t q = 0; q < n; q++) {
        PyObject *r = PyList_GET_ITEM(runs, q), *j = PyList_GET_ITEM(judged, q);
        Py_ssize_t len = 0, pos = 0;
        PyObject *key, *value;
        while (PyDict_Next(r, &pos, &key, &value)) {
            double s;
            if (len >= longest || !PyUnicode_CheckExact(key) || !as_double(value, &s) || s != s) {
                bail = 1;
                goto done;
            }
            scores[len] = s;
            keys[len] = key;
            len++;
        }
        num_ret[q] = len;
        Py_ssize_t nj = PyDict_GET_SIZE(j);
        if (nj > total_judged - at) { bail = 1; goto done; }
        qlen[q] = nj;
        if (!nj) continue;
        int sorted = len > 1 && nj > scan_limit;
        if (sorted) {
            for (Py_ssize_t i = 0; i < len; i++) {
                buf[i].score = scores[i];
                buf[i].key = keys[i];
            }
            qsort(buf, (size_t)len, sizeof(entry), entry_order);
        }
        Py_ssize_t end = at + nj;
        pos = 0;
        while (PyDict_Next(j, &pos, &key, &value)) {
            double g;
            /* exact str keys looked up in a dict whose keys were all just checked to be exact str */
            if (at >= end || !PyUnicode_CheckExact(key) || !as_double(value, &g)) { bail = 1; goto done; }
            grades[at] = g;
            PyObject *hit = PyDict_GetItemWithError(r, key);
            if (hit == NULL) {
                if (PyErr_Occurred()) goto done;
                ranks[at++] = -1;
                continue;
            }
            double s = 0.0;
            if (!as_double(hit, &s)) { bail = 1; goto done; }
            int64_t rank = 0;
            if (sorted) {
                /* the judged document is in buf: its position is the count of entries ordered before it */
                entry probe = {s, key};
                Py_ssize_t lo = 0, hi = len;
                while (lo < hi) {
                    Py_ssize_t mid = lo + (hi - lo) / 2;
                    if (entry_order(&buf[mid], &probe) < 0) lo = mid + 1;
                    else hi = mid;
                }
                rank = lo;
            } else {
                /* branch-free counts over a contiguous array: random score order mispredicts any branch */
                int64_t same = 0;
                for (Py_ssize_t i = 0; i < len; i++) {
                    rank += scores[i] > s;
                    same += scores[i] == s;
                }
                if (same > 1) {
                    for (Py_ssize_t i = 0; i < len; i++) {
                        if (scores[i] == s && keys[i] != key && PyUnicode_Compare(keys[i], key) > 0) rank++;
                    }
                }
            }
            ranks[at++] = rank;
        }
        if (at != end) { bail = 1; goto done; }
    }
    if (at != total_judged) { bail = 1; goto done; }
    result = outputs_pack(&out);

done:
    PyMem_Free(buf);
    PyMem_Free(scores);
    PyMem_Free(keys);
    outputs_free(&out);
    if (bail) {
        Py_XDECREF(result);
        Py_RETURN_NONE;
    }
    return result;
}

#define PREFETCH 16
#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH_OBJ(p) __builtin_prefetch((const void *)(p), 0, 1)
#else
#define PREFETCH_OBJ(p) ((void)0)
#endif

/* one ranking's documents in an open-addressing table: slot -> 1 + position (0: empty), with the cached str hash */
typedef struct {
    Py_hash_t hash;
    Py_ssize_t pos1;
} slot;

static int
same_str(PyObject *a, PyObject *b)
{
    /* exact str on both sides: no Python code runs; identity first, as ids are often the same object */
    return a == b || PyUnicode_Compare(a, b) == 0;
}

static PyObject *
rank_lists_chunk(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *lists, *judged;
    Py_ssize_t n = 0;
    if (!PyArg_ParseTuple(args, "OO", &lists, &judged)) return NULL;
    if (!chunk_lists(lists, judged, &n)) Py_RETURN_NONE;

    slot *table = NULL;
    outputs out = {NULL, NULL, NULL, NULL};
    PyObject *result = NULL;
    int bail = 0;

    /* first pass: exact lists/tuples and exact dicts, and their sizes; no Python code runs in this function */
    Py_ssize_t total_judged = 0, longest = 0;
    for (Py_ssize_t q = 0; q < n; q++) {
        PyObject *r = PyList_GET_ITEM(lists, q), *j = PyList_GET_ITEM(judged, q);
        if ((!PyList_CheckExact(r) && !PyTuple_CheckExact(r)) || !PyDict_CheckExact(j)) { bail = 1; goto done; }
        if (PySequence_Fast_GET_SIZE(r) > longest) longest = PySequence_Fast_GET_SIZE(r);
        total_judged += PyDict_GET_SIZE(j);
    }
    if (longest > PY_SSIZE_T_MAX / 4) {
        PyErr_NoMemory();
        goto done;
    }
    size_t cap = 8;
    while (cap < (size_t)longest * 2) cap <<= 1;
    if (!outputs_alloc(&out, n, total_judged)) goto done;
    table = alloc_items((Py_ssize_t)cap, sizeof(slot));
    if (!table) goto done;
    int64_t *num_ret = (int64_t *)PyByteArray_AS_STRING(out.num_ret);
    int64_t *qlen = (int64_t *)PyByteArray_AS_STRING(out.qlen);
    int64_t *ranks = (int64_t *)PyByteArray_AS_STRING(out.ranks);
    double *grades = (double *)PyByteArray_AS_STRING(out.grades);

    /* second pass: sizes re-checked against the buffers before any write */
    Py_ssize_t at = 0;
    for (Py_ssize_t q = 0; q < n; q++) {
        PyObject *r = PyList_GET_ITEM(lists, q), *j = PyList_GET_ITEM(judged, q);
        Py_ssize_t len = PySequence_Fast_GET_SIZE(r);
        PyObject **items = PySequence_Fast_ITEMS(r);
        if (len > longest) { bail = 1; goto done; }
        num_ret[q] = len;
        size_t size = 8;
        while (size < (size_t)len * 2) size <<= 1;
        size_t mask = size - 1;
        memset(table, 0, sizeof(slot) * size);
        /* every id once: a duplicate declines the chunk, and the pure path raises its error naming query and doc */
        /* the ids are scattered objects, one cache miss each: ask for the next ones while this one is hashed */
        for (Py_ssize_t i = 0; i < len && i < PREFETCH; i++) PREFETCH_OBJ(items[i]);
        for (Py_ssize_t i = 0; i < len; i++) {
            PyObject *doc = items[i];
            if (i + PREFETCH < len) PREFETCH_OBJ(items[i + PREFETCH]);
            if (!PyUnicode_CheckExact(doc)) { bail = 1; goto done; }
            Py_hash_t h = PyObject_Hash(doc);
            if (h == -1) goto done;
            size_t k = (size_t)h & mask;
            while (table[k].pos1) {
                if (table[k].hash == h && same_str(items[table[k].pos1 - 1], doc)) { bail = 1; goto done; }
                k = (k + 1) & mask;
            }
            table[k].hash = h;
            table[k].pos1 = i + 1;
        }
        Py_ssize_t nj = PyDict_GET_SIZE(j);
        if (nj > total_judged - at) { bail = 1; goto done; }
        qlen[q] = nj;
        Py_ssize_t end = at + nj, pos = 0;
        PyObject *key, *value;
        while (PyDict_Next(j, &pos, &key, &value)) {
            double g;
            if (at >= end || !PyUnicode_CheckExact(key) || !as_double(value, &g)) { bail = 1; goto done; }
            grades[at] = g;
            int64_t rank = -1;
            if (len) {
                Py_hash_t h = PyObject_Hash(key);
                if (h == -1) goto done;
                size_t k = (size_t)h & mask;
                while (table[k].pos1) {
                    if (table[k].hash == h && same_str(items[table[k].pos1 - 1], key)) {
                        rank = table[k].pos1 - 1;
                        break;
                    }
                    k = (k + 1) & mask;
                }
            }
            ranks[at++] = rank;
        }
        if (at != end) { bail = 1; goto done; }
    }
    if (at != total_judged) { bail = 1; goto done; }
    result = outputs_pack(&out);

done:
    PyMem_Free(table);
    outputs_free(&out);
    if (bail) {
        Py_XDECREF(result);
        Py_RETURN_NONE;
    }
    return result;
}

/* -- resample_sums: the bootstrap's per-resample sums, without the GIL ------------------------------------------ */

/* a C-contiguous 2-D buffer of 8-byte items whose format is one of `formats`; 0 with an exception set otherwise */
static int
matrix_view(PyObject *obj, Py_buffer *view, int writable, const char *formats, const char *what)
{
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    int ok = PyObject_GetBuffer(obj, view, flags) == 0;
    if (ok) {
        const char *f = view->format ? view->format : "B";
        ok = view->ndim == 2 && view->itemsize == 8 && strlen(f) == 1 && strchr(formats, f[0]) != NULL;
        if (!ok) PyBuffer_Release(view);
    }
    if (!ok) { /* not a buffer, strided, read-only, another type or byte order: one message naming the argument */
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "resample_sums: %s must be a C-contiguous%s 2-D array of %s", what,
                     writable ? ", writable" : "", formats[0] == 'd' ? "native float64" : "native int64");
    }
    return ok;
}

/* a[k] = sum over i of counts[i] * x[i * m + k] for k < width (1 to 4), added in row order; one loop per width so
 * that the compiler keeps the sums in registers */
#define DOT_LOOP(BODY)                                                                                              \
    for (Py_ssize_t i = 0; i < n; i++) {                                                                          \
        const double c = (double)counts[i];                                                                         \
        const double *row = x + i * m;                                                                              \
        BODY                                                                                                        \
    }
static void
dot_counts(const int32_t *counts, const double *x, Py_ssize_t n, Py_ssize_t m, Py_ssize_t width, double *a)
{
    double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0;
    switch (width) {
    case 1: DOT_LOOP(a0 += c * row[0];) break;
    case 2: DOT_LOOP(a0 += c * row[0]; a1 += c * row[1];) break;
    case 3: DOT_LOOP(a0 += c * row[0]; a1 += c * row[1]; a2 += c * row[2];) break;
    default: DOT_LOOP(a0 += c * row[0]; a1 += c * row[1]; a2 += c * row[2]; a3 += c * row[3];) break;
    }
    a[0] = a0;
    a[1] = a1;
    a[2] = a2;
    a[3] = a3;
}
#undef DOT_LOOP

static PyObject *
resample_sums(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *index_obj, *matrix_obj, *out_obj;
    if (!PyArg_ParseTuple(args, "OOO", &index_obj, &matrix_obj, &out_obj)) return NULL;
    Py_buffer index, matrix, out;
    if (!matrix_view(index_obj, &index, 0, "lq", "index")) return NULL;
    if (!matrix_view(matrix_obj, &matrix, 0, "d", "matrix")) {
        PyBuffer_Release(&index);
        return NULL;
    }
    if (!matrix_view(out_obj, &out, 1, "d", "out")) {
        PyBuffer_Release(&index);
        PyBuffer_Release(&matrix);
        return NULL;
    }
    const Py_ssize_t rows = index.shape[0], n = index.shape[1], m = matrix.shape[1];
    PyObject *result = NULL;
    if (matrix.shape[0] != n || out.shape[0] != rows || out.shape[1] != m || n < 1 || m < 1) {
        PyErr_Format(PyExc_ValueError,
                     "resample_sums: shapes do not fit: index %zd x %zd, matrix %zd x %zd, out %zd x %zd",
                     rows, n, matrix.shape[0], m, out.shape[0], out.shape[1]);
        goto done;
    }
    if (n > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "resample_sums: more than 2**31 - 1 rows");
        goto done;
    }
    const int64_t *idx = (const int64_t *)index.buf;
    const double *x = (const double *)matrix.buf;
    double *sums = (double *)out.buf;
    int bad = 0, no_memory = 0;
    /* Each resample: count how often each row was drawn (each index is read once and checked against n before it
     * is used: another thread may write the arrays while the GIL is released), then out[r, k] = sum over i of
     * count[i] * matrix[i, k], added in row order i = 0, 1, ..., n - 1, four metrics at a time in registers. The
     * counts (4 bytes a row: no count can pass n) stay in cache where a gather of the matrix's rows would not. */
    Py_BEGIN_ALLOW_THREADS
    int32_t *counts = PyMem_RawCalloc((size_t)n, sizeof(int32_t));
    if (counts == NULL) no_memory = 1;
    for (Py_ssize_t r = 0; r < rows && counts != NULL; r++) {
        const int64_t *drawn = idx + r * n;
        for (Py_ssize_t j = 0; j < n; j++) {
            const int64_t v = drawn[j];
            if (v < 0 || v >= n) {
                bad = 1;
                break;
            }
            counts[v]++;
        }
        if (bad) break;
        for (Py_ssize_t k0 = 0; k0 < m; k0 += 4) {
            const Py_ssize_t width = m - k0 < 4 ? m - k0 : 4;
            double a[4] = {0.0, 0.0, 0.0, 0.0};
            dot_counts(counts, x + k0, n, m, width, a);
            memcpy(sums + r * m + k0, a, (size_t)width * sizeof(double));
        }
        memset(counts, 0, (size_t)n * sizeof(int32_t));
    }
    PyMem_RawFree(counts);
    Py_END_ALLOW_THREADS
    if (no_memory) {
        PyErr_NoMemory();
        goto done;
    }
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "resample_sums: an index is outside [0, n)");
        goto done;
    }
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&index);
    PyBuffer_Release(&matrix);
    PyBuffer_Release(&out);
    return result;
}

static PyMethodDef methods[] = {
    {"rank_chunk", rank_chunk, METH_VARARGS,
     "rank_chunk(runs, judged, scan_limit=48) -> (num_ret, qrel_lengths, ranks, grades) as bytearrays, or "
     "None: use the pure path. runs and judged: lists of each query's run and qrels dicts. Queries with more "
     "than scan_limit judged documents rank by sorting their run."},
    {"rank_lists_chunk", rank_lists_chunk, METH_VARARGS,
     "rank_lists_chunk(lists, judged) -> (num_ret, qrel_lengths, ranks, grades) as bytearrays, or None: "
     "use the pure path (anything but lists/tuples of str, dicts of str -> float/int, or a document listed twice)."},
    {"resample_sums", resample_sums, METH_VARARGS,
     "resample_sums(index, matrix, out) -> None: out[r, k] = sum over i of (times i is drawn in index[r]) * "
     "matrix[i, k], added in row order, with the GIL released. index: int64 rows x n, matrix: float64 n x m, out: float64 rows x m, "
     "all C-contiguous; an index outside [0, n) raises ValueError."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_fastrank",
    .m_doc = "Compiled reader of run/qrels dicts for the metrics engine, and the bootstrap's resample sums "
             "(optional).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__fastrank(void)
{
    return PyModule_Create(&module);
}
