/* Optional accelerator of evret_core.io.trecscan: one pass over a block of TREC run or qrels lines.
 *
 * scan(data, nfields, want_tag[, into[, keep]]) reads `data` (any bytes-like object; whole lines, the last one may lack its
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
 * With `into` (a dict, not None or False), the lines go into it as {query_id: {doc_id: value}} instead of the
 * columns: ids is `into` itself and values is empty. A query already in `into` (its lines are not adjacent, or
 * an earlier block had some) gets its documents added to its dict, and a document already there sets `repeats`.
 * The float objects are shared within a call (one per distinct value: ties, grades) while values repeat.
 * With `keep` too (an exact dict, set or frozenset of query ids; dicts only), the lines of a query not in it are checked
 * but not put into `into`, and a document they list twice is no repeat (a shard's qrels: its own queries only).
 * The rules are those of the Python reader (evret_core.io.trecscan.line_fields): fields are split on what
 * str.split() splits on (ASCII whitespace, 0x1c-0x1f, and the Unicode spaces, read from their UTF-8 bytes); a
 * blank line or one whose first field starts with '#' is skipped; a line is bad when it is not strict UTF-8
 * (overlong forms, surrogates and code points past U+10FFFF included), holds a NUL byte, has another number of
 * fields (run: fewer than 6 or 12 and more, two lines joined; qrels: not 4), or its value is not a number
 * (float()'s grammar: plain decimals are read here, correctly rounded; any other text is handed to float() itself)
 * or is NaN. Lines of ASCII are split by a bit-mask lexer (lex_line), any other line by split_line.
 *
 * fill_dicts(...) puts a columns scan into such a dict (the scan made on another thread: see the function), and
 * query_dicts(...) builds a ColumnarRun's per-query dicts from its columns.
 *
 * Memory safety: the input is held as a buffer for the whole call (it cannot be resized), the outputs are created
 * here and sized from the block's length before anything is written (every write is still checked), and no
 * Python code runs but str creation, float() on an exact str and dict operations with exact str keys (a key of
 * another type put in `into` by the caller could run its __eq__: the dicts written to are held by strong references
 * meanwhile). Reads of 16 bytes (SSE2) are made only where 16 bytes remain before the end; the last bytes of a
 * block are copied to a local 64-byte buffer before they are read as masks.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__) && defined(__GNUC__)
#include <emmintrin.h>
#endif

#define MAXF 6

/* the rare paths kept out of line, so that the hot ones are inlined into the scan loop */
#if defined(__GNUC__)
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE
#endif

/* the bit-mask lexer needs GCC's or Clang's count-trailing-zeros (elsewhere every line is read by split_line) */
#if defined(__GNUC__) && !defined(TRECSCAN_NO_LEXER)
#define FAST_LEX 1
#else
#define FAST_LEX 0
#endif

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

/* strtod_l with a "C" locale object: glibc's and the BSDs' (macOS's) strtod are correctly rounded and need no GIL,
 * so a long decimal (a float's 17-digit repr) is read while other threads run; elsewhere Python's reader, with
 * the GIL. Build with -DTRECSCAN_NO_STRTOD_L to test that path. */
#if (defined(__GLIBC__) || defined(__APPLE__)) && !defined(TRECSCAN_NO_STRTOD_L)
#define HAVE_STRTOD_L 1
#include <locale.h>
#include <stdlib.h>
#if defined(__APPLE__)
#include <xlocale.h>
#endif
static locale_t c_locale;
#else
#define HAVE_STRTOD_L 0
#endif

static const double pow10s[23] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14,
                                  1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* number()'s decimals past the exact path (more than 19 digits, or past 2**53, or a power of ten past 22) */
static NOINLINE int
decimal_slow(const char *s, Py_ssize_t n, double *out, int python)
{
#if HAVE_STRTOD_L
    (void)python; /* the C library's reader needs no GIL */
#else
    if (!python) return 2;
#endif
    char small[128], *buf = small;
    if (n >= (Py_ssize_t)sizeof(small)) {
        buf = PyMem_RawMalloc((size_t)n + 1);
        if (!buf) {
            if (!python) return 2; /* (the retry with the GIL raises the MemoryError) */
            PyErr_NoMemory();
            return -1;
        }
    }
    memcpy(buf, s, (size_t)n);
    buf[n] = '\0';
    char *end = NULL;
#if HAVE_STRTOD_L
    /* a decimal of number()'s grammar, read correctly rounded (as float() reads it) in the "C" locale, whatever the
     * program's; overflow gives +-inf and underflow 0 or a subnormal, as float() does (ERANGE ignored) */
    double v = strtod_l(buf, &end, c_locale);
    int ok = end == buf + n;
#else
    double v = PyOS_string_to_double(buf, &end, NULL); /* overflow gives +-inf, as float() does */
    int ok = !(v == -1.0 && PyErr_Occurred()) && end == buf + n;
    if (!ok) PyErr_Clear();
#endif
    if (buf != small) PyMem_RawFree(buf);
    if (!ok) return 0;
    *out = v;
    return 1;
}

