//  The shared-memory all-reduce; see ps_ring_shm.h.
//
//  The mapping: a header (the barrier and each member's announcement),
//  then each member's input slot of slot_bytes, then each member's output
//  of a part's size. In a pass, member m writes into its input slot the
//  parts of the piece that the others sum, and its part's sum into its
//  output; the others read those. Because the sums go to an area of their
//  own, a member may copy the next piece in (after the barrier that ends
//  this pass's summing) while the others still copy this piece's sums
//  out, and a piece may be cut into parts of any length: the next write
//  of an output comes after the next pass's first barrier, which every
//  member passes only once it has copied the sums out.
//
//  A part is a multiple of 16 floats long, so that every part but the
//  last starts on a cache line of its own and members never write one
//  line together.
//
//  Measured with tests/bench/bench_allreduce (2 members, 16 MiB, the
//  2-core machine): see the commit that made this file and README's
//  "Same-host peers" for the slot size.

#include "ps_ring_shm.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "ps_clock.h"
#include "ps_log.h"
#include "ps_ring_schedule.h"

//  A part is a multiple of this many floats (one cache line).
#define S_ALIGN_FLOATS      16

//  The sum of a part is made in blocks of this many floats, so that the
//  partial sums stay in the first-level cache while the members' values
//  stream past.
#define S_BLOCK_FLOATS      2048

//  How often a member checks the barrier before it sleeps on the futex.
#define S_SPINS             256

//  Where shm_open keeps its objects, and how old an object no process
//  holds must be for s_sweep to remove its name.
#define S_SHM_DIR           "/dev/shm"
#define S_STALE_S           60

typedef struct {
    _Atomic uint64_t seq;
    _Atomic uint64_t count;
} s_announce_t;

typedef struct {
    //  The barrier: members arrived in this generation, the generation
    //  (the futex word), and members asleep on it.
    _Atomic uint32_t arrived;
    _Atomic uint32_t generation;
    _Atomic uint32_t waiters;
    uint32_t reserved;
    s_announce_t announce [];   //  one per member
} s_head_t;

struct _ps_ring_shm_t {
    char name [96];
    int rank, n;
    size_t slot_floats;         //  a piece, at most
    size_t out_floats;          //  a part, at most
    unsigned char *map;
    size_t map_bytes;
    s_head_t *head;
    float **in, **out;          //  each member's input slot and output
    size_t *segment;            //  the ring's segments of this collective: n + 1 bounds
    int fd;                     //  open for the mapping's life, holding a shared lock
    bool owned;                 //  the object is this user's: its name may be removed
    bool unlinked;
    double progress_at;
    int pass, passes;           //  for messages
};

//  FNV-1a over the members' endpoints, so that two rings of one id (two
//  clusters of one host) map different objects.
static uint64_t
s_hash (const char *const *members, int n)
{
    uint64_t hash = 14695981039346656037ULL;
    for (int i = 0; i < n; i++)
        for (const char *p = members [i]; ; p++) {
            hash = (hash ^ (unsigned char) *p) * 1099511628211ULL;
            if (!*p)
                break;
        }
    return hash;
}

static size_t
s_round_up (size_t value, size_t to)
{
    return (value + to - 1) / to * to;
}

