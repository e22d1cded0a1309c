//  The schedule of a ring collective; see ps_ring_schedule.h.

#include "ps_ring_schedule.h"

#include "ps_ring_transport.h"

ps_ring_schedule_t
ps_ring_schedule_allreduce (size_t total, int n, int rank)
{
    return (ps_ring_schedule_t) {
        .broadcast = false, .total = total, .n = n, .rank = rank,
        .send_rounds = 2 * (n - 1), .recv_rounds = 2 * (n - 1), .free_rounds = 1
    };
}

ps_ring_schedule_t
ps_ring_schedule_broadcast (size_t total, int n, int rank, int root)
{
    int place = (rank - root + n) % n;
    return (ps_ring_schedule_t) {
        .broadcast = true, .total = total, .n = n, .rank = rank, .root = root,
        .send_rounds = place < n - 1, .recv_rounds = place > 0, .free_rounds = place == 0
    };
}

//  The segment that member sends in all-reduce round `round`.
static int
s_segment (int n, int member, int round)
{
    int s = round < n - 1 ? member - round : member + 1 - (round - (n - 1));
    return ((s % n) + n) % n;
}

void
ps_ring_schedule_range (const ps_ring_schedule_t *self, bool sending, int round, size_t *begin,
                        size_t *len)
{
    if (self->broadcast) {
        *begin = 0;
        *len = self->total;
        return;
    }
    int n = self->n;
    int member = sending ? self->rank : (self->rank + n - 1) % n;
    ps_ring_schedule_segment (self->total, n, s_segment (n, member, round), begin, len);
}

void
ps_ring_schedule_segment (size_t total, int n, int s, size_t *begin, size_t *len)
{
    size_t count = total / sizeof (float);
    size_t base = count / (size_t) n;
    size_t extra = count % (size_t) n;
    size_t i = (size_t) s;
    *begin = (i * base + (i < extra ? i : extra)) * sizeof (float);
    *len = (base + (i < extra)) * sizeof (float);
}

void
ps_ring_schedule_round_kind (const ps_ring_schedule_t *self, int round, unsigned *kind,
                             unsigned *within)
{
    int n = self->n;
    if (self->broadcast) {
        *kind = PS_RING_KIND_BROADCAST;
        *within = 0;
    }
    else
    if (round < n - 1) {
        *kind = PS_RING_KIND_REDUCE_SCATTER;
        *within = (unsigned) round;
    }
    else {
        *kind = PS_RING_KIND_ALL_GATHER;
        *within = (unsigned) (round - (n - 1));
    }
}
