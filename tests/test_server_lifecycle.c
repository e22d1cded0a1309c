//  ps_server objects made and destroyed one after another in one process,
//  as the fuzz target of the server's dispatch does for every input. The
//  listening sockets live in a context that outlives each server
//  (ps_curve_context), so whatever a server names in it must not collide
//  with what an earlier server, since destroyed, named there: a new server
//  often gets the same address from malloc as the one before it.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "ps_server.h"

static void
test_new_destroy_again (void **state)
{
    (void) state;
    for (int i = 0; i < 200; i++) {
        ps_server_config_t config = {
            .bind = "tcp://127.0.0.1:0", .name = "ps:0", .threads = i % 3,
            .max_message = -1, .max_pending = 1 << 20,
        };
        ps_opt_config_default (&config.opt, PS_OPT_SGD);
        ps_error_t err;
        ps_server_t *server = ps_server_new (&config, &err);
        if (!server)
            fail_msg ("server %d of 200: %s", i, err.msg);
        ps_server_destroy (&server);
        assert_null (server);
    }
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_new_destroy_again),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
