//  Unit tests for the coordinator's roster (coordinator/ps_roster.c),
//  with a fake clock: registration (first, again, back, a new incarnation
//  while the old one lives, after it is known dead), failure detection by
//  the heartbeat timeout, a stopped task declared failed and rejoining,
//  and finding a task by its routing id.

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "ps_roster.h"

#define S_TIMEOUT 1000.0

//  Register role:index as process pid with the routing id "<role><index>-<pid>".
static ps_join_t
s_register (ps_roster_t *roster, ps_role_t role, int index, uint64_t pid, double now)
{
    char id [32];
    snprintf (id, sizeof id, "%s%d-%llu", ps_role_name (role), index, (unsigned long long) pid);
    return ps_roster_register (roster, role, index, pid * 1000 + 7, id, strlen (id), pid, now);
}

static void
test_roles (void **state)
{
    (void) state;
    ps_role_t role = PS_ROLES;
    assert_int_equal (ps_role_parse ("worker", &role), 0);
    assert_int_equal (role, PS_ROLE_WORKER);
    assert_int_equal (ps_role_parse ("evaluator", &role), 0);
    assert_int_equal (role, PS_ROLE_EVALUATOR);
    assert_int_equal (ps_role_parse ("chief", &role), -1);
    assert_string_equal (ps_role_name (PS_ROLE_PS), "ps");
}

static void
test_register (void **state)
{
    (void) state;
    ps_roster_t *roster = ps_roster_new (2, 3, 1);
    assert_int_equal (ps_roster_count (roster, PS_ROLE_PS), 2);
    assert_int_equal (ps_roster_count (roster, PS_ROLE_WORKER), 3);
    assert_int_equal (ps_roster_count (roster, PS_ROLE_EVALUATOR), 1);
    assert_int_equal (ps_roster_alive (roster, PS_ROLE_WORKER), 0);
    assert_int_equal (s_register (roster, PS_ROLE_WORKER, 1, 42, 0), PS_JOIN_FIRST);
    assert_int_equal (ps_roster_alive (roster, PS_ROLE_WORKER), 1);
    //  The same process again (its link reconnected) is taken as it was.
    assert_int_equal (s_register (roster, PS_ROLE_WORKER, 1, 42, 10), PS_JOIN_AGAIN);
    //  Another process claiming the live task is refused, and changes
    //  nothing.
    assert_int_equal (s_register (roster, PS_ROLE_WORKER, 1, 43, 20), PS_JOIN_REFUSED);
    ps_peer_t *peer = ps_roster_peer (roster, PS_ROLE_WORKER, 1);
    assert_int_equal (peer->pid, 42);
    assert_true (peer->alive);
    //  Found by the routing id of its registration.
    ps_role_t role;
    int index;
    assert_ptr_equal (ps_roster_find (roster, "worker1-42", 10, &role, &index), peer);
    assert_int_equal (role, PS_ROLE_WORKER);
    assert_int_equal (index, 1);
    assert_null (ps_roster_find (roster, "worker1-43", 10, &role, &index));
    ps_roster_destroy (&roster);
    assert_null (roster);
    ps_roster_destroy (&roster);
}

