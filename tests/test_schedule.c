//  Unit tests for the step schedule (coordinator/ps_schedule.c): step
//  numbering, the order steps are handed out in, giving steps back,
//  which worker holds a step, completions from anyone, epochs, the done set and its restore, and a
//  long random run against a plain-array model of the same rules.
//
//  This file is longer than the project's 800 lines on purpose: its cases
//  check one module, the step schedule, the last against a model of the
//  same rules.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "harness_rand.h"
#include "ps_schedule.h"

static uint64_t
s_next (ps_schedule_t *schedule, int worker)
{
    uint64_t step = 0;
    assert_int_equal (ps_schedule_next (schedule, worker, &step), PS_OK);
    return step;
}

static void
s_assert_nothing_waiting (ps_schedule_t *schedule)
{
    uint64_t step = 12345;
    assert_int_equal (ps_schedule_next (schedule, 0, &step), PS_ENOTFOUND);
    assert_int_equal (step, 12345);
}

//  The done set, checked against an expected watermark and list.
static void
s_assert_done_set (const ps_schedule_t *schedule, uint64_t watermark,
                   const uint64_t *above, size_t count)
{
    uint64_t got_watermark = 0;
    uint64_t *got = NULL;
    size_t got_count = 99;
    assert_int_equal (ps_schedule_done_set (schedule, &got_watermark, &got, &got_count), PS_OK);
    assert_int_equal (got_watermark, watermark);
    assert_int_equal (got_count, count);
    if (count == 0)
        assert_null (got);
    else
        assert_memory_equal (got, above, count * sizeof (uint64_t));
    free (got);
}

static void
test_new (void **state)
{
    (void) state;
    ps_error_t err = { 0 };
    assert_null (ps_schedule_new (0, 10, &err));
    assert_int_equal (err.code, PS_EINVAL);
    assert_non_null (strstr (err.msg, "batches_per_epoch"));
    memset (&err, 0, sizeof err);
    assert_null (ps_schedule_new (10, 0, &err));
    assert_int_equal (err.code, PS_EINVAL);
    assert_non_null (strstr (err.msg, "total_steps"));

    ps_schedule_t *schedule = ps_schedule_new (938, 2814, &err);
    assert_non_null (schedule);
    assert_int_equal (ps_schedule_total (schedule), 2814);
    assert_int_equal (ps_schedule_batches_per_epoch (schedule), 938);
    assert_int_equal (ps_schedule_done_count (schedule), 0);
    assert_int_equal (ps_schedule_in_flight (schedule), 0);
    assert_false (ps_schedule_finished (schedule));
    s_assert_done_set (schedule, 0, NULL, 0);

    //  step = epoch * batches + batch + 1.
    uint64_t epoch = 99;
    uint64_t batch = 99;
    ps_schedule_locate (schedule, 1, &epoch, &batch);
    assert_int_equal (epoch, 0);
    assert_int_equal (batch, 0);
    ps_schedule_locate (schedule, 938, &epoch, &batch);
    assert_int_equal (epoch, 0);
    assert_int_equal (batch, 937);
    ps_schedule_locate (schedule, 939, &epoch, &batch);
    assert_int_equal (epoch, 1);
    assert_int_equal (batch, 0);
    ps_schedule_locate (schedule, 2814, &epoch, &batch);
    assert_int_equal (epoch, 2);
    assert_int_equal (batch, 937);
    ps_schedule_destroy (&schedule);
    assert_null (schedule);
    ps_schedule_destroy (&schedule);
}

