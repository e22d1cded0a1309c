//  Unit tests for the partitioners and placement
//  (coordinator/ps_partitioner.c): shard counts against TensorFlow's own
//  examples and hand-computed shapes, row splits, the placement of the CNN
//  on two servers worked out by hand, and random placements against a
//  brute-force reference.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "harness_rand.h"
#include "ps_partitioner.h"

static ps_shape_t
s_shape (int rank, int64_t d0, int64_t d1, int64_t d2, int64_t d3)
{
    int64_t dims [4] = { d0, d1, d2, d3 };
    ps_shape_t shape;
    memset (&shape, 0, sizeof shape);
    assert_int_equal (ps_shape_set (&shape, dims, rank, NULL), PS_OK);
    return shape;
}

static ps_partitioner_t
s_fixed (int num_shards)
{
    ps_partitioner_t p;
    memset (&p, 0, sizeof p);
    p.kind = PS_PARTITIONER_FIXED;
    p.num_shards = num_shards;
    return p;
}

static ps_partitioner_t
s_min_size (int64_t min_shard_bytes, int max_shards)
{
    ps_partitioner_t p;
    memset (&p, 0, sizeof p);
    p.kind = PS_PARTITIONER_MIN_SIZE;
    p.min_shard_bytes = min_shard_bytes;
    p.max_shards = max_shards;
    return p;
}

static ps_partitioner_t
s_max_size (int64_t max_shard_bytes, int max_shards)
{
    ps_partitioner_t p;
    memset (&p, 0, sizeof p);
    p.kind = PS_PARTITIONER_MAX_SIZE;
    p.max_shard_bytes = max_shard_bytes;
    p.max_shards = max_shards;
    return p;
}

static int
s_shards (ps_partitioner_t p, int rank, int64_t d0, int64_t d1)
{
    ps_shape_t shape = s_shape (rank, d0, d1, 1, 1);
    assert_int_equal (ps_partitioner_validate (&p, NULL), PS_OK);
    return ps_partitioner_shards (&p, &shape);
}

static void
test_kind_names (void **state)
{
    (void) state;
    const char *names [] = { "fixed", "min_size", "max_size" };
    ps_partitioner_kind_t kinds [] = {
        PS_PARTITIONER_FIXED, PS_PARTITIONER_MIN_SIZE, PS_PARTITIONER_MAX_SIZE
    };
    for (int i = 0; i < 3; i++) {
        ps_partitioner_kind_t kind = (ps_partitioner_kind_t) -1;
        assert_int_equal (ps_partitioner_kind_parse (names [i], &kind, NULL), PS_OK);
        assert_int_equal (kind, kinds [i]);
        assert_string_equal (ps_partitioner_kind_name (kinds [i]), names [i]);
    }
    ps_error_t err = { 0 };
    ps_partitioner_kind_t kind = PS_PARTITIONER_MAX_SIZE;
    assert_int_equal (ps_partitioner_kind_parse ("round_robin", &kind, &err), PS_EINVAL);
    assert_int_equal (err.code, PS_EINVAL);
    assert_non_null (strstr (err.msg, "round_robin"));
    assert_non_null (strstr (err.msg, "min_size"));
    //  Case matters, and nothing is written on failure.
    assert_int_equal (ps_partitioner_kind_parse ("Fixed", &kind, NULL), PS_EINVAL);
    assert_int_equal (ps_partitioner_kind_parse ("", &kind, NULL), PS_EINVAL);
    assert_int_equal (ps_partitioner_kind_parse (NULL, &kind, NULL), PS_EINVAL);
    assert_int_equal (kind, PS_PARTITIONER_MAX_SIZE);
}

//  The message must name the field that is wrong.
static void
s_assert_invalid (ps_partitioner_t p, const char *field)
{
    ps_error_t err = { 0 };
    assert_int_equal (ps_partitioner_validate (&p, &err), PS_EINVAL);
    assert_int_equal (err.code, PS_EINVAL);
    if (!strstr (err.msg, field))
        fail_msg ("message \"%s\" does not name %s", err.msg, field);
}

