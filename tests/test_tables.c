//  Unit tests for the ps-server's registry of embedding table shards
//  (ps/ps_tables.c): snapshot file names round-trip, whatever the table's
//  name holds (escaped bytes, ".shard" and "of" of its own), and names not
//  made by it are refused; an incremental file names its full one; the
//  registry lists shards in name order, replaces one of the same name, and
//  a shard a request still links outlives its replacement.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "ps_tables.h"

static void
test_file_names (void **state)
{
    (void) state;
    const char *names [] = { "emb", "a/b c", "x.shard1of2", "t.shard3of4.full.table", "%" };
    for (size_t i = 0; i < sizeof names / sizeof names [0]; i++)
        for (int full = 0; full < 2; full++) {
            char file [PATH_MAX];
            assert_int_equal (ps_tables_filename (names [i], 3, 7, full, file, sizeof file), 0);
            uint32_t shard = 0, shards = 0;
            bool got_full = !full;
            assert_true (ps_tables_parse_filename (file, &shard, &shards, &got_full));
            assert_int_equal (shard, 3);
            assert_int_equal (shards, 7);
            assert_int_equal (got_full, full);
            char full_file [PATH_MAX], want [PATH_MAX];
            assert_int_equal (ps_tables_full_filename (file, full_file, sizeof full_file),
                              full ? PS_EINVAL : PS_OK);
            if (!full) {
                ps_tables_filename (names [i], 3, 7, true, want, sizeof want);
                assert_string_equal (full_file, want);
            }
        }
    char file [64];
    ps_tables_filename ("a/b", 0, 2, true, file, sizeof file);
    assert_string_equal (file, "a%2Fb.shard0of2.full.table");
    assert_int_equal (ps_tables_filename ("emb", 0, 2, true, file, 10), PS_EINVAL);
    const char *bad [] = { "emb.shard2of2.full.table", "emb.shard0of0.full.table",
                           "emb.shard0of2.part.table", "emb.shard-1of2.incr.table",
                           "emb.shard0of99999999999.full.table", "emb.shard0of2x.full.table",
                           ".shard0of2.full.table", "emb.part0.snap", "emb.shardof2.full.table" };
    for (size_t i = 0; i < sizeof bad / sizeof bad [0]; i++) {
        uint32_t shard, shards;
        bool full;
        if (ps_tables_parse_filename (bad [i], &shard, &shards, &full))
            fail_msg ("%s was taken for a table file", bad [i]);
    }
}

static ps_tshard_t *
s_shard (const char *name)
{
    ps_tablespec_t spec;
    ps_tablespec_default (&spec, name, 4);
    ps_error_t err;
    ps_sparse_t *table = ps_sparse_new (&spec, &err);
    assert_non_null (table);
    return ps_tshard_new (table, 1, 3);
}

static void
test_registry (void **state)
{
    (void) state;
    ps_tables_t *tables = ps_tables_new ();
    ps_tables_put (tables, s_shard ("b"));
    ps_tables_put (tables, s_shard ("a"));
    ps_tshard_t *old = ps_tables_lookup (tables, "b");
    assert_non_null (old);
    assert_null (ps_tables_lookup (tables, "c"));
    //  A request's link keeps the shard alive past its replacement.
    ps_tshard_t *linked = ps_tshard_link (old);
    ps_tables_put (tables, s_shard ("b"));
    assert_ptr_not_equal (ps_tables_lookup (tables, "b"), linked);
    assert_string_equal (ps_tshard_name (linked), "b");
    assert_int_equal (ps_tshard_dim (linked), 4);
    ps_tshard_unlink (&linked);
    assert_null (linked);
    size_t count;
    ps_tshard_t **list = ps_tables_sorted (tables, &count);
    assert_int_equal (count, 2);
    assert_string_equal (ps_tshard_name (list [0]), "a");
    assert_string_equal (ps_tshard_name (list [1]), "b");
    assert_null (list [2]);
    free (list);
    //  Ids belong to the shard ps_tablespec_shard_of names.
    ps_tshard_t *a = ps_tables_lookup (tables, "a");
    for (uint64_t id = 0; id < 100; id++)
        assert_int_equal (ps_tshard_holds (a, id), ps_tablespec_shard_of (id, 0, 3) == 1);
    assert_string_equal (ps_tshard_last_full (a), "");
    ps_tshard_set_last_full (a, "ckpt-1");
    assert_string_equal (ps_tshard_last_full (a), "ckpt-1");
    ps_tables_destroy (&tables);
    assert_null (tables);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_file_names),
        cmocka_unit_test (test_registry),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