//  A step budget that is not a multiple of the epoch: 3 batches an epoch,
//  7 steps, so the third epoch has one step.
static void
test_budget (void **state)
{
    (void) state;
    ps_schedule_t *schedule = ps_schedule_new (3, 7, NULL);
    assert_non_null (schedule);
    for (uint64_t step = 1; step <= 7; step++)
        assert_int_equal (s_next (schedule, 0), step);
    s_assert_nothing_waiting (schedule);
    assert_int_equal (ps_schedule_in_flight (schedule), 7);
    assert_int_equal (ps_schedule_worker_in_flight (schedule, 0), 7);
    uint64_t epoch;
    uint64_t batch;
    ps_schedule_locate (schedule, 7, &epoch, &batch);
    assert_int_equal (epoch, 2);
    assert_int_equal (batch, 0);

    assert_int_equal (ps_schedule_complete (schedule, 7), PS_OK);
    //  The last, short epoch is done once its one step is.
    assert_true (ps_schedule_epoch_done (schedule, 2));
    assert_false (ps_schedule_epoch_done (schedule, 0));
    assert_false (ps_schedule_epoch_done (schedule, 3));
    for (uint64_t step = 1; step <= 6; step++)
        assert_int_equal (ps_schedule_complete (schedule, step), PS_OK);
    assert_true (ps_schedule_finished (schedule));
    assert_int_equal (ps_schedule_done_count (schedule), 7);
    assert_true (ps_schedule_epoch_done (schedule, 0));
    assert_true (ps_schedule_epoch_done (schedule, 1));
    assert_false (ps_schedule_epoch_done (schedule, 3));
    assert_int_equal (ps_schedule_in_flight (schedule), 0);
    s_assert_done_set (schedule, 7, NULL, 0);
    s_assert_nothing_waiting (schedule);
    //  Past the total, and step 0, are no steps.
    assert_int_equal (ps_schedule_complete (schedule, 8), PS_EINVAL);
    assert_int_equal (ps_schedule_complete (schedule, 0), PS_EINVAL);
    assert_false (ps_schedule_is_done (schedule, 0));
    assert_false (ps_schedule_is_done (schedule, 8));
    assert_int_equal (ps_schedule_complete (schedule, 4), PS_DUPLICATE);
    ps_schedule_destroy (&schedule);

    //  A budget longer than one epoch and shorter than two.
    schedule = ps_schedule_new (100, 150, NULL);
    assert_non_null (schedule);
    for (uint64_t step = 150; step > 100; step--)
        assert_int_equal (ps_schedule_complete (schedule, step), PS_OK);
    assert_true (ps_schedule_epoch_done (schedule, 1));
    assert_false (ps_schedule_epoch_done (schedule, 0));
    assert_false (ps_schedule_finished (schedule));
    //  Steps completed without being handed out are skipped.
    for (uint64_t step = 1; step <= 100; step++)
        assert_int_equal (s_next (schedule, 3), step);
    s_assert_nothing_waiting (schedule);
    ps_schedule_destroy (&schedule);
}

//  Given-back steps go to the front, the latest first; a worker's steps
//  given back together go in increasing order.
static void
test_requeue (void **state)
{
    (void) state;
    ps_schedule_t *schedule = ps_schedule_new (10, 100, NULL);
    assert_non_null (schedule);
    //  Workers 0, 1 and 2 take steps 1..9 in turn.
    for (uint64_t step = 1; step <= 9; step++)
        assert_int_equal (s_next (schedule, (int) ((step - 1) % 3)), step);
    assert_int_equal (ps_schedule_worker_in_flight (schedule, 0), 3);   //  1, 4, 7
    assert_int_equal (ps_schedule_worker_in_flight (schedule, 1), 3);   //  2, 5, 8
    assert_int_equal (ps_schedule_worker_in_flight (schedule, 2), 3);   //  3, 6, 9

    //  Only the holder can give a step back.
    assert_int_equal (ps_schedule_release (schedule, 0, 2), PS_EINVAL);
    assert_int_equal (ps_schedule_release (schedule, 5, 2), PS_EINVAL);
    assert_int_equal (ps_schedule_release (schedule, -1, 2), PS_EINVAL);
    assert_int_equal (ps_schedule_release (schedule, 1, 0), PS_EINVAL);
    assert_int_equal (ps_schedule_release (schedule, 1, 10), PS_EINVAL);
    assert_int_equal (ps_schedule_release (schedule, 1, 1000), PS_EINVAL);

    assert_int_equal (ps_schedule_release (schedule, 1, 5), PS_OK);
    assert_int_equal (ps_schedule_release (schedule, 1, 5), PS_EINVAL);
    assert_int_equal (ps_schedule_worker_in_flight (schedule, 1), 2);
    assert_int_equal (ps_schedule_in_flight (schedule), 8);
    assert_int_equal (s_next (schedule, 4), 5);
    assert_int_equal (ps_schedule_worker_in_flight (schedule, 4), 1);
    assert_int_equal (s_next (schedule, 4), 10);

    //  One at a time: the latest given back is first.
    assert_int_equal (ps_schedule_release (schedule, 0, 4), PS_OK);
    assert_int_equal (ps_schedule_release (schedule, 2, 3), PS_OK);
    //  A whole worker, 2, 8 at once: ahead of 3 and 4, in increasing order.
    assert_int_equal (ps_schedule_release_worker (schedule, 1), 2);
    assert_int_equal (ps_schedule_worker_in_flight (schedule, 1), 0);
    assert_int_equal (ps_schedule_release_worker (schedule, 1), 0);
    assert_int_equal (ps_schedule_release_worker (schedule, 77), 0);
    assert_int_equal (ps_schedule_release_worker (schedule, -1), 0);
    assert_int_equal (s_next (schedule, 5), 2);
    assert_int_equal (s_next (schedule, 5), 8);
    assert_int_equal (s_next (schedule, 5), 3);
    assert_int_equal (s_next (schedule, 5), 4);
    assert_int_equal (s_next (schedule, 5), 11);

    //  Worker 5 took 2, 8, 3, 4, 11 in that order; they come back sorted.
    assert_int_equal (ps_schedule_release_worker (schedule, 5), 5);
    uint64_t expected [] = { 2, 3, 4, 8, 11, 12 };
    for (size_t i = 0; i < 6; i++)
        assert_int_equal (s_next (schedule, 6), expected [i]);
    ps_schedule_destroy (&schedule);
}

