/* Optional accelerator of evret_core.metrics.trecscan: one pass over a block of TREC run or qrels lines.
 *
 * scan(data, nfields, want_tag[, as_dicts]) reads `data` (any bytes-like object; whole lines, the last one may lack its
 * '\n'), nfields = 6 (run: query_id Q0 doc_id rank score run_tag) or 4 (qrels: query_id iteration doc_id grade),
 * and returns (ids, values, group_qids, group_sizes, group_bytes, tag, repeats, error, newlines):
 *   ids          bytearray: each result line's document id followed by a space, in file order;
 *   values       bytearray of float64: each line's score (run) or grade (qrels);
 *   group_qids   list of str: one per stretch of adjacent lines with the same query id;
 *   group_sizes  bytearray of int64: the lines of each stretch; group_bytes: the bytes of its ids;
 *   tag          the run tag (str) of the first result line when want_tag is true and nfields is 6, else None;
 *   repeats      True when some stretch lists a document id twice (found with a hash table per stretch);
 *   error        None, or (line index in the block, start, end) of the first bad line: the outputs then hold the
 *                lines before it, and the caller re-reads that one line with the Python reader for its message;
 *   newlines     the number of '\n' in the block.
 * With as_dicts, ids is instead a list of one {doc_id: value} dict per stretch (values is empty): what the dict
 * readers want, without the columns in between; a repeated document sets `repeats` as in the columns.
 * The rules are those of the Python reader (evret_core.metrics.trec.line_fields): fields are split on what
 * str.split() splits on (ASCII whitespace, 0x1c-0x1f, and the Unicode spaces, read from their UTF-8 bytes); a
 * blank line or one whose first field starts with '#' is skipped; a line is bad when it is not strict UTF-8
 * (overlong forms, surrogates and code points past U+10FFFF included), holds a NUL byte, has another number of
 * fields (run: fewer than 6 or 12 and more, two lines joined; qrels: not 4), or its value is not a number (float()'s grammar: plain decimals are read here, correctly rounded; any
 * other text is handed to float() itself) or is NaN.
 *
 * query_dicts(...) builds a ColumnarRun's per-query dicts from its columns (see the function).
 *
 * Memory safety: the input is held as a buffer for the whole call (it cannot be resized), the outputs are created
 * here and sized from a first count of the block's lines before anything is written (every write is still
 * checked), and no Python code runs: only str creation and float() on an exact str.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MAXF 6

/* a dict sized for n entries: CPython's private presizing call where the headers have it (3.8-3.13), else a plain
 * dict (it then grows as it fills) */
#if PY_VERSION_HEX >= 0x03080000 && PY_VERSION_HEX < 0x030e0000 && !defined(Py_LIMITED_API)
#define NEW_DICT(n) _PyDict_NewPresized(n)
#else
#define NEW_DICT(n) PyDict_New()
#endif

/* 0: part of a field, 1: whitespace, 2: NUL (a bad line), 3: first byte of a multi-byte UTF-8 sequence (or bad) */
static unsigned char cls[256];

static void
init_classes(void)
{
    for (int b = 0; b < 256; b++) cls[b] = b >= 0x80 ? 3 : 0;
    const char *space = " \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f";
    for (const char *s = space; *s; s++) cls[(unsigned char)*s] = 1;
    cls[0] = 2;
}

/* the length of the well-formed UTF-8 sequence at p (Unicode table 3-7), 0 when it is not one; *space: whether
 * it is a character str.split() splits on (U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029, U+202F,
 * U+205F, U+3000) */
static int
utf8_char(const unsigned char *p, const unsigned char *e, int *space)
{
    unsigned char b = p[0];
    *space = 0;
    if (b >= 0xc2 && b <= 0xdf) {
        if (e - p < 2 || (p[1] & 0xc0) != 0x80) return 0;
        *space = b == 0xc2 && (p[1] == 0x85 || p[1] == 0xa0);
        return 2;
    }
    if (b >= 0xe0 && b <= 0xef) {
        if (e - p < 3 || (p[2] & 0xc0) != 0x80) return 0;
        unsigned char lo = b == 0xe0 ? 0xa0 : 0x80, hi = b == 0xed ? 0x9f : 0xbf;
        if (p[1] < lo || p[1] > hi) return 0;
        if (b == 0xe1) *space = p[1] == 0x9a && p[2] == 0x80;
        else if (b == 0xe2) *space = (p[1] == 0x80 && (p[2] <= 0x8a || p[2] == 0xa8 || p[2] == 0xa9 || p[2] == 0xaf))
                                     || (p[1] == 0x81 && p[2] == 0x9f);
        else if (b == 0xe3) *space = p[1] == 0x80 && p[2] == 0x80;
        return 3;
    }
    if (b >= 0xf0 && b <= 0xf4) {
        if (e - p < 4 || (p[2] & 0xc0) != 0x80 || (p[3] & 0xc0) != 0x80) return 0;
        unsigned char lo = b == 0xf0 ? 0x90 : 0x80, hi = b == 0xf4 ? 0x8f : 0xbf;
        if (p[1] < lo || p[1] > hi) return 0;
        return 4;
    }
    return 0;
}