static void
test_validate (void **state)
{
    (void) state;
    assert_int_equal (ps_partitioner_validate (&(ps_partitioner_t) { 0 }, NULL), PS_EINVAL);
    s_assert_invalid (s_fixed (0), "num_shards");
    s_assert_invalid (s_fixed (-3), "num_shards");
    s_assert_invalid (s_min_size (0, 2), "min_shard_bytes");
    s_assert_invalid (s_min_size (-1, 2), "min_shard_bytes");
    s_assert_invalid (s_min_size (1024, 0), "max_shards");
    s_assert_invalid (s_max_size (0, 0), "max_shard_bytes");
    s_assert_invalid (s_max_size (1024, -1), "max_shards");
    ps_partitioner_t bad = s_fixed (2);
    bad.kind = (ps_partitioner_kind_t) 7;
    s_assert_invalid (bad, "kind");

    //  Fields a kind does not use are not checked.
    ps_partitioner_t fixed = s_fixed (1);
    fixed.max_shards = -5;
    assert_int_equal (ps_partitioner_validate (&fixed, NULL), PS_OK);
    ps_partitioner_t smallest = s_min_size (1, 1);
    assert_int_equal (ps_partitioner_validate (&smallest, NULL), PS_OK);
    //  max_size without a cap is valid.
    ps_partitioner_t uncapped = s_max_size (1, 0);
    assert_int_equal (ps_partitioner_validate (&uncapped, NULL), PS_OK);
}

static void
test_default (void **state)
{
    (void) state;
    ps_partitioner_t p;
    memset (&p, 0xa5, sizeof p);
    ps_partitioner_default (&p, 3);
    assert_int_equal (p.kind, PS_PARTITIONER_MIN_SIZE);
    assert_int_equal (p.min_shard_bytes, 256 * 1024);
    assert_int_equal (p.max_shards, 3);
    assert_int_equal (ps_partitioner_validate (&p, NULL), PS_OK);
    //  No servers is no valid default; the message says which field.
    ps_partitioner_default (&p, 0);
    s_assert_invalid (p, "max_shards");
}

//  FixedShardsPartitioner: min (num_shards, dims[0]).
static void
test_fixed (void **state)
{
    (void) state;
    //  TensorFlow's docstring: [10, 3] with 2 shards gives [2, 1].
    assert_int_equal (s_shards (s_fixed (2), 2, 10, 3), 2);
    assert_int_equal (s_shards (s_fixed (3), 2, 10, 3), 3);
    //  Capped by the rows; the row size does not matter.
    assert_int_equal (s_shards (s_fixed (20), 2, 5, 4), 5);
    assert_int_equal (s_shards (s_fixed (4), 1, 1, 1), 1);
    assert_int_equal (s_shards (s_fixed (1), 2, 1000000, 1000), 1);
    assert_int_equal (s_shards (s_fixed (7), 1, 7, 1), 7);
}

//  MinSizePartitioner: max (1, min (max_shards, dims[0],
//  ceil (4 * elements / min_shard_bytes))).
static void
test_min_size (void **state)
{
    (void) state;
    //  TensorFlow's docstring: [6, 1] float32 with min_shard_bytes 4 gives
    //  2 shards at max_shards 2 and 6 at max_shards 10.
    assert_int_equal (s_shards (s_min_size (4, 2), 2, 6, 1), 2);
    assert_int_equal (s_shards (s_min_size (4, 10), 2, 6, 1), 6);
    //  min_max_variable_partitioner's docstring: [1024, 1024] float32 at
    //  256 KiB is 16 shards, or max_partitions when that is smaller.
    assert_int_equal (s_shards (s_min_size (256 << 10, 16), 2, 1024, 1024), 16);
    assert_int_equal (s_shards (s_min_size (256 << 10, 100), 2, 1024, 1024), 16);
    assert_int_equal (s_shards (s_min_size (256 << 10, 5), 2, 1024, 1024), 5);
    //  TensorFlow rounds up: exactly 256 KiB is one shard, 4 bytes more is
    //  two, and 300 x 256 floats (300 KiB) is two.
    assert_int_equal (s_shards (s_min_size (256 << 10, 8), 2, 256, 256), 1);
    assert_int_equal (s_shards (s_min_size (256 << 10, 8), 1, 65537, 1), 2);
    assert_int_equal (s_shards (s_min_size (256 << 10, 8), 2, 300, 256), 2);
    //  24 bytes over 5-byte shards: ceil (4.8) = 5.
    assert_int_equal (s_shards (s_min_size (5, 10), 2, 6, 1), 5);
    //  Small variables get one shard.
    assert_int_equal (s_shards (s_min_size (256 << 10, 8), 1, 10, 1), 1);
    assert_int_equal (s_shards (s_min_size (1 << 30, 8), 2, 1024, 1024), 1);
    //  Capped by the rows: 3 rows of 4 MiB each.
    assert_int_equal (s_shards (s_min_size (256 << 10, 8), 2, 3, 1 << 20), 3);
}