//  A step completes whoever holds it, or when nobody does.
static void
test_complete_anywhere (void **state)
{
    (void) state;
    ps_schedule_t *schedule = ps_schedule_new (5, 20, NULL);
    assert_non_null (schedule);
    for (uint64_t step = 1; step <= 4; step++)
        assert_int_equal (s_next (schedule, (int) step), step);

    //  Each step in flight is held by the worker it went to; nobody
    //  holds a step never handed out, or one out of range.
    for (uint64_t step = 1; step <= 4; step++)
        assert_int_equal (ps_schedule_holder (schedule, step), (int) step);
    assert_int_equal (ps_schedule_holder (schedule, 5), -1);
    assert_int_equal (ps_schedule_holder (schedule, 0), -1);
    assert_int_equal (ps_schedule_holder (schedule, 21), -1);

    //  Worker 2 is declared failed and its step 2 queued: nobody holds it
    //  now. It finishes anyway. Step 2 must not be handed out again.
    assert_int_equal (ps_schedule_release_worker (schedule, 2), 1);
    assert_int_equal (ps_schedule_holder (schedule, 2), -1);
    assert_int_equal (ps_schedule_complete (schedule, 2), PS_OK);
    assert_int_equal (s_next (schedule, 9), 5);

    //  Step 3, in flight on worker 3, is completed (a late report for it):
    //  it leaves worker 3's list.
    assert_int_equal (ps_schedule_complete (schedule, 3), PS_OK);
    assert_int_equal (ps_schedule_worker_in_flight (schedule, 3), 0);
    assert_int_equal (ps_schedule_holder (schedule, 3), -1);
    assert_int_equal (ps_schedule_release (schedule, 3, 3), PS_EINVAL);
    assert_int_equal (ps_schedule_release_worker (schedule, 3), 0);

    //  Steps never handed out can complete too, and are then skipped.
    assert_int_equal (ps_schedule_complete (schedule, 6), PS_OK);
    assert_int_equal (ps_schedule_complete (schedule, 7), PS_OK);
    assert_int_equal (s_next (schedule, 9), 8);

    //  Queued steps mixed with done ones: 1 and 4 go back, 4 completes.
    assert_int_equal (ps_schedule_release (schedule, 1, 1), PS_OK);
    assert_int_equal (ps_schedule_release (schedule, 4, 4), PS_OK);
    assert_int_equal (ps_schedule_complete (schedule, 4), PS_OK);
    assert_int_equal (ps_schedule_complete (schedule, 4), PS_DUPLICATE);
    assert_int_equal (s_next (schedule, 9), 1);
    assert_int_equal (s_next (schedule, 9), 9);
    assert_int_equal (ps_schedule_in_flight (schedule), 4);      //  1, 5, 8, 9 on worker 9
    assert_int_equal (ps_schedule_worker_in_flight (schedule, 9), 4);

    //  Done: 2, 3, 4, 6, 7.
    uint64_t above [] = { 2, 3, 4, 6, 7 };
    s_assert_done_set (schedule, 0, above, 5);
    assert_int_equal (ps_schedule_complete (schedule, 1), PS_OK);
    uint64_t above2 [] = { 6, 7 };
    s_assert_done_set (schedule, 4, above2, 2);
    assert_int_equal (ps_schedule_done_count (schedule), 6);
    assert_int_equal (ps_schedule_complete (schedule, 5), PS_OK);
    s_assert_done_set (schedule, 7, NULL, 0);
    assert_true (ps_schedule_epoch_done (schedule, 0));
    assert_false (ps_schedule_epoch_done (schedule, 1));
    ps_schedule_destroy (&schedule);
}

static void
test_worker_ids (void **state)
{
    (void) state;
    ps_schedule_t *schedule = ps_schedule_new (10, 10, NULL);
    assert_non_null (schedule);
    uint64_t step = 0;
    assert_int_equal (ps_schedule_next (schedule, -1, &step), PS_EINVAL);
    assert_int_equal (ps_schedule_next (schedule, 65536, &step), PS_EINVAL);
    assert_int_equal (ps_schedule_in_flight (schedule), 0);
    assert_int_equal (s_next (schedule, 65535), 1);
    assert_int_equal (s_next (schedule, 300), 2);
    assert_int_equal (s_next (schedule, 0), 3);
    assert_int_equal (ps_schedule_worker_in_flight (schedule, 65535), 1);
    assert_int_equal (ps_schedule_worker_in_flight (schedule, 300), 1);
    assert_int_equal (ps_schedule_worker_in_flight (schedule, 299), 0);
    assert_int_equal (ps_schedule_worker_in_flight (schedule, -4), 0);
    assert_int_equal (ps_schedule_worker_in_flight (schedule, 1 << 20), 0);
    assert_int_equal (ps_schedule_release_worker (schedule, 65535), 1);
    assert_int_equal (s_next (schedule, 7), 1);
    ps_schedule_destroy (&schedule);
}

