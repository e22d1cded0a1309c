//  Unit tests for the step ledger (common/store/ps_ledger.c): marking, the
//  watermark, the span limit, the encoding with its consistency checks, and
//  the intersection of two ledgers against a bitmap model.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "harness_rand.h"
#include "ps_bytes.h"
#include "ps_ledger.h"

static void
s_shuffle (uint64_t *steps, size_t n, uint64_t seed)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t) (harness_lcg (&seed) % i);
        uint64_t tmp = steps [i - 1];
        steps [i - 1] = steps [j];
        steps [j] = tmp;
    }
}

//  Encode, decode, and check that the copy holds the same steps and
//  encodes to the same bytes.
static void
s_assert_round_trip (const ps_ledger_t *ledger)
{
    size_t size = ps_ledger_encoded_size (ledger);
    uint8_t *buf = malloc (size);
    assert_non_null (buf);
    ps_ledger_encode (ledger, buf);
    ps_error_t err = { 0 };
    ps_ledger_t *copy = ps_ledger_decode (buf, size, &err);
    if (!copy)
        fail_msg ("decode failed: %s", err.msg);
    assert_true (ps_ledger_equal (ledger, copy));
    assert_int_equal (ps_ledger_base (copy), ps_ledger_base (ledger));
    assert_int_equal (ps_ledger_count (copy), ps_ledger_count (ledger));
    assert_int_equal (ps_ledger_encoded_size (copy), size);
    uint8_t *again = malloc (size);
    assert_non_null (again);
    ps_ledger_encode (copy, again);
    assert_memory_equal (buf, again, size);
    free (again);
    free (buf);
    ps_ledger_destroy (&copy);
    assert_null (copy);
}

static void
test_new_and_duplicate (void **state)
{
    (void) state;
    ps_ledger_t *ledger = ps_ledger_new ();
    assert_non_null (ledger);
    assert_int_equal (ps_ledger_count (ledger), 0);
    //  The watermark counts from step 1; step 0 is recorded apart.
    assert_int_equal (ps_ledger_base (ledger), 1);
    assert_false (ps_ledger_contains (ledger, 0));

    assert_int_equal (ps_ledger_mark (ledger, 0, NULL), PS_OK);
    assert_int_equal (ps_ledger_mark (ledger, 0, NULL), PS_DUPLICATE);
    assert_int_equal (ps_ledger_mark (ledger, 5, NULL), PS_OK);
    assert_int_equal (ps_ledger_mark (ledger, 5, NULL), PS_DUPLICATE);
    assert_int_equal (ps_ledger_count (ledger), 2);
    assert_int_equal (ps_ledger_base (ledger), 1);
    assert_true (ps_ledger_contains (ledger, 0));
    assert_true (ps_ledger_contains (ledger, 5));
    assert_false (ps_ledger_contains (ledger, 1));
    assert_false (ps_ledger_contains (ledger, 1000));

    ps_ledger_destroy (&ledger);
    assert_null (ledger);
    //  A second destroy of the NULLed pointer is harmless.
    ps_ledger_destroy (&ledger);
}

static void
test_holes (void **state)
{
    (void) state;
    uint64_t steps [99];
    size_t n = 0;
    for (uint64_t s = 0; s < 100; s++)
        if (s != 37)
            steps [n++] = s;
    s_shuffle (steps, n, 42);

    ps_ledger_t *ledger = ps_ledger_new ();
    assert_non_null (ledger);
    for (size_t i = 0; i < n; i++)
        assert_int_equal (ps_ledger_mark (ledger, steps [i], NULL), PS_OK);
    assert_int_equal (ps_ledger_base (ledger), 37);
    assert_int_equal (ps_ledger_count (ledger), 99);
    for (uint64_t s = 0; s < 100; s++)
        assert_int_equal (ps_ledger_contains (ledger, s), s != 37);
    assert_false (ps_ledger_contains (ledger, 100));
    for (size_t i = 0; i < n; i++)
        assert_int_equal (ps_ledger_mark (ledger, steps [i], NULL), PS_DUPLICATE);
    s_assert_round_trip (ledger);

    assert_int_equal (ps_ledger_mark (ledger, 37, NULL), PS_OK);
    assert_int_equal (ps_ledger_base (ledger), 100);
    assert_int_equal (ps_ledger_count (ledger), 100);
    assert_true (ps_ledger_contains (ledger, 37));
    assert_false (ps_ledger_contains (ledger, 100));
    s_assert_round_trip (ledger);
    ps_ledger_destroy (&ledger);
}

