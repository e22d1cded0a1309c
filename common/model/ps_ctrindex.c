//  Building, saving and loading the line index of a CTR data file
//  (ps_ctrindex.h).
//
//  The index file is little-endian throughout and ends with the CRC-32 of
//  everything before it; schemas/data.md lays it out. Building reads the
//  whole file once through a source that records access points, parsing
//  every line into a one-example batch to count the malformed ones.

#include "ps_ctrindex.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "ps_bytes.h"
#include "ps_ctrparse.h"
#include "ps_file.h"
#include "ps_log.h"
#include "ps_mix.h"

#define S_MAGIC      "PSCTRIDX"
#define S_VERSION    1
#define S_HEADER     (8 + 4 * 4 + 8 * 8 + PS_CTRINDEX_REASON + 8)
#define S_POINT      (4 * 8 + 2 * 4)
#define S_PROGRESS   1000000    //  lines between progress lines while building

struct _ps_ctrindex_t {
    ps_ctrformat_t format;
    bool gzip;
    bool built;
    uint64_t size;              //  the data file's size and modification time
    int64_t mtime_sec, mtime_nsec;
    uint64_t span;
    uint64_t lines, good, malformed, first_malformed;
    char reason [PS_CTRINDEX_REASON];
    ps_ctrpoint_t *points;
    size_t count;
    char file [PATH_MAX];
};

//  A growing byte buffer for the index file.
typedef struct {
    uint8_t *data;
    size_t len, cap;
    bool failed;
} s_out_t;

static void
s_put (s_out_t *out, const void *data, size_t len)
{
    if (out->failed)
        return;
    if (len > out->cap - out->len) {
        size_t cap = out->cap ? out->cap : 4096;
        while (cap - out->len < len)
            cap *= 2;
        uint8_t *grown = realloc (out->data, cap);
        if (!grown) {
            out->failed = true;
            return;
        }
        out->data = grown;
        out->cap = cap;
    }
    memcpy (out->data + out->len, data, len);
    out->len += len;
}

static void
s_put_u64 (s_out_t *out, uint64_t value)
{
    uint8_t bytes [8];
    ps_put_u64 (bytes, value);
    s_put (out, bytes, 8);
}

static void
s_put_u32 (s_out_t *out, uint32_t value)
{
    uint8_t bytes [4];
    ps_put_u32 (bytes, value);
    s_put (out, bytes, 4);
}

static int
s_write_buffer (int fd, void *arg)
{
    s_out_t *out = arg;
    return ps_file_write_all (fd, out->data, out->len, NULL);
}

static void
s_free_points (ps_ctrindex_t *self)
{
    for (size_t i = 0; i < self->count; i++)
        free (self->points [i].window);
    free (self->points);
    self->points = NULL;
    self->count = 0;
}

void
ps_ctrindex_destroy (ps_ctrindex_t **self_p)
{
    assert (self_p);
    if (*self_p) {
        s_free_points (*self_p);
        free (*self_p);
        *self_p = NULL;
    }
}

//  The index as the bytes of its file.
static int
s_serialize (const ps_ctrindex_t *self, s_out_t *out)
{
    s_put (out, S_MAGIC, 8);
    s_put_u32 (out, S_VERSION);
    s_put_u32 (out, (uint32_t) self->format);
    s_put_u32 (out, self->gzip);
    s_put_u32 (out, 0);
    s_put_u64 (out, self->size);
    s_put_u64 (out, (uint64_t) self->mtime_sec);
    s_put_u64 (out, (uint64_t) self->mtime_nsec);
    s_put_u64 (out, self->span);
    s_put_u64 (out, self->lines);
    s_put_u64 (out, self->good);
    s_put_u64 (out, self->malformed);
    s_put_u64 (out, self->first_malformed);
    s_put (out, self->reason, PS_CTRINDEX_REASON);
    s_put_u64 (out, self->count);
    for (size_t i = 0; i < self->count; i++) {
        const ps_ctrpoint_t *point = &self->points [i];
        s_put_u64 (out, point->line);
        s_put_u64 (out, point->out);
        s_put_u64 (out, point->skip);
        s_put_u64 (out, point->in);
        s_put_u32 (out, point->bits);
        s_put_u32 (out, point->window_len);
        if (point->window_len)
            s_put (out, point->window, point->window_len);
    }
    //  crc32_z takes a size_t length: an index over 4 GiB is covered whole.
    uint32_t crc = (uint32_t) crc32_z (0, out->data, out->len);
    s_put_u32 (out, crc);
    return out->failed ? PS_ETOOBIG : 0;
}