//  Epoch e is done exactly when its last step completes, in any order.
static void
test_epoch_done (void **state)
{
    (void) state;
    const uint64_t batches = 4;
    const uint64_t total = 10;         //  epochs of 4, 4 and 2 steps
    uint64_t order [] = { 10, 2, 5, 1, 8, 3, 6, 9, 4, 7 };
    //  After each completion, which epochs are done (bit e).
    unsigned expected [] = { 0, 0, 0, 0, 0, 0, 0, 4, 5, 7 };
    ps_schedule_t *schedule = ps_schedule_new (batches, total, NULL);
    assert_non_null (schedule);
    for (size_t i = 0; i < total; i++) {
        assert_int_equal (ps_schedule_complete (schedule, order [i]), PS_OK);
        for (uint64_t e = 0; e < 3; e++)
            assert_int_equal (ps_schedule_epoch_done (schedule, e), (expected [i] >> e) & 1);
        assert_false (ps_schedule_epoch_done (schedule, 3));
        assert_false (ps_schedule_epoch_done (schedule, UINT64_MAX));
    }
    assert_true (ps_schedule_finished (schedule));
    ps_schedule_destroy (&schedule);
}

static void
test_restore (void **state)
{
    (void) state;
    ps_schedule_t *schedule = ps_schedule_new (8, 40, NULL);
    assert_non_null (schedule);
    uint64_t done [] = { 1, 2, 3, 5, 8, 9, 17, 40 };
    for (size_t i = 0; i < 8; i++)
        assert_int_equal (ps_schedule_complete (schedule, done [i]), PS_OK);
    uint64_t watermark;
    uint64_t *above;
    size_t count;
    assert_int_equal (ps_schedule_done_set (schedule, &watermark, &above, &count), PS_OK);
    assert_int_equal (watermark, 3);
    assert_int_equal (count, 5);
    uint64_t expected [] = { 5, 8, 9, 17, 40 };
    assert_memory_equal (above, expected, sizeof expected);

    //  Into a fresh schedule: the same steps are done and every other step
    //  is handed out once, in increasing order.
    ps_schedule_t *copy = ps_schedule_new (8, 40, NULL);
    assert_non_null (copy);
    ps_error_t err = { 0 };
    assert_int_equal (ps_schedule_restore (copy, watermark, above, count, &err), PS_OK);
    assert_int_equal (ps_schedule_done_count (copy), 8);
    for (uint64_t step = 1; step <= 40; step++)
        assert_int_equal (ps_schedule_is_done (copy, step), ps_schedule_is_done (schedule, step));
    s_assert_done_set (copy, 3, expected, 5);
    for (uint64_t step = 1; step <= 40; step++)
        if (!ps_schedule_is_done (copy, step))
            assert_int_equal (s_next (copy, 0), step);
    s_assert_nothing_waiting (copy);

    //  Over a busy schedule: what was in flight or queued is forgotten.
    assert_int_equal (s_next (schedule, 1), 4);
    assert_int_equal (s_next (schedule, 2), 6);
    assert_int_equal (s_next (schedule, 2), 7);
    assert_int_equal (ps_schedule_release (schedule, 2, 6), PS_OK);
    assert_int_equal (ps_schedule_restore (schedule, watermark, above, count, &err), PS_OK);
    assert_int_equal (ps_schedule_in_flight (schedule), 0);
    assert_int_equal (ps_schedule_worker_in_flight (schedule, 1), 0);
    assert_int_equal (ps_schedule_worker_in_flight (schedule, 2), 0);
    assert_int_equal (ps_schedule_release (schedule, 2, 7), PS_EINVAL);
    assert_int_equal (ps_schedule_release_worker (schedule, 1), 0);
    assert_int_equal (s_next (schedule, 3), 4);
    assert_int_equal (s_next (schedule, 3), 6);
    assert_int_equal (s_next (schedule, 3), 7);
    assert_int_equal (s_next (schedule, 3), 10);
    free (above);

    //  The empty set; a list starting right above the watermark, which
    //  moves it up; everything done.
    assert_int_equal (ps_schedule_restore (copy, 0, NULL, 0, &err), PS_OK);
    assert_int_equal (ps_schedule_done_count (copy), 0);
    assert_int_equal (ps_schedule_in_flight (copy), 0);
    assert_false (ps_schedule_epoch_done (copy, 0));
    assert_int_equal (s_next (copy, 0), 1);
    uint64_t run [] = { 9, 10, 11, 20 };
    assert_int_equal (ps_schedule_restore (copy, 8, run, 4, &err), PS_OK);
    uint64_t rest [] = { 20 };
    s_assert_done_set (copy, 11, rest, 1);
    assert_int_equal (ps_schedule_done_count (copy), 12);
    assert_true (ps_schedule_epoch_done (copy, 0));
    assert_false (ps_schedule_epoch_done (copy, 1));
    assert_int_equal (s_next (copy, 0), 12);
    assert_int_equal (ps_schedule_restore (copy, 40, NULL, 0, &err), PS_OK);
    assert_true (ps_schedule_finished (copy));
    for (uint64_t e = 0; e < 5; e++)
        assert_true (ps_schedule_epoch_done (copy, e));
    s_assert_nothing_waiting (copy);
    //  Watermarks inside and at the edge of an epoch.
    assert_int_equal (ps_schedule_restore (copy, 16, NULL, 0, &err), PS_OK);
    assert_true (ps_schedule_epoch_done (copy, 1));
    assert_false (ps_schedule_epoch_done (copy, 2));
    assert_int_equal (ps_schedule_restore (copy, 15, NULL, 0, &err), PS_OK);
    assert_false (ps_schedule_epoch_done (copy, 1));
    assert_int_equal (ps_schedule_complete (copy, 16), PS_OK);
    assert_true (ps_schedule_epoch_done (copy, 1));
    ps_schedule_destroy (&copy);
    ps_schedule_destroy (&schedule);
}