//  min_size's chunk_bytes: at least max_size's count at chunk_bytes, past
//  max_shards; none at 0; and the default's value.
static void
test_min_size_chunks (void **state)
{
    (void) state;
    ps_partitioner_t p = s_min_size (256 << 10, 1);
    //  16 MiB as [4096, 1024] float32: one shard without chunks, 8 of 2 MiB
    //  with, 16 of 1 MiB, and one again at chunks larger than the variable.
    assert_int_equal (s_shards (p, 2, 4096, 1024), 1);
    p.chunk_bytes = 2 << 20;
    assert_int_equal (s_shards (p, 2, 4096, 1024), 8);
    p.chunk_bytes = 1 << 20;
    assert_int_equal (s_shards (p, 2, 4096, 1024), 16);
    p.chunk_bytes = 64 << 20;
    assert_int_equal (s_shards (p, 2, 4096, 1024), 1);
    //  Whole rows: 3 rows of 4 MiB at 1 MiB chunks are 3 shards, and
    //  10 rows of 400 KiB at 1 MiB (two rows a chunk) are 5.
    p.chunk_bytes = 1 << 20;
    assert_int_equal (s_shards (p, 2, 3, 1 << 20), 3);
    assert_int_equal (s_shards (p, 2, 10, 100 << 10), 5);
    //  More shards by min_shard_bytes than chunks ask for: min_size's count.
    p = s_min_size (4, 10);
    p.chunk_bytes = 12;
    assert_int_equal (s_shards (p, 2, 6, 1), 6);
    //  Negative is refused, naming the field.
    p.chunk_bytes = -1;
    s_assert_invalid (p, "chunk_bytes");
    //  The default cuts 16 MiB on 2 servers into 2 MiB shards, and leaves
    //  the seed CNN's 1.4 MB dense kernel at one shard per server.
    ps_partitioner_default (&p, 2);
    assert_int_equal (p.chunk_bytes, PS_PARTITIONER_CHUNK_BYTES);
    assert_int_equal (s_shards (p, 2, 4096, 1024),
                      (int) ((INT64_C (16) << 20) / PS_PARTITIONER_CHUNK_BYTES));
    assert_int_equal (s_shards (p, 2, 5408, 64), 2);
}

//  MaxSizePartitioner: ceil (dims[0] / max (1, floor (max_shard_bytes /
//  row_bytes))), capped by max_shards when > 0.
static void
test_max_size (void **state)
{
    (void) state;
    //  TensorFlow's docstring: [6, 1] float32.
    assert_int_equal (s_shards (s_max_size (4, 0), 2, 6, 1), 6);
    assert_int_equal (s_shards (s_max_size (4, 2), 2, 6, 1), 2);
    assert_int_equal (s_shards (s_max_size (1024, 0), 2, 6, 1), 1);
    //  Rows of 12 bytes: 40 bytes hold 3 rows, 36 exactly 3, 35 only 2.
    assert_int_equal (s_shards (s_max_size (40, 0), 2, 10, 3), 4);
    assert_int_equal (s_shards (s_max_size (36, 0), 2, 10, 3), 4);
    assert_int_equal (s_shards (s_max_size (35, 0), 2, 10, 3), 5);
    assert_int_equal (s_shards (s_max_size (35, 3), 2, 10, 3), 3);
    assert_int_equal (s_shards (s_max_size (120, 0), 2, 10, 3), 1);
    assert_int_equal (s_shards (s_max_size (119, 0), 2, 10, 3), 2);
    //  Rows larger than the limit: one row per shard, as many as rows.
    assert_int_equal (s_shards (s_max_size (100, 0), 2, 5, 100), 5);
    assert_int_equal (s_shards (s_max_size (1, 0), 2, 7, 1000), 7);
    assert_int_equal (s_shards (s_max_size (1, 4), 2, 7, 1000), 4);
    //  The CNN's dense kernel, 5408 rows of 256 bytes, under 64 KiB: 256
    //  rows a shard, ceil (5408 / 256) = 22.
    assert_int_equal (s_shards (s_max_size (64 << 10, 0), 2, 5408, 64), 22);
    assert_int_equal (s_shards (s_max_size (64 << 10, 16), 2, 5408, 64), 16);
    //  The cap is never above what the rows allow.
    assert_int_equal (s_shards (s_max_size (4, 100), 1, 3, 1), 3);
}

