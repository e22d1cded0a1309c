//  Parsing Criteo and LIBSVM lines into a batch (ps_ctrparse.h).
//
//  Every parser writes the example into the batch's free room past the
//  examples it holds and commits it (the count and the offsets) only once
//  the whole line was read, so a malformed line leaves the batch as it was.

#include "ps_ctrparse.h"

#include <assert.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ps_mix.h"

//  Fields of a Criteo line: the label, the integers, the categoricals.
#define S_CRITEO_COLUMNS (1 + PS_CTR_CRITEO_DENSE + PS_CTR_CRITEO_FIELDS)

//  At most this much of a bad field is quoted in a message.
#define S_QUOTE 24

uint64_t
ps_ctrparse_criteo_id (unsigned field, uint64_t value)
{
    return ps_mix64 ((uint64_t) (field + 1) << 40 ^ value);
}

static int
s_hex_digit (char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

//  A whole number of decimal digits only, into *value. False when the text
//  is empty, holds anything else, or exceeds 2^64 - 1.
static bool
s_decimal (const char *text, size_t len, uint64_t *value)
{
    if (len == 0)
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (text [i] < '0' || text [i] > '9')
            return false;
        unsigned digit = (unsigned) (text [i] - '0');
        if (v > (UINT64_MAX - digit) / 10)
            return false;
        v = v * 10 + digit;
    }
    *value = v;
    return true;
}

//  log (1 + x) for the small counts that most integer features hold,
//  computed once: the logarithm is otherwise a good part of a line's cost.
#define S_LOG1P_TABLE 1024
static float s_log1p [S_LOG1P_TABLE];
static pthread_once_t s_log1p_once = PTHREAD_ONCE_INIT;

static void
s_log1p_fill (void)
{
    for (int x = 0; x < S_LOG1P_TABLE; x++)
        s_log1p [x] = (float) log1p ((double) x);
}

//  The field of a Criteo line that starts at p: up to the next tab.
static size_t
s_field_len (const char *p, const char *end)
{
    const char *tab = memchr (p, '\t', (size_t) (end - p));
    return (size_t) ((tab ? tab : end) - p);
}

//  Why a Criteo line failed at column (0 label, 1..13 I1..I13, then
//  C1..C26) whose field starts at p: its field count when that is wrong,
//  else what is wrong with the field.
static int
s_criteo_error (const char *line, const char *end, int column, const char *p, ps_error_t *err)
{
    size_t columns = 1;
    for (const char *t = line; (t = memchr (t, '\t', (size_t) (end - t))); t++)
        columns++;
    if (columns != S_CRITEO_COLUMNS)
        return ps_error_set (err, PS_ECORRUPT, "%zu tab-separated fields, expected %d",
                             columns, S_CRITEO_COLUMNS);
    size_t flen = s_field_len (p, end);
    int shown = (int) (flen < S_QUOTE ? flen : S_QUOTE);
    if (column == 0)
        return ps_error_set (err, PS_ECORRUPT, "label \"%.*s\", expected 0 or 1", shown, p);
    if (column <= PS_CTR_CRITEO_DENSE)
        return ps_error_set (err, PS_ECORRUPT, "I%d \"%.*s\", expected a whole number or "
                             "nothing", column, shown, p);
    return ps_error_set (err, PS_ECORRUPT, "C%d \"%.*s\", expected 8 hex digits or nothing",
                         column - PS_CTR_CRITEO_DENSE, shown, p);
}

//  Read Criteo integer field text at *p, stopping at the first character
//  that is not part of it, into *feature: log (1 + x), with nothing and a
//  negative x giving 0. False when it is not a whole number below 2^64.
static bool
s_criteo_integer (const char **p, const char *end, float *feature)
{
    const char *q = *p;
    bool negative = q < end && *q == '-';
    if (negative)
        q++;
    const char *digits = q;
    uint64_t x = 0;
    for (; q < end && *q >= '0' && *q <= '9'; q++) {
        unsigned digit = (unsigned) (*q - '0');
        if (x > (UINT64_MAX - digit) / 10)
            return false;
        x = x * 10 + digit;
    }
    if (negative && q == digits)
        return false;
    *p = q;
    if (negative)
        *feature = 0.0f;
    else
        *feature = x < S_LOG1P_TABLE ? s_log1p [x] : (float) log1p ((double) x);
    return true;
}

//  Read Criteo categorical field text at *p: 8 hex digits, or nothing
//  (PS_CTR_CRITEO_EMPTY), into *value. False for anything else.
static bool
s_criteo_category (const char **p, const char *end, uint64_t *value)
{
    const char *q = *p;
    if (q == end || *q == '\t') {
        *value = PS_CTR_CRITEO_EMPTY;
        return true;
    }
    if (end - q < 8)
        return false;
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) {
        int digit = s_hex_digit (q [i]);
        if (digit < 0)
            return false;
        v = v << 4 | (uint64_t) digit;
    }
    *p = q + 8;
    *value = v;
    return true;
}