static const double pow10s[23] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14,
                                  1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* a field as float() reads it: 1 with *out set, 0 when float() refuses it, -1 with an exception set */
static int
number(const char *s, Py_ssize_t n, double *out)
{
    /* [+-]digits[.digits][(e|E)[+-]digits]: exact when the digits fit 2**53 and the power of ten is <= 22
     * (both exact doubles, so one correctly rounded operation); else Python's own correctly rounded reader */
    Py_ssize_t i = 0;
    int neg = 0, digits = 0, sig = 0, exact = 1;
    uint64_t m = 0;
    long e10 = 0;
    if (i < n && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
    for (; i < n && s[i] >= '0' && s[i] <= '9'; i++, digits++) {
        if (m || s[i] != '0') sig++;
        if (sig > 19) exact = 0;
        else m = m * 10 + (uint64_t)(s[i] - '0');
    }
    if (i < n && s[i] == '.') {
        for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++, digits++) {
            if (m || s[i] != '0') sig++;
            if (sig > 19) exact = 0;
            else { m = m * 10 + (uint64_t)(s[i] - '0'); e10--; }
        }
    }
    int plain = digits > 0;
    if (plain && i < n && (s[i] == 'e' || s[i] == 'E')) {
        Py_ssize_t j = i + 1;
        int eneg = 0, edigits = 0;
        long ev = 0;
        if (j < n && (s[j] == '+' || s[j] == '-')) eneg = s[j++] == '-';
        for (; j < n && s[j] >= '0' && s[j] <= '9'; j++, edigits++) {
            if (ev < 100000) ev = ev * 10 + (s[j] - '0');
        }
        if (!edigits) plain = 0;
        e10 += eneg ? -ev : ev;
        i = j;
    }
    if (plain && i == n) {
        if (exact && m <= ((uint64_t)1 << 53) && e10 >= -22 && e10 <= 22) {
            double v = (double)m;
            v = e10 < 0 ? v / pow10s[-e10] : v * pow10s[e10];
            *out = neg ? -v : v;
            return 1;
        }
        char small[128], *buf = small;
        if (n >= (Py_ssize_t)sizeof(small)) {
            buf = PyMem_Malloc((size_t)n + 1);
            if (!buf) { PyErr_NoMemory(); return -1; }
        }
        memcpy(buf, s, (size_t)n);
        buf[n] = '\0';
        char *end = NULL;
        double v = PyOS_string_to_double(buf, &end, NULL); /* overflow gives +-inf, as float() does */
        int ok = !(v == -1.0 && PyErr_Occurred()) && end == buf + n;
        if (buf != small) PyMem_Free(buf);
        if (!ok) { PyErr_Clear(); return 0; }
        *out = v;
        return 1;
    }
    /* inf, nan, underscores, non-ASCII digits...: float() itself (an exact str: no Python code runs) */
    PyObject *text = PyUnicode_DecodeUTF8(s, n, "strict");
    if (!text) return -1;
    PyObject *f = PyFloat_FromString(text);
    Py_DECREF(text);
    if (!f) {
        if (PyErr_ExceptionMatches(PyExc_ValueError)) { PyErr_Clear(); return 0; }
        return -1;
    }
    *out = PyFloat_AS_DOUBLE(f);
    Py_DECREF(f);
    return 1;
}

/* the ids of the current stretch of one query: an open-addressing table whose slots belong to the stretch when
 * their generation is the current one, so that a new stretch clears nothing */
typedef struct {
    uint64_t hash;
    Py_ssize_t off, len;
    uint64_t gen;
} dslot;

typedef struct {
    dslot *slots;
    size_t cap, used;
    uint64_t gen;
} dtable;

static uint64_t
hash_bytes(const char *s, Py_ssize_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ (uint64_t)n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdULL;
        h ^= h >> 32;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, s, (size_t)n);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ULL;
    return h ^ (h >> 29);
}