static void
test_far_ahead_refused (void **state)
{
    (void) state;
    ps_ledger_t *ledger = ps_ledger_new ();
    assert_non_null (ledger);
    for (uint64_t s = 0; s < 70; s++)
        if (s != 3)
            assert_int_equal (ps_ledger_mark (ledger, s, NULL), PS_OK);
    assert_int_equal (ps_ledger_mark (ledger, 500, NULL), PS_OK);
    uint64_t base = ps_ledger_base (ledger);
    assert_int_equal (base, 3);

    size_t size = ps_ledger_encoded_size (ledger);
    uint8_t *before = malloc (size);
    assert_non_null (before);
    ps_ledger_encode (ledger, before);

    ps_error_t err = { 0 };
    assert_int_equal (ps_ledger_mark (ledger, base + PS_LEDGER_MAX_SPAN, &err), PS_EINVAL);
    assert_int_equal (err.code, PS_EINVAL);
    assert_non_null (strstr (err.msg, "watermark"));
    assert_int_equal (ps_ledger_mark (ledger, UINT64_MAX - 1, NULL), PS_EINVAL);
    assert_int_equal (ps_ledger_mark (ledger, UINT64_MAX, NULL), PS_EINVAL);

    //  Nothing changed.
    assert_int_equal (ps_ledger_base (ledger), base);
    assert_int_equal (ps_ledger_count (ledger), 70);
    assert_false (ps_ledger_contains (ledger, base + PS_LEDGER_MAX_SPAN));
    assert_int_equal (ps_ledger_encoded_size (ledger), size);
    uint8_t *after = malloc (size);
    assert_non_null (after);
    ps_ledger_encode (ledger, after);
    assert_memory_equal (before, after, size);

    //  The last step inside the span is accepted.
    assert_int_equal (ps_ledger_mark (ledger, base + PS_LEDGER_MAX_SPAN - 1, NULL), PS_OK);
    assert_true (ps_ledger_contains (ledger, base + PS_LEDGER_MAX_SPAN - 1));
    s_assert_round_trip (ledger);
    free (before);
    free (after);
    ps_ledger_destroy (&ledger);
}

//  Steps arrive out of order within a sliding window, as from several
//  workers; a plain byte array is the reference. This drives the window
//  through many word drops, compactions and growths.
//  A reserved step can always be marked later; reserving records nothing,
//  and refuses what marking would refuse.
static void
test_reserve (void **state)
{
    (void) state;
    ps_ledger_t *ledger = ps_ledger_new ();
    ps_error_t err;
    assert_int_equal (ps_ledger_reserve (ledger, 100000, &err), PS_OK);
    assert_false (ps_ledger_contains (ledger, 100000));
    assert_int_equal (ps_ledger_count (ledger), 0);
    assert_int_equal (ps_ledger_reserve (ledger, 1 + PS_LEDGER_MAX_SPAN, &err), PS_EINVAL);
    assert_int_equal (ps_ledger_reserve (ledger, UINT64_MAX, &err), PS_EINVAL);
    //  The watermark moving up in between does not undo a reservation.
    for (uint64_t step = 0; step < 5000; step++)
        assert_int_equal (ps_ledger_mark (ledger, step, &err), PS_OK);
    assert_int_equal (ps_ledger_mark (ledger, 100000, &err), PS_OK);
    assert_int_equal (ps_ledger_reserve (ledger, 3, &err), PS_OK);
    assert_int_equal (ps_ledger_mark (ledger, 3, &err), PS_DUPLICATE);
    assert_int_equal (ps_ledger_count (ledger), 5001);
    ps_ledger_destroy (&ledger);
}