static void
s_assert_splits (int64_t n, int k, const int64_t *expected)
{
    int64_t splits [16];
    ps_partitioner_splits (n, k, splits);
    assert_memory_equal (splits, expected, sizeof (int64_t) * (size_t) (k + 1));
}

static void
test_splits (void **state)
{
    (void) state;
    //  The example in TensorFlow's ParameterServerStrategy: 10 rows in 4
    //  shards are 3, 3, 2, 2.
    s_assert_splits (10, 4, (int64_t []) { 0, 3, 6, 8, 10 });
    s_assert_splits (5408, 2, (int64_t []) { 0, 2704, 5408 });
    s_assert_splits (7, 1, (int64_t []) { 0, 7 });
    s_assert_splits (7, 7, (int64_t []) { 0, 1, 2, 3, 4, 5, 6, 7 });
    s_assert_splits (11, 3, (int64_t []) { 0, 4, 8, 11 });
    s_assert_splits (13, 5, (int64_t []) { 0, 3, 6, 9, 11, 13 });

    //  Every small case: the first n % k shards are one row longer than
    //  the rest, which are n / k rows.
    int64_t splits [65];
    for (int64_t n = 1; n <= 200; n++)
        for (int k = 1; k <= 64 && k <= n; k++) {
            ps_partitioner_splits (n, k, splits);
            assert_int_equal (splits [0], 0);
            assert_int_equal (splits [k], n);
            for (int i = 0; i < k; i++) {
                int64_t rows = splits [i + 1] - splits [i];
                assert_int_equal (rows, n / k + (i < n % k ? 1 : 0));
            }
        }
}

//  The seed CNN: conv 3x3x1x32 and its bias, dense 5408x64 and its bias,
//  output 64x10 and its bias, with the default partitioner on 2 servers.
static void
test_cnn_placement (void **state)
{
    (void) state;
    ps_shape_t shapes [6] = {
        s_shape (4, 3, 3, 1, 32),
        s_shape (1, 32, 1, 1, 1),
        s_shape (2, 5408, 64, 1, 1),
        s_shape (1, 64, 1, 1, 1),
        s_shape (2, 64, 10, 1, 1),
        s_shape (1, 10, 1, 1, 1),
    };
    ps_partitioner_t p;
    ps_partitioner_default (&p, 2);
    //  The dense kernel is 1,384,448 bytes: ceil (5.28) = 6 shards of
    //  256 KiB, capped at 2 servers. Everything else is under 256 KiB.
    int expected_shards [6] = { 1, 1, 2, 1, 1, 1 };
    for (int i = 0; i < 6; i++)
        assert_int_equal (ps_partitioner_shards (&p, &shapes [i]), expected_shards [i]);

    ps_error_t err = { 0 };
    ps_placement_t *placement = ps_placement_new (&p, shapes, 6, 2, &err);
    assert_non_null (placement);
    const ps_placed_var_t *dense = ps_placement_var (placement, 2);
    assert_int_equal (dense->nparts, 2);
    assert_int_equal (dense->splits [0], 0);
    assert_int_equal (dense->splits [1], 2704);
    assert_int_equal (dense->splits [2], 5408);

    //  By hand, largest first: dense halves (692,224 bytes each) to 0 and
    //  1; the output kernel (2,560) to 0 on the tie; then the conv kernel
    //  (1,152), dense bias (256), conv bias (128) and output bias (40) all
    //  to 1, which stays the lighter.
    assert_int_equal (dense->servers [0], 0);
    assert_int_equal (dense->servers [1], 1);
    int expected_server [6] = { 1, 1, -1, 1, 0, 1 };
    for (int i = 0; i < 6; i++) {
        if (i == 2)
            continue;
        const ps_placed_var_t *var = ps_placement_var (placement, i);
        assert_int_equal (var->nparts, 1);
        assert_int_equal (var->splits [0], 0);
        assert_int_equal (var->splits [1], shapes [i].dims [0]);
        assert_int_equal (var->servers [0], expected_server [i]);
    }
    assert_int_equal (ps_placement_server_bytes (placement, 0), 692224 + 2560);
    assert_int_equal (ps_placement_server_bytes (placement, 1), 692224 + 1152 + 256 + 128 + 40);
    ps_placement_destroy (&placement);
    assert_null (placement);
    ps_placement_destroy (&placement);
}

