//  Unit tests for the worker's reports to the coordinator
//  (worker/ps_reports.c), without processes: every work_request is caught
//  where it would be sent, decoded and validated against the protocol
//  schema, and its reports read back. Checked: reports go in the order
//  they were made, at most 64 to a request; a request that is never
//  answered puts its reports back in front of newer ones (at least once);
//  an answered one drops them; a send that fails keeps them pending; the
//  mode's optional fields (update and order, checksum, error) go only
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
#include "ps_schema.h"

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
    assert_string_equal (ps_msg_type (caught->msg), "work_request");
    caught->sends++;
    return 0;
}

static const msgpack_object *
s_reports (s_catch_t *caught)
{
    const msgpack_object *reports = ps_obj_get (ps_msg_header (caught->msg), "reports");
    assert_non_null (reports);
    return reports;
}

static uint64_t
s_uint (const msgpack_object *report, const char *key)
{
    const msgpack_object *obj = ps_obj_get (report, key);
    if (!obj)
        fail_msg ("the report has no %s", key);
    return obj->via.u64;
}

//  The steps of the last request's reports, in order, into steps; returns
//  how many.
static size_t
s_steps (s_catch_t *caught, uint64_t *steps, size_t max)
{
    const msgpack_object *reports = s_reports (caught);
    size_t n = reports->via.array.size;
    assert_true (n <= max);
    for (size_t i = 0; i < n; i++)
        steps [i] = s_uint (&reports->via.array.ptr [i], "step");
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
    assert_int_equal (s_uint (ps_msg_header (caught.msg), "want"), 1);
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
    assert_int_equal (s_uint (ps_msg_header (caught.msg), "want"), 0);
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
                         .update = 42, .order = 8, .has_checksum = true, .checksum = 0xabc };
    ps_report_t failed = { .kind = PS_WORK_TRAIN, .step = 11 };
    snprintf (failed.error, sizeof failed.error, "nonfinite: a gradient holds NaN");
    ps_reports_add (reports, &plain);
    ps_reports_add (reports, &ring);
    ps_reports_add (reports, &eval);
    ps_reports_add (reports, &failed);
    assert_int_equal (ps_reports_send (reports, true, &err), 0);
    const msgpack_object *list = s_reports (&caught);
    assert_int_equal (list->via.array.size, 4);
    const msgpack_object *r = &list->via.array.ptr [0];
    assert_true (ps_obj_str_eq (ps_obj_get (r, "kind"), "eval"));
    assert_true (ps_obj_str_eq (ps_obj_get (r, "status"), "done"));
    assert_int_equal (s_uint (r, "correct"), 80);
    assert_null (ps_obj_get (r, "update"));
    assert_null (ps_obj_get (r, "checksum"));
    assert_null (ps_obj_get (r, "error"));
    r = &list->via.array.ptr [1];
    assert_true (ps_obj_str_eq (ps_obj_get (r, "kind"), "ring"));
    assert_true (ps_obj_str_eq (ps_obj_get (r, "status"), "failed"));
    assert_int_equal (s_uint (r, "update"), 41);
    assert_int_equal (s_uint (r, "order"), 7);
    r = &list->via.array.ptr [2];
    assert_int_equal (s_uint (r, "checksum"), 0xabc);
    r = &list->via.array.ptr [3];
    assert_true (ps_obj_str_eq (ps_obj_get (r, "error"), "nonfinite: a gradient holds NaN"));
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
