//  Unit tests for the CTR data reader (common/model/ps_ctrparse.c,
//  ps_ctrsource.c, ps_ctrindex.c, ps_ctrdata.c): good Criteo and LIBSVM
//  lines parsed to the documented values and ids, each kind of malformed
//  line refused with the field named and the batch untouched; a file with
//  malformed lines scattered in it read plain and as two gzip members with
//  access points every few KiB, sequentially and in random ranges, giving
//  the same examples everywhere; the index reused on a second open and
//  rebuilt when the data changes or its access points are invalid (with
//  the data's own counts), or kept in the cache directory when the
//  data's directory is not writable; a truncated or damaged gzip file and a
//  mostly malformed file refused naming the file; an overlong line counted
//  as malformed. And the generator, tests/gen_ctr (its path is the
//  program's argument): deterministic in its seed, the same rows plain and
//  gzip-compressed, files the reader takes without a malformed line, and a
//  planted.json that describes them. Every case works in its own
//  temporary directory.

#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <jansson.h>

#include "harness.h"
#include "harness_case.h"
#include "harness_rand.h"
#include "ps_bytes.h"
#include "ps_ctrdata.h"
#include "ps_ctrindex.h"
#include "ps_ctrparse.h"
#include "ps_mix.h"

typedef struct {
    char dir [HARNESS_DIR_SIZE];
    char plain [256];           //  dir/data.txt
    char gz [256];              //  dir/data.txt.gz
} fixture_t;

static int
s_setup (void **state)
{
    int rc = harness_dir_setup (state, sizeof (fixture_t));
    if (rc == 0) {
        fixture_t *fx = *state;
        snprintf (fx->plain, sizeof fx->plain, "%s/data.txt", fx->dir);
        snprintf (fx->gz, sizeof fx->gz, "%s/data.txt.gz", fx->dir);
    }
    return rc;
}

//  Parse one line into batch, returning the parser's code.
static int
s_parse (ps_ctrbatch_t *batch, const char *line, ps_error_t *err)
{
    return ps_ctrparse_line (batch, line, strlen (line), err);
}

//  A Criteo line from its 40 fields given as one string with '|' for tabs.
static void
s_criteo (char *line, size_t size, const char *fields)
{
    snprintf (line, size, "%s", fields);
    for (char *c = line; *c; c++)
        if (*c == '|')
            *c = '\t';
}

static const char *s_good =
    "1|0|5||-1|7|||||||99|3|68fd1e64|80e26c9b|||fb936136|7b4723c4|25c83c98|7e0ccccf|"
    "de7995b8|1f89b562|a73ee510|a8cd5504|b2cb9c98|37c9c164|2824a5f6|1adce6ef|8ba8b39a|"
    "891b62e7|e5ba7672|f54016b9|21ddcdc9|b1252a9d|07b5194c||3a171ecb|c5c50484";