/* number()'s fields that are not plain decimals */
static NOINLINE int
float_slow(const char *s, Py_ssize_t n, double *out, int python)
{
    /* inf, nan, underscores, non-ASCII digits...: float() itself (an exact str: no Python code runs) */
    if (!python) return 2;
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
    return *out == *out; /* NaN: refused (only float() gives one) */
}

/* a field as float() reads it: 1 with *out set, 0 when float() refuses it or reads NaN, -1 with an exception set;
 * with python 0 (the GIL not held), 2 for a field that only Python's readers can read (they need the GIL) */
static inline int
number(const char *s, Py_ssize_t n, double *out, int python)
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
        return decimal_slow(s, n, out, python);
    }
    return float_slow(s, n, out, python);
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

static inline uint64_t
load64(const char *s)
{
    uint64_t w;
    memcpy(&w, s, 8);
    return w;
}

static inline uint32_t
load32(const char *s)
{
    uint32_t w;
    memcpy(&w, s, 4);
    return w;
}

/* whether a[0:n] and b[0:n] are equal: ids of 4 to 16 bytes (most query ids) by two overlapping loads each, not a
 * call to memcmp */
static inline int
same_bytes(const unsigned char *a, const unsigned char *b, Py_ssize_t n)
{
    if (n >= 8 && n <= 16)
        return load64((const char *)a) == load64((const char *)b)
               && load64((const char *)a + n - 8) == load64((const char *)b + n - 8);
    if (n >= 4 && n < 8)
        return load32((const char *)a) == load32((const char *)b)
               && load32((const char *)a + n - 4) == load32((const char *)b + n - 4);
    return memcmp(a, b, (size_t)n) == 0;
}

/* a hash of s[0:n] that reads only those bytes, each load a whole word (the tail overlaps the last full word, or is
 * two overlapping 4-byte loads: no byte-by-byte copy, which stalls the load that follows it) */
static uint64_t
hash_bytes(const char *s, Py_ssize_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ (uint64_t)n, w;
    if (n >= 8) {
        const char *last = s + n - 8;
        while (s < last) {
            h = (h ^ load64(s)) * 0xff51afd7ed558ccdULL;
            h ^= h >> 32;
            s += 8;
        }
        w = load64(last);
    } else if (n >= 4) {
        w = ((uint64_t)load32(s) << 32) | load32(s + n - 4);
    } else if (n > 0) {
        w = ((uint64_t)(unsigned char)s[0] << 16) | ((uint64_t)(unsigned char)s[n / 2] << 8) | (unsigned char)s[n - 1];
    } else {
        w = 0;
    }
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 32; /* the table takes the low bits: every input bit reaches them */
    h *= 0xff51afd7ed558ccdULL;
    return h ^ (h >> 29);
}

/* add the id at ids[off:off+len] to the table: 1 when it was there already, 0 when added, -1 on no memory; its hash
 * is read from src (the same bytes in the block: reading the copy just written would wait for those stores) */
static int
dtable_add(dtable *t, const char *ids, Py_ssize_t off, Py_ssize_t len, const char *src)
{
    if ((t->used + 1) * 2 > t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 256;
        dslot *slots = PyMem_RawCalloc(cap, sizeof(dslot)); /* the Raw allocator: called without the GIL */
        if (!slots) return -1;
        for (size_t i = 0; i < t->cap; i++) {
            if (t->slots[i].gen != t->gen) continue;
            size_t k = (size_t)t->slots[i].hash & (cap - 1);
            while (slots[k].gen == t->gen) k = (k + 1) & (cap - 1);
            slots[k] = t->slots[i];
        }
        PyMem_RawFree(t->slots);
        t->slots = slots;
        t->cap = cap;
    }
    uint64_t h = hash_bytes(src, len);
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

/* where a stretch's query id lies in the block (its str is made once the GIL is back) */
typedef struct {
    const unsigned char *start;
    Py_ssize_t len;
    int ascii;
} qspan;

typedef struct {
    const unsigned char *start[MAXF];
    Py_ssize_t len[MAXF];
    Py_ssize_t count;
    int ascii; /* no byte >= 0x80 on the line */
} fields;

/* the first byte at or after p that is not printable ASCII (0x21-0x7f: what most of a field is made of), or e; 16
 * bytes at a time with SSE2 (only ever loading 16 bytes that lie before e), else one at a time. Build with
 * -DTRECSCAN_SCALAR to test the byte loop on a machine that has SSE2. */
static inline const unsigned char *
skip_plain(const unsigned char *p, const unsigned char *e)
{
#if defined(__SSE2__) && defined(__GNUC__) && !defined(TRECSCAN_SCALAR)
    const __m128i space = _mm_set1_epi8(0x20);
    while (e - p >= 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)p);
        /* signed compare: bytes >= 0x80 are negative, so they are flagged with those <= 0x20 */
        unsigned m = (unsigned)_mm_movemask_epi8(_mm_cmpgt_epi8(x, space)) ^ 0xffffu;
        if (m) return p + __builtin_ctz(m);
        p += 16;
    }