/* add the id at ids[off:off+len] to the table: 1 when it was there already, 0 when added, -1 on no memory */
static int
dtable_add(dtable *t, const char *ids, Py_ssize_t off, Py_ssize_t len)
{
    if ((t->used + 1) * 2 > t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 256;
        dslot *slots = PyMem_Calloc(cap, sizeof(dslot));
        if (!slots) return -1;
        for (size_t i = 0; i < t->cap; i++) {
            if (t->slots[i].gen != t->gen) continue;
            size_t k = (size_t)t->slots[i].hash & (cap - 1);
            while (slots[k].gen == t->gen) k = (k + 1) & (cap - 1);
            slots[k] = t->slots[i];
        }
        PyMem_Free(t->slots);
        t->slots = slots;
        t->cap = cap;
    }
    uint64_t h = hash_bytes(ids + off, len);
    size_t k = (size_t)h & (t->cap - 1);
    while (t->slots[k].gen == t->gen) {
        dslot *s = &t->slots[k];
        if (s->hash == h && s->len == len && memcmp(ids + s->off, ids + off, (size_t)len) == 0) return 1;
        k = (k + 1) & (t->cap - 1);
    }
    t->slots[k] = (dslot){h, off, len, t->gen};
    t->used++;
    return 0;
}

typedef struct {
    const unsigned char *start[MAXF];
    Py_ssize_t len[MAXF];
    Py_ssize_t count;
    int ascii; /* no byte >= 0x80 on the line */
} fields;

/* split [p, e) into fields; 0 when the line is bad (not UTF-8, a NUL byte) */
static int
split_line(const unsigned char *p, const unsigned char *e, fields *f)
{
    const unsigned char *field = NULL;
    f->count = 0;
    f->ascii = 1;
    while (p < e) {
        unsigned char k = cls[*p];
        if (k == 0) {
            if (!field) field = p;
            p++;
            while (p < e && cls[*p] == 0) p++;
            continue;
        }
        int step = 1, space = 1;
        if (k == 2) return 0;
        if (k == 3) {
            f->ascii = 0;
            step = utf8_char(p, e, &space);
            if (!step) return 0;
        }
        if (space && field) {
            if (f->count < MAXF) { f->start[f->count] = field; f->len[f->count] = p - field; }
            f->count++;
            field = NULL;
        } else if (!space && !field) {
            field = p;
        }
        p += step;
    }
    if (field) {
        if (f->count < MAXF) { f->start[f->count] = field; f->len[f->count] = e - field; }
        f->count++;
    }
    return 1;
}