//  Equal partitions go in variable order, then partition order, each to
//  the lightest server, ties to the lowest index.
static void
test_placement_ties (void **state)
{
    (void) state;
    ps_shape_t shapes [3] = {
        s_shape (2, 4, 1, 1, 1),
        s_shape (2, 4, 1, 1, 1),
        s_shape (2, 3, 1, 1, 1),
    };
    ps_partitioner_t p = s_fixed (2);
    ps_placement_t *placement = ps_placement_new (&p, shapes, 3, 3, NULL);
    assert_non_null (placement);
    //  Partitions of 8 bytes: v0p0, v0p1, v1p0, v1p1 to 0, 1, 2, 0; then
    //  v2p0 (8 bytes, 2 rows) to 1 and v2p1 (4 bytes) to 2.
    const ps_placed_var_t *v0 = ps_placement_var (placement, 0);
    const ps_placed_var_t *v1 = ps_placement_var (placement, 1);
    const ps_placed_var_t *v2 = ps_placement_var (placement, 2);
    assert_int_equal (v0->servers [0], 0);
    assert_int_equal (v0->servers [1], 1);
    assert_int_equal (v1->servers [0], 2);
    assert_int_equal (v1->servers [1], 0);
    assert_int_equal (v2->splits [1], 2);
    assert_int_equal (v2->servers [0], 1);
    assert_int_equal (v2->servers [1], 2);
    assert_int_equal (ps_placement_server_bytes (placement, 0), 16);
    assert_int_equal (ps_placement_server_bytes (placement, 1), 16);
    assert_int_equal (ps_placement_server_bytes (placement, 2), 12);
    ps_placement_destroy (&placement);

    //  More servers than partitions: the extra servers hold nothing.
    p = s_fixed (1);
    placement = ps_placement_new (&p, shapes, 3, 5, NULL);
    assert_non_null (placement);
    assert_int_equal (ps_placement_var (placement, 0)->servers [0], 0);
    assert_int_equal (ps_placement_var (placement, 1)->servers [0], 1);
    assert_int_equal (ps_placement_var (placement, 2)->servers [0], 2);
    assert_int_equal (ps_placement_server_bytes (placement, 3), 0);
    assert_int_equal (ps_placement_server_bytes (placement, 4), 0);
    ps_placement_destroy (&placement);

    //  No variables at all.
    placement = ps_placement_new (&p, NULL, 0, 2, NULL);
    assert_non_null (placement);
    assert_int_equal (ps_placement_server_bytes (placement, 0), 0);
    assert_int_equal (ps_placement_server_bytes (placement, 1), 0);
    ps_placement_destroy (&placement);
}

//  The reference: shard counts straight from TensorFlow's formulas in
//  double precision, and the greedy placement by repeated selection of the
//  largest unplaced partition rather than by sorting.
static int64_t
s_ref_shards (const ps_partitioner_t *p, const ps_shape_t *shape)
{
    double rows = (double) shape->dims [0];
    double elements = 1;
    for (int i = 0; i < shape->rank; i++)
        elements *= (double) shape->dims [i];
    int64_t shards = 0;
    if (p->kind == PS_PARTITIONER_FIXED)
        shards = p->num_shards < shape->dims [0] ? p->num_shards : shape->dims [0];
    else
    if (p->kind == PS_PARTITIONER_MIN_SIZE) {
        double partitions = elements * 4 / (double) p->min_shard_bytes;
        int64_t c = (int64_t) partitions;
        if ((double) c < partitions)
            c++;
        shards = c;
        if (shards > shape->dims [0])
            shards = shape->dims [0];
        if (shards > p->max_shards)
            shards = p->max_shards;
        if (shards < 1)
            shards = 1;
    }
    else {
        double bytes_per_slice = elements / rows * 4;
        int64_t slices = (int64_t) ((double) p->max_shard_bytes / bytes_per_slice);
        if (slices < 1)
            slices = 1;
        double q = rows / (double) slices;
        shards = (int64_t) q;
        if ((double) shards < q)
            shards++;
        if (p->max_shards > 0 && shards > p->max_shards)
            shards = p->max_shards;
    }
    return shards;
}