//  A reservation whose mark never comes (a push refused by another of its
//  partitions) leaves the ledger as it was: the same encoding, which
//  decodes, and equal to a twin that was never reserved. Found by
//  tests/fuzz/fuzz_server: a refused two-partition push, then a snapshot,
//  whose encoder took the clz of the reserved clear last word and wrote a
//  ledger of garbage length.
static void
test_reserve_unused (void **state)
{
    (void) state;
    //  Empty; then steps 0..9 and 70 recorded, with reservations inside the
    //  last live word and beyond it.
    const uint64_t marked [] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 70 };
    const uint64_t reserved [] = { 5, 20, 71, 200, 5000 };
    for (size_t nmarked = 0; nmarked <= 11; nmarked += 11)
        for (size_t r = 0; r < sizeof reserved / sizeof reserved [0]; r++) {
            ps_ledger_t *ledger = ps_ledger_new ();
            ps_ledger_t *twin = ps_ledger_new ();
            ps_error_t err;
            for (size_t i = 0; i < nmarked; i++) {
                assert_int_equal (ps_ledger_mark (ledger, marked [i], &err), PS_OK);
                assert_int_equal (ps_ledger_mark (twin, marked [i], &err), PS_OK);
            }
            size_t size = ps_ledger_encoded_size (twin);
            uint8_t before [1024], after [1024];
            assert_true (size <= sizeof before);
            ps_ledger_encode (twin, before);
            assert_int_equal (ps_ledger_reserve (ledger, reserved [r], &err), PS_OK);
            assert_int_equal (ps_ledger_encoded_size (ledger), size);
            ps_ledger_encode (ledger, after);
            assert_memory_equal (before, after, size);
            assert_true (ps_ledger_equal (ledger, twin));
            s_assert_round_trip (ledger);
            //  The reservation still holds: the mark succeeds.
            assert_int_equal (ps_ledger_mark (ledger, reserved [r], &err),
                              ps_ledger_contains (twin, reserved [r]) ? PS_DUPLICATE : PS_OK);
            s_assert_round_trip (ledger);
            ps_ledger_destroy (&ledger);
            ps_ledger_destroy (&twin);
        }
}

static void
test_against_model (void **state)
{
    (void) state;
    const size_t total = 200000;
    uint8_t *model = calloc (total, 1);
    uint64_t *steps = malloc (total * sizeof (uint64_t));
    assert_non_null (model);
    assert_non_null (steps);
    for (size_t i = 0; i < total; i++)
        steps [i] = i;
    //  Shuffle in blocks of varying size, so the window grows and shrinks.
    uint64_t seed = 7;
    for (size_t i = 0; i < total; ) {
        size_t block = 1 + (size_t) (harness_lcg (&seed) % 5000);
        if (block > total - i)
            block = total - i;
        s_shuffle (steps + i, block, seed);
        i += block;
    }
    ps_ledger_t *ledger = ps_ledger_new ();
    assert_non_null (ledger);
    uint64_t count = 0;
    //  The watermark counts from step 1 (step 0 is recorded apart).
    uint64_t base = 1;
    for (size_t i = 0; i < total; i++) {
        uint64_t step = steps [i];
        //  Now and then repeat an earlier step.
        if (i > 0 && harness_lcg (&seed) % 10 == 0) {
            uint64_t old = steps [harness_lcg (&seed) % i];
            assert_int_equal (ps_ledger_mark (ledger, old, NULL), PS_DUPLICATE);
        }
        assert_int_equal (ps_ledger_mark (ledger, step, NULL), PS_OK);
        model [step] = 1;
        count++;
        while (base < total && model [base])
            base++;
        assert_int_equal (ps_ledger_base (ledger), base);
        assert_int_equal (ps_ledger_count (ledger), count);
        if (i % 997 == 0) {
            for (uint64_t s = base; s < base + 6000 && s < total; s++)
                assert_int_equal (ps_ledger_contains (ledger, s), model [s]);
            s_assert_round_trip (ledger);
        }
    }
    assert_int_equal (ps_ledger_base (ledger), total);
    ps_ledger_destroy (&ledger);
    free (steps);
    free (model);
}