//  Refused restores name what is wrong and change nothing.
static void
s_assert_refused (ps_schedule_t *schedule, uint64_t watermark, const uint64_t *above,
                  size_t count, const char *words)
{
    uint64_t before_watermark;
    uint64_t *before;
    size_t before_count;
    assert_int_equal (ps_schedule_done_set (schedule, &before_watermark, &before, &before_count),
                      PS_OK);
    size_t in_flight = ps_schedule_in_flight (schedule);
    ps_error_t err = { 0 };
    assert_int_equal (ps_schedule_restore (schedule, watermark, above, count, &err), PS_EINVAL);
    assert_int_equal (err.code, PS_EINVAL);
    if (!strstr (err.msg, words))
        fail_msg ("message \"%s\" does not say \"%s\"", err.msg, words);
    assert_int_equal (ps_schedule_in_flight (schedule), in_flight);
    s_assert_done_set (schedule, before_watermark, before, before_count);
    free (before);
}

static void
test_restore_refused (void **state)
{
    (void) state;
    ps_schedule_t *schedule = ps_schedule_new (10, 50, NULL);
    assert_non_null (schedule);
    assert_int_equal (ps_schedule_complete (schedule, 1), PS_OK);
    assert_int_equal (ps_schedule_complete (schedule, 30), PS_OK);
    assert_int_equal (s_next (schedule, 0), 2);
    assert_int_equal (s_next (schedule, 1), 3);

    s_assert_refused (schedule, 51, NULL, 0, "watermark 51");
    s_assert_refused (schedule, 2, (uint64_t []) { 5, 51 }, 2, "51");
    s_assert_refused (schedule, 10, (uint64_t []) { 10 }, 1, "the watermark");
    s_assert_refused (schedule, 10, (uint64_t []) { 3 }, 1, "the watermark");
    s_assert_refused (schedule, 10, (uint64_t []) { 12, 12 }, 2, "previous");
    s_assert_refused (schedule, 10, (uint64_t []) { 12, 14, 13 }, 3, "previous");
    s_assert_refused (schedule, 0, NULL, 3, "list");
    s_assert_refused (schedule, UINT64_MAX, NULL, 0, "watermark");

    //  The schedule goes on as before.
    assert_int_equal (s_next (schedule, 0), 4);
    assert_int_equal (ps_schedule_worker_in_flight (schedule, 0), 2);
    ps_schedule_destroy (&schedule);
}

//  The model: plain arrays and linear scans, the rules written out as
//  directly as possible.
enum { S_NEW, S_QUEUED, S_FLIGHT, S_DONE };

typedef struct {
    uint64_t total;
    uint64_t batches;
    uint8_t *state;             //  per step, 1-based
    int *owner;
    int *ok;                    //  completions that returned PS_OK
    uint64_t *queue;            //  queue [0] is the front
    size_t queue_len;
    uint64_t done;
    size_t in_flight;
} s_model_t;

static void
s_model_init (s_model_t *m, uint64_t batches, uint64_t total)
{
    m->total = total;
    m->batches = batches;
    m->state = calloc (total + 1, 1);
    m->owner = calloc (total + 1, sizeof (int));
    m->ok = calloc (total + 1, sizeof (int));
    m->queue = calloc (total + 1, sizeof (uint64_t));
    m->queue_len = 0;
    m->done = 0;
    m->in_flight = 0;
    assert_non_null (m->state);
    assert_non_null (m->owner);
    assert_non_null (m->ok);
    assert_non_null (m->queue);
}

static void
s_model_free (s_model_t *m)
{
    free (m->state);
    free (m->owner);
    free (m->ok);
    free (m->queue);
}