static void
test_criteo_line (void **state)
{
    (void) state;
    ps_error_t err = { 0 };
    ps_ctrbatch_t *batch = ps_ctrbatch_new (PS_CTR_CRITEO, 4, &err);
    assert_non_null (batch);
    char line [1024];
    s_criteo (line, sizeof line, s_good);
    //  A carriage return before the newline is ignored.
    strcat (line, "\r");
    harness_ok (s_parse (batch, line, &err), &err);
    assert_int_equal (batch->n, 1);
    assert_int_equal (batch->ndense, 13);
    assert_int_equal (batch->nfields, 26);
    assert_null (batch->weights);
    assert_float_equal (batch->labels [0], 1.0f, 0);
    //  I1 = 0, I2 = 5, I3 empty, I4 = -1 (taken as 0), I12 = 99, I13 = 3.
    const float dense [13] = { 0, (float) log1p (5), 0, 0, (float) log1p (7), 0, 0, 0, 0, 0,
                               0, (float) log1p (99), (float) log1p (3) };
    for (int i = 0; i < 13; i++)
        assert_float_equal (batch->dense [i], dense [i], 1e-6);
    for (int f = 0; f <= 26; f++)
        assert_int_equal (batch->offsets [f], f);
    assert_true (batch->ids [0] == ps_ctrparse_criteo_id (0, 0x68fd1e64));
    assert_true (batch->ids [1] == ps_ctrparse_criteo_id (1, 0x80e26c9b));
    assert_true (batch->ids [2] == ps_ctrparse_criteo_id (2, PS_CTR_CRITEO_EMPTY));
    assert_true (batch->ids [24] == ps_ctrparse_criteo_id (24, 0x3a171ecb));
    //  Each empty field has an id of its own, and no field shares an id.
    assert_true (batch->ids [2] != batch->ids [3]);
    assert_true (ps_ctrparse_criteo_id (0, 5) != ps_ctrparse_criteo_id (1, 5));
    //  The documented formula.
    assert_true (ps_ctrparse_criteo_id (3, 0xabcdef01) == ps_mix64 ((4ULL << 40) ^ 0xabcdef01));
    //  Upper-case hex is the same value.
    char upper [1024];
    s_criteo (upper, sizeof upper, s_good);
    char *c1 = strstr (upper, "68fd1e64");
    memcpy (c1, "68FD1E64", 8);
    harness_ok (s_parse (batch, upper, &err), &err);
    assert_true (batch->ids [26] == batch->ids [0]);
    assert_int_equal (batch->offsets [52], 52);

    //  Each kind of malformed line, with what the message must name.
    struct { const char *from, *to, *says; } bad [] = {
        { "1|0|", "2|0|", "label \"2\"" },
        { "|99|", "|9x|", "I12 \"9x\"" },
        { "|99|", "|99999999999999999999|", "I12" },
        { "|-1|", "|--1|", "I4 \"--1\"" },
        { "80e26c9b", "80e26c9g", "C2 \"80e26c9g\"" },
        { "80e26c9b", "80e26c9", "C2 \"80e26c9\"" },
        { "80e26c9b", "80e26c9b0", "C2" },
        { "|c5c50484", "", "39 tab-separated fields, expected 40" },
        { "|c5c50484", "|c5c50484|", "41 tab-separated fields" },
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad [0]; k++) {
        char text [1024], fields [1024];
        const char *at = strstr (s_good, bad [k].from);
        assert_non_null (at);
        snprintf (fields, sizeof fields, "%.*s%s%s", (int) (at - s_good), s_good, bad [k].to,
                  at + strlen (bad [k].from));
        s_criteo (text, sizeof text, fields);
        ps_error_t why = { 0 };
        assert_int_equal (s_parse (batch, text, &why), PS_ECORRUPT);
        if (!strstr (why.msg, bad [k].says))
            fail_msg ("case %zu: \"%s\" does not say %s", k, why.msg, bad [k].says);
        assert_int_equal (batch->n, 2);
        assert_int_equal (batch->offsets [52], 52);
    }
    ps_error_t why = { 0 };
    assert_int_equal (s_parse (batch, "", &why), PS_ECORRUPT);
    assert_non_null (strstr (why.msg, "1 tab-separated fields"));
    ps_ctrbatch_destroy (&batch);
    assert_null (batch);
}

static void
test_libsvm_line (void **state)
{
    (void) state;
    ps_error_t err = { 0 };
    ps_ctrbatch_t *batch = ps_ctrbatch_new (PS_CTR_LIBSVM, 8, &err);
    assert_non_null (batch);
    assert_int_equal (batch->ndense, 0);
    assert_int_equal (batch->nfields, 1);
    harness_ok (s_parse (batch, "1 3:0.5 18446744073709551615:2", &err), &err);
    harness_ok (s_parse (batch, "-1\t7:1e-3 ", &err), &err);
    harness_ok (s_parse (batch, "+1", &err), &err);
    harness_ok (s_parse (batch, "0 qid:4 9:-2.5 # a comment 5:5\r", &err), &err);
    assert_int_equal (batch->n, 4);
    const float labels [] = { 1, 0, 1, 0 };
    const uint32_t offsets [] = { 0, 2, 3, 3, 4 };
    const uint64_t ids [] = { 3, UINT64_MAX, 7, 9 };
    const float weights [] = { 0.5f, 2.0f, 1e-3f, -2.5f };
    for (int i = 0; i < 4; i++) {
        assert_float_equal (batch->labels [i], labels [i], 0);
        assert_true (batch->ids [i] == ids [i]);
        assert_float_equal (batch->weights [i], weights [i], 0);
    }
    for (int i = 0; i <= 4; i++)
        assert_int_equal (batch->offsets [i], offsets [i]);

    struct { const char *line, *says; } bad [] = {
        { "", "no label" },
        { "# only a comment", "no label" },
        { "2 1:1", "label \"2\"" },
        { "yes 1:1", "label \"yes\"" },
        { "1 x:1", "feature \"x:1\"" },
        { "1 1:abc", "feature \"1:abc\"" },
        { "1 1:nan", "feature \"1:nan\"" },
        { "1 1:1e40", "feature \"1:1e40\"" },
        { "1 -1:1", "feature \"-1:1\"" },
        { "1 5", "feature \"5\"" },
        { "1 18446744073709551616:1", "feature" },
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad [0]; k++) {
        ps_error_t why = { 0 };
        assert_int_equal (s_parse (batch, bad [k].line, &why), PS_ECORRUPT);
        if (!strstr (why.msg, bad [k].says))
            fail_msg ("case %zu: \"%s\" does not say %s", k, why.msg, bad [k].says);
        assert_int_equal (batch->n, 4);
        assert_int_equal (batch->offsets [4], 4);
    }
    //  A line with many features grows the batch's id arrays.
    char *wide = malloc (200 * 16);
    assert_non_null (wide);
    size_t at = (size_t) sprintf (wide, "1");
    for (int i = 0; i < 200; i++)
        at += (size_t) sprintf (wide + at, " %d:%d", i, i);
    harness_ok (s_parse (batch, wide, &err), &err);
    assert_int_equal (batch->offsets [5], 204);
    assert_true (batch->ids [203] == 199);
    assert_float_equal (batch->weights [203], 199.0f, 0);
    free (wide);
    ps_ctrbatch_destroy (&batch);
}