#endif
    while (p < e && (signed char)*p > 0x20) p++;
    return p;
}

/* split the line at p (it ends at the next '\n' or at e) into fields; *stop: where it ends (its '\n', or e). 0 when
 * the line is bad (not UTF-8, a NUL byte). Field bytes are skipped by skip_plain; only the bytes it stops at
 * (separators, control bytes, the first byte of a multi-byte character) are looked at one by one. */
static int
split_line(const unsigned char *p, const unsigned char *e, fields *f, const unsigned char **stop)
{
    const unsigned char *field = NULL;
    f->count = 0;
    f->ascii = 1;
    for (;;) {
        const unsigned char *q = skip_plain(p, e);
        if (q != p && !field) field = p;
        p = q;
        if (p >= e) break;
        unsigned char b = *p, k = cls[b];
        if (k == 0) { /* a control byte that is no separator: part of a field */
            if (!field) field = p;
            p++;
            continue;
        }
        int step = 1, space = 1;
        if (k == 2) goto bad;
        if (k == 3) { /* a sequence never holds '\n' (continuation bytes are >= 0x80): checked against e */
            f->ascii = 0;
            step = utf8_char(p, e, &space);
            if (!step) goto bad;
        }
        if (space) {
            if (field) {
                if (f->count < MAXF) { f->start[f->count] = field; f->len[f->count] = p - field; }
                f->count++;
                field = NULL;
            }
            if (b == '\n') break;
        } else if (!field) {
            field = p;
        }
        p += step;
    }
    if (field) {
        if (f->count < MAXF) { f->start[f->count] = field; f->len[f->count] = p - field; }
        f->count++;
    }
    *stop = p;
    return 1;
bad: {
        const unsigned char *nl = memchr(p, '\n', (size_t)(e - p));
        *stop = nl ? nl : e;
        return 0;
    }
}

/* The fast path of split_line, for lines of ASCII without NUL (nearly every line of a real file): 64 bytes at a time
 * are turned into bit masks (whitespace, '\n', and "odd" bytes: NUL or >= 0x80), and the fields are read off the
 * bits where whitespace starts or stops, with no byte-by-byte loop and no load that waits on the one before. A line
 * with an odd byte is handed back (LEX_SLOW) to split_line, which knows UTF-8, and the lexer restarts after it. */
typedef struct {
    const unsigned char *base, *end; /* the 64 bytes at base (past end: read as spaces) */
    uint64_t ws, events;             /* events: the bits still to visit (whitespace edges, '\n', odd bytes) */
    uint64_t nl, odd;
} lexer;

enum { LEX_LINE, LEX_SLOW };

/* the index of the lowest set bit of x (x != 0) */
static inline int
lowest_bit(uint64_t x)
{
#if FAST_LEX
    return __builtin_ctzll(x);
#else
    int i = 0; /* not used where FAST_LEX is 0 (every line goes to split_line); kept so that the lexer compiles */
    while (!(x & 1)) { x >>= 1; i++; }
    return i;
#endif
}

static inline uint64_t
chunk_masks(const unsigned char *p, uint64_t *nl, uint64_t *odd)
{
    uint64_t ws = 0, n = 0, o = 0;
#if defined(__SSE2__) && defined(__GNUC__) && !defined(TRECSCAN_SCALAR)
    const __m128i lf = _mm_set1_epi8('\n'), sp = _mm_set1_epi8(' '), tab = _mm_set1_epi8(0x09),
                  fs = _mm_set1_epi8(0x1c), four = _mm_set1_epi8(4), three = _mm_set1_epi8(3), one = _mm_set1_epi8(1);
    for (int k = 0; k < 4; k++) {
        __m128i x = _mm_loadu_si128((const __m128i *)(p + 16 * k));
        __m128i a = _mm_sub_epi8(x, tab), b = _mm_sub_epi8(x, fs); /* 0x09-0x0d and 0x1c-0x1f, unsigned ranges */
        __m128i w = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, sp), _mm_cmpeq_epi8(_mm_min_epu8(a, four), a)),
                                 _mm_cmpeq_epi8(_mm_min_epu8(b, three), b));
        ws |= (uint64_t)(unsigned)_mm_movemask_epi8(w) << (16 * k);
        n |= (uint64_t)(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, lf)) << (16 * k);
        o |= (uint64_t)(unsigned)_mm_movemask_epi8(_mm_cmpgt_epi8(one, x)) << (16 * k); /* 0, or >= 0x80 */
    }
