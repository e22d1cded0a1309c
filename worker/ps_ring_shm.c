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
//  The slot size: three alternated runs of tests/bench/bench_allreduce
//  --quick --no-peer with each of --shm-bytes 1, 4 and 16 MiB (2 members,
//  16 MiB, the shared 2-core machine) took 3.3-7.0, 3.9-7.3 and 3.9-7.5
//  ms: no size stood out against the noise, so the default is the middle
//  one, which keeps a ring's memory at (n + 1) x 4 MiB.

#include "ps_ring_shm.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

//  Where the objects live (as shm_open's do), and how old an object no
//  process holds must be for s_sweep to remove its name.
#define S_SHM_DIR           "/dev/shm"
#define S_STALE_S           60

//  The header's first words, which a member that joins checks: the mark
//  of this layout, and the geometry it was made for.
#define S_MAGIC             0x52534d50u     //  "PMSR"
#define S_LAYOUT            1

//  Tries at opening or making the object before giving up (each lost
//  race with another member, or a stale object removed, costs one).
#define S_OPEN_TRIES        8

typedef struct {
    _Atomic uint64_t seq;
    _Atomic uint64_t count;
} s_announce_t;

typedef struct {
    uint32_t magic;
    uint32_t layout;
    uint64_t members;
    uint64_t slot_bytes;
    uint64_t map_bytes;
    //  The barrier: members arrived in this generation, the generation
    //  (the futex word), and members asleep on it.
    _Atomic uint32_t arrived;
    _Atomic uint32_t generation;
    _Atomic uint32_t waiters;
    uint32_t reserved;
    s_announce_t announce [];   //  one per member
} s_head_t;

struct _ps_ring_shm_t {
    char name [96];             //  "/ps-ring-...", as shm_open names it
    char path [112];            //  S_SHM_DIR and the name
    uint64_t ring_id;
    int rank, n;
    size_t slot_bytes;
    size_t slot_floats;         //  a piece, at most
    size_t out_floats;          //  a part, at most
    unsigned char *map;
    size_t map_bytes;
    s_head_t *head;
    float **in, **out;          //  each member's input slot and output
    size_t *segment;            //  the ring's segments of this collective: n + 1 bounds
    int fd;                     //  open for the mapping's life, holding a shared lock
    bool unlinked;              //  the name is gone (or was never this member's to remove)
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

static int
s_flock (int fd, int how)
{
    int rc;
    while ((rc = flock (fd, how)) != 0 && errno == EINTR)
        ;
    return rc;
}

//  Remove the name at path if it still names the object open at fd, on
//  which the caller holds an exclusive lock or its own shared one: never
//  another object made under the same name since. Returns 0 or -1.
static int
s_unlink_if (const char *path, int fd)
{
    struct stat named, held;
    if (stat (path, &named) != 0 || fstat (fd, &held) != 0)
        return errno == ENOENT ? 0 : -1;
    if (named.st_dev != held.st_dev || named.st_ino != held.st_ino)
        return 0;
    return unlink (path) != 0 && errno != ENOENT ? -1 : 0;
}

//  Whether the object open at fd is held by no process (an exclusive lock
//  can be had, and is kept) and was last changed more than min_age_s ago.
static bool
s_abandoned (int fd, int min_age_s)
{
    struct stat st;
    return fstat (fd, &st) == 0 && st.st_uid == geteuid ()
        && time (NULL) - st.st_mtime >= min_age_s
        && flock (fd, LOCK_EX | LOCK_NB) == 0;
}

//  Remove the names of this user's ring memory that no process holds and
//  that are older than S_STALE_S: the memory of rings whose members all
//  died before their first barrier (and the half-made objects of members
//  that died making one), which would otherwise stay in /dev/shm until the
//  machine restarts. A member holds a shared lock on its object for as
//  long as it has it, so an exclusive lock that can be had means nobody
//  does; the age spares an object just made. Failures only leave a name.
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
        char path [sizeof ((ps_ring_shm_t *) 0)->path];
        if (strncmp (entry->d_name, prefix, (size_t) len) != 0
        ||  snprintf (path, sizeof path, "%s/%s", S_SHM_DIR, entry->d_name) >= (int) sizeof path)
            continue;
        int fd = open (path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
            continue;
        if (s_abandoned (fd, S_STALE_S)) {
            if (s_unlink_if (path, fd) == 0)
                ps_info ("removed %s, the shared memory of a ring whose members are gone", path);
            else
                ps_warn ("cannot remove %s: %s", path, strerror (errno));
        }
        if (close (fd) != 0)
            ps_warn ("close of %s: %s", path, strerror (errno));
    }
    if (closedir (dir) != 0)
        ps_warn ("closedir %s: %s", S_SHM_DIR, strerror (errno));
}