//  The text of a Criteo file of `lines` lines, line i malformed when
//  bad [i] (about one in 30, set here), from seed. Returns a new string.
static char *
s_make_criteo (size_t lines, bool *bad, uint64_t seed, size_t *len)
{
    size_t cap = lines * 400 + 1;
    char *text = malloc (cap);
    assert_non_null (text);
    size_t at = 0;
    for (size_t i = 0; i < lines; i++) {
        bad [i] = harness_unit (&seed) < 1.0 / 30;
        at += (size_t) snprintf (text + at, cap - at, "%d", harness_unit (&seed) < 0.25);
        for (int f = 0; f < 13; f++) {
            double u = harness_unit (&seed);
            if (u < 0.2)
                at += (size_t) snprintf (text + at, cap - at, "\t");
            else
                at += (size_t) snprintf (text + at, cap - at, "\t%d",
                                         (int) (pow (2, 12 * u) - 3));
        }
        for (int f = 0; f < 26; f++) {
            double u = harness_unit (&seed);
            if (u < 0.1)
                at += (size_t) snprintf (text + at, cap - at, "\t");
            else
                at += (size_t) snprintf (text + at, cap - at, "\t%08x",
                                         (unsigned) (harness_splitmix (&seed) % (f * 50 + 3)));
        }
        if (bad [i])
            at += (size_t) snprintf (text + at, cap - at, "\textra");
        at += (size_t) snprintf (text + at, cap - at, "\n");
    }
    *len = at;
    return text;
}

static void
s_write_gzip_members (const char *path, const char *text, size_t len)
{
    //  Two members, split in the middle of a line, as `cat a.gz b.gz` makes.
    size_t half = len / 2;
    const char *mode [2] = { "wb6", "ab6" };
    const char *part [2] = { text, text + half };
    size_t size [2] = { half, len - half };
    for (int m = 0; m < 2; m++) {
        gzFile file = gzopen (path, mode [m]);
        assert_non_null (file);
        assert_int_equal (gzwrite (file, part [m], (unsigned) size [m]), (int) size [m]);
        assert_int_equal (gzclose (file), Z_OK);
    }
}

//  Batches are equal example for example.
static void
s_assert_same (const ps_ctrbatch_t *a, size_t a_first, const ps_ctrbatch_t *b, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        size_t x = a_first + i;
        assert_float_equal (a->labels [x], b->labels [i], 0);
        assert_memory_equal (a->dense + x * 13, b->dense + i * 13, 13 * sizeof (float));
        assert_int_equal (a->offsets [x * 26 + 26] - a->offsets [x * 26],
                          b->offsets [i * 26 + 26] - b->offsets [i * 26]);
        assert_memory_equal (a->ids + a->offsets [x * 26], b->ids + b->offsets [i * 26],
                             26 * sizeof (uint64_t));
    }
}