#else
    for (int k = 0; k < 64; k++) {
        unsigned char c = cls[p[k]];
        ws |= (uint64_t)(c == 1) << k;
        n |= (uint64_t)(p[k] == '\n') << k;
        o |= (uint64_t)(c >= 2) << k;
    }
#endif
    *nl = n;
    *odd = o;
    return ws;
}

/* the masks of the 64 bytes at base; carry: whether the byte before base is whitespace */
static inline void
lex_load(lexer *L, const unsigned char *base, uint64_t carry)
{
    L->base = base;
    if (L->end - base >= 64) {
        L->ws = chunk_masks(base, &L->nl, &L->odd);
    } else { /* the last bytes: a copy, spaces after them (no read past the end) */
        unsigned char tail[64];
        memset(tail, ' ', sizeof tail);
        memcpy(tail, base, (size_t)(L->end - base));
        L->ws = chunk_masks(tail, &L->nl, &L->odd);
    }
    L->events = (L->ws ^ ((L->ws << 1) | carry)) | L->nl | L->odd;
}

/* read the line at the lexer's position into f; *stop: its '\n' or the end. LEX_SLOW: the line holds an odd byte
 * (the lexer is then somewhere inside it: the caller restarts it after the line) */
static inline int
lex_line(lexer *L, fields *f, const unsigned char **stop)
{
    const unsigned char *field = NULL;
    f->count = 0;
    f->ascii = 1;
    for (;;) {
        while (!L->events) {
            if (L->end - L->base <= 64) { /* no byte left: the line ends at the end */
                if (field) {
                    if (f->count < MAXF) { f->start[f->count] = field; f->len[f->count] = L->end - field; }
                    f->count++;
                }
                *stop = L->end;
                return LEX_LINE;
            }
            lex_load(L, L->base + 64, L->ws >> 63);
        }
        int i = lowest_bit(L->events);
        const unsigned char *at = L->base + i;
        uint64_t bit = (uint64_t)1 << i;
        if (at >= L->end) { /* the spaces after the end */
            L->events = 0;
            continue;
        }
        L->events ^= bit;
        if (L->odd & bit) return LEX_SLOW;
        if (L->ws & bit) {
            if (field) {
                if (f->count < MAXF) { f->start[f->count] = field; f->len[f->count] = at - field; }
                f->count++;
                field = NULL;
            }
            if (L->nl & bit) {
                *stop = at;
                return LEX_LINE;
            }
        } else {
            field = at;
        }
    }
}

/* a str of the UTF-8 bytes s[0:n] (already checked by split_line); ascii: the caller knows they are ASCII, so the
 * compact ASCII str is filled directly */
static PyObject *
make_str(const unsigned char *s, Py_ssize_t n, int ascii)
{
    if (!ascii) return PyUnicode_DecodeUTF8((const char *)s, n, "strict");
    PyObject *out = PyUnicode_New(n, 127);
    if (out) memcpy(PyUnicode_DATA(out), s, (size_t)n);
    return out;
}

/* the float objects of one call, by their bits: scores and grades repeat (ties, grades 0-3), and one object per
 * value saves an allocation and 24 bytes per line; a direct-mapped table, a miss replaces the slot. Scores that
 * hardly repeat (a dense retriever's) gain nothing from it and pay the lookup: the cache is checked every
 * FCHECK lookups and left off for the rest of the call when fewer than one in FRARE of them hit. */
#define FCACHE 1024
#define FCHECK 4096
#define FRARE 8
typedef struct {
    uint64_t bits;
    PyObject *value;
} fslot;

typedef struct {
    fslot *slots; /* NULL: off (not allocated, or switched off) */
    Py_ssize_t lookups, hits;
} fcache;

static void
fcache_clear(fcache *c)
{
    if (!c->slots) return;
    for (int i = 0; i < FCACHE; i++) Py_XDECREF(c->slots[i].value);
    PyMem_Free(c->slots);
    c->slots = NULL;
}