static void
test_heartbeat_timeout (void **state)
{
    (void) state;
    ps_roster_t *roster = ps_roster_new (1, 2, 0);
    assert_int_equal (s_register (roster, PS_ROLE_PS, 0, 10, 0), PS_JOIN_FIRST);
    assert_int_equal (s_register (roster, PS_ROLE_WORKER, 0, 11, 0), PS_JOIN_FIRST);
    assert_int_equal (s_register (roster, PS_ROLE_WORKER, 1, 12, 0), PS_JOIN_FIRST);
    ps_role_t role;
    int index;
    //  Heard from within the timeout: nobody expires, however late the
    //  clock gets, as long as they speak.
    for (double now = 500; now <= 5000; now += 500) {
        ps_roster_heard (roster, ps_roster_peer (roster, PS_ROLE_PS, 0), now);
        ps_roster_heard (roster, ps_roster_peer (roster, PS_ROLE_WORKER, 0), now);
        ps_roster_heard (roster, ps_roster_peer (roster, PS_ROLE_WORKER, 1), now);
        assert_false (ps_roster_expire (roster, now, S_TIMEOUT, &role, &index));
    }
    //  worker:1 stops (SIGSTOP): silent at the timeout exactly it is not
    //  failed yet; past it, it is, once.
    ps_roster_heard (roster, ps_roster_peer (roster, PS_ROLE_PS, 0), 6000);
    ps_roster_heard (roster, ps_roster_peer (roster, PS_ROLE_WORKER, 0), 6000);
    assert_false (ps_roster_expire (roster, 5000 + S_TIMEOUT, S_TIMEOUT, &role, &index));
    assert_true (ps_roster_expire (roster, 5001 + S_TIMEOUT, S_TIMEOUT, &role, &index));
    assert_int_equal (role, PS_ROLE_WORKER);
    assert_int_equal (index, 1);
    const ps_peer_t *peer = ps_roster_peer (roster, PS_ROLE_WORKER, 1);
    assert_false (peer->alive);
    assert_true (peer->silent);
    assert_false (ps_roster_expire (roster, 6500, S_TIMEOUT, &role, &index));
    assert_int_equal (ps_roster_alive (roster, PS_ROLE_WORKER), 1);
    //  Every silent task expires, one per call.
    int expired = 0;
    while (ps_roster_expire (roster, 60000, S_TIMEOUT, &role, &index))
        expired++;
    assert_int_equal (expired, 2);
    assert_int_equal (ps_roster_alive (roster, PS_ROLE_PS), 0);
    ps_roster_destroy (&roster);
}

static void
test_stopped_rejoins (void **state)
{
    (void) state;
    ps_roster_t *roster = ps_roster_new (0, 1, 0);
    assert_int_equal (s_register (roster, PS_ROLE_WORKER, 0, 20, 0), PS_JOIN_FIRST);
    ps_role_t role;
    int index;
    assert_true (ps_roster_expire (roster, 2000, S_TIMEOUT, &role, &index));
    //  The stopped process is continued: its next message brings it back,
    //  once.
    ps_peer_t *peer = ps_roster_peer (roster, PS_ROLE_WORKER, 0);
    assert_true (ps_roster_heard (roster, peer, 2500));
    assert_true (peer->alive);
    assert_false (peer->silent);
    assert_false (ps_roster_heard (roster, peer, 2600));
    //  It may also register again as the same process: back, not new.
    assert_true (ps_roster_expire (roster, 4000, S_TIMEOUT, &role, &index));
    assert_int_equal (s_register (roster, PS_ROLE_WORKER, 0, 20, 4100), PS_JOIN_BACK);
    assert_true (peer->alive);
    ps_roster_destroy (&roster);
}

static void
test_restart (void **state)
{
    (void) state;
    ps_roster_t *roster = ps_roster_new (0, 1, 0);
    assert_int_equal (s_register (roster, PS_ROLE_WORKER, 0, 30, 0), PS_JOIN_FIRST);
    ps_peer_t *peer = ps_roster_peer (roster, PS_ROLE_WORKER, 0);
    peer->refused_report_logged = true;
    //  While the old process lives, its successor waits.
    assert_int_equal (s_register (roster, PS_ROLE_WORKER, 0, 31, 100), PS_JOIN_REFUSED);
    //  A launcher saw it die: gone for certain, not silent.
    assert_true (ps_roster_fail (roster, PS_ROLE_WORKER, 0));
    ps_roster_gone (roster, PS_ROLE_WORKER, 0);
    assert_false (ps_roster_fail (roster, PS_ROLE_WORKER, 0));
    assert_false (peer->silent);
    assert_int_equal (s_register (roster, PS_ROLE_WORKER, 0, 31, 200), PS_JOIN_RESTARTED);
    assert_int_equal (peer->pid, 31);
    assert_true (peer->alive);
    //  A new process has been refused nothing yet.
    assert_false (peer->refused_report_logged);
    //  The old routing id no longer finds the task.
    ps_role_t role;
    int index;
    assert_null (ps_roster_find (roster, "worker0-30", 10, &role, &index));
    assert_non_null (ps_roster_find (roster, "worker0-31", 10, &role, &index));
    ps_roster_destroy (&roster);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_roles),
        cmocka_unit_test (test_register),
        cmocka_unit_test (test_heartbeat_timeout),
        cmocka_unit_test (test_stopped_rejoins),
        cmocka_unit_test (test_restart),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
