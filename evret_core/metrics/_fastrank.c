/* Optional accelerator of evret_core.metrics.engine.batch_from_run: reads the run and qrels dicts directly.
 *
 * rank_chunk(run, qrels, qids[, scan_limit]) walks each query's run dict once (PyDict_Next), then each judged document of its
 * qrels dict, and returns four bytearrays that numpy wraps without copying:
 *   num_ret (int64 per query), qrel_lengths (int64 per query),
 *   ranks (int64 per judgment, qrels order: 0-based trec_eval rank, -1 when not retrieved),
 *   grades (float64 per judgment).
 * The rank is the number of documents with a higher score plus the tied ones with a larger id (trec_eval: score
 * descending, ties by document id in descending string order; str comparison as Python's `>`).
 * Anything the pure numpy path would treat differently or report as an error (per-query containers that are
 * not plain dicts, non-str
 * ids, values that are not float/int, NaN scores, huge ints) makes it return None: the caller then runs the pure
 * path, which raises the same errors it always has. Each query's dicts are held by strong references; inside
 * them only exact str keys are looked up in dicts whose keys were all checked to be exact str, so no Python code
 * runs during the walk, and every output buffer is allocated before it.
 *
 * rank_lists_chunk(rankings, qrels, qids) does the same for already ranked lists {qid: [docid, ...]}: each list
 * is read once into a small open-addressing table (the str's cached hash, then str equality), which rejects a
 * document listed twice (None: the pure path raises its error naming query and document) and gives each judged
 * document's 0-based position (-1 when not listed). Same buffers as rank_chunk.
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
    /* numpy.float64 subclasses float and keeps its value where a float does */
    if (PyFloat_Check(v) && strcmp(Py_TYPE(v)->tp_name, "numpy.float64") == 0) {
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

static PyObject *
rank_chunk(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *run, *qrels, *qids;
    Py_ssize_t scan_limit = SCAN_LIMIT;
    if (!PyArg_ParseTuple(args, "OOO|n", &run, &qrels, &qids, &scan_limit)) return NULL;
    /* run and qrels may be dict subclasses (TrecRun): the caller checks they keep dict's lookup */
    if (!PyDict_Check(run) || !PyDict_Check(qrels) || !PyList_CheckExact(qids)) Py_RETURN_NONE;

    Py_ssize_t n = PyList_GET_SIZE(qids);
    PyObject **runs = NULL, **judged = NULL;
    entry *buf = NULL;
    double *scores = NULL;
    PyObject **keys = NULL;
    outputs out = {NULL, NULL, NULL, NULL};
    PyObject *result = NULL;
    int bail = 0;

    Py_ssize_t filled = 0;
    runs = PyMem_Malloc(sizeof(PyObject *) * (size_t)(n ? n : 1));
    judged = PyMem_Malloc(sizeof(PyObject *) * (size_t)(n ? n : 1));
    if (!runs || !judged) {
        PyErr_NoMemory();
        goto done;
    }
    /* first pass: the dicts of each query, sizes, and the checks that keep lookups free of Python code */
    Py_ssize_t total_judged = 0, longest = 0;
    for (Py_ssize_t q = 0; q < n; q++) {
        PyObject *qid = PyList_GET_ITEM(qids, q);
        if (!PyUnicode_CheckExact(qid)) { bail = 1; goto done; }
        PyObject *r = PyDict_GetItemWithError(run, qid);
        if (r == NULL && PyErr_Occurred()) goto done;
        PyObject *j = PyDict_GetItemWithError(qrels, qid);
        if (j == NULL && PyErr_Occurred()) goto done;
        if ((r && !PyDict_CheckExact(r)) || (j && !PyDict_CheckExact(j))) { bail = 1; goto done; }
        /* strong references: a later qid lookup could compare against an odd key type and run Python code */
        Py_XINCREF(r);
        Py_XINCREF(j);
        runs[q] = r;
        judged[q] = j;
        filled = q + 1;
        if (r && PyDict_GET_SIZE(r) > longest) longest = PyDict_GET_SIZE(r);
        if (j) total_judged += PyDict_GET_SIZE(j);
    }
    if (!outputs_alloc(&out, n, total_judged)) goto done;
    buf = PyMem_Malloc(sizeof(entry) * (size_t)(longest ? longest : 1));
    scores = PyMem_Malloc(sizeof(double) * (size_t)(longest ? longest : 1));
    keys = PyMem_Malloc(sizeof(PyObject *) * (size_t)(longest ? longest : 1));
    if (!buf || !scores || !keys) {
        PyErr_NoMemory();
        goto done;
    }
    int64_t *num_ret = (int64_t *)PyByteArray_AS_STRING(out.num_ret);
    int64_t *qlen = (int64_t *)PyByteArray_AS_STRING(out.qlen);
    int64_t *ranks = (int64_t *)PyByteArray_AS_STRING(out.ranks);
    double *grades = (double *)PyByteArray_AS_STRING(out.grades);

    Py_ssize_t at = 0;
    for (Py_ssize_t q = 0; q < n; q++) {
        PyObject *r = runs[q], *j = judged[q];
        Py_ssize_t len = 0, pos = 0;
        PyObject *key, *value;
        if (r) {
            while (PyDict_Next(r, &pos, &key, &value)) {
                double s;
                if (!PyUnicode_CheckExact(key) || !as_double(value, &s) || s != s) { bail = 1; goto done; }
                scores[len] = s;
                keys[len] = key;
                len++;
            }
        }
        num_ret[q] = len;
        Py_ssize_t nj = j ? PyDict_GET_SIZE(j) : 0;
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
        pos = 0;
        while (PyDict_Next(j, &pos, &key, &value)) {
            double g;
            if (!PyUnicode_CheckExact(key) || !as_double(value, &g)) { bail = 1; goto done; }
            grades[at] = g;
            PyObject *hit = r ? PyDict_GetItemWithError(r, key) : NULL;
            if (hit == NULL) {
                if (PyErr_Occurred()) goto done;
                ranks[at++] = -1;
                continue;
            }
            double s = 0.0;
            as_double(hit, &s); /* already checked in the walk above */
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
    }
    result = outputs_pack(&out);

done:
    for (Py_ssize_t q = 0; q < filled; q++) {
        Py_XDECREF(runs[q]);
        Py_XDECREF(judged[q]);
    }
    PyMem_Free(runs);
    PyMem_Free(judged);
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
    PyObject *rankings, *qrels, *qids;
    if (!PyArg_ParseTuple(args, "OOO", &rankings, &qrels, &qids)) return NULL;
    if (!PyDict_Check(rankings) || !PyDict_Check(qrels) || !PyList_CheckExact(qids)) Py_RETURN_NONE;

    Py_ssize_t n = PyList_GET_SIZE(qids);
    PyObject **lists = NULL, **judged = NULL;
    slot *table = NULL;
    outputs out = {NULL, NULL, NULL, NULL};
    PyObject *result = NULL;
    int bail = 0;
    Py_ssize_t filled = 0;

    lists = PyMem_Malloc(sizeof(PyObject *) * (size_t)(n ? n : 1));
    judged = PyMem_Malloc(sizeof(PyObject *) * (size_t)(n ? n : 1));
    if (!lists || !judged) {
        PyErr_NoMemory();
        goto done;
    }
    /* first pass: each query's list and judgments, held by strong references, and the sizes */
    Py_ssize_t total_judged = 0, longest = 0;
    for (Py_ssize_t q = 0; q < n; q++) {
        PyObject *qid = PyList_GET_ITEM(qids, q);
        if (!PyUnicode_CheckExact(qid)) { bail = 1; goto done; }
        PyObject *r = PyDict_GetItemWithError(rankings, qid);
        if (r == NULL && PyErr_Occurred()) goto done;
        PyObject *j = PyDict_GetItemWithError(qrels, qid);
        if (j == NULL && PyErr_Occurred()) goto done;
        if ((r && !PyList_CheckExact(r) && !PyTuple_CheckExact(r)) || !j || !PyDict_CheckExact(j)) {
            bail = 1;
            goto done;
        }
        Py_XINCREF(r);
        Py_INCREF(j);
        lists[q] = r;
        judged[q] = j;
        filled = q + 1;
        if (r && PySequence_Fast_GET_SIZE(r) > longest) longest = PySequence_Fast_GET_SIZE(r);
        total_judged += PyDict_GET_SIZE(j);
    }
    size_t cap = 8;
    while (cap < (size_t)longest * 2) cap <<= 1;
    if (!outputs_alloc(&out, n, total_judged)) goto done;
    table = PyMem_Malloc(sizeof(slot) * cap);
    if (!table) {
        PyErr_NoMemory();
        goto done;
    }
    int64_t *num_ret = (int64_t *)PyByteArray_AS_STRING(out.num_ret);
    int64_t *qlen = (int64_t *)PyByteArray_AS_STRING(out.qlen);
    int64_t *ranks = (int64_t *)PyByteArray_AS_STRING(out.ranks);
    double *grades = (double *)PyByteArray_AS_STRING(out.grades);

    Py_ssize_t at = 0;
    for (Py_ssize_t q = 0; q < n; q++) {
        PyObject *r = lists[q], *j = judged[q];
        Py_ssize_t len = r ? PySequence_Fast_GET_SIZE(r) : 0;
        PyObject **items = r ? PySequence_Fast_ITEMS(r) : NULL;
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
        qlen[q] = PyDict_GET_SIZE(j);
        Py_ssize_t pos = 0;
        PyObject *key, *value;
        while (PyDict_Next(j, &pos, &key, &value)) {
            double g;
            if (!PyUnicode_CheckExact(key) || !as_double(value, &g)) { bail = 1; goto done; }
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
    }
    result = outputs_pack(&out);

done:
    for (Py_ssize_t q = 0; q < filled; q++) {
        Py_XDECREF(lists[q]);
        Py_XDECREF(judged[q]);
    }
    PyMem_Free(lists);
    PyMem_Free(judged);
    PyMem_Free(table);
    outputs_free(&out);
    if (bail) {
        Py_XDECREF(result);
        Py_RETURN_NONE;
    }
    return result;
}

static PyMethodDef methods[] = {
    {"rank_chunk", rank_chunk, METH_VARARGS,
     "rank_chunk(run, qrels, qids, scan_limit=48) -> (num_ret, qrel_lengths, ranks, grades) as bytearrays, or "
     "None: use the pure path. Queries with more than scan_limit judged documents rank by sorting their run."},
    {"rank_lists_chunk", rank_lists_chunk, METH_VARARGS,
     "rank_lists_chunk(rankings, qrels, qids) -> (num_ret, qrel_lengths, ranks, grades) as bytearrays, or None: "
     "use the pure path (anything but lists/tuples of str, dicts of str -> float/int, or a document listed twice)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_fastrank",
    .m_doc = "Compiled reader of run/qrels dicts for the metrics engine (optional).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__fastrank(void)
{
    return PyModule_Create(&module);
}