static void
s_model_push_front (s_model_t *m, uint64_t step)
{
    memmove (m->queue + 1, m->queue, m->queue_len * sizeof (uint64_t));
    m->queue [0] = step;
    m->queue_len++;
    m->state [step] = S_QUEUED;
}

//  The step the model expects next; 0 when none waits.
static uint64_t
s_model_expected_next (const s_model_t *m)
{
    if (m->queue_len > 0)
        return m->queue [0];
    for (uint64_t step = 1; step <= m->total; step++)
        if (m->state [step] == S_NEW)
            return step;
    return 0;
}

static void
s_model_take (s_model_t *m, uint64_t step, int worker)
{
    if (m->queue_len > 0) {
        assert_int_equal (m->queue [0], step);
        m->queue_len--;
        memmove (m->queue, m->queue + 1, m->queue_len * sizeof (uint64_t));
    }
    m->state [step] = S_FLIGHT;
    m->owner [step] = worker;
    m->in_flight++;
}

static void
s_model_complete (s_model_t *m, uint64_t step)
{
    if (m->state [step] == S_QUEUED) {
        size_t i = 0;
        while (m->queue [i] != step)
            i++;
        memmove (m->queue + i, m->queue + i + 1, (m->queue_len - i - 1) * sizeof (uint64_t));
        m->queue_len--;
    }
    if (m->state [step] == S_FLIGHT)
        m->in_flight--;
    m->state [step] = S_DONE;
    m->ok [step]++;
    m->done++;
}

//  A random step in the given state, or 0 when there is none.
static uint64_t
s_model_pick (const s_model_t *m, int state, uint64_t *seed)
{
    uint64_t start = 1 + harness_lcg (seed) % m->total;
    for (uint64_t i = 0; i < m->total; i++) {
        uint64_t step = 1 + (start - 1 + i) % m->total;
        if (m->state [step] == state)
            return step;
    }
    return 0;
}

//  Everything the schedule reports, against the model.
static void
s_assert_matches (const ps_schedule_t *schedule, const s_model_t *m, int nworkers,
                  const int *worker_ids)
{
    assert_int_equal (ps_schedule_done_count (schedule), m->done);
    assert_int_equal (ps_schedule_in_flight (schedule), m->in_flight);
    assert_int_equal (ps_schedule_finished (schedule), m->done == m->total);
    for (int w = 0; w < nworkers; w++) {
        size_t count = 0;
        for (uint64_t step = 1; step <= m->total; step++)
            count += m->state [step] == S_FLIGHT && m->owner [step] == worker_ids [w];
        assert_int_equal (ps_schedule_worker_in_flight (schedule, worker_ids [w]), count);
    }
    uint64_t watermark = 0;
    while (watermark < m->total && m->state [watermark + 1] == S_DONE)
        watermark++;
    uint64_t *above = malloc ((m->total + 1) * sizeof (uint64_t));
    assert_non_null (above);
    size_t count = 0;
    for (uint64_t step = 1; step <= m->total; step++) {
        assert_int_equal (ps_schedule_is_done (schedule, step), m->state [step] == S_DONE);
        assert_int_equal (ps_schedule_holder (schedule, step),
                          m->state [step] == S_FLIGHT ? m->owner [step] : -1);
        if (step > watermark && m->state [step] == S_DONE)
            above [count++] = step;
    }
    s_assert_done_set (schedule, watermark, above, count);
    uint64_t nepochs = (m->total + m->batches - 1) / m->batches;
    for (uint64_t e = 0; e <= nepochs; e++) {
        bool done = e < nepochs;
        for (uint64_t b = 0; b < m->batches && done; b++) {
            uint64_t step = e * m->batches + b + 1;
            if (step <= m->total && m->state [step] != S_DONE)
                done = false;
        }
        assert_int_equal (ps_schedule_epoch_done (schedule, e), done);
    }

    //  The done set carries over to a new schedule.
    ps_schedule_t *copy = ps_schedule_new (m->batches, m->total, NULL);
    assert_non_null (copy);
    assert_int_equal (ps_schedule_restore (copy, watermark, above, count, NULL), PS_OK);
    assert_int_equal (ps_schedule_done_count (copy), m->done);
    for (uint64_t e = 0; e <= nepochs; e++)
        assert_int_equal (ps_schedule_epoch_done (copy, e), ps_schedule_epoch_done (schedule, e));
    s_assert_done_set (copy, watermark, above, count);
    ps_schedule_destroy (&copy);
    free (above);
}