static void
test_placement_against_reference (void **state)
{
    (void) state;
    uint64_t seed = 11;
    enum { MAXVARS = 12, MAXROWS = 100, MAXPARTS = MAXVARS * MAXROWS };
    //  How often the random cases reached what they are meant to reach.
    int kinds_seen [3] = { 0 };
    int many_parts = 0;
    int split_vars = 0;
    for (int round = 0; round < 400; round++) {
        int nvars = 1 + (int) (harness_lcg (&seed) % MAXVARS);
        int nservers = 1 + (int) (harness_lcg (&seed) % 6);
        ps_shape_t shapes [MAXVARS];
        for (int i = 0; i < nvars; i++) {
            int rank = 1 + (int) (harness_lcg (&seed) % 3);
            int64_t dims [3];
            for (int d = 0; d < 3; d++)
                dims [d] = 1 + (int64_t) (harness_lcg (&seed) % (d == 0 ? MAXROWS : 40));
            //  Repeat a shape now and then, to exercise the ties.
            if (i > 0 && harness_lcg (&seed) % 4 == 0)
                shapes [i] = shapes [harness_lcg (&seed) % (uint64_t) i];
            else
                assert_int_equal (ps_shape_set (&shapes [i], dims, rank, NULL), PS_OK);
        }
        ps_partitioner_t p;
        int kind = (int) (harness_lcg (&seed) % 3);
        kinds_seen [kind]++;
        switch (kind) {
            case 0:
                p = s_fixed (1 + (int) (harness_lcg (&seed) % 8));
                break;
            case 1:
                p = s_min_size (1 + (int64_t) (harness_lcg (&seed) % 20000),
                                1 + (int) (harness_lcg (&seed) % 8));
                break;
            default:
                p = s_max_size (1 + (int64_t) (harness_lcg (&seed) % 20000),
                                (int) (harness_lcg (&seed) % 5));
                break;
        }

        //  Reference partitions.
        int64_t bytes [MAXPARTS];
        int var_of [MAXPARTS];
        int part_of [MAXPARTS];
        int nparts = 0;
        int64_t total = 0;
        int64_t largest = 0;
        for (int i = 0; i < nvars; i++) {
            int64_t k = s_ref_shards (&p, &shapes [i]);
            assert_true (k >= 1 && k <= shapes [i].dims [0]);
            assert_int_equal (ps_partitioner_shards (&p, &shapes [i]), k);
            split_vars += k > 1;
            int64_t n = shapes [i].dims [0];
            int64_t row = 4;
            for (int d = 1; d < shapes [i].rank; d++)
                row *= shapes [i].dims [d];
            for (int64_t j = 0; j < k; j++) {
                int64_t rows = n / k + (j < n % k ? 1 : 0);
                bytes [nparts] = rows * row;
                var_of [nparts] = i;
                part_of [nparts] = (int) j;
                total += bytes [nparts];
                if (bytes [nparts] > largest)
                    largest = bytes [nparts];
                nparts++;
            }
        }
        //  Reference greedy placement.
        int ref_server [MAXPARTS];
        bool placed [MAXPARTS] = { false };
        int64_t load [8] = { 0 };
        for (int step = 0; step < nparts; step++) {
            int pick = -1;
            for (int j = 0; j < nparts; j++)
                if (!placed [j] && (pick < 0 || bytes [j] > bytes [pick]))
                    pick = j;       //  the first of equals: variable, then partition order
            int best = 0;
            for (int s = 0; s < nservers; s++)
                if (load [s] < load [best])
                    best = s;
            placed [pick] = true;
            ref_server [pick] = best;
            load [best] += bytes [pick];
        }

        ps_error_t err = { 0 };
        ps_placement_t *placement = ps_placement_new (&p, shapes, nvars, nservers, &err);
        if (!placement)
            fail_msg ("placement failed: %s", err.msg);
        int j = 0;
        for (int i = 0; i < nvars; i++) {
            const ps_placed_var_t *var = ps_placement_var (placement, i);
            assert_int_equal (var->splits [0], 0);
            assert_int_equal (var->splits [var->nparts], shapes [i].dims [0]);
            for (int k = 0; k < var->nparts; k++, j++) {
                assert_int_equal (var_of [j], i);
                assert_int_equal (part_of [j], k);
                assert_int_equal (var->servers [k], ref_server [j]);
            }
        }
        assert_int_equal (j, nparts);
        many_parts += nparts > 4 * nservers;
        int64_t sum = 0;
        int64_t lo = INT64_MAX;
        int64_t hi = 0;
        for (int s = 0; s < nservers; s++) {
            int64_t b = ps_placement_server_bytes (placement, s);
            assert_int_equal (b, load [s]);
            sum += b;
            lo = b < lo ? b : lo;
            hi = b > hi ? b : hi;
        }
        assert_int_equal (sum, total);
        //  Greedy largest-first keeps the spread within one partition.
        assert_true (hi - lo <= largest);
        ps_placement_destroy (&placement);
    }
    for (int kind = 0; kind < 3; kind++)
        assert_true (kinds_seen [kind] > 50);
    assert_true (many_parts > 50);
    assert_true (split_vars > 500);
}