//  Fill self from the bytes of an index file. Returns 0, or PS_ECORRUPT
//  with what was wrong (a stale index is not corrupt, but is refused the
//  same way: the caller rebuilds either). On an error self may hold some
//  of the file's counts and points: s_load parses into a scratch index
//  and keeps it only whole.
static int
s_parse (ps_ctrindex_t *self, const uint8_t *data, size_t len, ps_error_t *err)
{
    if (len < S_HEADER + 4 || memcmp (data, S_MAGIC, 8) != 0)
        return ps_error_set (err, PS_ECORRUPT, "not an index file");
    if (crc32_z (0, data, len - 4) != ps_get_u32 (data + len - 4))
        return ps_error_set (err, PS_ECORRUPT, "checksum mismatch");
    const uint8_t *p = data + 8;
    if (ps_get_u32 (p) != S_VERSION)
        return ps_error_set (err, PS_ECORRUPT, "version %u, expected %u", ps_get_u32 (p),
                             S_VERSION);
    if (ps_get_u32 (p + 4) != (uint32_t) self->format || ps_get_u32 (p + 8) != self->gzip)
        return ps_error_set (err, PS_ECORRUPT, "made for another format");
    p += 16;
    if (ps_get_u64 (p) != self->size || (int64_t) ps_get_u64 (p + 8) != self->mtime_sec
        || (int64_t) ps_get_u64 (p + 16) != self->mtime_nsec)
        return ps_error_set (err, PS_ECORRUPT, "stale: the data file's size or modification "
                             "time changed");
    p += 24;
    self->span = ps_get_u64 (p);
    self->lines = ps_get_u64 (p + 8);
    self->good = ps_get_u64 (p + 16);
    self->malformed = ps_get_u64 (p + 24);
    self->first_malformed = ps_get_u64 (p + 32);
    p += 40;
    memcpy (self->reason, p, PS_CTRINDEX_REASON);
    self->reason [PS_CTRINDEX_REASON - 1] = '\0';
    p += PS_CTRINDEX_REASON;
    uint64_t count = ps_get_u64 (p);
    p += 8;
    const uint8_t *end = data + len - 4;
    if (count == 0 || count > (uint64_t) (end - p) / S_POINT)
        return ps_error_set (err, PS_ECORRUPT, "%llu access points do not fit",
                             (unsigned long long) count);
    self->points = calloc ((size_t) count, sizeof (ps_ctrpoint_t));
    if (!self->points)
        return ps_error_set (err, PS_ETOOBIG, "out of memory for %llu access points",
                             (unsigned long long) count);
    for (self->count = 0; self->count < count; self->count++) {
        ps_ctrpoint_t *point = &self->points [self->count];
        if ((size_t) (end - p) < S_POINT)
            return ps_error_set (err, PS_ECORRUPT, "access point %zu is cut short",
                                 self->count);
        point->line = ps_get_u64 (p);
        point->out = ps_get_u64 (p + 8);
        point->skip = ps_get_u64 (p + 16);
        point->in = ps_get_u64 (p + 24);
        point->bits = ps_get_u32 (p + 32);
        point->window_len = ps_get_u32 (p + 36);
        p += S_POINT;
        if (point->bits > 7 || point->window_len > PS_CTRSOURCE_WINDOW
            || point->window_len > (size_t) (end - p)
            || (self->count > 0 && point->line < self->points [self->count - 1].line))
            return ps_error_set (err, PS_ECORRUPT, "access point %zu is invalid", self->count);
        if (point->window_len) {
            point->window = malloc (point->window_len);
            if (!point->window)
                return ps_error_set (err, PS_ETOOBIG, "out of memory for access points");
            memcpy (point->window, p, point->window_len);
            p += point->window_len;
        }
    }
    if (p != end || self->good + self->malformed != self->lines)
        return ps_error_set (err, PS_ECORRUPT, "inconsistent counts or length");
    return 0;
}