static void
test_plain_gzip_ranges (void **state)
{
    fixture_t *fx = *state;
    enum { LINES = 3000 };
    bool bad [LINES];
    size_t len;
    char *text = s_make_criteo (LINES, bad, 99, &len);
    harness_spit (fx->plain, (const uint8_t *) text, len);
    s_write_gzip_members (fx->gz, text, len);
    const char *lines = text;
    size_t malformed = 0, good_before [LINES + 1];
    for (size_t i = 0; i < LINES; i++) {
        good_before [i] = i - malformed;
        malformed += bad [i];
    }
    good_before [LINES] = LINES - malformed;
    assert_true (malformed > 50);

    //  Access points every 8 KiB: dozens in each file.
    ps_ctrindex_opts_t opts = { .span = 8192 };
    ps_error_t err = { 0 };
    ps_ctrfile_t *plain = ps_ctrfile_open (fx->plain, PS_CTR_CRITEO, &opts, &err);
    harness_ok (plain ? 0 : err.code, &err);
    ps_ctrfile_t *gz = ps_ctrfile_open (fx->gz, PS_CTR_CRITEO, &opts, &err);
    harness_ok (gz ? 0 : err.code, &err);
    for (int k = 0; k < 2; k++) {
        const ps_ctrindex_t *index = ps_ctrfile_index (k ? gz : plain);
        assert_int_equal (ps_ctrindex_gzip (index), k == 1);
        assert_int_equal (ps_ctrindex_lines (index), LINES);
        assert_int_equal (ps_ctrindex_malformed (index), malformed);
        size_t first = 0;
        while (!bad [first])
            first++;
        assert_int_equal (ps_ctrindex_first_malformed (index), first + 1);
        assert_non_null (strstr (ps_ctrindex_first_reason (index), "41 tab-separated"));
        //  A point well past the start, on a later line.
        assert_true (ps_ctrindex_point (index, LINES - 1)->line > LINES / 2);
    }
    //  The whole file in one batch, read sequentially from the plain file.
    ps_ctrbatch_t *all = ps_ctrbatch_new (PS_CTR_CRITEO, LINES, &err);
    ps_ctrbatch_t *part = ps_ctrbatch_new (PS_CTR_CRITEO, 400, &err);
    assert_non_null (all);
    assert_non_null (part);
    harness_ok (ps_ctrfile_read (plain, 0, LINES, all, &err), &err);
    assert_int_equal (all->n, LINES - malformed);
    assert_int_equal (all->malformed, malformed);
    assert_int_equal (all->lines, LINES);
    //  The gzip file read sequentially in batches of 256 gives the same.
    for (size_t first = 0; first < LINES; first += 256) {
        size_t count = first + 256 <= LINES ? 256 : LINES - first;
        harness_ok (ps_ctrfile_read (gz, first, count, part, &err), &err);
        assert_int_equal (part->n, good_before [first + count] - good_before [first]);
        s_assert_same (all, good_before [first], part, part->n);
    }
    //  Random ranges of both files equal the same lines of the whole.
    uint64_t seed = 7;
    for (int round = 0; round < 60; round++) {
        size_t first = harness_splitmix (&seed) % LINES;
        size_t count = harness_splitmix (&seed) % 400;
        if (first + count > LINES)
            count = LINES - first;
        ps_ctrfile_t *file = round % 2 ? gz : plain;
        harness_ok (ps_ctrfile_read (file, first, count, part, &err), &err);
        assert_int_equal (part->first_line, first);
        assert_int_equal (part->lines, count);
        assert_int_equal (part->n, good_before [first + count] - good_before [first]);
        assert_int_equal (part->malformed, count - part->n);
        s_assert_same (all, good_before [first], part, part->n);
    }
    //  The gzip file's points in the middle resume raw deflate data with
    //  its window; a read from one of them across the end of the first
    //  member (after a read at the end, so that the reader must go back)
    //  steps over the member's trailer into the second.
    const ps_ctrindex_t *gz_index = ps_ctrfile_index (gz);
    size_t cross = 0, passed = 0;
    while (passed < len / 2)
        passed += (size_t) (strchr (lines + passed, '\n') - (lines + passed)) + 1, cross++;
    assert_true (ps_ctrindex_point (gz_index, cross - 5)->window_len > 0);
    assert_true (ps_ctrindex_point (gz_index, cross - 5)->line > 0);
    harness_ok (ps_ctrfile_read (gz, LINES - 10, 10, part, &err), &err);
    harness_ok (ps_ctrfile_read (gz, cross - 5, 10, part, &err), &err);
    assert_int_equal (part->n, good_before [cross + 5] - good_before [cross - 5]);
    s_assert_same (all, good_before [cross - 5], part, part->n);
    //  A range outside the file, or larger than the batch, is refused.
    assert_int_equal (ps_ctrfile_read (plain, LINES - 5, 6, part, &err), PS_EINVAL);
    assert_non_null (strstr (err.msg, "not inside its 3000 lines"));
    assert_int_equal (ps_ctrfile_read (plain, 0, 401, part, &err), PS_EINVAL);
    assert_int_equal (part->n, 0);
    ps_ctrbatch_destroy (&all);
    ps_ctrbatch_destroy (&part);
    ps_ctrfile_destroy (&plain);
    ps_ctrfile_destroy (&gz);
    assert_null (gz);
    free (text);
}