//  One pass over the line: each field is read up to the first character
//  that is not part of it, which must then be the tab before the next
//  field, or the end of the line after the last. Only a failing line is
//  looked at again, to say why.
static int
s_parse_criteo (ps_ctrbatch_t *batch, const char *line, size_t len, ps_error_t *err)
{
    pthread_once (&s_log1p_once, s_log1p_fill);
    int rc = ps_ctrbatch_reserve_ids (batch, PS_CTR_CRITEO_FIELDS, err);
    if (rc)
        return rc;
    const char *p = line, *end = line + len;
    size_t n = batch->n;
    float *dense = batch->dense + n * PS_CTR_CRITEO_DENSE;
    uint32_t first = batch->offsets [n * PS_CTR_CRITEO_FIELDS];
    float label = 0;
    for (int column = 0; column < S_CRITEO_COLUMNS; column++) {
        const char *field = p;
        bool ok;
        if (column == 0) {
            ok = p < end && (*p == '0' || *p == '1');
            if (ok)
                label = *p++ == '1' ? 1.0f : 0.0f;
        }
        else
        if (column <= PS_CTR_CRITEO_DENSE)
            ok = s_criteo_integer (&p, end, &dense [column - 1]);
        else {
            int f = column - 1 - PS_CTR_CRITEO_DENSE;
            uint64_t value;
            ok = s_criteo_category (&p, end, &value);
            if (ok)
                batch->ids [first + (uint32_t) f] = ps_ctrparse_criteo_id ((unsigned) f, value);
        }
        bool last = column == S_CRITEO_COLUMNS - 1;
        if (!ok || (last ? p != end : p == end || *p != '\t'))
            return s_criteo_error (line, end, column, field, err);
        if (!last)
            p++;
    }
    batch->labels [n] = label;
    for (int f = 0; f < PS_CTR_CRITEO_FIELDS; f++)
        batch->offsets [n * PS_CTR_CRITEO_FIELDS + (size_t) f + 1] = first + (uint32_t) f + 1;
    batch->n = n + 1;
    return 0;
}

static bool
s_blank (char c)
{
    return c == ' ' || c == '\t';
}

//  The next blank-separated token of [*p, end): *start and *tlen; false at
//  the end.
static bool
s_token (const char **p, const char *end, const char **start, size_t *tlen)
{
    const char *s = *p;
    while (s < end && s_blank (*s))
        s++;
    if (s == end)
        return false;
    const char *e = s;
    while (e < end && !s_blank (*e))
        e++;
    *start = s;
    *tlen = (size_t) (e - s);
    *p = e;
    return true;
}

//  A finite float filling exactly [text, text + len), into *value.
static bool
s_float (const char *text, size_t len, float *value)
{
    //  strtod stops at the blank, colon, newline or NUL after the token at
    //  the latest (ps_ctrparse_line's contract on line [len]).
    if (len == 0 || s_blank (text [0]))
        return false;
    char *stop;
    double v = strtod (text, &stop);
    if (stop != text + len || !isfinite (v) || fabs (v) > 3.4e38)
        return false;
    *value = (float) v;
    return true;
}

static int
s_parse_libsvm (ps_ctrbatch_t *batch, const char *line, size_t len, ps_error_t *err)
{
    const char *end = line + len;
    const char *hash = memchr (line, '#', len);
    if (hash)
        end = hash;
    const char *p = line, *token;
    size_t tlen;
    if (!s_token (&p, end, &token, &tlen))
        return ps_error_set (err, PS_ECORRUPT, "no label, expected a label and index:value "
                             "pairs");
    int shown = (int) (tlen < S_QUOTE ? tlen : S_QUOTE);
    float label;
    if (!s_float (token, tlen, &label) || (label != 0.0f && label != 1.0f && label != -1.0f))
        return ps_error_set (err, PS_ECORRUPT, "label \"%.*s\", expected 0, 1, -1 or +1",
                             shown, token);
    size_t features = 0;
    for (const char *q = p; s_token (&q, end, &token, &tlen); )
        features++;
    int rc = ps_ctrbatch_reserve_ids (batch, features, err);
    if (rc)
        return rc;
    size_t n = batch->n;
    uint32_t first = batch->offsets [n], count = 0;
    while (s_token (&p, end, &token, &tlen)) {
        shown = (int) (tlen < S_QUOTE ? tlen : S_QUOTE);
        if (tlen > 4 && memcmp (token, "qid:", 4) == 0)
            continue;
        const char *colon = memchr (token, ':', tlen);
        uint64_t index;
        float value;
        if (!colon || !s_decimal (token, (size_t) (colon - token), &index)
            || !s_float (colon + 1, tlen - (size_t) (colon + 1 - token), &value))
            return ps_error_set (err, PS_ECORRUPT, "feature \"%.*s\", expected index:value "
                                 "(a whole number and a finite number)", shown, token);
        batch->ids [first + count] = index;
        batch->weights [first + count] = value;
        count++;
    }
    batch->labels [n] = label == 1.0f ? 1.0f : 0.0f;
    batch->offsets [n + 1] = first + count;
    batch->n = n + 1;
    return 0;
}

int
ps_ctrparse_line (ps_ctrbatch_t *batch, const char *line, size_t len, ps_error_t *err)
{
    assert (batch);
    assert (batch->n < batch->max_n);
    if (len > 0 && line [len - 1] == '\r')
        len--;
    if (batch->format == PS_CTR_CRITEO)
        return s_parse_criteo (batch, line, len, err);
    return s_parse_libsvm (batch, line, len, err);
}
