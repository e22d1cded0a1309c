//  Helpers that fail the running cmocka case; see harness_case.h.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "harness.h"
#include "harness_case.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
harness_ok (int rc, const ps_error_t *err)
{
    if (rc != 0)
        fail_msg ("%s: %s", ps_error_name (rc), err->msg);
}

uint8_t *
harness_slurp (const char *path, size_t *len)
{
    FILE *file = fopen (path, "rb");
    if (!file)
        fail_msg ("cannot open %s", path);
    assert_int_equal (fseek (file, 0, SEEK_END), 0);
    long size = ftell (file);
    assert_true (size >= 0);
    rewind (file);
    uint8_t *data = malloc ((size_t) size + 1);
    assert_non_null (data);
    if (fread (data, 1, (size_t) size, file) != (size_t) size)
        fail_msg ("cannot read the %ld bytes of %s", size, path);
    assert_int_equal (fclose (file), 0);
    data [size] = 0;
    *len = (size_t) size;
    return data;
}

void
harness_file_is (const char *path, const uint8_t *want, size_t len)
{
    size_t got_len;
    uint8_t *got = harness_slurp (path, &got_len);
    if (got_len != len)
        fail_msg ("%s holds %zu bytes, expected %zu", path, got_len, len);
    assert_memory_equal (got, want, len);
    free (got);
}

void
harness_fill (void *arg, uint64_t at, void *buf, size_t len)
{
    harness_filler_t *filler = arg;
    assert_int_equal (at, filler->next);
    memcpy (buf, filler->bytes + at, len);
    filler->next = at + len;
    filler->calls++;
}

void
harness_spit (const char *path, const uint8_t *data, size_t len)
{
    FILE *file = fopen (path, "wb");
    if (!file)
        fail_msg ("cannot create %s", path);
    assert_int_equal (fwrite (data, 1, len, file), len);
    if (fclose (file) != 0)
        fail_msg ("cannot write %s", path);
}

int
harness_dir_entries (const char *path)
{
    DIR *dir = opendir (path);
    if (!dir)
        fail_msg ("cannot open the directory %s", path);
    int count = 0;
    struct dirent *entry;
    while ((entry = readdir (dir)))
        if (strcmp (entry->d_name, ".") && strcmp (entry->d_name, ".."))
            count++;
    closedir (dir);
    return count;
}

void
harness_free_endpoint (char *buf, size_t len)
{
    int port = harness_free_port ();
    if (port <= 0)
        fail_msg ("no free TCP port on 127.0.0.1");
    snprintf (buf, len, "tcp://127.0.0.1:%d", port);
}

int
harness_dir_setup (void **state, size_t size)
{
    assert_true (size >= HARNESS_DIR_SIZE);
    char *fixture = calloc (1, size);
    if (!fixture)
        return -1;
    harness_tmpdir (fixture, HARNESS_DIR_SIZE);
    *state = fixture;
    return 0;
}

int
harness_dir_teardown (void **state)
{
    char *fixture = *state;
    harness_rmtree (fixture);
    free (fixture);
    return 0;
}

double
harness_rel_error (const float *a, const float *b, size_t n)
{
    double diff = 0, norm_a = 0, norm_b = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double) a [i] - (double) b [i];
        diff += d * d;
        norm_a += (double) a [i] * a [i];
        norm_b += (double) b [i] * b [i];
    }
    double scale = sqrt (fmax (norm_a, norm_b));
    return scale > 0 ? sqrt (diff) / scale : sqrt (diff);
}