static PyObject *
scan(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer view;
    int nfields, want_tag, as_dicts = 0;
    if (!PyArg_ParseTuple(args, "y*ip|p", &view, &nfields, &want_tag, &as_dicts)) return NULL;
    if (nfields != 4 && nfields != 6) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "scan: nfields must be 4 (qrels) or 6 (run)");
        return NULL;
    }
    const unsigned char *data = (const unsigned char *)view.buf, *end = data + view.len;
    const int doc_at = 2, value_at = nfields == 6 ? 4 : 3;
    PyObject *ids = NULL, *values = NULL, *qids = NULL, *sizes = NULL, *bytes = NULL, *tag = NULL, *error = NULL;
    PyObject *dicts = NULL, *current = NULL; /* as_dicts: one new dict per stretch; current is borrowed from dicts */
    PyObject *result = NULL;
    dtable table = {NULL, 0, 0, 1}; /* generation 1: calloc'd slots (generation 0) are empty */
    int repeats = 0;

    /* every output is at most one entry per line, and the ids at most the block's bytes (each id is followed by
     * whitespace or the line end in the block) */
    Py_ssize_t lines = 1;
    for (const unsigned char *p = data; (p = memchr(p, '\n', (size_t)(end - p))) != NULL; p++) lines++;
    if (lines > PY_SSIZE_T_MAX / 8) { PyErr_NoMemory(); goto done; }
    ids = PyByteArray_FromStringAndSize(NULL, as_dicts ? 0 : view.len);
    values = PyByteArray_FromStringAndSize(NULL, as_dicts ? 0 : lines * 8);
    dicts = PyList_New(0);
    sizes = PyByteArray_FromStringAndSize(NULL, lines * 8);
    bytes = PyByteArray_FromStringAndSize(NULL, lines * 8);
    qids = PyList_New(0);
    if (!ids || !values || !sizes || !bytes || !qids || !dicts) goto done;
    char *id_out = PyByteArray_AS_STRING(ids);
    double *value_out = (double *)PyByteArray_AS_STRING(values);
    int64_t *size_out = (int64_t *)PyByteArray_AS_STRING(sizes), *bytes_out = (int64_t *)PyByteArray_AS_STRING(bytes);
    Py_ssize_t n_ids = 0, n_values = 0, groups = 0, line = 0;
    const unsigned char *group_qid = NULL;
    Py_ssize_t group_len = 0;

    for (const unsigned char *p = data; p < end; line++) {
        const unsigned char *nl = memchr(p, '\n', (size_t)(end - p));
        const unsigned char *stop = nl ? nl : end, *next = nl ? nl + 1 : end;
        fields f;
        int ok = split_line(p, stop, &f);
        if (ok && (f.count == 0 || f.start[0][0] == '#')) { p = next; continue; }
        double v = 0.0;
        if (ok && f.count >= nfields && f.count < (nfields == 6 ? 12 : 5)) {
            int got = number((const char *)f.start[value_at], f.len[value_at], &v);
            if (got < 0) goto done;
            ok = got && v == v;
        } else {
            ok = 0;
        }
        if (!ok) {
            error = Py_BuildValue("(nnn)", line, (Py_ssize_t)(p - data), (Py_ssize_t)(stop - data));
            if (!error) goto done;
            break;
        }
        Py_ssize_t dl = f.len[doc_at];
        if (groups >= lines || (!as_dicts && (n_values >= lines || n_ids + dl + 1 > view.len))) {
            /* cannot happen: the sizes above bound them */
            PyErr_SetString(PyExc_RuntimeError, "scan: output overflow");
            goto done;
        }
        if (!group_qid || group_len != f.len[0] || memcmp(group_qid, f.start[0], (size_t)group_len) != 0) {
            PyObject *q = PyUnicode_DecodeUTF8((const char *)f.start[0], f.len[0], "strict");
            if (!q) goto done;
            int bad = PyList_Append(qids, q);
            Py_DECREF(q);
            if (bad) goto done;
            group_qid = f.start[0];
            group_len = f.len[0];
            table.gen++;
            table.used = 0;
            if (as_dicts) {
                /* sized for as many documents as the stretch before (runs mostly have one depth): no resizes; at
                 * most 4,096, so that one long query does not oversize the next ones */
                int64_t hint = groups > 0 ? size_out[groups - 1] : 0;
                current = NEW_DICT((Py_ssize_t)(hint < 4096 ? hint : 4096));
                if (!current) goto done;
                bad = PyList_Append(dicts, current);
                Py_DECREF(current); /* dicts holds it, and nothing else can reach dicts */
                if (bad) goto done;
            }
            size_out[groups] = 0;
            bytes_out[groups] = 0;
            groups++;
        }
        size_out[groups - 1] += 1;
        bytes_out[groups - 1] += dl + 1;
        if (as_dicts) { /* the dict of the stretch: a repeat leaves its size unchanged */
            PyObject *key;
            if (f.ascii) { /* the common case: a compact ASCII str, filled directly */
                key = PyUnicode_New(dl, 127);
                if (key) memcpy(PyUnicode_DATA(key), f.start[doc_at], (size_t)dl);
            } else {
                key = PyUnicode_DecodeUTF8((const char *)f.start[doc_at], dl, "strict");
            }
            if (!key) goto done;
            PyObject *value = PyFloat_FromDouble(v);
            if (!value) { Py_DECREF(key); goto done; }
            Py_ssize_t before = PyDict_GET_SIZE(current);
            int bad = PyDict_SetItem(current, key, value);
            Py_DECREF(key);
            Py_DECREF(value);
            if (bad) goto done;
            repeats = repeats || PyDict_GET_SIZE(current) == before;
            goto tagged;
        }
        memcpy(id_out + n_ids, f.start[doc_at], (size_t)dl);
        id_out[n_ids + dl] = ' ';
        if (!repeats) {
            int seen = dtable_add(&table, id_out, n_ids, dl);
            if (seen < 0) { PyErr_NoMemory(); goto done; }
            repeats = seen;
        }
        n_ids += dl + 1;
        value_out[n_values++] = v;
    tagged:
        if (want_tag && nfields == 6 && !tag) {
            tag = PyUnicode_DecodeUTF8((const char *)f.start[5], f.len[5], "strict");
            if (!tag) goto done;
        }
        p = next;
    }
    if (PyByteArray_Resize(ids, n_ids) < 0 || PyByteArray_Resize(values, n_values * 8) < 0
        || PyByteArray_Resize(sizes, groups * 8) < 0 || PyByteArray_Resize(bytes, groups * 8) < 0) goto done;
    result = Py_BuildValue("(OOOOOOOOn)", as_dicts ? dicts : ids, values, qids, sizes, bytes, tag ? tag : Py_None,
                           repeats ? Py_True : Py_False, error ? error : Py_None, lines - 1);