//  A cluster numbers its steps from 1 and never uses 0. A long run of them
//  must keep the watermark moving, so the ledger stays a few words
//  whatever the run's length: 2^28 steps in order, far past the span a
//  window may cover. Late and repeated steps are still refused exactly
//  once, below the watermark and above it.
static void
test_long_run_from_one (void **state)
{
    (void) state;
    const uint64_t total = UINT64_C (1) << 28;
    ps_ledger_t *ledger = ps_ledger_new ();
    assert_non_null (ledger);
    ps_error_t err = { 0 };
    for (uint64_t step = 1; step <= total; step++) {
        int rc = ps_ledger_mark (ledger, step, &err);
        if (rc != PS_OK)
            fail_msg ("step %llu: %d (%s)", (unsigned long long) step, rc, err.msg);
    }
    assert_int_equal (ps_ledger_base (ledger), total + 1);
    assert_int_equal (ps_ledger_count (ledger), total);
    assert_int_equal (ps_ledger_encoded_size (ledger), 20);
    assert_false (ps_ledger_contains (ledger, 0));
    assert_true (ps_ledger_contains (ledger, 1));
    assert_true (ps_ledger_contains (ledger, total));
    assert_false (ps_ledger_contains (ledger, total + 1));
    s_assert_round_trip (ledger);

    //  Duplicates below the watermark, then steps above it out of order.
    assert_int_equal (ps_ledger_mark (ledger, 1, NULL), PS_DUPLICATE);
    assert_int_equal (ps_ledger_mark (ledger, total / 2, NULL), PS_DUPLICATE);
    assert_int_equal (ps_ledger_mark (ledger, total, NULL), PS_DUPLICATE);
    assert_int_equal (ps_ledger_mark (ledger, total + 3, NULL), PS_OK);
    assert_int_equal (ps_ledger_mark (ledger, total + 3, NULL), PS_DUPLICATE);
    assert_int_equal (ps_ledger_base (ledger), total + 1);
    s_assert_round_trip (ledger);
    assert_int_equal (ps_ledger_mark (ledger, total + 1, NULL), PS_OK);
    assert_int_equal (ps_ledger_mark (ledger, total + 2, NULL), PS_OK);
    assert_int_equal (ps_ledger_base (ledger), total + 4);
    assert_int_equal (ps_ledger_mark (ledger, total + 2, NULL), PS_DUPLICATE);
    assert_int_equal (ps_ledger_count (ledger), total + 3);
    assert_int_equal (ps_ledger_encoded_size (ledger), 20);
    s_assert_round_trip (ledger);

    //  Step 0, which some clients use, is recorded once, late as it is.
    assert_int_equal (ps_ledger_reserve (ledger, 0, NULL), PS_OK);
    assert_int_equal (ps_ledger_mark (ledger, 0, NULL), PS_OK);
    assert_int_equal (ps_ledger_mark (ledger, 0, NULL), PS_DUPLICATE);
    assert_true (ps_ledger_contains (ledger, 0));
    assert_int_equal (ps_ledger_count (ledger), total + 4);
    assert_int_equal (ps_ledger_base (ledger), total + 4);
    s_assert_round_trip (ledger);
    ps_ledger_destroy (&ledger);
}

//  Ledgers written before the watermark could move past a missing step 0
//  hold steps from 1 in their bitmap above a watermark of 0. They still
//  load, with the watermark moved past the steps from 1 they hold, and
//  are written back in the compact form.
static void
test_old_encoding_loads (void **state)
{
    (void) state;
    //  Steps 1..100 and 130: watermark 0, count 101, three words.
    uint8_t old [20 + 24];
    ps_put_u64 (old, 0);
    ps_put_u64 (old + 8, 101);
    ps_put_u32 (old + 16, 3);
    ps_put_u64 (old + 20, ~UINT64_C (1));
    ps_put_u64 (old + 28, (UINT64_C (1) << 37) - 1);
    ps_put_u64 (old + 36, UINT64_C (1) << 2);
    ps_error_t err = { 0 };
    ps_ledger_t *ledger = ps_ledger_decode (old, sizeof old, &err);
    if (!ledger)
        fail_msg ("decode failed: %s", err.msg);
    assert_int_equal (ps_ledger_base (ledger), 101);
    assert_int_equal (ps_ledger_count (ledger), 101);
    assert_false (ps_ledger_contains (ledger, 0));
    assert_true (ps_ledger_contains (ledger, 100));
    assert_false (ps_ledger_contains (ledger, 101));
    assert_true (ps_ledger_contains (ledger, 130));
    assert_int_equal (ps_ledger_mark (ledger, 50, NULL), PS_DUPLICATE);
    assert_int_equal (ps_ledger_mark (ledger, 130, NULL), PS_DUPLICATE);
    //  The compact form: watermark 101, count 101 = 100 below it plus one.
    assert_int_equal (ps_ledger_encoded_size (ledger), 28);
    uint8_t now [28];
    ps_ledger_encode (ledger, now);
    assert_int_equal (ps_get_u64 (now), 101);
    assert_int_equal (ps_get_u64 (now + 8), 101);
    assert_int_equal (ps_get_u32 (now + 16), 1);
    assert_int_equal (ps_get_u64 (now + 20), UINT64_C (1) << 29);
    s_assert_round_trip (ledger);
    ps_ledger_destroy (&ledger);
}