static void
s_run_model (uint64_t batches, uint64_t total, int nworkers, int worker_stride, int ops,
             uint64_t seed)
{
    int *worker_ids = malloc ((size_t) nworkers * sizeof (int));
    assert_non_null (worker_ids);
    for (int w = 0; w < nworkers; w++)
        worker_ids [w] = w * worker_stride;
    ps_schedule_t *schedule = ps_schedule_new (batches, total, NULL);
    assert_non_null (schedule);
    s_model_t m;
    s_model_init (&m, batches, total);
    //  How often each kind of event happened, to show the run covers them.
    int queued_completions = 0;
    int stray_completions = 0;
    int duplicates = 0;
    int worker_failures = 0;

    for (int op = 0; op < ops; op++) {
        uint64_t roll = harness_lcg (&seed) % 100;
        int worker = worker_ids [harness_lcg (&seed) % (uint64_t) nworkers];
        if (roll < 40) {
            //  A worker asks for a step.
            uint64_t expected = s_model_expected_next (&m);
            uint64_t step = 0;
            int rc = ps_schedule_next (schedule, worker, &step);
            if (expected == 0)
                assert_int_equal (rc, PS_ENOTFOUND);
            else {
                assert_int_equal (rc, PS_OK);
                assert_int_equal (step, expected);
                //  Never a step that is done or in flight.
                assert_true (m.state [step] == S_NEW || m.state [step] == S_QUEUED);
                s_model_take (&m, step, worker);
            }
        }
        else
        if (roll < 70) {
            //  A step in flight finishes.
            uint64_t step = s_model_pick (&m, S_FLIGHT, &seed);
            if (step) {
                assert_int_equal (ps_schedule_complete (schedule, step), PS_OK);
                s_model_complete (&m, step);
            }
        }
        else
        if (roll < 75) {
            //  A failed worker's step finishes after it was queued again.
            uint64_t step = s_model_pick (&m, S_QUEUED, &seed);
            if (step) {
                assert_int_equal (ps_schedule_complete (schedule, step), PS_OK);
                s_model_complete (&m, step);
                queued_completions++;
            }
        }
        else
        if (roll < 82) {
            //  Any step at all completes, or is reported again; now and then
            //  a step that does not exist.
            uint64_t step = harness_lcg (&seed) % (total + 2);
            int rc = ps_schedule_complete (schedule, step);
            if (step == 0 || step > total)
                assert_int_equal (rc, PS_EINVAL);
            else
            if (m.state [step] == S_DONE) {
                assert_int_equal (rc, PS_DUPLICATE);
                duplicates++;
            }
            else {
                assert_int_equal (rc, PS_OK);
                stray_completions += m.state [step] == S_NEW;
                s_model_complete (&m, step);
            }
        }
        else
        if (roll < 90) {
            //  A worker reports one step failed; sometimes the wrong worker.
            uint64_t step = s_model_pick (&m, S_FLIGHT, &seed);
            if (step) {
                if (harness_lcg (&seed) % 4 == 0 && m.owner [step] != worker)
                    assert_int_equal (ps_schedule_release (schedule, worker, step), PS_EINVAL);
                else {
                    assert_int_equal (ps_schedule_release (schedule, m.owner [step], step), PS_OK);
                    m.in_flight--;
                    s_model_push_front (&m, step);
                }
            }
        }
        else
        if (roll < 93) {
            //  A worker is declared failed.
            size_t count = 0;
            for (uint64_t step = total; step >= 1; step--)
                if (m.state [step] == S_FLIGHT && m.owner [step] == worker) {
                    s_model_push_front (&m, step);
                    m.in_flight--;
                    count++;
                }
            assert_int_equal (ps_schedule_release_worker (schedule, worker), count);
            worker_failures += count > 0;
        }
        else {
            //  A duplicate of a done step.
            uint64_t step = s_model_pick (&m, S_DONE, &seed);
            if (step) {
                assert_int_equal (ps_schedule_complete (schedule, step), PS_DUPLICATE);
                duplicates++;
            }
        }
        assert_int_equal (ps_schedule_done_count (schedule), m.done);
        assert_int_equal (ps_schedule_in_flight (schedule), m.in_flight);
        if (op % 97 == 0)
            s_assert_matches (schedule, &m, nworkers, worker_ids);
    }
    s_assert_matches (schedule, &m, nworkers, worker_ids);

    //  Drain: every worker fails, then one worker trains what is left.
    for (int w = 0; w < nworkers; w++)
        ps_schedule_release_worker (schedule, worker_ids [w]);
    for (int w = 0; w < nworkers; w++)
        for (uint64_t step = total; step >= 1; step--)
            if (m.state [step] == S_FLIGHT && m.owner [step] == worker_ids [w]) {
                s_model_push_front (&m, step);
                m.in_flight--;
            }
    assert_int_equal (ps_schedule_in_flight (schedule), 0);
    for (;;) {
        uint64_t expected = s_model_expected_next (&m);
        uint64_t step = 0;
        int rc = ps_schedule_next (schedule, worker_ids [0], &step);
        if (expected == 0) {
            assert_int_equal (rc, PS_ENOTFOUND);
            break;
        }
        assert_int_equal (rc, PS_OK);
        assert_int_equal (step, expected);
        s_model_take (&m, step, worker_ids [0]);
        assert_int_equal (ps_schedule_complete (schedule, step), PS_OK);
        s_model_complete (&m, step);
    }
    assert_true (ps_schedule_finished (schedule));
    s_assert_matches (schedule, &m, nworkers, worker_ids);
    //  Every step was completed exactly once.
    for (uint64_t step = 1; step <= total; step++)
        assert_int_equal (m.ok [step], 1);
    //  The run met the cases it is there for.
    assert_true (queued_completions > 5);
    assert_true (stray_completions > 5);
    assert_true (duplicates > 50);
    assert_true (worker_failures > 5);

    s_model_free (&m);
    ps_schedule_destroy (&schedule);
    free (worker_ids);
}

