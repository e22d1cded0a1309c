//  Lines of a plain or gzip CTR data file from an access point
//  (ps_ctrsource.h).
//
//  Uncompressed data lands in one buffer of a line's maximum plus a chunk;
//  lines are cut out of it with memchr, and the part line left at its end
//  is moved to the front before the next fill. A gzip file is inflated
//  with zlib's inflate directly (not gzread) because an access point needs
//  what gzread hides: where each deflate block starts in the compressed
//  file, which inflate (Z_BLOCK) stops at, and the window before it, which
//  inflateGetDictionary gives. A point recorded in the middle of a line
//  gets its line number when the next line starts. A file of several gzip
//  members (concatenated .gz files) is read member after member; a source
//  started inside a member inflates raw deflate data, so at the member's
//  end it steps over the 8-byte gzip trailer itself and reads the next
//  member's header in gzip mode.

#include "ps_ctrsource.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#define S_CHUNK       (256u << 10)      //  uncompressed bytes per fill
#define S_INPUT       (64u << 10)       //  compressed bytes per read
#define S_TRAILER     8                 //  a gzip member's CRC-32 and length
#define S_GZIP_AUTO   (15 + 32)         //  windowBits: zlib or gzip header, detected
#define S_RAW         (-15)             //  windowBits: raw deflate data

struct _ps_ctrsource_t {
    const char *path;
    int fd;
    bool gzip;
    char *buf;                  //  S_CHUNK + PS_CTRSOURCE_LINE_MAX + 1 bytes
    size_t beg, end;            //  unread data is buf [beg, end)
    uint64_t buf_out;           //  uncompressed offset of buf [0]
    bool eof;                   //  no more data after buf [end]
    uint64_t line;              //  number of the line starting at buf [beg]
    uint64_t skip_left;         //  bytes still to drop before that line starts
    bool discarding;            //  inside a line that is too long
    //  Input side.
    uint64_t in_pos;            //  file offset of the next read
    uint8_t *input;             //  S_INPUT bytes (gzip)
    z_stream zs;
    bool zs_ready;              //  inflateInit2 was called
    bool member_end;            //  inflate reached the end of a member
    bool raw;                   //  inflating raw deflate data (started at a point)
    unsigned trailer_left;      //  trailer bytes still to step over (raw)
    uint64_t total_out;         //  uncompressed bytes produced
    //  Recording points.
    uint64_t span;              //  0: not recording
    uint64_t last_point;        //  out of the last point recorded
    ps_ctrpoint_t *points;
    size_t count, capacity;
    size_t resolved;            //  points [0, resolved) have their line
};

ps_ctrsource_t *
ps_ctrsource_new (const char *path, int fd, bool gzip, ps_error_t *err)
{
    ps_ctrsource_t *self = calloc (1, sizeof (ps_ctrsource_t));
    if (self) {
        self->path = path;
        self->fd = fd;
        self->gzip = gzip;
        self->buf = malloc (S_CHUNK + PS_CTRSOURCE_LINE_MAX + 1);
        if (gzip)
            self->input = malloc (S_INPUT);
    }
    if (!self || !self->buf || (gzip && !self->input)) {
        ps_ctrsource_destroy (&self);
        ps_error_set (err, PS_ETOOBIG, "%s: out of memory for a reader", path);
    }
    return self;
}

static void
s_free_points (ps_ctrsource_t *self)
{
    for (size_t i = 0; i < self->count; i++)
        free (self->points [i].window);
    free (self->points);
    self->points = NULL;
    self->count = self->capacity = self->resolved = 0;
}

void
ps_ctrsource_destroy (ps_ctrsource_t **self_p)
{
    assert (self_p);
    ps_ctrsource_t *self = *self_p;
    if (self) {
        if (self->zs_ready)
            inflateEnd (&self->zs);
        s_free_points (self);
        free (self->buf);
        free (self->input);
        free (self);
        *self_p = NULL;
    }
}

//  Read up to len bytes at the input offset, resuming after signals.
//  Returns the count (0 at the end) or PS_EIO naming the file.
static ssize_t
s_pread (ps_ctrsource_t *self, void *dst, size_t len, ps_error_t *err)
{
    ssize_t n;
    do
        n = pread (self->fd, dst, len, (off_t) self->in_pos);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return ps_error_set (err, PS_EIO, "%s: read at byte %llu failed: %s", self->path,
                             (unsigned long long) self->in_pos, strerror (errno));
    self->in_pos += (uint64_t) n;
    return n;
}

static int
s_add_point (ps_ctrsource_t *self, const ps_ctrpoint_t *point, ps_error_t *err)
{
    if (self->count == self->capacity) {
        size_t capacity = self->capacity ? 2 * self->capacity : 64;
        ps_ctrpoint_t *points = realloc (self->points, capacity * sizeof (ps_ctrpoint_t));
        if (!points)
            return ps_error_set (err, PS_ETOOBIG, "%s: out of memory for access points",
                                 self->path);
        self->points = points;
        self->capacity = capacity;
    }
    self->points [self->count++] = *point;
    self->last_point = point->out;
    return 0;
}