//  The encoded count tells whether step 0 is recorded: from a watermark
//  of 2, one fewer than the steps below it plus the bitmap's means step 0
//  is missing. Intersecting keeps step 0 only when both ledgers hold it.
static void
test_count_tells_step_0 (void **state)
{
    (void) state;
    ps_ledger_t *with = ps_ledger_new ();
    ps_ledger_t *without = ps_ledger_new ();
    assert_non_null (with);
    assert_non_null (without);
    for (uint64_t s = 0; s < 10; s++) {
        assert_int_equal (ps_ledger_mark (with, s, NULL), PS_OK);
        if (s > 0)
            assert_int_equal (ps_ledger_mark (without, s, NULL), PS_OK);
    }
    assert_int_equal (ps_ledger_mark (with, 12, NULL), PS_OK);
    assert_int_equal (ps_ledger_mark (without, 12, NULL), PS_OK);
    assert_int_equal (ps_ledger_base (with), 10);
    assert_int_equal (ps_ledger_base (without), 10);
    assert_false (ps_ledger_equal (with, without));
    s_assert_round_trip (with);
    s_assert_round_trip (without);

    uint8_t buf [28];
    assert_int_equal (ps_ledger_encoded_size (without), sizeof buf);
    ps_ledger_encode (with, buf);
    assert_int_equal (ps_get_u64 (buf + 8), 11);
    ps_put_u64 (buf + 8, 10);
    ps_ledger_t *copy = ps_ledger_decode (buf, sizeof buf, NULL);
    assert_non_null (copy);
    assert_true (ps_ledger_equal (copy, without));
    assert_false (ps_ledger_contains (copy, 0));
    ps_ledger_destroy (&copy);

    ps_ledger_t *both = ps_ledger_intersect (with, without, NULL);
    assert_non_null (both);
    assert_true (ps_ledger_equal (both, without));
    assert_int_equal (ps_ledger_count (both), 10);
    ps_ledger_destroy (&both);
    both = ps_ledger_intersect (with, with, NULL);
    assert_non_null (both);
    assert_true (ps_ledger_equal (both, with));
    ps_ledger_destroy (&both);
    ps_ledger_destroy (&with);
    ps_ledger_destroy (&without);
}