static void
test_against_model (void **state)
{
    (void) state;
    s_run_model (37, 3000, 12, 1, 20000, 1);
    s_run_model (1000, 1000, 3, 1, 6000, 2);
    s_run_model (1, 2500, 40, 1, 12000, 3);
    s_run_model (64, 5000, 300, 1, 20000, 4);
    s_run_model (100, 4096, 8, 1000, 15000, 5);
}

//  The sizes of a long run: 200,000 steps over 300 workers that each keep
//  two steps in flight and now and then fail, and one worker holding 50,000
//  steps at once. Quadratic work anywhere would show as a hung test.
static void
test_large (void **state)
{
    (void) state;
    const uint64_t total = 200000;
    const int nworkers = 300;
    ps_schedule_t *schedule = ps_schedule_new (938, total, NULL);
    assert_non_null (schedule);
    uint64_t seed = 99;
    uint64_t *held = calloc ((size_t) nworkers * 2, sizeof (uint64_t));
    assert_non_null (held);
    uint64_t completed = 0;
    uint64_t late = 0;
    while (!ps_schedule_finished (schedule)) {
        int w = (int) (harness_lcg (&seed) % (uint64_t) nworkers);
        uint64_t *slot = &held [2 * w + harness_lcg (&seed) % 2];
        if (*slot == 0) {
            int rc = ps_schedule_next (schedule, w, slot);
            assert_true (rc == PS_OK || rc == PS_ENOTFOUND);
            if (rc != PS_OK)
                *slot = 0;
            continue;
        }
        if (harness_lcg (&seed) % 500 == 0) {
            //  The worker fails with both its steps; one of them may still
            //  be reported done afterwards.
            size_t count = ps_schedule_release_worker (schedule, w);
            assert_int_equal (count, (held [2 * w] != 0) + (held [2 * w + 1] != 0));
            if (harness_lcg (&seed) % 2 == 0) {
                assert_int_equal (ps_schedule_complete (schedule, *slot), PS_OK);
                completed++;
                late++;
            }
            held [2 * w] = 0;
            held [2 * w + 1] = 0;
            continue;
        }
        int rc = ps_schedule_complete (schedule, *slot);
        assert_true (rc == PS_OK || rc == PS_DUPLICATE);
        completed += rc == PS_OK;
        *slot = 0;
    }
    assert_int_equal (completed, total);
    assert_true (late > 10);
    s_assert_done_set (schedule, total, NULL, 0);

    //  One worker with 50,000 steps, released and completed in random
    //  order.
    assert_int_equal (ps_schedule_restore (schedule, 0, NULL, 0, NULL), PS_OK);
    enum { HELD = 50000 };
    uint64_t *steps = malloc (HELD * sizeof (uint64_t));
    assert_non_null (steps);
    for (uint64_t i = 0; i < HELD; i++)
        assert_int_equal ((steps [i] = s_next (schedule, 7)), i + 1);
    for (size_t i = HELD; i > 1; i--) {
        size_t j = (size_t) (harness_lcg (&seed) % i);
        uint64_t tmp = steps [i - 1];
        steps [i - 1] = steps [j];
        steps [j] = tmp;
    }
    for (size_t i = 0; i < HELD; i++) {
        if (i % 2)
            assert_int_equal (ps_schedule_complete (schedule, steps [i]), PS_OK);
        else
            assert_int_equal (ps_schedule_release (schedule, 7, steps [i]), PS_OK);
        assert_int_equal (ps_schedule_worker_in_flight (schedule, 7), HELD - i - 1);
    }
    assert_int_equal (ps_schedule_in_flight (schedule), 0);
    //  The released half comes back latest first, then the new steps.
    for (size_t i = HELD - 2; ; i -= 2) {
        assert_int_equal (s_next (schedule, 8), steps [i]);
        if (i == 0)
            break;
    }
    assert_int_equal (s_next (schedule, 8), HELD + 1);
    free (steps);
    free (held);
    ps_schedule_destroy (&schedule);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_new),
        cmocka_unit_test (test_budget),
        cmocka_unit_test (test_requeue),
        cmocka_unit_test (test_complete_anywhere),
        cmocka_unit_test (test_worker_ids),
        cmocka_unit_test (test_epoch_done),
        cmocka_unit_test (test_restore),
        cmocka_unit_test (test_restore_refused),
        cmocka_unit_test (test_against_model),
        cmocka_unit_test (test_large),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