int
ps_ctrsource_start (ps_ctrsource_t *self, const ps_ctrpoint_t *point, uint64_t span,
                    ps_error_t *err)
{
    assert (self);
    assert (!point || span == 0);
    s_free_points (self);
    self->beg = self->end = 0;
    self->eof = false;
    self->discarding = false;
    self->member_end = false;
    self->trailer_left = 0;
    self->span = span;
    self->buf_out = self->total_out = point ? point->out : 0;
    self->line = point ? point->line : 0;
    self->skip_left = point ? point->skip : 0;
    self->in_pos = point ? point->in : 0;
    if (!self->gzip) {
        if (span) {
            ps_ctrpoint_t first = { 0 };
            return s_add_point (self, &first, err);
        }
        return 0;
    }
    self->raw = point && point->window_len;
    int rc = self->zs_ready ? inflateReset2 (&self->zs, self->raw ? S_RAW : S_GZIP_AUTO)
                            : inflateInit2 (&self->zs, self->raw ? S_RAW : S_GZIP_AUTO);
    if (rc != Z_OK)
        return ps_error_set (err, PS_ETOOBIG, "%s: inflateInit2 failed (zlib error %d)",
                             self->path, rc);
    self->zs_ready = true;
    self->zs.avail_in = 0;
    if (self->raw) {
        if (point->bits) {
            //  The block starts inside the byte before `in`: feed its top bits.
            uint8_t byte;
            self->in_pos = point->in - 1;
            ssize_t n = s_pread (self, &byte, 1, err);
            if (n < 0)
                return (int) n;
            if (n == 0)
                return ps_error_set (err, PS_ECORRUPT, "%s: ends before its access point at "
                                     "byte %llu: changed since it was indexed", self->path,
                                     (unsigned long long) point->in);
            rc = inflatePrime (&self->zs, (int) point->bits, byte >> (8 - point->bits));
        }
        if (rc == Z_OK)
            rc = inflateSetDictionary (&self->zs, point->window, point->window_len);
        if (rc != Z_OK)
            return ps_error_set (err, PS_ECORRUPT, "%s: cannot resume inflating at byte %llu "
                                 "(zlib error %d)", self->path, (unsigned long long) point->in,
                                 rc);
    }
    if (span) {
        ps_ctrpoint_t first = { 0 };
        return s_add_point (self, &first, err);
    }
    return 0;
}

//  Record a gzip access point where inflate stopped, at the end of a
//  deflate block.
static int
s_gzip_point (ps_ctrsource_t *self, ps_error_t *err)
{
    ps_ctrpoint_t point = {
        .out = self->total_out,
        .in = self->in_pos - self->zs.avail_in,
        .bits = (uint32_t) self->zs.data_type & 7,
        .window = malloc (PS_CTRSOURCE_WINDOW),
    };
    if (!point.window)
        return ps_error_set (err, PS_ETOOBIG, "%s: out of memory for access points",
                             self->path);
    uInt len = PS_CTRSOURCE_WINDOW;
    int rc = inflateGetDictionary (&self->zs, point.window, &len);
    point.window_len = len;
    if (rc == Z_OK && len > 0)
        rc = s_add_point (self, &point, err);
    else
        free (point.window);
    return rc == Z_OK ? 0 : rc;
}

//  Inflate into dst, up to cap bytes. Returns the count (0 at the end of
//  the last member) or an error naming the file.
static ssize_t
s_fill_gzip (ps_ctrsource_t *self, char *dst, size_t cap, ps_error_t *err)
{
    z_stream *zs = &self->zs;
    zs->next_out = (Bytef *) dst;
    zs->avail_out = (uInt) cap;
    while (zs->avail_out > 0) {
        if (zs->avail_in == 0) {
            ssize_t n = s_pread (self, self->input, S_INPUT, err);
            if (n < 0)
                return n;
            zs->next_in = self->input;
            zs->avail_in = (uInt) n;
        }
        if (self->member_end) {
            //  Step over a raw member's trailer, then read what follows in
            //  gzip mode: another member, or the end of the file.
            unsigned step = self->trailer_left < zs->avail_in ? self->trailer_left
                                                              : zs->avail_in;
            zs->next_in += step;
            zs->avail_in -= step;
            self->trailer_left -= step;
            if (self->trailer_left)
                return ps_error_set (err, PS_ECORRUPT, "%s: truncated gzip stream (it ends "
                                     "inside a member's trailer)", self->path);
            if (zs->avail_in == 0) {
                ssize_t n = s_pread (self, self->input, S_INPUT, err);
                if (n < 0)
                    return n;
                zs->next_in = self->input;
                zs->avail_in = (uInt) n;
                if (n == 0)
                    break;      //  the end of the last member
            }
            int rc = inflateReset2 (zs, S_GZIP_AUTO);
            if (rc != Z_OK)
                return ps_error_set (err, PS_ECORRUPT, "%s: inflateReset2 failed (zlib error "
                                     "%d)", self->path, rc);
            self->raw = false;
            self->member_end = false;
        }
        uInt before = zs->avail_out;
        bool input_left = zs->avail_in > 0;
        int rc = inflate (zs, self->span ? Z_BLOCK : Z_NO_FLUSH);
        self->total_out += before - zs->avail_out;
        if (rc == Z_BUF_ERROR || (rc == Z_OK && !input_left && before == zs->avail_out))
            return ps_error_set (err, PS_ECORRUPT, "%s: truncated gzip stream (it ends "
                                 "before its last member is complete)", self->path);
        if (rc != Z_OK && rc != Z_STREAM_END)
            return ps_error_set (err, PS_ECORRUPT, "%s: corrupt gzip stream: %s (zlib error "
                                 "%d)", self->path, zs->msg ? zs->msg : "no message", rc);
        if (self->span && (zs->data_type & 128) && !(zs->data_type & 64)
            && self->total_out - self->last_point >= self->span) {
            int prc = s_gzip_point (self, err);
            if (prc)
                return prc;
        }
        if (rc == Z_STREAM_END) {
            self->member_end = true;
            self->trailer_left = self->raw ? S_TRAILER : 0;
        }
    }
    return (ssize_t) (cap - zs->avail_out);
}

