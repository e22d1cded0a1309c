//  Reading line ranges of CTR data files (ps_ctrdata.h).

#include "ps_ctrdata.h"

#include <assert.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ps_ctrparse.h"
#include "ps_ctrsource.h"
#include "ps_file.h"

struct _ps_ctrfile_t {
    char *path;
    int fd;
    ps_ctrformat_t format;
    ps_ctrindex_t *index;
    ps_ctrsource_t *source;
    bool started;               //  the source is positioned at its next line
};

ps_ctrfile_t *
ps_ctrfile_open (const char *path, ps_ctrformat_t format, const ps_ctrindex_opts_t *opts,
                 ps_error_t *err)
{
    int fd = ps_file_open_regular (path, err);
    if (fd < 0)
        return NULL;
    ps_ctrfile_t *self = calloc (1, sizeof (ps_ctrfile_t));
    if (!self || !(self->path = strdup (path))) {
        free (self);
        close (fd);
        ps_error_set (err, PS_ETOOBIG, "%s: out of memory", path);
        return NULL;
    }
    self->fd = fd;
    self->format = format;
    self->index = ps_ctrindex_open (self->path, fd, format, opts, err);
    if (self->index)
        self->source = ps_ctrsource_new (self->path, fd, ps_ctrindex_gzip (self->index), err);
    if (!self->source) {
        ps_ctrfile_destroy (&self);
        return NULL;
    }
    uint64_t lines = ps_ctrindex_lines (self->index);
    uint64_t malformed = ps_ctrindex_malformed (self->index);
    if (malformed > lines / 2) {
        ps_error_set (err, PS_ECORRUPT, "%s: %llu of its %llu lines are malformed %s data, "
                      "more than half; the first, line %llu: %s", path,
                      (unsigned long long) malformed, (unsigned long long) lines,
                      ps_ctrformat_name (format),
                      (unsigned long long) ps_ctrindex_first_malformed (self->index),
                      ps_ctrindex_first_reason (self->index));
        ps_ctrfile_destroy (&self);
        return NULL;
    }
    return self;
}

void
ps_ctrfile_destroy (ps_ctrfile_t **self_p)
{
    assert (self_p);
    ps_ctrfile_t *self = *self_p;
    if (self) {
        ps_ctrsource_destroy (&self->source);
        ps_ctrindex_destroy (&self->index);
        close (self->fd);
        free (self->path);
        free (self);
        *self_p = NULL;
    }
}

const ps_ctrindex_t *
ps_ctrfile_index (const ps_ctrfile_t *self)
{
    assert (self);
    return self->index;
}

uint64_t
ps_ctrfile_lines (const ps_ctrfile_t *self)
{
    assert (self);
    return ps_ctrindex_lines (self->index);
}

//  The next line from the source, which the index says exists.
static int
s_next (ps_ctrfile_t *self, const char **line, size_t *len, ps_error_t *err)
{
    int got = ps_ctrsource_next (self->source, line, len, err);
    if (got == 0)
        return ps_error_set (err, PS_ECORRUPT, "%s: ends at line %llu, its index says %llu "
                             "lines: changed since it was indexed", self->path,
                             (unsigned long long) ps_ctrsource_line (self->source),
                             (unsigned long long) ps_ctrfile_lines (self));
    return got;
}

//  Position the source at the start of line `line`: from where it is when
//  that is on the way, else from the nearest access point.
static int
s_seek (ps_ctrfile_t *self, uint64_t line, ps_error_t *err)
{
    const ps_ctrpoint_t *point = ps_ctrindex_point (self->index, line);
    uint64_t at = ps_ctrsource_line (self->source);
    if (!self->started || at > line || point->line > at) {
        int rc = ps_ctrsource_start (self->source, point, 0, err);
        if (rc)
            return rc;
        self->started = true;
    }
    while (ps_ctrsource_line (self->source) < line) {
        const char *text;
        size_t len;
        int got = s_next (self, &text, &len, err);
        if (got < 0)
            return got;
    }
    return 0;
}

int
ps_ctrfile_read (ps_ctrfile_t *self, uint64_t first_line, uint64_t count,
                 ps_ctrbatch_t *batch, ps_error_t *err)
{
    assert (self);
    assert (batch);
    ps_ctrbatch_clear (batch, first_line);
    uint64_t lines = ps_ctrfile_lines (self);
    if (first_line > lines || count > lines - first_line)
        return ps_error_set (err, PS_EINVAL, "%s: lines [%llu, %llu) are not inside its %llu "
                             "lines", self->path, (unsigned long long) first_line,
                             (unsigned long long) (first_line + count),
                             (unsigned long long) lines);
    if (count > batch->max_n || batch->format != self->format)
        return ps_error_set (err, PS_EINVAL, "%s: a read of %llu lines of %s data into a "
                             "batch for %zu examples of %s data", self->path,
                             (unsigned long long) count, ps_ctrformat_name (self->format),
                             batch->max_n, ps_ctrformat_name (batch->format));
    int rc = count ? s_seek (self, first_line, err) : 0;
    for (uint64_t i = 0; rc == 0 && i < count; i++) {
        const char *line;
        size_t len;
        int got = s_next (self, &line, &len, err);
        if (got < 0)
            rc = got;
        else
        if (got == 2)
            batch->malformed++;
        else {
            ps_error_t why = { 0 };
            int bad = ps_ctrparse_line (batch, line, len, &why);
            if (bad == PS_ECORRUPT)
                batch->malformed++;
            else
            if (bad)
                rc = ps_error_set (err, bad, "%s line %llu: %s", self->path,
                                   (unsigned long long) (first_line + i + 1), why.msg);
        }
    }
    if (rc) {
        self->started = false;
        ps_ctrbatch_clear (batch, first_line);
        return rc;
    }
    batch->lines = count;
    return 0;
}
