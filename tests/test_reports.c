//  Unit tests for the worker's reports to the coordinator
//  (worker/ps_reports.c), without processes: every work_request is caught
//  where it would be sent, decoded by the generated codec (which checks it
//  against the protocol), and its reports read from the typed message. Checked: reports go in the order
//  they were made, at most 64 to a request; a request that is never
//  answered puts its reports back in front of newer ones (at least once);
//  an answered one drops them; a send that fails keeps them pending; the
//  mode's optional fields (update and order, checksum, AUC, error) go only
//  when set; request ids are the worker's own; and a queue held past its
//  bound drops the oldest report.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ps_msg.h"
#include "ps_reports.h"

//  What the send function caught: the last request, decoded.
typedef struct {
    ps_msg_t *msg;
    int sends;
    int fail;                   //  the code the next send returns, 0: none
} s_catch_t;

static int
s_send (void *arg, ps_writer_t *writer, ps_error_t *err)
{
    s_catch_t *caught = arg;
    if (caught->fail)
        return ps_error_set (err, caught->fail, "the link has failed (test)");
    const void *frames [1] = { writer->sbuf.data };
    size_t sizes [1] = { writer->sbuf.size };
    assert_int_equal (ps_msg_set (caught->msg, frames, sizes, 1), 0);
    ps_error_t decode_err = { 0 };
    if (ps_msg_decode (caught->msg, &decode_err))
        fail_msg ("the work_request does not decode: %s", decode_err.msg);
    assert_int_equal (ps_msg_proto (caught->msg)->type, PS_PROTO_WORK_REQUEST);
    caught->sends++;
    return 0;
}

//  The last request caught.
static const ps_proto_work_request_t *
s_request (s_catch_t *caught)
{
    return &ps_msg_proto (caught->msg)->work_request;
}

//  The steps of the last request's reports, in order, into steps; returns
//  how many.
static size_t
s_steps (s_catch_t *caught, uint64_t *steps, size_t max)
{
    const ps_proto_report_array_t *reports = &s_request (caught)->reports;
    size_t n = reports->count;
    assert_true (n <= max);
    for (size_t i = 0; i < n; i++)
        steps [i] = reports->items [i].step;
    return n;
}

static void
s_add_train (ps_reports_t *reports, uint64_t step)
{
    ps_report_t report = { .kind = PS_WORK_TRAIN, .done = true, .step = step,
                           .generation = 1, .count = 32, .loss = 10.0 };
    ps_reports_work (reports, &report);
}

static void
test_order_and_forget (void **state)
{
    (void) state;
    s_catch_t caught = { .msg = ps_msg_new () };
    ps_reports_t *reports = ps_reports_new (s_send, &caught);
    ps_error_t err = { 0 };
    for (uint64_t step = 1; step <= 3; step++)
        s_add_train (reports, step);
    assert_int_equal (ps_reports_pending (reports), 3);
    assert_int_equal (ps_reports_send (reports, true, &err), 0);
    uint64_t id = ps_reports_outstanding (reports);
    assert_true (id != 0);
    assert_int_equal (ps_msg_id (caught.msg), id);
    assert_true (ps_reports_ours (reports, id));
    //  The link's own ids count from 1 and are never the worker's.
    assert_false (ps_reports_ours (reports, 1));
    assert_int_equal (s_request (&caught)->want, 1);
    uint64_t steps [64];
    assert_int_equal (s_steps (&caught, steps, 64), 3);
    assert_int_equal (steps [0], 1);
    assert_int_equal (steps [2], 3);
    assert_int_equal (ps_reports_pending (reports), 0);
    assert_int_equal (ps_reports_undelivered (reports), 3);

    //  Never answered: the three go again, before the newer two.
    s_add_train (reports, 4);
    s_add_train (reports, 5);
    ps_reports_forget (reports);
    assert_int_equal (ps_reports_outstanding (reports), 0);
    assert_int_equal (ps_reports_pending (reports), 5);
    assert_int_equal (ps_reports_send (reports, false, &err), 0);
    assert_true (ps_reports_outstanding (reports) > id);
    assert_int_equal (s_request (&caught)->want, 0);
    assert_int_equal (s_steps (&caught, steps, 64), 5);
    for (uint64_t i = 0; i < 5; i++)
        assert_int_equal (steps [i], i + 1);

    //  Answered: delivered, gone.
    ps_reports_answered (reports);
    assert_int_equal (ps_reports_outstanding (reports), 0);
    assert_int_equal (ps_reports_undelivered (reports), 0);
    assert_int_equal (ps_reports_send (reports, true, &err), 0);
    assert_int_equal (s_steps (&caught, steps, 64), 0);

    //  A send that fails leaves its reports pending and nothing outstanding.
    ps_reports_answered (reports);
    s_add_train (reports, 6);
    caught.fail = PS_EIO;
    assert_int_equal (ps_reports_send (reports, true, &err), PS_EIO);
    assert_int_equal (ps_reports_outstanding (reports), 0);
    assert_int_equal (ps_reports_pending (reports), 1);
    caught.fail = 0;
    assert_int_equal (ps_reports_send (reports, true, &err), 0);
    assert_int_equal (s_steps (&caught, steps, 64), 1);
    assert_int_equal (steps [0], 6);
    ps_reports_destroy (&reports);
    assert_null (reports);
    ps_msg_destroy (&caught.msg);
}

