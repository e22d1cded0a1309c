//  Unit tests for the worker's split of a batch's ids over the servers
//  (common/wire/ps_idsplit.c), as properties over random batches and 1 to
//  7 servers: every id goes to exactly one server, the one
//  ps_tablespec_shard_of names (which ps-server checks), in batch order;
//  gathering rows that are a function of their id gives each position its
//  own id's row back, and scattering gradients puts each in its server's
//  frame at its id's place; and the servers' shares of many ids are even
//  to within a few percent. A split reused for a smaller batch forgets the
//  larger one.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "harness_rand.h"
#include "ps_idsplit.h"

#define S_DIM  3

//  The row of id, element j: a function of the id alone.
static float
s_row (uint64_t id, int j)
{
    return (float) (id % 100003) + 0.25f * (float) j;
}

//  Split n ids drawn from state (unique: a counter mixed) over nshards and
//  check every property of the result.
static void
s_check_split (ps_idsplit_t *split, uint64_t *state, size_t n, uint32_t nshards,
               uint64_t seed)
{
    uint64_t *ids = malloc ((n + 1) * sizeof *ids);
    assert_non_null (ids);
    uint64_t base = harness_splitmix (state);
    for (size_t i = 0; i < n; i++)
        ids [i] = (base + i) * 0x9e3779b97f4a7c15ULL;   //  distinct: an odd multiplier
    ps_idsplit_split (split, ids, n);

    //  Every id on exactly one server, the one the server checks, in
    //  batch order; the counts add up to the batch.
    const float *rows [8];
    float *grads_out [8];
    size_t total = 0;
    for (uint32_t s = 0; s < nshards; s++) {
        size_t count;
        const uint64_t *mine = ps_idsplit_ids (split, s, &count);
        float *r = malloc ((count + 1) * S_DIM * sizeof (float));
        grads_out [s] = malloc ((count + 1) * S_DIM * sizeof (float));
        assert_non_null (r);
        assert_non_null (grads_out [s]);
        size_t last = 0;
        for (size_t k = 0; k < count; k++) {
            assert_int_equal (ps_tablespec_shard_of (mine [k], seed, nshards), s);
            //  Batch order: each id's position comes after the previous one's.
            size_t at = 0;
            while (ids [at] != mine [k])
                at++;
            assert_true (k == 0 || at > last);
            last = at;
            for (int j = 0; j < S_DIM; j++)
                r [k * S_DIM + (size_t) j] = s_row (mine [k], j);
        }
        rows [s] = r;
        total += count;
    }
    assert_int_equal (total, n);

    //  Gather: position i gets its own id's row.
    float *out = malloc ((n + 1) * S_DIM * sizeof (float));
    assert_non_null (out);
    ps_idsplit_gather (split, rows, S_DIM, out);
    for (size_t i = 0; i < n; i++)
        for (int j = 0; j < S_DIM; j++)
            assert_true (out [i * S_DIM + (size_t) j] == s_row (ids [i], j));

    //  Scatter: each gradient lands at its id's place in its server's rows.
    for (size_t i = 0; i < n; i++)
        for (int j = 0; j < S_DIM; j++)
            out [i * S_DIM + (size_t) j] = s_row (ids [i], j) + 0.5f;
    ps_idsplit_scatter (split, out, S_DIM, grads_out);
    for (uint32_t s = 0; s < nshards; s++) {
        size_t count;
        const uint64_t *mine = ps_idsplit_ids (split, s, &count);
        for (size_t k = 0; k < count; k++)
            for (int j = 0; j < S_DIM; j++)
                assert_true (grads_out [s][k * S_DIM + (size_t) j] == s_row (mine [k], j) + 0.5f);
        free ((void *) rows [s]);
        free (grads_out [s]);
    }
    free (out);
    free (ids);
}

static void
test_random_batches (void **state)
{
    (void) state;
    uint64_t rand = 17;
    for (uint32_t nshards = 1; nshards <= 7; nshards++) {
        uint64_t seed = harness_splitmix (&rand);
        ps_idsplit_t *split = ps_idsplit_new (nshards, seed);
        assert_non_null (split);
        //  Growing, then smaller batches on the same split; 0 ids too.
        const size_t sizes [] = { 1, 0, 100, 777, 13 };
        for (size_t t = 0; t < sizeof sizes / sizeof sizes [0]; t++)
            s_check_split (split, &rand, sizes [t], nshards, seed);
        ps_idsplit_destroy (&split);
        assert_null (split);
    }
}

//  Hot ids of a power law are spread, not piled: for sequential ids (the
//  worst case for a range split) and random ones, each of the servers gets
//  its 1/n share of 200000 ids within 2%.
static void
test_even_shares (void **state)
{
    (void) state;
    const size_t n = 200000;
    uint64_t *ids = malloc (n * sizeof *ids);
    assert_non_null (ids);
    uint64_t rand = 5;
    for (int kind = 0; kind < 2; kind++) {
        for (size_t i = 0; i < n; i++)
            ids [i] = kind == 0 ? i : harness_splitmix (&rand);
        for (uint32_t nshards = 2; nshards <= 7; nshards++) {
            ps_idsplit_t *split = ps_idsplit_new (nshards, 3);
            ps_idsplit_split (split, ids, n);
            double share = (double) n / nshards;
            for (uint32_t s = 0; s < nshards; s++) {
                size_t count;
                ps_idsplit_ids (split, s, &count);
                assert_true ((double) count > share * 0.98 && (double) count < share * 1.02);
            }
            ps_idsplit_destroy (&split);
        }
    }
    free (ids);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_random_batches),
        cmocka_unit_test (test_even_shares),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
