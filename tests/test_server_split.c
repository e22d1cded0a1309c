//  Integration test: a real ps-server applies a partition of 1M floats
//  (above PS_PARTITION_SPLIT_MIN) with Adam, clipping by norm and weight
//  decay, to values bit-identical to ps_opt_apply run here on one thread:
//  with --threads 2, where the update is split into ranges on the apply
//  pool (ps_partition_push_on), and with --threads 0, where the serving
//  thread applies it whole. Pushes, a push-pull and a pull are checked.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ps_floats.h"
#include "ps_partition.h"

#define S_ROWS     1024
#define S_COLS     1024
#define S_COUNT    ((size_t) S_ROWS * S_COLS)
#define S_PUSHES   3

//  Gradient of step: varied signs and magnitudes, some large enough to clip.
static void
s_grad (float *grad, uint64_t step)
{
    uint32_t x = 2654435761u * (uint32_t) (step + 1);
    for (size_t i = 0; i < S_COUNT; i++) {
        x = x * 1664525u + 1013904223u;
        grad [i] = ((float) (x >> 8) / (float) (1 << 24) - 0.5f) * (i % 97 == 0 ? 40.0f : 1.0f);
    }
}

static void
s_check_same (const float *want, const float *got, const char *what)
{
    if (memcmp (want, got, S_COUNT * sizeof (float)) != 0) {
        size_t i = 0;
        while (memcmp (want + i, got + i, sizeof (float)) == 0)
            i++;
        fail_msg ("%s: element %zu is %.9g, not %.9g", what, i, (double) got [i],
                  (double) want [i]);
    }
}

static void
s_run (const char *threads)
{
    const char *args [] = { "--insecure", "--threads", threads, NULL };
    harness_server_t server;
    assert_int_equal (harness_server_start (&server, 0, args), 0);
    const char *endpoints [] = { server.endpoint };
    harness_clients_t clients;
    ps_error_t err;
    if (harness_clients_open (&clients, endpoints, 1, 30000, true, &err))
        fail_msg ("harness_clients_open: %s", err.msg);
    ps_shape_t shape;
    assert_int_equal (ps_shape_set (&shape, (const int64_t []) { S_ROWS, S_COLS }, 2, &err), 0);
    ps_init_t init;
    ps_init_default (&init, PS_INIT_CONSTANT);
    init.value = 0.5;
    const int64_t splits [] = { 0, S_ROWS };
    const int servers [] = { 0 };
    if (harness_clients_add_variable (&clients, "w", &shape, &init, 1, splits, servers, &err) < 0
    ||  ps_client_create (clients.control, &err))
        fail_msg ("variable: %s", err.msg);
    ps_opt_config_t opt;
    ps_opt_config_default (&opt, PS_OPT_ADAM);
    opt.clip_norm = 100.0;
    opt.weight_decay = 0.01;
    if (ps_client_set_optimizer (clients.control, &opt, &err))
        fail_msg ("ps_client_set_optimizer: %s", err.msg);

    //  The reference, on this thread, in the server's arithmetic mode.
    ps_floats_flush_subnormals ();
    float *values = ps_floats_alloc (S_COUNT);
    float *m = ps_floats_alloc (S_COUNT);
    float *v = ps_floats_alloc (S_COUNT);
    float *grad = ps_floats_alloc (S_COUNT);
    float *got = ps_floats_alloc (S_COUNT);
    assert_true (values && m && v && grad && got);
    for (size_t i = 0; i < S_COUNT; i++)
        values [i] = 0.5f;
    float *slots [PS_OPT_MAX_SLOTS] = { m, v };
    ps_opt_init_slots (&opt, slots, S_COUNT);

    for (uint64_t step = 1; step <= S_PUSHES + 1; step++) {
        s_grad (grad, step);
        ps_opt_apply (&opt, values, grad, slots, S_COUNT, step);
        const float *grads [] = { grad };
        float *outs [] = { got };
        ps_push_info_t info = { 0, 0 };
        int rc = step <= S_PUSHES
               ? ps_client_push (clients.data, step, 0, grads, &info, &err)
               : ps_client_push_pull (clients.data, step, 0, grads, outs, &info, &err);
        if (rc)
            fail_msg ("step %llu: %s", (unsigned long long) step, err.msg);
        assert_int_equal (info.applied, 1);
    }
    s_check_same (values, got, "push-pull");
    memset (got, 0, S_COUNT * sizeof (float));
    float *outs [] = { got };
    if (ps_client_pull (clients.data, outs, &err))
        fail_msg ("ps_client_pull: %s", err.msg);
    s_check_same (values, got, "pull");

    harness_clients_close (&clients);
    assert_int_equal (harness_server_stop (&server, SIGTERM), 0);
    free (values);
    free (m);
    free (v);
    free (grad);
    free (got);
}

static void
test_split_on_pool (void **state)
{
    (void) state;
    assert_true (S_COUNT >= PS_PARTITION_SPLIT_MIN);
    s_run ("2");
}

static void
test_whole_on_serving_thread (void **state)
{
    (void) state;
    s_run ("0");
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_split_on_pool),
        cmocka_unit_test (test_whole_on_serving_thread),
    };
    return harness_finish (cmocka_run_group_tests (tests, NULL, NULL));
}
