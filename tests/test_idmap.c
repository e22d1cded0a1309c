//  Unit tests for the id map (common/model/ps_idmap.c): random batches
//  full of repeated ids, added in one call or in pieces, against a plain
//  reference (a linear search over the distinct ids seen so far); the map
//  reused over many batches of different sizes, growing and resetting; and
//  the ids that hash together or are zero.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "harness_case.h"
#include "harness_rand.h"
#include "ps_idmap.h"

//  The reference: the position of id among seen[0..*count), appended when
//  new.
static uint32_t
s_reference (uint64_t *seen, size_t *count, uint64_t id)
{
    for (size_t i = 0; i < *count; i++)
        if (seen [i] == id)
            return (uint32_t) i;
    seen [*count] = id;
    return (uint32_t) (*count)++;
}

//  n ids drawn from a vocabulary of vocab ids, a few of them hot, as a
//  power-law field is: half the draws come from the first eighth.
static void
s_draw (uint64_t *ids, size_t n, uint64_t vocab, uint64_t *seed)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t r = harness_splitmix (seed);
        uint64_t k = (r & 1) ? (r >> 1) % (vocab / 8 + 1) : (r >> 1) % vocab;
        //  Spread the ids over 64 bits, as salted ids are.
        ids [i] = k * 0x9e3779b97f4a7c15ULL + 12345;
    }
}

//  Add ids[0..n) to map in pieces of at most piece ids and check every
//  index and the distinct ids against the reference.
static void
s_check_batch (ps_idmap_t *map, const uint64_t *ids, size_t n, size_t piece)
{
    uint64_t *seen = malloc ((n + 1) * sizeof *seen);
    uint32_t *index = malloc ((n + 1) * sizeof *index);
    assert_non_null (seen);
    assert_non_null (index);
    ps_error_t err = { 0 };
    for (size_t at = 0; at < n; at += piece)
        harness_ok (ps_idmap_add (map, ids + at, n - at < piece ? n - at : piece, index + at,
                                  &err), &err);
    size_t count = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t want = s_reference (seen, &count, ids [i]);
        if (index [i] != want)
            fail_msg ("id %zu (%llu): index %u, expected %u", i,
                      (unsigned long long) ids [i], index [i], want);
    }
    assert_int_equal (ps_idmap_count (map), count);
    assert_memory_equal (ps_idmap_ids (map), seen, count * sizeof *seen);
    free (seen);
    free (index);
}

static void
test_against_reference (void **state)
{
    (void) state;
    uint64_t seed = 17;
    enum { N = 3000 };
    uint64_t *ids = malloc (N * sizeof *ids);
    assert_non_null (ids);
    //  Vocabularies from a handful (almost every id repeated) to more ids
    //  than the batch (few repeats); pieces of one id, of a field's worth
    //  and the whole batch at once.
    const uint64_t vocabs [] = { 3, 40, 700, 100000 };
    const size_t pieces [] = { 1, 26, N };
    for (size_t v = 0; v < sizeof vocabs / sizeof vocabs [0]; v++)
        for (size_t p = 0; p < sizeof pieces / sizeof pieces [0]; p++) {
            ps_idmap_t *map = ps_idmap_new (0);
            assert_non_null (map);
            s_draw (ids, N, vocabs [v], &seed);
            s_check_batch (map, ids, N, pieces [p]);
            ps_idmap_destroy (&map);
            assert_null (map);
        }
    free (ids);
}

//  One map over many batches, as a training loop uses it: a reset forgets
//  the previous batch whatever its size, and the map grows past its first
//  capacity when a batch needs it.
static void
test_reuse_and_growth (void **state)
{
    (void) state;
    uint64_t seed = 99;
    enum { N = 5000 };
    uint64_t *ids = malloc (N * sizeof *ids);
    assert_non_null (ids);
    ps_idmap_t *map = ps_idmap_new (16);
    assert_non_null (map);
    for (int batch = 0; batch < 60; batch++) {
        size_t n = 1 + (size_t) (harness_splitmix (&seed) % N);
        s_draw (ids, n, 1 + harness_splitmix (&seed) % 20000, &seed);
        ps_idmap_reset (map);
        s_check_batch (map, ids, n, 1 + (size_t) (harness_splitmix (&seed) % n));
    }
    ps_idmap_reset (map);
    assert_int_equal (ps_idmap_count (map), 0);
    ps_idmap_destroy (&map);
    ps_idmap_destroy (&map);
    free (ids);
}

//  Ids the map must not treat as special: 0 and the largest, and ids that
//  differ only in their high bits, which a map indexing by the id's low
//  bits would pile into one slot.
static void
test_edge_ids (void **state)
{
    (void) state;
    enum { N = 400 };
    uint64_t ids [N];
    for (size_t i = 0; i < N; i++)
        ids [i] = i % 3 == 0 ? 0 : i % 3 == 1 ? UINT64_MAX : (uint64_t) (i % 50 + 1) << 40;
    ps_idmap_t *map = ps_idmap_new (0);
    assert_non_null (map);
    s_check_batch (map, ids, N, 7);
    assert_int_equal (ps_idmap_count (map), 2 + 50);
    ps_idmap_destroy (&map);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_against_reference),
        cmocka_unit_test (test_reuse_and_growth),
        cmocka_unit_test (test_edge_ids),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
