//  CSV data; see ps_csv.h.
//
//  Lines are read with gzgets into a buffer that doubles until a line
//  fits, so a line has no length limit but the memory it takes. Cells are
//  split at commas; spaces around a cell and a trailing carriage return
//  (a file written on Windows) are dropped; quoting is not supported,
//  since every cell is a number. Empty lines are skipped.

#include "ps_csv.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include "ps_file.h"

#define S_FIRST_LINE  4096

//  Features are written to the spill file in runs of this many floats.
#define S_SPILL_FLOATS  (256 * 1024)

typedef struct {
    gzFile file;
    const char *path;
    char *line;
    size_t size;
    size_t number;              //  of the line in line, from 1
    //  The features on their way to the spill file.
    int spill;                  //  the unlinked file, or -1
    char spill_dir [256];
    float *pending;             //  S_SPILL_FLOATS of them
    size_t npending;
    size_t spilled;             //  floats written
} s_reader_t;

//  Open the unlinked file the features go to, in $TMPDIR or /var/tmp: the
//  kernel's O_TMPFILE where the file system has it, else a named file
//  removed at once.
static int
s_spill_open (s_reader_t *reader, ps_error_t *err)
{
    const char *dir = getenv ("TMPDIR");
    snprintf (reader->spill_dir, sizeof reader->spill_dir, "%s", dir && *dir ? dir : "/var/tmp");
    reader->spill = open (reader->spill_dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (reader->spill < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
        char name [300];
        snprintf (name, sizeof name, "%s/ps-csv-XXXXXX", reader->spill_dir);
        reader->spill = mkostemp (name, O_CLOEXEC);
        if (reader->spill >= 0 && unlink (name) != 0) {
            int saved = errno;
            (void) close (reader->spill);
            reader->spill = -1;
            errno = saved;
        }
    }
    if (reader->spill < 0)
        return ps_error_set (err, PS_EIO, "%s: cannot make a temporary file for its features "
                             "in %s (set TMPDIR to a directory with room): %s", reader->path,
                             reader->spill_dir, strerror (errno));
    if (!(reader->pending = malloc (S_SPILL_FLOATS * sizeof (float))))
        return ps_error_set (err, PS_EIO, "%s: out of memory", reader->path);
    return 0;
}

//  Write the pending features to the spill file.
static int
s_spill_flush (s_reader_t *reader, ps_error_t *err)
{
    if (reader->npending == 0)
        return 0;
    if (ps_file_write_all (reader->spill, reader->pending, reader->npending * sizeof (float),
                           NULL) != 0)
        return ps_error_set (err, PS_EIO, "%s: cannot write its features to a temporary file "
                             "in %s (set TMPDIR to a directory with room): %s", reader->path,
                             reader->spill_dir, strerror (errno));
    reader->spilled += reader->npending;
    reader->npending = 0;
    return 0;
}

//  Read the next line into reader->line, without its end of line. Returns
//  1 with a line, 0 at the end of the file, or an error code.
static int
s_next_line (s_reader_t *reader, ps_error_t *err)
{
    size_t len = 0;
    for (;;) {
        if (len + 1 >= reader->size) {
            char *grown = realloc (reader->line, reader->size * 2);
            if (!grown)
                return ps_error_set (err, PS_EIO, "%s: out of memory for line %zu",
                                     reader->path, reader->number + 1);
            reader->line = grown;
            reader->size *= 2;
        }
        if (!gzgets (reader->file, reader->line + len, (int) (reader->size - len))) {
            int errnum;
            const char *msg = gzerror (reader->file, &errnum);
            if (errnum != Z_OK && errnum != Z_BUF_ERROR)
                return ps_error_set (err, errnum == Z_ERRNO ? PS_EIO : PS_ECORRUPT,
                                     "%s: read failed after line %zu: %s", reader->path,
                                     reader->number, errnum == Z_ERRNO ? strerror (errno) : msg);
            if (errnum == Z_BUF_ERROR)
                return ps_error_set (err, PS_ECORRUPT, "%s: the gzip stream ends early, after "
                                     "line %zu", reader->path, reader->number);
            if (len == 0)
                return 0;
            break;
        }
        len += strlen (reader->line + len);
        if (len > 0 && reader->line [len - 1] == '\n')
            break;
    }
    reader->number++;
    while (len > 0 && (reader->line [len - 1] == '\n' || reader->line [len - 1] == '\r'))
        reader->line [--len] = 0;
    return 1;
}

//  The next cell of the line at *at (NUL-terminated in place, spaces
//  trimmed), advancing *at past its comma; NULL after the last cell.
static char *
s_cell (char **at)
{
    if (!*at)
        return NULL;
    char *cell = *at;
    char *comma = strchr (cell, ',');
    if (comma) {
        *comma = 0;
        *at = comma + 1;
    }
    else
        *at = NULL;
    while (*cell == ' ' || *cell == '\t')
        cell++;
    size_t len = strlen (cell);
    while (len > 0 && (cell [len - 1] == ' ' || cell [len - 1] == '\t'))
        cell [--len] = 0;
    return cell;
}

//  Find the label column in the header line: its index, and the number of
//  columns.
static int
s_header (s_reader_t *reader, const char *label_column, int *label, int *columns,
          ps_error_t *err)
{
    int rc;
    do
        rc = s_next_line (reader, err);
    while (rc == 1 && reader->line [0] == 0);
    if (rc < 0)
        return rc;
    if (rc == 0)
        return ps_error_set (err, PS_ECORRUPT, "%s: empty, expected a header row naming the "
                             "columns", reader->path);
    //  The names are listed in a message when the label is missing.
    char names [256] = "";
    *label = -1;
    *columns = 0;
    char *at = reader->line;
    for (char *cell; (cell = s_cell (&at)); (*columns)++) {
        if (strcmp (cell, label_column) == 0 && *label < 0)
            *label = *columns;
        size_t used = strlen (names);
        if (used + strlen (cell) + 8 < sizeof names)
            snprintf (names + used, sizeof names - used, "%s%s", used ? ", " : "", cell);
        else
        if (strcmp (names + (used > 5 ? used - 5 : 0), ", ...") != 0)
            snprintf (names + used, sizeof names - used, ", ...");
    }
    if (*label < 0)
        return ps_error_set (err, PS_ECORRUPT, "%s: line %zu: no column \"%s\" for the labels "
                             "in the header (columns: %s); name it with --label-column",
                             reader->path, reader->number, label_column, names);
    if (*columns < 2)
        return ps_error_set (err, PS_ECORRUPT, "%s: the header names only the label column; "
                             "expected features too", reader->path);
    return 0;
}

//  Append one example: the line's cells parsed into the growing arrays.
static int
s_row (s_reader_t *reader, int label, int columns, ps_csv_t *out, size_t *capacity,
       ps_error_t *err)
{
    if (out->rows == *capacity) {
        size_t grown = *capacity ? *capacity * 2 : 1024;
        //  One label array grows: bytes for classes, floats for targets.
        bool grew;
        if (out->targets) {
            float *targets = realloc (out->targets, grown * sizeof (float));
            if ((grew = targets != NULL))
                out->targets = targets;
        }
        else {
            uint8_t *labels = realloc (out->labels, grown);
            if ((grew = labels != NULL))
                out->labels = labels;
        }
        if (!grew)
            return ps_error_set (err, PS_EIO, "%s: out of memory at line %zu", reader->path,
                                 reader->number);
        *capacity = grown;
    }
    //  A row always fits in the pending run when it starts empty; a row
    //  wider than the run is written straight from a buffer of its own.
    if (reader->npending + (size_t) out->features > S_SPILL_FLOATS) {
        int rc = s_spill_flush (reader, err);
        if (rc)
            return rc;
    }
    float *wide = NULL;
    if ((size_t) out->features > S_SPILL_FLOATS
    &&  !(wide = malloc ((size_t) out->features * sizeof (float))))
        return ps_error_set (err, PS_EIO, "%s: out of memory at line %zu", reader->path,
                             reader->number);
    float *values = wide ? wide : reader->pending + reader->npending;
    char *at = reader->line;
    int column = 0;
    for (char *cell; (cell = s_cell (&at)); column++) {
        if (column >= columns)
            continue;
        char *end;
        errno = 0;
        double value = strtod (cell, &end);
        if (end == cell || *end || !isfinite (value) || (errno == ERANGE && fabs (value) > 1)) {
            free (wide);
            return ps_error_set (err, PS_ECORRUPT, "%s: line %zu, column %d: \"%.40s\" is not "
                                 "a finite number", reader->path, reader->number, column + 1,
                                 cell);
        }
        if (column == label && out->targets)
            out->targets [out->rows] = (float) value;
        else
        if (column == label) {
            if (value != floor (value) || value < 0 || value > 255) {
                free (wide);
                return ps_error_set (err, PS_ECORRUPT, "%s: line %zu, column %d: label %.40s, "
                                     "expected a class 0 .. 255", reader->path,
                                     reader->number, column + 1, cell);
            }
            out->labels [out->rows] = (uint8_t) value;
        }
        else
            *values++ = (float) value;
    }
    int rc = 0;
    if (column != columns)
        rc = ps_error_set (err, PS_ECORRUPT, "%s: line %zu: %d cells, expected %d (the "
                           "header's columns)", reader->path, reader->number, column, columns);
    else
    if (wide) {
        if (ps_file_write_all (reader->spill, wide, (size_t) out->features * sizeof (float),
                               NULL) != 0)
            rc = ps_error_set (err, PS_EIO, "%s: cannot write its features to a temporary "
                               "file in %s: %s", reader->path, reader->spill_dir,
                               strerror (errno));
        reader->spilled += (size_t) out->features;
    }
    else
        reader->npending += (size_t) out->features;
    free (wide);
    if (rc == 0)
        out->rows++;
    return rc;
}

//  Map the spill file's features read-only into out.
static int
s_spill_map (s_reader_t *reader, ps_csv_t *out, ps_error_t *err)
{
    int rc = s_spill_flush (reader, err);
    if (rc)
        return rc;
    size_t len = reader->spilled * sizeof (float);
    void *map = mmap (NULL, len, PROT_READ, MAP_SHARED, reader->spill, 0);
    if (map == MAP_FAILED)
        return ps_error_set (err, PS_EIO, "%s: cannot map its features (%zu bytes): %s",
                             reader->path, len, strerror (errno));
    out->values = map;
    out->mapped = len;
    return 0;
}

int
ps_csv_read (const char *path, const char *label_column, bool targets, size_t limit,
             ps_csv_t *out, ps_error_t *err)
{
    assert (path && label_column && out);
    memset (out, 0, sizeof *out);
    //  s_row grows whichever label array is there: start the one wanted.
    if (targets && !(out->targets = malloc (sizeof (float))))
        return ps_error_set (err, PS_EIO, "%s: out of memory", path);
    int fd = ps_file_open_regular (path, err);
    if (fd < 0)
        return fd;
    s_reader_t reader = { .file = gzdopen (fd, "rb"), .path = path,
                          .line = malloc (S_FIRST_LINE), .size = S_FIRST_LINE, .spill = -1 };
    int rc = 0;
    if (!reader.file || !reader.line) {
        rc = ps_error_set (err, PS_EIO, "%s: cannot open: out of memory", path);
        if (!reader.file)
            (void) close (fd);
    }
    int label = 0, columns = 0;
    if (rc == 0)
        rc = s_header (&reader, label_column, &label, &columns, err);
    if (rc == 0)
        rc = s_spill_open (&reader, err);
    out->features = columns - 1;
    size_t capacity = 0;
    while (rc == 0 && (limit == 0 || out->rows < limit)) {
        int got = s_next_line (&reader, err);
        if (got <= 0) {
            rc = got;
            break;
        }
        if (reader.line [0])
            rc = s_row (&reader, label, columns, out, &capacity, err);
    }
    if (rc == 0 && out->rows == 0)
        rc = ps_error_set (err, PS_ECORRUPT, "%s: a header but no examples", path);
    if (rc == 0)
        rc = s_spill_map (&reader, out, err);
    if (reader.file && gzclose (reader.file) != Z_OK && rc == 0)
        rc = ps_error_set (err, PS_EIO, "%s: close failed", path);
    //  The mapping keeps the unlinked file; the descriptor is not needed.
    if (reader.spill >= 0 && close (reader.spill) != 0 && rc == 0)
        rc = ps_error_set (err, PS_EIO, "%s: closing its temporary file: %s", path,
                           strerror (errno));
    free (reader.pending);
    free (reader.line);
    if (rc)
        ps_csv_free (out);
    return rc;
}

void
ps_csv_free (ps_csv_t *csv)
{
    assert (csv);
    if (csv->mapped && munmap ((void *) csv->values, csv->mapped) != 0)
        abort ();               //  only a bad address fails, a bug
    free (csv->labels);
    free (csv->targets);
    memset (csv, 0, sizeof *csv);
}