static void
s_write_text (const char *path, const char *text)
{
    harness_spit (path, (const uint8_t *) text, strlen (text));
}

static void
test_index_reuse (void **state)
{
    fixture_t *fx = *state;
    s_write_text (fx->plain, "1 1:1\n0 2:1\n1 3:1\n");
    ps_error_t err = { 0 };
    ps_ctrfile_t *file = ps_ctrfile_open (fx->plain, PS_CTR_LIBSVM, NULL, &err);
    harness_ok (file ? 0 : err.code, &err);
    assert_true (ps_ctrindex_built (ps_ctrfile_index (file)));
    char index [300];
    snprintf (index, sizeof index, "%s.psidx", fx->plain);
    assert_string_equal (ps_ctrindex_file (ps_ctrfile_index (file)), index);
    ps_ctrfile_destroy (&file);
    struct stat before, after;
    assert_int_equal (stat (index, &before), 0);

    file = ps_ctrfile_open (fx->plain, PS_CTR_LIBSVM, NULL, &err);
    harness_ok (file ? 0 : err.code, &err);
    assert_false (ps_ctrindex_built (ps_ctrfile_index (file)));
    assert_int_equal (ps_ctrfile_lines (file), 3);
    ps_ctrfile_destroy (&file);
    assert_int_equal (stat (index, &after), 0);
    assert_true (before.st_mtim.tv_sec == after.st_mtim.tv_sec
                 && before.st_mtim.tv_nsec == after.st_mtim.tv_nsec);

    //  Changed data: rebuilt, with the new count.
    s_write_text (fx->plain, "1 1:1\n0 2:1\n1 3:1\n0 4:1\n");
    file = ps_ctrfile_open (fx->plain, PS_CTR_LIBSVM, NULL, &err);
    harness_ok (file ? 0 : err.code, &err);
    assert_true (ps_ctrindex_built (ps_ctrfile_index (file)));
    assert_int_equal (ps_ctrfile_lines (file), 4);
    ps_ctrfile_destroy (&file);

    //  A damaged index: rebuilt, not trusted.
    size_t len;
    uint8_t *bytes = harness_slurp (index, &len);
    bytes [len / 2] ^= 0x40;
    harness_spit (index, bytes, len);
    free (bytes);
    file = ps_ctrfile_open (fx->plain, PS_CTR_LIBSVM, NULL, &err);
    harness_ok (file ? 0 : err.code, &err);
    assert_true (ps_ctrindex_built (ps_ctrfile_index (file)));
    assert_int_equal (ps_ctrfile_lines (file), 4);
    ps_ctrfile_destroy (&file);
    //  The same file as another format is indexed again.
    file = ps_ctrfile_open (fx->plain, PS_CTR_CRITEO, NULL, &err);
    assert_null (file);
    assert_int_equal (err.code, PS_ECORRUPT);
    assert_non_null (strstr (err.msg, "4 of its 4 lines are malformed criteo data"));
}

//  An index whose first access point is invalid (its bit count above 7)
//  under a right checksum is rebuilt, and the rebuilt index counts the
//  data's lines once: the counts the refused file held are not kept, nor
//  added to.
static void
test_index_bad_points (void **state)
{
    fixture_t *fx = *state;
    s_write_text (fx->plain, "1 1:1\n0 2:1\nbad\n1 3:1\n");
    ps_error_t err = { 0 };
    ps_ctrfile_t *file = ps_ctrfile_open (fx->plain, PS_CTR_LIBSVM, NULL, &err);
    harness_ok (file ? 0 : err.code, &err);
    ps_ctrfile_destroy (&file);
    char index [300];
    snprintf (index, sizeof index, "%s.psidx", fx->plain);
    size_t len;
    uint8_t *bytes = harness_slurp (index, &len);
    //  The header (magic, four u32, eight u64, the reason, the point
    //  count), then the first point's line, out, skip and in before its
    //  bits (schemas/data.md).
    size_t bits = 8 + 4 * 4 + 8 * 8 + PS_CTRINDEX_REASON + 8 + 4 * 8;
    assert_true (len > bits + 4 + 4);
    ps_put_u32 (bytes + bits, 8);
    ps_put_u32 (bytes + len - 4, (uint32_t) crc32 (0, bytes, (uInt) (len - 4)));
    harness_spit (index, bytes, len);
    free (bytes);

    file = ps_ctrfile_open (fx->plain, PS_CTR_LIBSVM, NULL, &err);
    harness_ok (file ? 0 : err.code, &err);
    const ps_ctrindex_t *rebuilt = ps_ctrfile_index (file);
    assert_true (ps_ctrindex_built (rebuilt));
    assert_int_equal (ps_ctrindex_lines (rebuilt), 4);
    assert_int_equal (ps_ctrindex_good (rebuilt), 3);
    assert_int_equal (ps_ctrindex_malformed (rebuilt), 1);
    assert_int_equal (ps_ctrindex_first_malformed (rebuilt), 3);
    ps_ctrfile_destroy (&file);
    //  What was saved is what was counted: a third open trusts it.
    file = ps_ctrfile_open (fx->plain, PS_CTR_LIBSVM, NULL, &err);
    harness_ok (file ? 0 : err.code, &err);
    assert_false (ps_ctrindex_built (ps_ctrfile_index (file)));
    assert_int_equal (ps_ctrfile_lines (file), 4);
    assert_int_equal (ps_ctrindex_malformed (ps_ctrfile_index (file)), 1);
    ps_ctrfile_destroy (&file);
}