static void
test_round_trip (void **state)
{
    (void) state;
    //  Empty.
    ps_ledger_t *ledger = ps_ledger_new ();
    assert_non_null (ledger);
    assert_int_equal (ps_ledger_encoded_size (ledger), 20);
    s_assert_round_trip (ledger);
    ps_ledger_destroy (&ledger);

    //  Dense: everything below the watermark, an empty bitmap, at an
    //  aligned and at an unaligned watermark.
    ledger = ps_ledger_new ();
    for (uint64_t s = 0; s < 1024; s++)
        assert_int_equal (ps_ledger_mark (ledger, s, NULL), PS_OK);
    assert_int_equal (ps_ledger_encoded_size (ledger), 20);
    s_assert_round_trip (ledger);
    for (uint64_t s = 1024; s < 1034; s++)
        assert_int_equal (ps_ledger_mark (ledger, s, NULL), PS_OK);
    assert_int_equal (ps_ledger_encoded_size (ledger), 20);
    s_assert_round_trip (ledger);
    ps_ledger_destroy (&ledger);

    //  Holes, at every alignment of the watermark within a word.
    for (uint64_t shift = 0; shift < 64; shift++) {
        ledger = ps_ledger_new ();
        uint64_t seed = shift + 1;
        for (uint64_t s = 0; s < 1000 + shift; s++)
            assert_int_equal (ps_ledger_mark (ledger, s, NULL), PS_OK);
        for (int i = 0; i < 300; i++) {
            int rc = ps_ledger_mark (ledger, 1001 + shift + harness_lcg (&seed) % 700, NULL);
            assert_true (rc == PS_OK || rc == PS_DUPLICATE);
        }
        assert_int_equal (ps_ledger_base (ledger), 1000 + shift);
        s_assert_round_trip (ledger);
        ps_ledger_destroy (&ledger);
    }

    //  A big span: a lagging step and steps a million ahead.
    ledger = ps_ledger_new ();
    for (uint64_t s = 0; s < 10; s++)
        assert_int_equal (ps_ledger_mark (ledger, s, NULL), PS_OK);
    assert_int_equal (ps_ledger_mark (ledger, 11, NULL), PS_OK);
    assert_int_equal (ps_ledger_mark (ledger, 1000000, NULL), PS_OK);
    assert_int_equal (ps_ledger_mark (ledger, 999999, NULL), PS_OK);
    assert_int_equal (ps_ledger_mark (ledger, 500000, NULL), PS_OK);
    assert_int_equal (ps_ledger_base (ledger), 10);
    assert_int_equal (ps_ledger_count (ledger), 14);
    assert_int_equal (ps_ledger_encoded_size (ledger), 20 + 8 * ((1000000 - 10) / 64 + 1));
    s_assert_round_trip (ledger);

    //  A decoded ledger goes on behaving like the original.
    size_t size = ps_ledger_encoded_size (ledger);
    uint8_t *buf = malloc (size);
    assert_non_null (buf);
    ps_ledger_encode (ledger, buf);
    ps_ledger_t *copy = ps_ledger_decode (buf, size, NULL);
    assert_non_null (copy);
    free (buf);
    for (uint64_t s = 10; s < 1000; s++) {
        int rc = ps_ledger_mark (ledger, s, NULL);
        assert_int_equal (ps_ledger_mark (copy, s, NULL), rc);
    }
    assert_true (ps_ledger_equal (ledger, copy));
    assert_int_equal (ps_ledger_base (copy), 1000);
    assert_int_equal (ps_ledger_mark (copy, 2000, NULL), PS_OK);
    assert_false (ps_ledger_equal (ledger, copy));
    ps_ledger_destroy (&copy);
    ps_ledger_destroy (&ledger);
}

static void
s_assert_refused (const uint8_t *buf, size_t len)
{
    ps_error_t err = { 0 };
    ps_ledger_t *ledger = ps_ledger_decode (buf, len, &err);
    assert_null (ledger);
    assert_int_equal (err.code, PS_ECORRUPT);
    assert_non_null (strstr (err.msg, "ledger"));
}

static void
test_decode_refuses (void **state)
{
    (void) state;
    ps_ledger_t *ledger = ps_ledger_new ();
    assert_non_null (ledger);
    for (uint64_t s = 0; s < 300; s += (s % 7 == 3) ? 2 : 1)
        assert_int_equal (ps_ledger_mark (ledger, s, NULL), PS_OK);
    size_t size = ps_ledger_encoded_size (ledger);
    assert_true (size > 20);
    uint8_t *buf = malloc (size + 8);
    assert_non_null (buf);
    ps_ledger_encode (ledger, buf);

    //  Every truncation, including to nothing.
    for (size_t len = 0; len < size; len++)
        s_assert_refused (buf, len);
    //  Extra bytes.
    memset (buf + size, 0, 8);
    s_assert_refused (buf, size + 1);
    s_assert_refused (buf, size + 8);

    //  Counts that do not match the bitmap.
    uint8_t *bad = malloc (size + 8);
    assert_non_null (bad);
    memcpy (bad, buf, size);
    ps_put_u64 (bad + 8, ps_ledger_count (ledger) + 1);
    s_assert_refused (bad, size);
    //  One fewer is a ledger without step 0 (see test_count_tells_step_0).
    ps_put_u64 (bad + 8, ps_ledger_count (ledger) - 2);
    s_assert_refused (bad, size);
    ps_put_u64 (bad + 8, 0);
    s_assert_refused (bad, size);

    //  The bit for the watermark set (with the count adjusted to match).
    memcpy (bad, buf, size);
    bad [20] |= 1;
    ps_put_u64 (bad + 8, ps_ledger_count (ledger) + 1);
    s_assert_refused (bad, size);

    //  An untrimmed bitmap: an extra zero word.
    memcpy (bad, buf, size);
    memset (bad + size, 0, 8);
    bad [16]++;
    s_assert_refused (bad, size + 8);

    //  More words than the span allows, and a word count that overflows the
    //  length.
    memcpy (bad, buf, size);
    bad [16] = 0xff;
    bad [17] = 0xff;
    bad [18] = 0xff;
    bad [19] = 0xff;
    s_assert_refused (bad, size);

    //  A watermark so high that the bitmap would pass 2^64-1.
    memcpy (bad, buf, size);
    ps_put_u64 (bad, UINT64_MAX - 10);
    ps_put_u64 (bad + 8, UINT64_MAX - 10 + (ps_ledger_count (ledger) - ps_ledger_base (ledger)));
    s_assert_refused (bad, size);

    //  The untouched encoding still decodes.
    ps_ledger_t *copy = ps_ledger_decode (buf, size, NULL);
    assert_non_null (copy);
    assert_true (ps_ledger_equal (ledger, copy));
    ps_ledger_destroy (&copy);
    free (bad);
    free (buf);
    ps_ledger_destroy (&ledger);
}