//  Read the whole data file once, counting lines and recording points.
static int
s_build (ps_ctrindex_t *self, const char *path, int fd, ps_error_t *err)
{
    ps_ctrsource_t *source = ps_ctrsource_new (path, fd, self->gzip, err);
    ps_ctrbatch_t *batch = ps_ctrbatch_new (self->format, 1, err);
    int rc = source && batch ? 0 : PS_ETOOBIG;
    if (rc == 0)
        rc = ps_ctrsource_start (source, NULL, self->span, err);
    while (rc == 0) {
        const char *line;
        size_t len;
        int got = ps_ctrsource_next (source, &line, &len, err);
        if (got <= 0) {
            rc = got;
            break;
        }
        ps_error_t why = { 0 };
        int bad = 0;
        if (got == 2)
            bad = ps_error_set (&why, PS_ECORRUPT, "longer than %u bytes",
                                PS_CTRSOURCE_LINE_MAX);
        else {
            ps_ctrbatch_clear (batch, 0);
            bad = ps_ctrparse_line (batch, line, len, &why);
        }
        if (bad == PS_ECORRUPT) {
            if (self->malformed++ == 0) {
                self->first_malformed = self->lines + 1;
                snprintf (self->reason, sizeof self->reason, "%.*s", PS_CTRINDEX_REASON - 1, why.msg);
            }
        }
        else
        if (bad) {
            rc = ps_error_prefix (err, bad, "%s line %llu: %s", path,
                                  (unsigned long long) self->lines + 1, why.msg);
            break;
        }
        else
            self->good++;
        if (++self->lines % S_PROGRESS == 0)
            ps_info ("%s: indexing, %llu lines so far", path, (unsigned long long) self->lines);
    }
    if (rc == 0)
        ps_ctrsource_take_points (source, &self->points, &self->count);
    if (rc == 0 && self->count == 0) {
        //  An empty file: one point at its start, for a uniform format.
        //  The reader's points, none of which starts a line, come as an
        //  array of no entries that is freed all the same.
        free (self->points);
        self->points = calloc (1, sizeof (ps_ctrpoint_t));
        self->count = self->points ? 1 : 0;
        if (!self->points)
            rc = ps_error_set (err, PS_ETOOBIG, "%s: out of memory", path);
    }
    ps_ctrbatch_destroy (&batch);
    ps_ctrsource_destroy (&source);
    return rc;
}

//  The two places an index may be: next to the data, and in the cache
//  directory under a name made from the data's absolute path.
static int
s_candidates (const char *path, const ps_ctrindex_opts_t *opts, char *beside, char *cached,
              char *cache_dir, ps_error_t *err)
{
    if (snprintf (beside, PATH_MAX, "%s.psidx", path) >= PATH_MAX)
        return ps_error_set (err, PS_EINVAL, "%s: path too long for an index beside it", path);
    cached [0] = cache_dir [0] = '\0';
    const char *xdg = getenv ("XDG_CACHE_HOME"), *home = getenv ("HOME");
    if (opts && opts->cache_dir)
        snprintf (cache_dir, PATH_MAX, "%s", opts->cache_dir);
    else
    if (xdg && xdg [0] == '/')
        snprintf (cache_dir, PATH_MAX, "%s/ps-cluster", xdg);
    else
    if (home && home [0] == '/')
        snprintf (cache_dir, PATH_MAX, "%s/.cache/ps-cluster", home);
    else
        return 0;
    char absolute [PATH_MAX];
    if (!realpath (path, absolute))
        return 0;
    //  FNV-1a over the absolute path, finished with ps_mix64.
    uint64_t hash = 0xcbf29ce484222325ULL;
    for (const char *c = absolute; *c; c++)
        hash = (hash ^ (uint8_t) *c) * 0x100000001b3ULL;
    const char *base = strrchr (absolute, '/') + 1;
    if (snprintf (cached, PATH_MAX, "%s/%016llx-%s.psidx", cache_dir,
                  (unsigned long long) ps_mix64 (hash), base) >= PATH_MAX)
        cached [0] = '\0';
    return 0;
}

//  Load the index at file if it matches the data. True when it did.
static bool
s_load (ps_ctrindex_t *self, const char *file)
{
    char *data = NULL;
    size_t len;
    ps_error_t why = { 0 };
    int rc = ps_file_read (file, SIZE_MAX / 2, &data, &len, &why);
    if (rc == PS_ENOTFOUND)
        return false;
    //  What the file says goes into a scratch index that knows only the
    //  data file, so a file refused halfway leaves self as it was: a
    //  rebuild would otherwise count its lines on top of the file's.
    ps_ctrindex_t *parsed = calloc (1, sizeof *parsed);
    if (rc == 0 && !parsed)
        rc = ps_error_set (&why, PS_ETOOBIG, "out of memory");
    if (rc == 0) {
        parsed->format = self->format;
        parsed->gzip = self->gzip;
        parsed->size = self->size;
        parsed->mtime_sec = self->mtime_sec;
        parsed->mtime_nsec = self->mtime_nsec;
        rc = s_parse (parsed, (const uint8_t *) data, len, &why);
    }
    free (data);
    if (rc) {
        ps_info ("line index %s: %s; rebuilding it", file, why.msg);
        ps_ctrindex_destroy (&parsed);
        return false;
    }
    *self = *parsed;
    free (parsed);
    snprintf (self->file, sizeof self->file, "%s", file);
    return true;
}