static void
test_cache_dir (void **state)
{
    fixture_t *fx = *state;
    char data_dir [128], cache [128], path [200];
    snprintf (data_dir, sizeof data_dir, "%s/ro", fx->dir);
    snprintf (cache, sizeof cache, "%s/cache", fx->dir);
    snprintf (path, sizeof path, "%s/data.txt", data_dir);
    assert_int_equal (mkdir (data_dir, 0755), 0);
    assert_int_equal (mkdir (cache, 0777), 0);
    assert_int_equal (chmod (cache, 0777), 0);
    s_write_text (path, "1 1:1\n0 2:1\n");
    assert_int_equal (chmod (data_dir, 0555), 0);
    //  Root writes anywhere: the child then reads as nobody, to whom the
    //  data's directory is not writable either way.
    assert_int_equal (chmod (fx->dir, 0755), 0);
    pid_t pid = fork ();
    assert_true (pid >= 0);
    if (pid == 0) {
        if (getuid () == 0 && (setgid (65534) != 0 || setuid (65534) != 0))
            _exit (2);
        ps_ctrindex_opts_t opts = { .cache_dir = cache };
        ps_error_t err = { 0 };
        ps_ctrfile_t *file = ps_ctrfile_open (path, PS_CTR_LIBSVM, &opts, &err);
        if (!file) {
            fprintf (stderr, "open failed: %s\n", err.msg);
            _exit (3);
        }
        const char *index = ps_ctrindex_file (ps_ctrfile_index (file));
        bool ok = strncmp (index, cache, strlen (cache)) == 0 && strstr (index, "data.txt.psidx")
                  && ps_ctrfile_lines (file) == 2 && ps_ctrindex_built (ps_ctrfile_index (file));
        ps_ctrfile_destroy (&file);
        //  The second open finds it there.
        file = ps_ctrfile_open (path, PS_CTR_LIBSVM, &opts, &err);
        ok = ok && file && !ps_ctrindex_built (ps_ctrfile_index (file));
        ps_ctrfile_destroy (&file);
        _exit (ok ? 0 : 4);
    }
    int status;
    assert_int_equal (waitpid (pid, &status, 0), pid);
    assert_int_equal (chmod (data_dir, 0755), 0);
    assert_true (WIFEXITED (status));
    assert_int_equal (WEXITSTATUS (status), 0);
    assert_int_equal (harness_dir_entries (cache), 1);
    assert_int_equal (harness_dir_entries (data_dir), 1);
}

