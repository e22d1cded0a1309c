//  Fuzz target: the snapshot reader (common/store/ps_snapshot), as a ps-server
//  restoring a partition uses it. The input is a snapshot file; the
//  harness writes it to the scratch directory with its last four bytes
//  replaced by the CRC-32 of the rest, so that mutations reach the fields
//  behind the checksum instead of stopping at it (a checksum mismatch is
//  tested by tests/test_snapshot.c). The file is read with
//  ps_snapshot_read and loaded as a partition with ps_partition_load; a
//  partition that loads takes pushes of two steps, is saved again and
//  loaded back.
//
//  Oracles, beyond the sanitizers: the reader and the partition loader
//  accept the same files; a refusal names the file; a loaded partition
//  saves, and what is saved loads back with the same values, counters and
//  shape.

#include "fuzz_input.h"
#include "fuzz_scratch.h"
#include "ps_partition.h"
#include "ps_snapshot.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void
s_fail (const char *what, const char *detail)
{
    fprintf (stderr, "fuzz_snapshot: %s: %s\n", what, detail);
    abort ();
}

//  Save part, load it back and compare.
static void
s_round_trip (ps_partition_t *part)
{
    char dir [512], file [PS_NAME_MAX * 3 + 32], path [1024];
    fuzz_scratch_mkdir ("saved", dir, sizeof dir);
    uint64_t bytes, version;
    uint32_t crc;
    ps_error_t err;
    if (ps_partition_save (part, dir, file, sizeof file, &bytes, &crc, &version, &err) != 0)
        s_fail ("a loaded partition does not save", err.msg);
    snprintf (path, sizeof path, "%s/%s", dir, file);
    ps_partition_t *again = ps_partition_load (path, &err);
    if (!again)
        s_fail ("a saved partition does not load", err.msg);
    size_t count = ps_partition_count (part);
    float *a = malloc (count * sizeof (float));
    float *b = malloc (count * sizeof (float));
    if (!a || !b)
        abort ();
    uint64_t va, vb;
    ps_partition_pull (part, a, &va);
    ps_partition_pull (again, b, &vb);
    ps_partition_stats_t sa, sb;
    ps_partition_stats (part, &sa);
    ps_partition_stats (again, &sb);
    if (count != ps_partition_count (again) || memcmp (a, b, count * sizeof (float)) != 0
    ||  va != vb || sa.updates != sb.updates || sa.duplicates != sb.duplicates
    ||  !ps_shape_equal (ps_partition_shape (part), ps_partition_shape (again)))
        s_fail ("a saved partition loads back different", path);
    free (a);
    free (b);
    ps_partition_destroy (&again);
}

//  Push a zero gradient for two steps, as the server would after a restore.
static void
s_push (ps_partition_t *part)
{
    size_t count = ps_partition_count (part);
    float *grad = calloc (count, sizeof (float));
    if (!grad)
        abort ();
    uint64_t steps [] = { 1, 1000 };
    for (size_t i = 0; i < sizeof steps / sizeof steps [0]; i++) {
        uint64_t version;
        ps_error_t err;
        if (ps_partition_reserve_step (part, steps [i], &err) == 0
        &&  ps_partition_push (part, steps [i], grad, NULL, &version, &err) < 0)
            s_fail ("a reserved step is refused", err.msg);
    }
    free (grad);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    uint8_t *file = fuzz_input_sealed (data, size);
    char path [512];
    fuzz_scratch_write ("input.snap", file, size, path, sizeof path);
    free (file);

    ps_snapshot_t snap;
    ps_error_t err = { 0 };
    int rc = ps_snapshot_read (path, &snap, &err);
    if (rc == 0)
        ps_snapshot_release (&snap);
    else
    if (!strstr (err.msg, path))
        s_fail ("a refusal does not name the file", err.msg);
    uint64_t bytes;
    uint32_t trailer;
    ps_snapshot_summary (path, &bytes, &trailer, &err);

    ps_partition_t *part = ps_partition_load (path, &err);
    if ((part != NULL) != (rc == 0))
        s_fail (part ? "the loader accepts a file the reader refuses"
                     : "the loader refuses a file the reader accepts", err.msg);
    if (part) {
        s_push (part);
        s_round_trip (part);
        ps_partition_destroy (&part);
    }
    fuzz_scratch_clear ();
    return 0;
}