//  Append more data to the buffer, after making room at its end.
static int
s_fill (ps_ctrsource_t *self, ps_error_t *err)
{
    if (self->beg > 0) {
        memmove (self->buf, self->buf + self->beg, self->end - self->beg);
        self->buf_out += self->beg;
        self->end -= self->beg;
        self->beg = 0;
    }
    size_t cap = S_CHUNK + PS_CTRSOURCE_LINE_MAX - self->end;
    ssize_t n = self->gzip ? s_fill_gzip (self, self->buf + self->end, cap, err)
                           : s_pread (self, self->buf + self->end, cap, err);
    if (n < 0)
        return (int) n;
    self->end += (size_t) n;
    self->eof = n == 0;
    return 0;
}

//  A line starts at buf [beg]: give the points before it their line, and
//  record a plain file's point when one is due.
static int
s_line_starts (ps_ctrsource_t *self, ps_error_t *err)
{
    uint64_t at = self->buf_out + self->beg;
    if (self->span && !self->gzip && at - self->last_point >= self->span) {
        ps_ctrpoint_t point = { .line = self->line, .out = at, .in = at };
        int rc = s_add_point (self, &point, err);
        if (rc)
            return rc;
    }
    for (; self->resolved < self->count && self->points [self->resolved].out <= at;
         self->resolved++) {
        self->points [self->resolved].line = self->line;
        self->points [self->resolved].skip = at - self->points [self->resolved].out;
    }
    return 0;
}

int
ps_ctrsource_next (ps_ctrsource_t *self, const char **line, size_t *len, ps_error_t *err)
{
    assert (self);
    while (true) {
        if (self->skip_left) {
            size_t drop = self->end - self->beg;
            if (drop > self->skip_left)
                drop = (size_t) self->skip_left;
            self->beg += drop;
            self->skip_left -= drop;
        }
        if (!self->skip_left) {
            char *start = self->buf + self->beg;
            char *nl = memchr (start, '\n', self->end - self->beg);
            if (nl || (self->eof && self->beg < self->end)) {
                int rc = self->discarding ? 0 : s_line_starts (self, err);
                if (rc)
                    return rc;
                size_t length = nl ? (size_t) (nl - start) : self->end - self->beg;
                if (!nl)
                    start [length] = '\0';
                self->beg += length + (nl ? 1 : 0);
                self->line++;
                if (self->discarding || length > PS_CTRSOURCE_LINE_MAX) {
                    self->discarding = false;
                    return 2;
                }
                *line = start;
                *len = length;
                return 1;
            }
            if (self->eof) {
                if (self->discarding) {
                    self->discarding = false;
                    self->line++;
                    return 2;
                }
                return 0;
            }
            if (self->end - self->beg >= PS_CTRSOURCE_LINE_MAX) {
                //  Too long: drop what is held; the line ends at a later newline.
                if (!self->discarding) {
                    int rc = s_line_starts (self, err);
                    if (rc)
                        return rc;
                }
                self->discarding = true;
                self->beg = self->end;
            }
        }
        else
        if (self->eof)
            return ps_error_set (err, PS_ECORRUPT, "%s: ends before its indexed line %llu: "
                                 "changed since it was indexed", self->path,
                                 (unsigned long long) self->line + 1);
        int rc = s_fill (self, err);
        if (rc)
            return rc;
    }
}

uint64_t
ps_ctrsource_line (const ps_ctrsource_t *self)
{
    assert (self);
    return self->line;
}

void
ps_ctrsource_take_points (ps_ctrsource_t *self, ps_ctrpoint_t **points, size_t *count)
{
    assert (self);
    //  Points after the last line start no line: drop them.
    for (size_t i = self->resolved; i < self->count; i++)
        free (self->points [i].window);
    *points = self->points;
    *count = self->resolved;
    self->points = NULL;
    self->count = self->capacity = self->resolved = 0;
}