static void
test_request_bound (void **state)
{
    (void) state;
    s_catch_t caught = { .msg = ps_msg_new () };
    ps_reports_t *reports = ps_reports_new (s_send, &caught);
    ps_error_t err = { 0 };
    for (uint64_t step = 1; step <= 100; step++)
        s_add_train (reports, step);
    uint64_t steps [64];
    assert_int_equal (ps_reports_send (reports, true, &err), 0);
    assert_int_equal (s_steps (&caught, steps, 64), 64);
    assert_int_equal (steps [63], 64);
    assert_int_equal (ps_reports_pending (reports), 36);
    ps_reports_answered (reports);
    assert_int_equal (ps_reports_send (reports, true, &err), 0);
    assert_int_equal (s_steps (&caught, steps, 64), 36);
    assert_int_equal (steps [0], 65);

    //  Held past the bound (1024), the oldest report makes room.
    ps_reports_answered (reports);
    for (uint64_t step = 1; step <= 1030; step++)
        s_add_train (reports, step);
    assert_int_equal (ps_reports_pending (reports), 1024);
    assert_int_equal (ps_reports_send (reports, true, &err), 0);
    assert_int_equal (s_steps (&caught, steps, 64), 64);
    assert_int_equal (steps [0], 7);
    ps_reports_destroy (&reports);
    ps_msg_destroy (&caught.msg);
}

static void
test_fields (void **state)
{
    (void) state;
    s_catch_t caught = { .msg = ps_msg_new () };
    ps_reports_t *reports = ps_reports_new (s_send, &caught);
    ps_error_t err = { 0 };
    ps_report_t plain = { .kind = PS_WORK_EVAL, .done = true, .step = 9, .generation = 2,
                          .correct = 80, .count = 100, .loss = 33.5 };
    ps_report_t ring = { .kind = PS_WORK_RING, .generation = 3, .has_update = true,
                         .update = 41, .order = 7 };
    ps_report_t eval = { .kind = PS_WORK_EVAL, .done = true, .step = 10, .has_update = true,
                         .update = 42, .order = 8, .has_checksum = true, .checksum = 0xabc,
                         .has_auc = true, .auc = 0.8125 };
    ps_report_t failed = { .kind = PS_WORK_TRAIN, .step = 11 };
    snprintf (failed.error, sizeof failed.error, "nonfinite: a gradient holds NaN");
    ps_reports_add (reports, &plain);
    ps_reports_add (reports, &ring);
    ps_reports_add (reports, &eval);
    ps_reports_add (reports, &failed);
    assert_int_equal (ps_reports_send (reports, true, &err), 0);
    const ps_proto_report_array_t *list = &s_request (&caught)->reports;
    assert_int_equal (list->count, 4);
    const ps_proto_report_t *r = &list->items [0];
    assert_string_equal (r->kind, "eval");
    assert_string_equal (r->status, "done");
    assert_int_equal (r->correct, 80);
    assert_false (r->has_update);
    assert_false (r->has_order);
    assert_false (r->has_checksum);
    assert_false (r->has_auc);
    assert_false (r->has_error);
    r = &list->items [1];
    assert_string_equal (r->kind, "ring");
    assert_string_equal (r->status, "failed");
    assert_true (r->has_update && r->has_order);
    assert_int_equal (r->update, 41);
    assert_int_equal (r->order, 7);
    r = &list->items [2];
    assert_true (r->has_checksum);
    assert_int_equal (r->checksum, 0xabc);
    assert_true (r->has_auc);
    assert_true (r->auc == 0.8125);
    r = &list->items [3];
    assert_true (r->has_error);
    assert_string_equal (r->error, "nonfinite: a gradient holds NaN");
    ps_reports_destroy (&reports);
    ps_msg_destroy (&caught.msg);
}

static void
test_kind_names (void **state)
{
    (void) state;
    const char *names [] = { "train", "eval", "ring", "save", "wait", "stop" };
    for (int k = 0; k < PS_WORK_KINDS; k++) {
        assert_string_equal (ps_work_kind_name ((ps_work_kind_t) k), names [k]);
        assert_int_equal (ps_work_kind_find (names [k]), k);
    }
    assert_int_equal (ps_work_kind_find ("dance"), PS_WORK_KINDS);
    assert_int_equal (ps_work_kind_find (""), PS_WORK_KINDS);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_order_and_forget),
        cmocka_unit_test (test_request_bound),
        cmocka_unit_test (test_fields),
        cmocka_unit_test (test_kind_names),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