//  A ledger holding steps [0, base) and, above them, each step of
//  [base + 1, base + span) with probability 1/2.
static ps_ledger_t *
s_random_ledger (uint64_t base, uint64_t span, uint8_t *model, uint64_t *seed)
{
    ps_ledger_t *ledger = ps_ledger_new ();
    assert_non_null (ledger);
    for (uint64_t s = 0; s < base + span; s++) {
        model [s] = s < base || (s > base && harness_lcg (seed) % 2 == 0);
        if (model [s])
            assert_int_equal (ps_ledger_mark (ledger, s, NULL), PS_OK);
    }
    return ledger;
}

static void
s_assert_intersection (const ps_ledger_t *a, const ps_ledger_t *b,
                       const uint8_t *model_a, const uint8_t *model_b, uint64_t total)
{
    ps_error_t err = { 0 };
    ps_ledger_t *both = ps_ledger_intersect (a, b, &err);
    if (!both)
        fail_msg ("intersect failed: %s", err.msg);
    //  The same steps marked one by one in increasing order: the canonical
    //  form must be the same, watermark, count and words alike.
    ps_ledger_t *expect = ps_ledger_new ();
    assert_non_null (expect);
    for (uint64_t s = 0; s < total; s++) {
        bool in = model_a [s] && model_b [s];
        assert_int_equal (ps_ledger_contains (both, s), in);
        if (in)
            assert_int_equal (ps_ledger_mark (expect, s, NULL), PS_OK);
    }
    assert_false (ps_ledger_contains (both, total));
    assert_int_equal (ps_ledger_base (both), ps_ledger_base (expect));
    assert_int_equal (ps_ledger_count (both), ps_ledger_count (expect));
    assert_true (ps_ledger_equal (both, expect));
    s_assert_round_trip (both);
    //  The order of the operands does not matter.
    ps_ledger_t *again = ps_ledger_intersect (b, a, NULL);
    assert_non_null (again);
    assert_true (ps_ledger_equal (both, again));
    ps_ledger_destroy (&again);
    //  The result goes on marking like any ledger.
    uint64_t next = ps_ledger_base (both);
    assert_int_equal (ps_ledger_mark (both, next, NULL), PS_OK);
    assert_int_equal (ps_ledger_mark (expect, next, NULL), PS_OK);
    assert_true (ps_ledger_equal (both, expect));
    ps_ledger_destroy (&expect);
    ps_ledger_destroy (&both);
}