static inline PyObject *
cached_float(fcache *c, double v)
{
    if (!c->slots) return PyFloat_FromDouble(v);
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    fslot *s = &c->slots[(bits * 0x9e3779b97f4a7c15ULL) >> 54]; /* the top 10 bits: FCACHE slots */
    if (++c->lookups == FCHECK) {
        int rare = c->hits < FCHECK / FRARE;
        c->lookups = c->hits = 0;
        if (rare) {
            fcache_clear(c);
            return PyFloat_FromDouble(v);
        }
    }
    if (s->value && s->bits == bits) {
        c->hits++;
        Py_INCREF(s->value);
        return s->value;
    }
    PyObject *value = PyFloat_FromDouble(v);
    if (!value) return NULL;
    Py_XDECREF(s->value);
    Py_INCREF(value);
    s->value = value;
    s->bits = bits;
    return value;
}

/* d[s[0:n]] = v (the float shared through the cache); *repeats set when the id was in d already (its size does not
 * change). -1 with an exception set. */
static inline int
put_doc(PyObject *d, const unsigned char *s, Py_ssize_t n, int ascii, fcache *floats, double v, int *repeats)
{
    PyObject *key = make_str(s, n, ascii);
    if (!key) return -1;
    PyObject *value = cached_float(floats, v);
    if (!value) {
        Py_DECREF(key);
        return -1;
    }
    Py_ssize_t before = PyDict_GET_SIZE(d);
    int bad = PyDict_SetItem(d, key, value);
    Py_DECREF(key);
    Py_DECREF(value);
    if (bad) return -1;
    *repeats = *repeats || PyDict_GET_SIZE(d) == before;
    return 0;
}