static void
test_bad_files (void **state)
{
    fixture_t *fx = *state;
    enum { LINES = 2000 };
    bool bad [LINES];
    size_t len;
    char *text = s_make_criteo (LINES, bad, 3, &len);
    //  Truncated gzip: refused at open, naming the file.
    s_write_gzip_members (fx->gz, text, len);
    size_t gz_len;
    uint8_t *gz = harness_slurp (fx->gz, &gz_len);
    harness_spit (fx->gz, gz, gz_len * 3 / 4);
    ps_error_t err = { 0 };
    assert_null (ps_ctrfile_open (fx->gz, PS_CTR_CRITEO, NULL, &err));
    assert_int_equal (err.code, PS_ECORRUPT);
    assert_non_null (strstr (err.msg, fx->gz));
    assert_non_null (strstr (err.msg, "truncated gzip stream"));
    //  Cut inside the last trailer.
    harness_spit (fx->gz, gz, gz_len - 3);
    assert_null (ps_ctrfile_open (fx->gz, PS_CTR_CRITEO, NULL, &err));
    assert_int_equal (err.code, PS_ECORRUPT);
    assert_non_null (strstr (err.msg, "truncated gzip stream"));
    //  Damaged in the middle: corrupt.
    gz [gz_len / 3] ^= 0xff;
    gz [gz_len / 3 + 1] ^= 0x5a;
    harness_spit (fx->gz, gz, gz_len);
    assert_null (ps_ctrfile_open (fx->gz, PS_CTR_CRITEO, NULL, &err));
    assert_int_equal (err.code, PS_ECORRUPT);
    assert_non_null (strstr (err.msg, fx->gz));
    free (gz);
    free (text);

    //  Mostly malformed: 6 of 10 lines refused, 5 of 10 accepted.
    s_write_text (fx->plain, "1 1:1\n0 2:1\n1 3:1\n2 1:1\n0 4:1\nx\ny\nz\nw 1\n1 1:q\n");
    assert_null (ps_ctrfile_open (fx->plain, PS_CTR_LIBSVM, NULL, &err));
    assert_int_equal (err.code, PS_ECORRUPT);
    assert_non_null (strstr (err.msg, fx->plain));
    assert_non_null (strstr (err.msg, "6 of its 10 lines"));
    assert_non_null (strstr (err.msg, "line 4: label \"2\""));
    s_write_text (fx->plain, "1 1:1\n0 2:1\n1 3:1\n2 1:1\n0 4:1\nx\ny\nz\n1 6:1\n1 1:q\n");
    ps_ctrfile_t *file = ps_ctrfile_open (fx->plain, PS_CTR_LIBSVM, NULL, &err);
    harness_ok (file ? 0 : err.code, &err);
    assert_int_equal (ps_ctrindex_malformed (ps_ctrfile_index (file)), 5);
    ps_ctrfile_destroy (&file);

    //  A line over the limit is malformed, and the lines around it read.
    size_t long_len = PS_CTRSOURCE_LINE_MAX * 3 / 2;
    char *big = malloc (long_len + 64);
    assert_non_null (big);
    size_t at = (size_t) sprintf (big, "1 1:1\n1");
    while (at < long_len)
        at += (size_t) sprintf (big + at, " 1:1");
    at += (size_t) sprintf (big + at, "\n0 2:1");       //  no final newline
    harness_spit (fx->plain, (const uint8_t *) big, at);
    free (big);
    file = ps_ctrfile_open (fx->plain, PS_CTR_LIBSVM, NULL, &err);
    harness_ok (file ? 0 : err.code, &err);
    const ps_ctrindex_t *index = ps_ctrfile_index (file);
    assert_int_equal (ps_ctrindex_lines (index), 3);
    assert_int_equal (ps_ctrindex_first_malformed (index), 2);
    assert_non_null (strstr (ps_ctrindex_first_reason (index), "longer than"));
    ps_ctrbatch_t *batch = ps_ctrbatch_new (PS_CTR_LIBSVM, 3, &err);
    harness_ok (ps_ctrfile_read (file, 0, 3, batch, &err), &err);
    assert_int_equal (batch->n, 2);
    assert_int_equal (batch->malformed, 1);
    assert_true (batch->ids [1] == 2);
    //  A Criteo batch for a LIBSVM file is refused.
    ps_ctrbatch_t *other = ps_ctrbatch_new (PS_CTR_CRITEO, 3, &err);
    assert_int_equal (ps_ctrfile_read (file, 0, 1, other, &err), PS_EINVAL);
    ps_ctrbatch_destroy (&other);
    ps_ctrbatch_destroy (&batch);
    ps_ctrfile_destroy (&file);
    //  Missing file.
    char missing [300];
    snprintf (missing, sizeof missing, "%s/none.txt", fx->dir);
    assert_null (ps_ctrfile_open (missing, PS_CTR_LIBSVM, NULL, &err));
    assert_int_equal (err.code, PS_ENOTFOUND);
}

static const char *s_gen_ctr;

//  Run gen_ctr with args (NULL-terminated, after the program) and return
//  its exit status; its output goes to dir/gen.log.
static int
s_run_gen (const char *dir, const char *const *args)
{
    const char *argv [16] = { s_gen_ctr };
    for (int i = 0; args [i]; i++)
        argv [i + 1] = args [i];
    char log [256];
    snprintf (log, sizeof log, "%s/gen.log", dir);
    pid_t pid = harness_spawn (argv, NULL, log);
    assert_true (pid > 0);
    int status = harness_wait_or_kill (pid, 120000);
    if (status != 0)
        harness_print_log (log);
    return status;
}