//  Remove the names of this user's ring memory that no process holds and
//  that are older than S_STALE_S: the memory of rings whose members all
//  died before their first barrier, which would otherwise stay in
//  /dev/shm until the machine restarts. A member holds a shared lock on
//  its object for as long as it has it mapped, so an exclusive lock that
//  can be had means nobody does; the age spares an object whose maker
//  has opened it but not locked it yet. Failures only leave a name.
static void
s_sweep (void)
{
    char prefix [32];
    int len = snprintf (prefix, sizeof prefix, "ps-ring-%u-", (unsigned) geteuid ());
    DIR *dir = opendir (S_SHM_DIR);
    if (!dir)
        return;
    struct dirent *entry;
    while ((entry = readdir (dir))) {
        if (strncmp (entry->d_name, prefix, (size_t) len) != 0
        ||  strlen (entry->d_name) + 2 > sizeof ((ps_ring_shm_t *) 0)->name)
            continue;
        char name [sizeof ((ps_ring_shm_t *) 0)->name];
        snprintf (name, sizeof name, "/%s", entry->d_name);
        int fd = shm_open (name, O_RDONLY, 0);
        if (fd < 0)
            continue;
        struct stat st;
        if (fstat (fd, &st) == 0 && st.st_uid == geteuid ()
        &&  time (NULL) - st.st_mtime > S_STALE_S
        &&  flock (fd, LOCK_EX | LOCK_NB) == 0) {
            if (shm_unlink (name) == 0)
                ps_info ("removed the shared memory %s of a ring whose members are gone", name);
            else
            if (errno != ENOENT)
                ps_warn ("shm_unlink %s: %s", name, strerror (errno));
        }
        if (close (fd) != 0)
            ps_warn ("close of the shared memory %s: %s", name, strerror (errno));
    }
    if (closedir (dir) != 0)
        ps_warn ("closedir %s: %s", S_SHM_DIR, strerror (errno));
}