static PyObject *
scan(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer view;
    int nfields, want_tag;
    PyObject *into = NULL, *keep = NULL;
    if (!PyArg_ParseTuple(args, "y*ip|OO", &view, &nfields, &want_tag, &into, &keep)) return NULL;
    if (into == Py_None || into == Py_False) into = NULL;
    if (keep == Py_None) keep = NULL;
    if (keep && (!into || !(PyDict_CheckExact(keep) || PyAnySet_CheckExact(keep)))) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_TypeError, "scan: keep must be a dict, set or frozenset, and needs into");
        return NULL;
    }
    if (into && !PyDict_Check(into)) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_TypeError, "scan: into must be a dict (or None for columns)");
        return NULL;
    }
    if (nfields != 4 && nfields != 6) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "scan: nfields must be 4 (qrels) or 6 (run)");
        return NULL;
    }
    const int as_dicts = into != NULL;
    const unsigned char *data = (const unsigned char *)view.buf, *end = data + view.len;
    const int doc_at = 2, value_at = nfields == 6 ? 4 : 3;
    PyObject *ids = NULL, *values = NULL, *qids = NULL, *sizes = NULL, *bytes = NULL, *tag = NULL, *error = NULL;
    PyObject *current = NULL; /* as_dicts: the dict of the current stretch's query (a strong reference) */
    PyObject *result = NULL;
    dtable table = {NULL, 0, 0, 1}; /* generation 1: calloc'd slots (generation 0) are empty */
    fcache floats = {NULL, 0, 0};
    int repeats = 0;
    /* columns: the lines are read without the GIL (other threads run meanwhile, reading other blocks); what
     * needs it waits for the end of the loop (query id and tag strs, made from where they lie in the block, the
     * error tuple) or takes it back for a moment (a number only Python's readers read) */
    PyThreadState *unlocked = NULL;
    const int release = !as_dicts;
    qspan *spans = NULL; /* columns: each stretch's query id in the block */
    const unsigned char *tag_at = NULL;
    Py_ssize_t tag_len = 0, err_line = -1, err_start = 0, err_stop = 0;
    int tag_ascii = 1, failed = 0; /* failed: 1 no memory, 2 output overflow (set once the GIL is back) */

    /* every output is at most one entry per result line, and a result line takes 2 * nfields - 1 bytes at least
     * (its fields and the separators between them) and a '\n' unless it is the last: so there are at most
     * (len + 1) / (2 * nfields) of them; the ids take at most the block's bytes (each is followed by whitespace or
     * the line end in the block) */
    Py_ssize_t lines = (view.len + 1) / (2 * nfields) + 1, newlines = 0;
    if (lines > PY_SSIZE_T_MAX / (Py_ssize_t)sizeof(qspan)) { PyErr_NoMemory(); goto done; }
    ids = as_dicts ? into : PyByteArray_FromStringAndSize(NULL, view.len);
    Py_XINCREF(as_dicts ? into : NULL);
    values = PyByteArray_FromStringAndSize(NULL, as_dicts ? 0 : lines * 8);
    sizes = PyByteArray_FromStringAndSize(NULL, lines * 8);
    bytes = PyByteArray_FromStringAndSize(NULL, lines * 8);
    qids = as_dicts ? PyList_New(0) : NULL;
    spans = as_dicts ? NULL : PyMem_RawMalloc((size_t)lines * sizeof(qspan));
    floats.slots = as_dicts ? PyMem_Calloc(FCACHE, sizeof(fslot)) : NULL;
    if (!ids || !values || !sizes || !bytes || (as_dicts && (!qids || !floats.slots)) || (!as_dicts && !spans)) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        goto done;
    }
    char *id_out = as_dicts ? NULL : PyByteArray_AS_STRING(ids);
    double *value_out = (double *)PyByteArray_AS_STRING(values);
    int64_t *size_out = (int64_t *)PyByteArray_AS_STRING(sizes), *bytes_out = (int64_t *)PyByteArray_AS_STRING(bytes);
    Py_ssize_t n_ids = 0, n_values = 0, groups = 0, line = 0;
    const unsigned char *group_qid = NULL;
    Py_ssize_t group_len = 0;

    lexer lex = {NULL, end, 0, 0, 0, 0};
    const int fast_lex = FAST_LEX;
    if (fast_lex && data < end) lex_load(&lex, data, 1);
    if (release) unlocked = PyEval_SaveThread();
    for (const unsigned char *p = data; p < end; line++) {
        const unsigned char *stop;
        fields f;
        int ok;
        if (fast_lex && lex_line(&lex, &f, &stop) == LEX_LINE) {
            ok = 1;
        } else {
            ok = split_line(p, end, &f, &stop);
            if (fast_lex && stop < end) lex_load(&lex, stop + 1, 1); /* after a line split_line read */
        }
        const unsigned char *next = stop < end ? stop + 1 : end;
        newlines += stop < end;
        if (ok && (f.count == 0 || f.start[0][0] == '#')) { p = next; continue; }
        double v = 0.0;
        if (ok && f.count >= nfields && f.count < (nfields == 6 ? 12 : 5)) {
            int got = number((const char *)f.start[value_at], f.len[value_at], &v, unlocked == NULL);
            if (got == 2) { /* inf, underscores, 20 digits...: Python's readers, with the GIL */
                PyEval_RestoreThread(unlocked);
                unlocked = NULL;
                got = number((const char *)f.start[value_at], f.len[value_at], &v, 1);
                if (got < 0) goto done;
                unlocked = PyEval_SaveThread();
            }
            if (got < 0) goto done;
            ok = got;
        } else {
            ok = 0;
        }
        if (!ok) {
            err_line = line;
            err_start = p - data;
            err_stop = stop - data;
            for (const unsigned char *q = next; (q = memchr(q, '\n', (size_t)(end - q))) != NULL; q++) newlines++;
            break;
        }
        Py_ssize_t dl = f.len[doc_at];
        if (groups >= lines || (!as_dicts && (n_values >= lines || n_ids + dl + 1 > view.len))) {
            failed = 2; /* cannot happen: the sizes above bound them */
            goto done;
        }
        if (!group_qid || group_len != f.len[0] || !same_bytes(group_qid, f.start[0], group_len)) {
            group_qid = f.start[0];
            group_len = f.len[0];
            table.gen++;
            table.used = 0;
            if (!as_dicts) {
                spans[groups] = (qspan){f.start[0], f.len[0], f.ascii};
            } else {
                PyObject *q = make_str(f.start[0], f.len[0], f.ascii);
                if (!q) goto done;
                if (PyList_Append(qids, q) < 0) { Py_DECREF(q); goto done; }
                /* the query's dict in `into`: a new one, or the one its earlier lines made (lines not adjacent,
                 * or on both sides of a block's end), which its documents are added to */
                Py_CLEAR(current);
                int kept = keep == NULL ? 1 : PyDict_CheckExact(keep) ? PyDict_Contains(keep, q) : PySet_Contains(keep, q);
                if (kept < 0) { Py_DECREF(q); goto done; }
                if (!kept) goto grouped; /* current stays NULL: the query's lines are only checked */
                /* sized for as many documents as the stretch before (runs mostly have one depth): no resizes; at
                 * most 4,096, so that one long query does not oversize the next ones */
                int64_t hint = groups > 0 ? size_out[groups - 1] : 0;
                PyObject *fresh = NEW_DICT((Py_ssize_t)(hint < 4096 ? hint : 4096));
                if (!fresh) { Py_DECREF(q); goto done; }
                current = PyDict_SetDefault(into, q, fresh); /* borrowed; one lookup */
                Py_DECREF(fresh);
                if (!current) { Py_DECREF(q); goto done; }
                Py_INCREF(current);
                if (!PyDict_CheckExact(current)) {
                    PyErr_Format(PyExc_TypeError, "scan: into[%R] is not a dict", q);
                    Py_DECREF(q);
                    goto done;
                }
            grouped:
                Py_DECREF(q);
            }
            size_out[groups] = 0;
            bytes_out[groups] = 0;
            groups++;
        }
        size_out[groups - 1] += 1;
        bytes_out[groups - 1] += dl + 1;
        if (as_dicts && !current) goto tagged; /* a query not kept */
        if (as_dicts) { /* a repeated document leaves the dict's size unchanged */
            if (put_doc(current, f.start[doc_at], dl, f.ascii, &floats, v, &repeats) < 0) goto done;
            goto tagged;
        }
        if (dl <= 32 && end - f.start[doc_at] >= 32 && view.len - n_ids >= 32) {
            /* a short id: 32 bytes copied at once (a fixed size: no call to memcpy); what lies past the id is
             * overwritten by the space after it and the next ids, and cut off at the end */
            memcpy(id_out + n_ids, f.start[doc_at], 32);
        } else {
            memcpy(id_out + n_ids, f.start[doc_at], (size_t)dl);
        }
        id_out[n_ids + dl] = ' ';
        if (!repeats) {
            int seen = dtable_add(&table, id_out, n_ids, dl, (const char *)f.start[doc_at]);
            if (seen < 0) { failed = 1; goto done; }
            repeats = seen;
        }
        n_ids += dl + 1;
        value_out[n_values++] = v;
    tagged:
        if (want_tag && nfields == 6 && !tag_at) {
            tag_at = f.start[5];
            tag_len = f.len[5];
            tag_ascii = f.ascii;
        }
        p = next;
    }
    if (unlocked) {
        PyEval_RestoreThread(unlocked);
        unlocked = NULL;
    }
    if (!as_dicts) {
        qids = PyList_New(groups);
        if (!qids) goto done;
        for (Py_ssize_t g = 0; g < groups; g++) {
            PyObject *q = make_str(spans[g].start, spans[g].len, spans[g].ascii);
            if (!q) goto done;
            PyList_SET_ITEM(qids, g, q);
        }
    }
    if (tag_at && !(tag = make_str(tag_at, tag_len, tag_ascii))) goto done;
    if (err_line >= 0 && !(error = Py_BuildValue("(nnn)", err_line, err_start, err_stop))) goto done;
    if ((!as_dicts && PyByteArray_Resize(ids, n_ids) < 0) || PyByteArray_Resize(values, n_values * 8) < 0
        || PyByteArray_Resize(sizes, groups * 8) < 0 || PyByteArray_Resize(bytes, groups * 8) < 0) goto done;
    result = Py_BuildValue("(OOOOOOOOn)", ids, values, qids, sizes, bytes, tag ? tag : Py_None,
                           repeats ? Py_True : Py_False, error ? error : Py_None, newlines);