//  Check the object open at fd (this member holding a shared lock on it)
//  before using it: this user's alone, and made for this ring's layout.
//  Another user's object, or one open to others, could let them read or
//  change the sums. Returns 0 or a code with err set.
static int
s_check (ps_ring_shm_t *self, int fd, ps_error_t *err)
{
    struct stat st;
    if (fstat (fd, &st) != 0)
        return ps_error_set (err, PS_EIO, "ring %" PRIx64 ": fstat %s: %s", self->ring_id,
                             self->path, strerror (errno));
    if (st.st_uid != geteuid () || (st.st_mode & 077))
        return ps_error_set (err, PS_EIO, "ring %" PRIx64 ": the shared memory %s is of user "
                             "%u, mode %03o: it must be this user's (%u) with mode 0600",
                             self->ring_id, self->path, (unsigned) st.st_uid,
                             (unsigned) (st.st_mode & 0777), (unsigned) geteuid ());
    s_head_t head;
    ssize_t got = (size_t) st.st_size >= sizeof head ? pread (fd, &head, sizeof head, 0) : 0;
    if (got < 0)
        return ps_error_set (err, PS_EIO, "ring %" PRIx64 ": reading %s: %s", self->ring_id,
                             self->path, strerror (errno));
    if ((size_t) got != sizeof head || head.magic != S_MAGIC || head.layout != S_LAYOUT
    ||  (size_t) st.st_size != self->map_bytes || head.map_bytes != self->map_bytes
    ||  head.members != (uint64_t) self->n || head.slot_bytes != self->slot_bytes)
        return ps_error_set (err, PS_EPROTO, "ring %" PRIx64 ": the shared memory %s was made "
                             "for another layout (%zu bytes, layout %u, %" PRIu64 " members, "
                             "slots of %" PRIu64 " bytes) than this member's (%zu bytes, "
                             "layout %d, %d members, slots of %zu bytes): do the members "
                             "run the same build and shm_bytes?", self->ring_id, self->path,
                             (size_t) st.st_size, got == sizeof head ? head.layout : 0,
                             got == sizeof head ? head.members : 0,
                             got == sizeof head ? head.slot_bytes : 0, self->map_bytes,
                             S_LAYOUT, self->n, self->slot_bytes);
    return PS_OK;
}