static void
test_intersect (void **state)
{
    (void) state;
    const uint64_t total = 3000;
    uint8_t *model_a = calloc (total, 1);
    uint8_t *model_b = calloc (total, 1);
    assert_non_null (model_a);
    assert_non_null (model_b);
    uint64_t seed = 11;
    //  Watermarks at and around word boundaries, either one lower, and
    //  windows of different lengths, including none.
    const uint64_t bases [] = { 0, 1, 63, 64, 65, 127, 128, 200, 640 };
    const uint64_t spans [] = { 0, 1, 5, 64, 300, 1500 };
    size_t nbases = sizeof bases / sizeof bases [0];
    size_t nspans = sizeof spans / sizeof spans [0];
    for (size_t i = 0; i < nbases; i++)
        for (size_t j = 0; j < nbases; j++)
            for (size_t k = 0; k < nspans; k++) {
                uint64_t span_b = spans [(k + i + j) % nspans];
                memset (model_a, 0, total);
                memset (model_b, 0, total);
                ps_ledger_t *a = s_random_ledger (bases [i], spans [k], model_a, &seed);
                ps_ledger_t *b = s_random_ledger (bases [j], span_b, model_b, &seed);
                s_assert_intersection (a, b, model_a, model_b, total);
                //  With itself: the same ledger.
                ps_ledger_t *self = ps_ledger_intersect (a, a, NULL);
                assert_non_null (self);
                assert_true (ps_ledger_equal (self, a));
                ps_ledger_destroy (&self);
                ps_ledger_destroy (&a);
                ps_ledger_destroy (&b);
            }

    //  Step ids from 1, as the coordinator numbers them: the watermark stays
    //  at 0 and everything is in the windows. One ledger has an extra step.
    ps_ledger_t *a = ps_ledger_new ();
    ps_ledger_t *b = ps_ledger_new ();
    assert_non_null (a);
    assert_non_null (b);
    memset (model_a, 0, total);
    memset (model_b, 0, total);
    for (uint64_t s = 1; s <= 100; s++) {
        assert_int_equal (ps_ledger_mark (a, s, NULL), PS_OK);
        assert_int_equal (ps_ledger_mark (b, s, NULL), PS_OK);
        model_a [s] = model_b [s] = 1;
    }
    assert_int_equal (ps_ledger_mark (a, 101, NULL), PS_OK);
    model_a [101] = 1;
    s_assert_intersection (a, b, model_a, model_b, total);
    ps_ledger_t *both = ps_ledger_intersect (a, b, NULL);
    assert_non_null (both);
    assert_true (ps_ledger_equal (both, b));
    assert_int_equal (ps_ledger_count (both), 100);
    ps_ledger_destroy (&both);
    ps_ledger_destroy (&a);
    ps_ledger_destroy (&b);

    //  Watermarks far up (from decoded ledgers) cost nothing: the time goes
    //  with the windows only.
    uint8_t enc [20 + 8];
    ps_put_u64 (enc, UINT64_C (1) << 50);
    ps_put_u64 (enc + 8, (UINT64_C (1) << 50) + 1);
    ps_put_u32 (enc + 16, 1);
    ps_put_u64 (enc + 20, 0x4);
    a = ps_ledger_decode (enc, sizeof enc, NULL);
    ps_put_u64 (enc, (UINT64_C (1) << 50) + 1);
    ps_put_u64 (enc + 8, (UINT64_C (1) << 50) + 2);
    ps_put_u64 (enc + 20, 0x2);
    b = ps_ledger_decode (enc, sizeof enc, NULL);
    assert_non_null (a);
    assert_non_null (b);
    both = ps_ledger_intersect (a, b, NULL);
    assert_non_null (both);
    //  a: every step below 2^50, and 2^50 + 2; b: every step below 2^50 + 1,
    //  and 2^50 + 2.
    assert_int_equal (ps_ledger_base (both), UINT64_C (1) << 50);
    assert_int_equal (ps_ledger_count (both), (UINT64_C (1) << 50) + 1);
    assert_true (ps_ledger_contains (both, (UINT64_C (1) << 50) + 2));
    assert_false (ps_ledger_contains (both, UINT64_C (1) << 50));
    assert_true (ps_ledger_equal (both, a));
    ps_ledger_destroy (&both);
    ps_ledger_destroy (&a);
    ps_ledger_destroy (&b);
    free (model_a);
    free (model_b);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_new_and_duplicate),
        cmocka_unit_test (test_holes),
        cmocka_unit_test (test_far_ahead_refused),
        cmocka_unit_test (test_reserve),
        cmocka_unit_test (test_reserve_unused),
        cmocka_unit_test (test_against_model),
        cmocka_unit_test (test_long_run_from_one),
        cmocka_unit_test (test_old_encoding_loads),
        cmocka_unit_test (test_count_tells_step_0),
        cmocka_unit_test (test_round_trip),
        cmocka_unit_test (test_decode_refuses),
        cmocka_unit_test (test_intersect),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