done:
    if (unlocked) PyEval_RestoreThread(unlocked);
    if (failed == 1) PyErr_NoMemory();
    if (failed == 2) PyErr_SetString(PyExc_RuntimeError, "scan: output overflow");
    fcache_clear(&floats);
    PyMem_RawFree(table.slots);
    PyMem_RawFree(spans);
    PyBuffer_Release(&view);
    Py_XDECREF(current);
    Py_XDECREF(ids);
    Py_XDECREF(values);
    Py_XDECREF(qids);
    Py_XDECREF(sizes);
    Py_XDECREF(bytes);
    Py_XDECREF(tag);
    Py_XDECREF(error);
    return result;
}

/* fill_dicts(into, ids, values, group_qids, group_sizes, ascii[, keep]) -> repeats: a columns scan of a block (made
 * on another thread, without the GIL) put into `into` as {query_id: {doc_id: value}}, as scan(..., into, keep)
 * would have put it: each stretch's documents into its query's dict (merged with what is there), the float objects
 * shared while values repeat, a query not in `keep` skipped; True when a document was already in its query's dict.
 * ids: each id followed by a space (checked UTF-8 by the scan; ascii: they are all ASCII); every count is checked
 * against the buffers before it is used, and a mismatch is a ValueError. */
static PyObject *
fill_dicts(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *into, *qids, *keep = Py_None;
    Py_buffer ids, vals, sizes;
    int ascii;
    if (!PyArg_ParseTuple(args, "O!y*y*O!y*p|O", &PyDict_Type, &into, &ids, &vals, &PyList_Type, &qids, &sizes,
                          &ascii, &keep)) return NULL;
    PyObject *result = NULL, *current = NULL, *q = NULL;
    fcache floats = {NULL, 0, 0};
    int repeats = 0;
    if (keep == Py_None) keep = NULL;
    if (keep && !(PyDict_CheckExact(keep) || PyAnySet_CheckExact(keep))) {
        PyErr_SetString(PyExc_TypeError, "fill_dicts: keep must be a dict, set or frozenset");
        goto done;
    }
    const char *p = (const char *)ids.buf, *end = p + ids.len;
    const double *values = (const double *)vals.buf;
    const int64_t *size_at = (const int64_t *)sizes.buf;
    Py_ssize_t groups = sizes.len / 8, n_values = vals.len / 8, k = 0;
    if (groups != PyList_GET_SIZE(qids) || sizes.len % 8 || vals.len % 8) {
        PyErr_SetString(PyExc_ValueError, "fill_dicts: group_qids, group_sizes and values do not match");
        goto done;
    }
    if (!(floats.slots = PyMem_Calloc(FCACHE, sizeof(fslot)))) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t g = 0; g < groups && g < PyList_GET_SIZE(qids); g++) {
        int64_t size = size_at[g];
        if (size < 0 || size > n_values - k) {
            PyErr_SetString(PyExc_ValueError, "fill_dicts: a stretch has more lines than there are values");
            goto done;
        }
        Py_XSETREF(q, Py_NewRef(PyList_GET_ITEM(qids, g))); /* held: a key's __eq__ in `into` could change qids */
        if (!PyUnicode_CheckExact(q)) {
            PyErr_SetString(PyExc_TypeError, "fill_dicts: a query id is not a str");
            goto done;
        }
        int kept = keep == NULL ? 1 : PyDict_CheckExact(keep) ? PyDict_Contains(keep, q) : PySet_Contains(keep, q);
        if (kept < 0) goto done;
        Py_CLEAR(current);
        if (kept) {
            int64_t hint = g > 0 ? size_at[g - 1] : size;
            PyObject *fresh = NEW_DICT((Py_ssize_t)(hint < 4096 ? hint : 4096));
            if (!fresh) goto done;
            current = PyDict_SetDefault(into, q, fresh); /* borrowed */
            Py_DECREF(fresh);
            if (!current) goto done;
            Py_INCREF(current);
            if (!PyDict_CheckExact(current)) {
                PyErr_Format(PyExc_TypeError, "fill_dicts: into[%R] is not a dict", q);
                goto done;
            }
        }
        for (int64_t i = 0; i < size; i++, k++) {
            if ((k & 16383) == 16383) {
                /* let a scan on another thread, waiting for the GIL to hand back its columns, have it for a moment
                 * (this call holds it for a whole block otherwise, and the threads would wait on each other; what
                 * is used below is held by strong references or buffers, and qids is read up to its length) */
                Py_BEGIN_ALLOW_THREADS
                Py_END_ALLOW_THREADS
            }
            const char *sp = memchr(p, ' ', (size_t)(end - p));
            if (!sp) {
                PyErr_SetString(PyExc_ValueError, "fill_dicts: fewer ids than values");
                goto done;
            }
            if (current && put_doc(current, (const unsigned char *)p, sp - p, ascii, &floats, values[k], &repeats) < 0)
                goto done;
            p = sp + 1;
        }
    }
    if (p != end || k != n_values) {
        PyErr_SetString(PyExc_ValueError, "fill_dicts: more ids or values than the stretches' lines");
        goto done;
    }
    result = Py_NewRef(repeats ? Py_True : Py_False);
done:
    fcache_clear(&floats);
    Py_XDECREF(current);
    Py_XDECREF(q);
    PyBuffer_Release(&ids);
    PyBuffer_Release(&vals);
    PyBuffer_Release(&sizes);
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
     "scan(data, nfields, want_tag[, into[, keep]]) -> (ids, values, group_qids, group_sizes, group_bytes, tag, repeats, error, "
     "newlines): one block of TREC run (nfields=6) or qrels (nfields=4) lines as columns (or into the dict `into`), "
     "stopping at the first bad line."},
    {"fill_dicts", fill_dicts, METH_VARARGS,
     "fill_dicts(into, ids, values, group_qids, group_sizes, ascii[, keep]) -> repeats: a block's columns (a scan "
     "made on another thread) put into the dict `into`, as scan(..., into, keep) puts them."},
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
#if HAVE_STRTOD_L
    if (!c_locale && !(c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0))) return PyErr_NoMemory();
#endif
    return PyModule_Create(&module);
}