//  Make the object whole under a name of this member's own (sized, its
//  pages taken, so that a full /dev/shm is an error here rather than a
//  SIGBUS in a collective, and its header written), holding a shared lock
//  on it, and then give it the ring's name, which fails when another
//  member's is there already. Returns the descriptor, -1 with *taken set
//  when the name was taken, or -1 with err set.
static int
s_make (ps_ring_shm_t *self, bool *taken, ps_error_t *err)
{
    *taken = false;
    char own [sizeof self->path + 32];
    snprintf (own, sizeof own, "%s.%d.%p", self->path, (int) getpid (), (void *) self);
    int fd = open (own, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        ps_error_set (err, PS_EIO, "ring %" PRIx64 ": cannot make %s: %s", self->ring_id, own,
                      strerror (errno));
        return -1;
    }
    int rc = 0;
    if (s_flock (fd, LOCK_SH) != 0)
        rc = ps_error_set (err, PS_EIO, "ring %" PRIx64 ": flock %s: %s", self->ring_id, own,
                           strerror (errno));
    else
    if (ftruncate (fd, (off_t) self->map_bytes) != 0)
        rc = ps_error_set (err, PS_EIO, "ring %" PRIx64 ": cannot size %s to %zu bytes: %s",
                           self->ring_id, own, self->map_bytes, strerror (errno));
    else
    if ((errno = posix_fallocate (fd, 0, (off_t) self->map_bytes)) != 0)
        rc = ps_error_set (err, PS_EIO, "ring %" PRIx64 ": no room in %s for the %zu bytes of "
                           "the ring's shared memory: %s (PS_SAME_HOST=ipc keeps the ring on "
                           "sockets)", self->ring_id, S_SHM_DIR, self->map_bytes,
                           strerror (errno));
    else {
        s_head_t head = { .magic = S_MAGIC, .layout = S_LAYOUT, .members = (uint64_t) self->n,
                          .slot_bytes = self->slot_bytes, .map_bytes = self->map_bytes };
        ssize_t put = pwrite (fd, &head, sizeof head, 0);
        if (put != (ssize_t) sizeof head)
            rc = ps_error_set (err, PS_EIO, "ring %" PRIx64 ": writing %s: %s", self->ring_id,
                               own, put < 0 ? strerror (errno) : "short write");
        else
        if (link (own, self->path) != 0) {
            if (errno == EEXIST)
                *taken = true;
            else
                rc = ps_error_set (err, PS_EIO, "ring %" PRIx64 ": cannot name %s %s: %s",
                                   self->ring_id, own, self->path, strerror (errno));
        }
    }
    if (unlink (own) != 0)
        ps_warn ("cannot remove %s: %s", own, strerror (errno));
    if (rc == 0 && !*taken)
        return fd;
    if (close (fd) != 0)
        ps_warn ("close of %s: %s", own, strerror (errno));
    return -1;
}

//  Open the ring's object, joining the one another member made or making
//  it, and hold a shared lock on it. An object of that name that no
//  process holds is a dead ring's (a ring id and members used again): it
//  is removed and made anew, never joined, since its barrier and
//  announcements hold whatever its members left. Returns the descriptor
//  or -1 with err set.
static int
s_open (ps_ring_shm_t *self, ps_error_t *err)
{
    for (int tries = 0; tries < S_OPEN_TRIES; tries++) {
        int fd = open (self->path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0 && errno != ENOENT) {
            ps_error_set (err, PS_EIO, "ring %" PRIx64 ": cannot open %s: %s", self->ring_id,
                          self->path, strerror (errno));
            return -1;
        }
        if (fd >= 0) {
            int rc = 0;
            if (s_abandoned (fd, 0)) {
                if (s_unlink_if (self->path, fd) != 0)
                    rc = ps_error_set (err, PS_EIO, "ring %" PRIx64 ": cannot remove %s, the "
                                       "memory of a dead ring of this name: %s", self->ring_id,
                                       self->path, strerror (errno));
            }
            else
            if (s_flock (fd, LOCK_SH) != 0)
                rc = ps_error_set (err, PS_EIO, "ring %" PRIx64 ": flock %s: %s",
                                   self->ring_id, self->path, strerror (errno));
            else
            if ((rc = s_check (self, fd, err)) == 0) {
                //  It may have lost its last holder, and its name, while
                //  this member waited for the lock: then make another.
                struct stat named, held;
                if (stat (self->path, &named) == 0 && fstat (fd, &held) == 0
                &&  named.st_dev == held.st_dev && named.st_ino == held.st_ino)
                    return fd;
            }
            if (close (fd) != 0)
                ps_warn ("close of %s: %s", self->path, strerror (errno));
            if (rc)
                return -1;
            continue;
        }
        bool taken;
        if ((fd = s_make (self, &taken, err)) >= 0)
            return fd;
        if (!taken)
            return -1;
    }
    ps_error_set (err, PS_EIO, "ring %" PRIx64 ": could not open or make %s in %d tries",
                  self->ring_id, self->path, S_OPEN_TRIES);
    return -1;
}