done:
    PyMem_Free(table.slots);
    PyBuffer_Release(&view);
    Py_XDECREF(ids);
    Py_XDECREF(dicts);
    Py_XDECREF(values);
    Py_XDECREF(qids);
    Py_XDECREF(sizes);
    Py_XDECREF(bytes);
    Py_XDECREF(tag);
    Py_XDECREF(error);
    return result;
}

/* query_dicts(ids, byte_offsets, offsets, scores, first, last): the {doc_id: score} dicts of queries first..last-1
 * of a ColumnarRun's columns (ids: bytes, each id followed by a space; byte_offsets, offsets: int64; scores:
 * float64). Each offset is read once and checked against the buffers before it is used; ids that are not UTF-8,
 * or a query whose id count differs from its score count, are a ValueError. */
static PyObject *
query_dicts(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer ids, bo, off, sc;
    Py_ssize_t first, last;
    if (!PyArg_ParseTuple(args, "y*y*y*y*nn", &ids, &bo, &off, &sc, &first, &last)) return NULL;
    PyObject *out = NULL, *d = NULL;
    const char *text = (const char *)ids.buf;
    const int64_t *bytes_at = (const int64_t *)bo.buf, *at = (const int64_t *)off.buf;
    const double *scores = (const double *)sc.buf;
    Py_ssize_t nb = bo.len / 8, no = off.len / 8, ns = sc.len / 8;
    if (first < 0 || last < first || last >= nb || last >= no) {
        PyErr_SetString(PyExc_ValueError, "query_dicts: first/last outside the offsets");
        goto fail;
    }
    out = PyList_New(last - first);
    if (!out) goto fail;
    for (Py_ssize_t q = first; q < last; q++) {
        int64_t b0 = bytes_at[q], b1 = bytes_at[q + 1], s0 = at[q], s1 = at[q + 1];
        if (b0 < 0 || b1 < b0 || b1 > ids.len || s0 < 0 || s1 < s0 || s1 > ns) {
            PyErr_SetString(PyExc_ValueError, "query_dicts: offsets outside the columns");
            goto fail;
        }
        d = NEW_DICT((Py_ssize_t)(s1 - s0 < 4096 ? s1 - s0 : 4096)); /* no resize while it fills */
        if (!d) goto fail;
        int64_t k = s0;
        for (int64_t p = b0; p < b1;) {
            const char *sp = memchr(text + p, ' ', (size_t)(b1 - p));
            int64_t e = sp ? (int64_t)(sp - text) : b1;
            if (e > p) {
                if (k >= s1) {
                    PyErr_SetString(PyExc_ValueError, "query_dicts: more ids than scores");
                    goto fail;
                }
                PyObject *key = PyUnicode_DecodeUTF8(text + p, (Py_ssize_t)(e - p), "strict");
                if (!key) goto fail;
                PyObject *value = PyFloat_FromDouble(scores[k++]);
                if (!value) { Py_DECREF(key); goto fail; }
                int bad = PyDict_SetItem(d, key, value);
                Py_DECREF(key);
                Py_DECREF(value);
                if (bad) goto fail;
            }
            p = e + 1;
        }
        if (k != s1) {
            PyErr_SetString(PyExc_ValueError, "query_dicts: fewer ids than scores");
            goto fail;
        }
        PyList_SET_ITEM(out, q - first, d);
        d = NULL;
    }
    PyBuffer_Release(&ids);
    PyBuffer_Release(&bo);
    PyBuffer_Release(&off);
    PyBuffer_Release(&sc);
    return out;
fail:
    Py_XDECREF(d);
    Py_XDECREF(out);
    PyBuffer_Release(&ids);
    PyBuffer_Release(&bo);
    PyBuffer_Release(&off);
    PyBuffer_Release(&sc);
    return NULL;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS,
     "scan(data, nfields, want_tag) -> (ids, values, group_qids, group_sizes, group_bytes, tag, repeats, error, newlines): one block "
     "of TREC run (nfields=6) or qrels (nfields=4) lines as columns, stopping at the first bad line."},
    {"query_dicts", query_dicts, METH_VARARGS,
     "query_dicts(ids, byte_offsets, offsets, scores, first, last) -> the {doc_id: score} dicts of queries "
     "first..last-1 of a ColumnarRun's columns."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_trecscan",
    .m_doc = "Compiled tokenizer of TREC run and qrels files (optional).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__trecscan(void)
{
    init_classes();
    return PyModule_Create(&module);
}