static void
test_placement_invalid (void **state)
{
    (void) state;
    ps_shape_t shapes [2] = { s_shape (2, 4, 4, 1, 1), s_shape (1, 8, 1, 1, 1) };
    ps_error_t err = { 0 };
    ps_partitioner_t p = s_min_size (0, 2);
    assert_null (ps_placement_new (&p, shapes, 2, 2, &err));
    assert_int_equal (err.code, PS_EINVAL);
    assert_non_null (strstr (err.msg, "min_shard_bytes"));

    p = s_fixed (2);
    memset (&err, 0, sizeof err);
    assert_null (ps_placement_new (&p, shapes, 2, 0, &err));
    assert_int_equal (err.code, PS_EINVAL);
    assert_non_null (strstr (err.msg, "servers"));
    assert_null (ps_placement_new (&p, shapes, 2, -1, NULL));
    assert_null (ps_placement_new (&p, shapes, -1, 2, NULL));
    assert_null (ps_placement_new (&p, NULL, 2, 2, NULL));

    //  A shape of rank 0: the message names the variable.
    shapes [1].rank = 0;
    memset (&err, 0, sizeof err);
    assert_null (ps_placement_new (&p, shapes, 2, 2, &err));
    assert_int_equal (err.code, PS_ESHAPE);
    assert_non_null (strstr (err.msg, "variable 1"));
    assert_non_null (strstr (err.msg, "rank"));
    //  A dimension of 0.
    shapes [1] = s_shape (1, 8, 1, 1, 1);
    shapes [0].dims [1] = 0;
    memset (&err, 0, sizeof err);
    assert_null (ps_placement_new (&p, shapes, 2, 2, &err));
    assert_int_equal (err.code, PS_ESHAPE);
    assert_non_null (strstr (err.msg, "variable 0"));
    //  Fixed, it places.
    shapes [0].dims [1] = 4;
    ps_placement_t *placement = ps_placement_new (&p, shapes, 2, 2, &err);
    assert_non_null (placement);
    ps_placement_destroy (&placement);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_kind_names),
        cmocka_unit_test (test_validate),
        cmocka_unit_test (test_default),
        cmocka_unit_test (test_fixed),
        cmocka_unit_test (test_min_size),
        cmocka_unit_test (test_min_size_chunks),
        cmocka_unit_test (test_max_size),
        cmocka_unit_test (test_splits),
        cmocka_unit_test (test_cnn_placement),
        cmocka_unit_test (test_placement_ties),
        cmocka_unit_test (test_placement_against_reference),
        cmocka_unit_test (test_placement_invalid),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