//  Save the index at file (through file.tmp.PID). Returns 0 or an error.
static int
s_save (const s_out_t *out, const char *file, ps_error_t *err)
{
    char tmp [PATH_MAX + 32];
    snprintf (tmp, sizeof tmp, "%s.tmp.%ld", file, (long) getpid ());
    return ps_file_write_atomic (file, tmp, s_write_buffer, (void *) out, err);
}

ps_ctrindex_t *
ps_ctrindex_open (const char *path, int fd, ps_ctrformat_t format,
                  const ps_ctrindex_opts_t *opts, ps_error_t *err)
{
    struct stat st;
    if (fstat (fd, &st) != 0) {
        ps_error_set (err, PS_EIO, "%s: fstat failed: %s", path, strerror (errno));
        return NULL;
    }
    uint8_t magic [2] = { 0 };
    ssize_t n;
    do
        n = pread (fd, magic, 2, 0);
    while (n < 0 && errno == EINTR);
    if (n < 0) {
        ps_error_set (err, PS_EIO, "%s: read failed: %s", path, strerror (errno));
        return NULL;
    }
    ps_ctrindex_t *self = calloc (1, sizeof (ps_ctrindex_t));
    if (!self) {
        ps_error_set (err, PS_ETOOBIG, "%s: out of memory for its index", path);
        return NULL;
    }
    self->format = format;
    self->gzip = n == 2 && magic [0] == 0x1f && magic [1] == 0x8b;
    self->size = (uint64_t) st.st_size;
    self->mtime_sec = (int64_t) st.st_mtim.tv_sec;
    self->mtime_nsec = (int64_t) st.st_mtim.tv_nsec;
    char beside [PATH_MAX], cached [PATH_MAX], cache_dir [PATH_MAX];
    int rc = s_candidates (path, opts, beside, cached, cache_dir, err);
    if (rc == 0 && (s_load (self, beside) || (cached [0] && s_load (self, cached))))
        return self;
    self->span = opts && opts->span ? opts->span
               : self->gzip ? PS_CTRINDEX_SPAN_GZIP : PS_CTRINDEX_SPAN_PLAIN;
    if (rc == 0) {
        ps_info ("%s: building its line index", path);
        rc = s_build (self, path, fd, err);
    }
    if (rc) {
        ps_ctrindex_destroy (&self);
        return NULL;
    }
    self->built = true;
    s_out_t out = { 0 };
    ps_error_t first = { 0 }, second = { 0 };
    if (s_serialize (self, &out) != 0)
        ps_warn ("%s: out of memory writing its line index", path);
    else
    if (s_save (&out, beside, &first) == 0)
        snprintf (self->file, sizeof self->file, "%s", beside);
    else
    if (cached [0] && ps_file_mkdirs (cache_dir, &second) == 0
        && s_save (&out, cached, &second) == 0)
        snprintf (self->file, sizeof self->file, "%s", cached);
    else
        ps_warn ("%s: line index not saved (%s; %s): it will be built again next time", path,
                 first.msg, cached [0] ? second.msg : "no cache directory");
    free (out.data);
    return self;
}

bool
ps_ctrindex_gzip (const ps_ctrindex_t *self)
{
    assert (self);
    return self->gzip;
}

bool
ps_ctrindex_built (const ps_ctrindex_t *self)
{
    assert (self);
    return self->built;
}

const char *
ps_ctrindex_file (const ps_ctrindex_t *self)
{
    assert (self);
    return self->file;
}

uint64_t
ps_ctrindex_lines (const ps_ctrindex_t *self)
{
    assert (self);
    return self->lines;
}

uint64_t
ps_ctrindex_good (const ps_ctrindex_t *self)
{
    assert (self);
    return self->good;
}

uint64_t
ps_ctrindex_malformed (const ps_ctrindex_t *self)
{
    assert (self);
    return self->malformed;
}

uint64_t
ps_ctrindex_first_malformed (const ps_ctrindex_t *self)
{
    assert (self);
    return self->first_malformed;
}

const char *
ps_ctrindex_first_reason (const ps_ctrindex_t *self)
{
    assert (self);
    return self->reason;
}

const ps_ctrpoint_t *
ps_ctrindex_point (const ps_ctrindex_t *self, uint64_t line)
{
    assert (self && self->count > 0);
    //  The last point whose line is at most `line`: points are in line order.
    size_t lo = 0, hi = self->count;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (self->points [mid].line <= line)
            lo = mid;
        else
            hi = mid;
    }
    return &self->points [lo];
}