static void
test_generator (void **state)
{
    fixture_t *fx = *state;
    char a [128], b [128], c [128], path [256], other [256];
    snprintf (a, sizeof a, "%s/a", fx->dir);
    snprintf (b, sizeof b, "%s/b", fx->dir);
    snprintf (c, sizeof c, "%s/c", fx->dir);
    const char *plain [] = { "--out", a, "--train-rows", "3000", "--test-rows", "1000",
                             "--seed", "4", "--cardinalities", "small", NULL };
    const char *gzip [] = { "--out", b, "--train-rows", "3000", "--test-rows", "1000",
                            "--seed", "4", "--cardinalities", "small", "--gzip", NULL };
    const char *libsvm [] = { "--out", c, "--train-rows", "500", "--test-rows", "100",
                              "--seed", "4", "--format", "libsvm", NULL };
    assert_int_equal (s_run_gen (fx->dir, plain), 0);
    assert_int_equal (s_run_gen (fx->dir, gzip), 0);
    assert_int_equal (s_run_gen (fx->dir, libsvm), 0);

    //  The gzip file holds the same bytes as the plain one.
    snprintf (path, sizeof path, "%s/train.txt", a);
    size_t len;
    uint8_t *text = harness_slurp (path, &len);
    snprintf (other, sizeof other, "%s/train.txt.gz", b);
    gzFile gz = gzopen (other, "rb");
    assert_non_null (gz);
    uint8_t *unzipped = malloc (len + 1);
    assert_non_null (unzipped);
    assert_int_equal (gzread (gz, unzipped, (unsigned) len + 1), (int) len);
    assert_int_equal (gzclose (gz), Z_OK);
    assert_memory_equal (text, unzipped, len);
    free (unzipped);
    free (text);

    //  The reader takes both splits whole.
    ps_error_t err = { 0 };
    const char *files [3] = { "train.txt", "test.txt.gz", "train.txt" };
    const char *dirs [3] = { a, b, c };
    const uint64_t lines [3] = { 3000, 1000, 500 };
    for (int k = 0; k < 3; k++) {
        snprintf (path, sizeof path, "%s/%s", dirs [k], files [k]);
        ps_ctrfile_t *file = ps_ctrfile_open (path, k == 2 ? PS_CTR_LIBSVM : PS_CTR_CRITEO,
                                              NULL, &err);
        harness_ok (file ? 0 : err.code, &err);
        assert_int_equal (ps_ctrfile_lines (file), lines [k]);
        assert_int_equal (ps_ctrindex_malformed (ps_ctrfile_index (file)), 0);
        ps_ctrfile_destroy (&file);
    }

    //  planted.json describes what was written, and is the same for the
    //  same seed.
    snprintf (path, sizeof path, "%s/planted.json", a);
    json_error_t jerr;
    json_t *doc = json_load_file (path, 0, &jerr);
    assert_non_null (doc);
    json_t *train = json_object_get (json_object_get (doc, "splits"), "train");
    assert_int_equal (json_integer_value (json_object_get (train, "rows")), 3000);
    double rate = json_real_value (json_object_get (train, "positive_rate"));
    double auc = json_real_value (json_object_get (train, "auc"));
    double logloss = json_real_value (json_object_get (train, "logloss"));
    if (rate < 0.2 || rate > 0.3 || auc < 0.75 || auc > 0.95 || logloss < 0.2 || logloss > 0.6)
        fail_msg ("planted model: positive rate %g, AUC %g, log loss %g", rate, auc, logloss);
    assert_string_equal (json_string_value (json_object_get (doc, "cardinalities")), "small");
    json_decref (doc);

    //  Bad arguments: a usage error, exit 2.
    const char *bad [] = { "--out", a, "--train-rows", "0", "--test-rows", "1", "--seed", "1",
                           NULL };
    assert_int_equal (s_run_gen (fx->dir, bad), 2);
    snprintf (path, sizeof path, "%s/gen.log", fx->dir);
    assert_true (harness_file_contains (path, "--train-rows"));
}

int
main (int argc, char **argv)
{
    if (argc != 2) {
        fprintf (stderr, "usage: test_ctrdata PATH-OF-GEN_CTR\n");
        return 2;
    }
    s_gen_ctr = argv [1];
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_criteo_line),
        cmocka_unit_test (test_libsvm_line),
        cmocka_unit_test_setup_teardown (test_plain_gzip_ranges, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_index_reuse, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_index_bad_points, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_cache_dir, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_bad_files, s_setup, harness_dir_teardown),
        cmocka_unit_test_setup_teardown (test_generator, s_setup, harness_dir_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