ps_ring_shm_t *
ps_ring_shm_new (uint64_t ring_id, const char *const *members, int n, int rank,
                 size_t slot_bytes, ps_error_t *err)
{
    assert (members && n >= 2 && rank >= 0 && rank < n);
    if (slot_bytes < PS_RING_SHM_MIN_SLOT || slot_bytes > PS_RING_SHM_MAX_SLOT
    ||  slot_bytes % 64) {
        ps_error_set (err, PS_EINVAL, "ring %" PRIx64 ": a shared-memory slot of %zu bytes "
                      "(a multiple of 64 from %d to %d)", ring_id, slot_bytes,
                      PS_RING_SHM_MIN_SLOT, PS_RING_SHM_MAX_SLOT);
        return NULL;
    }
    size_t head_bytes = s_round_up (sizeof (s_head_t) + (size_t) n * sizeof (s_announce_t),
                                    4096);
    size_t out_floats = s_round_up ((slot_bytes / sizeof (float) + (size_t) n - 1) / (size_t) n,
                                    S_ALIGN_FLOATS);
    size_t per_member = slot_bytes + out_floats * sizeof (float), map_bytes;
    if (__builtin_mul_overflow ((size_t) n, per_member, &map_bytes)
    ||  __builtin_add_overflow (map_bytes, head_bytes, &map_bytes)
    ||  map_bytes > (size_t) INT64_MAX) {
        ps_error_set (err, PS_EINVAL, "ring %" PRIx64 ": %d members with slots of %zu bytes "
                      "are too many to map", ring_id, n, slot_bytes);
        return NULL;
    }
    s_sweep ();
    ps_ring_shm_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    self->fd = -1;
    self->unlinked = true;      //  until this member has the object
    self->ring_id = ring_id;
    self->rank = rank;
    self->n = n;
    self->slot_bytes = slot_bytes;
    self->slot_floats = slot_bytes / sizeof (float);
    self->out_floats = out_floats;
    self->map_bytes = map_bytes;
    self->in = calloc ((size_t) n, sizeof *self->in);
    self->out = calloc ((size_t) n, sizeof *self->out);
    self->segment = calloc ((size_t) n + 1, sizeof *self->segment);
    if (!self->in || !self->out || !self->segment)
        abort ();
    snprintf (self->name, sizeof self->name, "/ps-ring-%u-%016" PRIx64 "-%016" PRIx64,
              (unsigned) geteuid (), s_hash (members, n), ring_id);
    snprintf (self->path, sizeof self->path, "%s%s", S_SHM_DIR, self->name);
    if ((self->fd = s_open (self, err)) < 0)
        goto failed;
    self->unlinked = false;
    self->map = mmap (NULL, self->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, self->fd, 0);
    if (self->map == MAP_FAILED) {
        self->map = NULL;
        ps_error_set (err, PS_EIO, "ring %" PRIx64 ": mmap of the shared memory %s: %s",
                      ring_id, self->path, strerror (errno));
        goto failed;
    }
    self->head = (s_head_t *) self->map;
    for (int k = 0; k < n; k++) {
        self->in [k] = (float *) (self->map + head_bytes + (size_t) k * slot_bytes);
        self->out [k] = (float *) (self->map + head_bytes + (size_t) n * slot_bytes
                                   + (size_t) k * out_floats * sizeof (float));
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
        ps_warn ("munmap of the shared memory %s: %s", self->path, strerror (errno));
    if (!self->unlinked && s_unlink_if (self->path, self->fd) != 0)
        ps_warn ("cannot remove %s: %s", self->path, strerror (errno));
    if (self->fd >= 0 && close (self->fd) != 0)
        ps_warn ("close of the shared memory %s: %s", self->path, strerror (errno));
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
            //  Every member has the object now: its name can go, and
            //  member 0 removes it.
            if (!self->unlinked && rank == 0 && s_unlink_if (self->path, self->fd) != 0)
                return ps_error_set (err, PS_EIO, "cannot remove %s: %s", self->path,
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