ps_ring_shm_t *
ps_ring_shm_new (uint64_t ring_id, const char *const *members, int n, int rank,
                 size_t slot_bytes, ps_error_t *err)
{
    assert (members && n >= 2 && rank >= 0 && rank < n);
    if (slot_bytes < PS_RING_SHM_MIN_SLOT || slot_bytes % 64) {
        ps_error_set (err, PS_EINVAL, "ring %" PRIx64 ": a shared-memory slot of %zu bytes "
                      "(at least %d, a multiple of 64)", ring_id, slot_bytes,
                      PS_RING_SHM_MIN_SLOT);
        return NULL;
    }
    s_sweep ();
    ps_ring_shm_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    self->fd = -1;
    self->rank = rank;
    self->n = n;
    self->slot_floats = slot_bytes / sizeof (float);
    self->out_floats = s_round_up ((self->slot_floats + (size_t) n - 1) / (size_t) n,
                                   S_ALIGN_FLOATS);
    self->in = calloc ((size_t) n, sizeof *self->in);
    self->out = calloc ((size_t) n, sizeof *self->out);
    self->segment = calloc ((size_t) n + 1, sizeof *self->segment);
    if (!self->in || !self->out || !self->segment)
        abort ();
    snprintf (self->name, sizeof self->name, "/ps-ring-%u-%016" PRIx64 "-%016" PRIx64,
              (unsigned) geteuid (), s_hash (members, n), ring_id);
    size_t head_bytes = s_round_up (sizeof (s_head_t) + (size_t) n * sizeof (s_announce_t),
                                    4096);
    size_t out_bytes = self->out_floats * sizeof (float);
    self->map_bytes = head_bytes + (size_t) n * (slot_bytes + out_bytes);

    int fd = self->fd = shm_open (self->name, O_RDWR | O_CREAT, 0600);
    if (fd < 0) {
        ps_error_set (err, PS_EIO, "ring %" PRIx64 ": shm_open %s: %s", ring_id, self->name,
                      strerror (errno));
        goto failed;
    }
    //  An object someone else made, or left open to others, could let
    //  them read or change the sums: refuse it.
    struct stat st;
    if (fstat (fd, &st) != 0) {
        ps_error_set (err, PS_EIO, "ring %" PRIx64 ": fstat %s: %s", ring_id, self->name,
                      strerror (errno));
        goto failed;
    }
    if (st.st_uid != geteuid () || (st.st_mode & 077)) {
        ps_error_set (err, PS_EIO, "ring %" PRIx64 ": the shared memory %s is of user %u, "
                      "mode %03o: it must be this user's (%u) with mode 0600", ring_id,
                      self->name, (unsigned) st.st_uid, (unsigned) (st.st_mode & 0777),
                      (unsigned) geteuid ());
        goto failed;
    }
    self->owned = true;
    //  Held until the mapping goes, so that s_sweep leaves it be.
    while (flock (fd, LOCK_SH) != 0)
        if (errno != EINTR) {
            ps_error_set (err, PS_EIO, "ring %" PRIx64 ": flock %s: %s", ring_id, self->name,
                          strerror (errno));
            goto failed;
        }
    //  Every member sizes it alike, whoever comes first. The pages are
    //  taken now, so that a full /dev/shm is an error here rather than a
    //  SIGBUS in the middle of a collective.
    if ((size_t) st.st_size != self->map_bytes && ftruncate (fd, (off_t) self->map_bytes) != 0) {
        ps_error_set (err, PS_EIO, "ring %" PRIx64 ": cannot size the shared memory %s to "
                      "%zu bytes: %s", ring_id, self->name, self->map_bytes, strerror (errno));
        goto failed;
    }
    int rc = posix_fallocate (fd, 0, (off_t) self->map_bytes);
    if (rc != 0) {
        ps_error_set (err, PS_EIO, "ring %" PRIx64 ": no room for the %zu bytes of shared "
                      "memory %s: %s (PS_SAME_HOST=ipc keeps the ring on sockets)", ring_id,
                      self->map_bytes, self->name, strerror (rc));
        goto failed;
    }
    self->map = mmap (NULL, self->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (self->map == MAP_FAILED) {
        self->map = NULL;
        ps_error_set (err, PS_EIO, "ring %" PRIx64 ": mmap of the shared memory %s: %s",
                      ring_id, self->name, strerror (errno));
        goto failed;
    }
    self->head = (s_head_t *) self->map;
    for (int k = 0; k < n; k++) {
        self->in [k] = (float *) (self->map + head_bytes + (size_t) k * slot_bytes);
        self->out [k] = (float *) (self->map + head_bytes + (size_t) n * slot_bytes
                                   + (size_t) k * out_bytes);
    }
    return self;

failed:
    ps_ring_shm_destroy (&self);
    return NULL;
}

void
ps_ring_shm_destroy (ps_ring_shm_t **self_p)
{
    assert (self_p);
    ps_ring_shm_t *self = *self_p;
    if (!self)
        return;
    //  Nothing can be done about a failure here but to leak the mapping
    //  or the name; neither is worth more than a word in the log.
    if (self->map && munmap (self->map, self->map_bytes) != 0)
        ps_warn ("munmap of the shared memory %s: %s", self->name, strerror (errno));
    if (self->owned && !self->unlinked && shm_unlink (self->name) != 0 && errno != ENOENT)
        ps_warn ("shm_unlink %s: %s", self->name, strerror (errno));
    if (self->fd >= 0 && close (self->fd) != 0)
        ps_warn ("close of the shared memory %s: %s", self->name, strerror (errno));
    free (self->in);
    free (self->out);
    free (self->segment);
    free (self);
    *self_p = NULL;
}

const char *
ps_ring_shm_name (const ps_ring_shm_t *self)
{
    assert (self);
    return self->name;
}

void
ps_ring_shm_describe (const ps_ring_shm_t *self, char *buf, size_t size)
{
    assert (self);
    snprintf (buf, size, "pass %d of %d over the shared memory %s, %u of %d members at the "
              "barrier", self->pass + 1, self->passes, self->name,
              (unsigned) atomic_load (&self->head->arrived), self->n);
}

//  ---------------------------------------------------------------------
//  The barrier

static long
s_futex (_Atomic uint32_t *word, int op, uint32_t value, const struct timespec *timeout)
{
    return syscall (SYS_futex, (uint32_t *) word, op, value, timeout, NULL, 0);
}

//  Wait until every member has arrived. The last to arrive starts the
//  next generation and wakes the sleepers; the sequentially consistent
//  atomics make every write a member did before arriving visible to every
//  member that leaves.
static int
s_barrier (ps_ring_shm_t *self, ps_ring_shm_wait_fn *wait, void *arg, ps_error_t *err)
{
    s_head_t *head = self->head;
    uint32_t generation = atomic_load (&head->generation);
    if (atomic_fetch_add (&head->arrived, 1) == (uint32_t) self->n - 1) {
        atomic_store (&head->arrived, 0);
        atomic_fetch_add (&head->generation, 1);
        //  A sleeper counts itself before it checks the word, and this
        //  reads the count after changing the word, so one of the two
        //  sees the other.
        if (atomic_load (&head->waiters)
        &&  s_futex (&head->generation, FUTEX_WAKE, INT_MAX, NULL) < 0)
            return ps_error_set (err, PS_EIO, "futex wake on %s: %s", self->name,
                                 strerror (errno));
        self->progress_at = ps_clock_ms ();
        return PS_OK;
    }
    for (int spin = 0; spin < S_SPINS; spin++) {
        if (atomic_load (&head->generation) != generation) {
            self->progress_at = ps_clock_ms ();
            return PS_OK;
        }
#if defined (__x86_64__) || defined (__i386__)
        __builtin_ia32_pause ();
#endif
    }
    const struct timespec poll = { 0, PS_RING_SHM_POLL_MS * 1000000L };
    while (true) {
        atomic_fetch_add (&head->waiters, 1);
        long rc = s_futex (&head->generation, FUTEX_WAIT, generation, &poll);
        int error = errno;
        atomic_fetch_sub (&head->waiters, 1);
        if (atomic_load (&head->generation) != generation) {
            self->progress_at = ps_clock_ms ();
            return PS_OK;
        }
        if (rc < 0 && error != EAGAIN && error != ETIMEDOUT && error != EINTR)
            return ps_error_set (err, PS_EIO, "futex wait on %s: %s", self->name,
                                 strerror (error));
        int given_up = wait (arg, ps_clock_ms () - self->progress_at, err);
        if (given_up)
            return given_up;
    }
}

//  ---------------------------------------------------------------------
//  The collective

//  out [i] = a [i] + b [i], and out [i] += c [i]: the steps of a sum.
static void
s_add2 (float *restrict out, const float *restrict a, const float *restrict b, size_t count)
{
    for (size_t i = 0; i < count; i++)
        out [i] = a [i] + b [i];
}

static void
s_add1 (float *restrict out, const float *restrict c, size_t count)
{
    for (size_t i = 0; i < count; i++)
        out [i] += c [i];
}

//  Member k's values of the vector's elements from `at` on, in this
//  piece (which starts at element base): this member's own in its
//  vector, the others' in their slots.
static const float *
s_values (const ps_ring_shm_t *self, const float *data, int k, size_t base, size_t at)
{
    return k == self->rank ? data + at : self->in [k] + (at - base);
}

//  Sum elements [begin, end) of the piece at base, all of them in the
//  ring's segment s, in the ring's order, into this member's output and
//  its vector.
static void
s_sum_segment (ps_ring_shm_t *self, float *data, size_t base, size_t part_begin, int s,
               size_t begin, size_t end)
{
    int n = self->n;
    for (size_t at = begin; at < end; at += S_BLOCK_FLOATS) {
        size_t len = end - at < S_BLOCK_FLOATS ? end - at : S_BLOCK_FLOATS;
        float *out = self->out [self->rank] + (at - part_begin);
        s_add2 (out, s_values (self, data, s, base, at),
                s_values (self, data, (s + 1) % n, base, at), len);
        for (int j = 2; j < n; j++)
            s_add1 (out, s_values (self, data, (s + j) % n, base, at), len);
        memcpy (data + at, out, len * sizeof (float));
    }
}

//  Part q of the piece [base, base + len): [*begin, *end).
static void
s_part (const ps_ring_shm_t *self, size_t base, size_t len, int q, size_t *begin, size_t *end)
{
    size_t part = s_round_up ((len + (size_t) self->n - 1) / (size_t) self->n, S_ALIGN_FLOATS);
    size_t b = (size_t) q * part, e = b + part;
    *begin = base + (b < len ? b : len);
    *end = base + (e < len ? e : len);
}

//  Check that every member announced this collective and this length.
static int
s_check_announcements (ps_ring_shm_t *self, uint64_t seq, size_t count, ps_error_t *err)
{
    for (int k = 0; k < self->n; k++) {
        uint64_t their_seq = atomic_load (&self->head->announce [k].seq);
        uint64_t their_count = atomic_load (&self->head->announce [k].count);
        if (their_seq != seq || their_count != count)
            return ps_error_set (err, PS_EPROTO, "all-reduce over the shared memory %s: "
                                 "member %d runs collective %" PRIu64 " of %" PRIu64 " floats; "
                                 "this member's is collective %" PRIu64 " of %zu floats (do "
                                 "the members run the same collectives?)", self->name, k,
                                 their_seq, their_count, seq, count);
    }
    return PS_OK;
}

int
ps_ring_shm_allreduce (ps_ring_shm_t *self, uint64_t seq, float *data, size_t count,
                       ps_ring_shm_wait_fn *wait, void *arg, ps_error_t *err)
{
    assert (self && (data || !count) && wait);
    int n = self->n, rank = self->rank;
    for (int s = 0; s <= n; s++) {
        size_t begin, len;
        ps_ring_schedule_segment (count * sizeof (float), n, s < n ? s : n - 1, &begin, &len);
        self->segment [s] = (s < n ? begin : begin + len) / sizeof (float);
    }
    atomic_store (&self->head->announce [rank].seq, seq);
    atomic_store (&self->head->announce [rank].count, count);
    self->progress_at = ps_clock_ms ();
    //  An empty vector still meets the others once, so that they compare
    //  their announcements.
    self->passes = count ? (int) ((count + self->slot_floats - 1) / self->slot_floats) : 1;
    int rc = PS_OK;
    for (self->pass = 0; self->pass < self->passes; self->pass++) {
        size_t base = (size_t) self->pass * self->slot_floats;
        size_t len = count - base < self->slot_floats ? count - base : self->slot_floats;
        size_t begin, end;
        for (int q = 0; q < n; q++)
            if (q != rank) {
                s_part (self, base, len, q, &begin, &end);
                memcpy (self->in [rank] + (begin - base), data + begin,
                        (end - begin) * sizeof (float));
            }
        if ((rc = s_barrier (self, wait, arg, err)))
            return rc;
        if (self->pass == 0) {
            if ((rc = s_check_announcements (self, seq, count, err)))
                return rc;
            //  Every member has the object mapped now: its name can go.
            if (!self->unlinked && shm_unlink (self->name) != 0 && errno != ENOENT)
                return ps_error_set (err, PS_EIO, "shm_unlink %s: %s", self->name,
                                     strerror (errno));
            self->unlinked = true;
        }
        size_t part_begin, part_end;
        s_part (self, base, len, rank, &part_begin, &part_end);
        for (int s = 0; s < n; s++) {
            begin = self->segment [s] > part_begin ? self->segment [s] : part_begin;
            end = self->segment [s + 1] < part_end ? self->segment [s + 1] : part_end;
            if (begin < end)
                s_sum_segment (self, data, base, part_begin, s, begin, end);
        }
        if ((rc = s_barrier (self, wait, arg, err)))
            return rc;
        for (int q = 0; q < n; q++)
            if (q != rank) {
                s_part (self, base, len, q, &begin, &end);
                memcpy (data + begin, self->out [q], (end - begin) * sizeof (float));
            }
    }
    return PS_OK;
}
