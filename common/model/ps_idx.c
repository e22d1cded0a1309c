//  IDX files; see ps_idx.h.
//
//  The file is read through zlib's gz* interface, which decompresses a
//  gzip file and passes any other file through unchanged, so one code path
//  serves both. zlib reports a damaged gzip stream in two ways: gzread
//  fails on bad deflate data or a bad CRC, while a stream that simply stops
//  early reads as a short end of file with Z_BUF_ERROR left in gzerror.
//  Every short read is therefore followed by a look at gzerror, so that a
//  truncated .gz file is reported as such and not as truncated IDX data.
//
//  The header is not trusted to size the data buffer: it grows with the
//  data actually read, so a corrupt header that claims gigabytes costs no
//  more memory than the file really holds.

#include "ps_idx.h"

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "ps_file.h"

//  The element type code of unsigned bytes, the only one the data sets use.
#define S_TYPE_UBYTE  0x08

//  gzread takes an unsigned length and returns an int, so large reads go
//  in chunks of 1 GiB.
#define S_CHUNK  ((size_t) 1 << 30)

//  The data buffer starts at 1 MiB and doubles until it holds the count the
//  header announced.
#define S_FIRST_CAPACITY  ((size_t) 1 << 20)

typedef struct {
    gzFile file;
    const char *path;
} s_reader_t;

static uint32_t
s_get_be32 (const uint8_t *p)
{
    return (uint32_t) p [0] << 24 | (uint32_t) p [1] << 16 | (uint32_t) p [2] << 8 | p [3];
}

//  Turn the error zlib has recorded for the file, if any, into ours. A
//  failed system call or allocation is an I/O error; anything else (bad
//  deflate data, a CRC or length mismatch, a stream that ends early) means
//  the file is corrupt. zlib prefixes its message with the path it was
//  given, which our message already starts with, so that part is dropped.
static int
s_check_stream (s_reader_t *reader, ps_error_t *err)
{
    int errnum;
    const char *msg = gzerror (reader->file, &errnum);
    if (errnum == Z_OK)
        return PS_OK;
    size_t path_len = strlen (reader->path);
    if (strncmp (msg, reader->path, path_len) == 0 && strncmp (msg + path_len, ": ", 2) == 0)
        msg += path_len + 2;
    if (errnum == Z_ERRNO || errnum == Z_MEM_ERROR)
        return ps_error_set (err, PS_EIO, "%s: read failed: %s", reader->path, msg);
    return ps_error_set (err, PS_ECORRUPT, "%s: corrupt gzip stream: %s (zlib error %d)",
                         reader->path, msg, errnum);
}

//  Read up to len bytes into buf, stopping early only at the end of the
//  data, and set *got to the number read. Returns 0, or the error zlib
//  recorded on the way.
static int
s_read (s_reader_t *reader, uint8_t *buf, size_t len, size_t *got, ps_error_t *err)
{
    *got = 0;
    while (*got < len) {
        size_t want = len - *got < S_CHUNK ? len - *got : S_CHUNK;
        int n = gzread (reader->file, buf + *got, (unsigned) want);
        if (n <= 0)
            break;
        *got += (size_t) n;
    }
    return s_check_stream (reader, err);
}

//  Parse the header: magic, element type, rank and dimensions. Fills rank,
//  dims and count in idx.
static int
s_read_header (s_reader_t *reader, ps_idx_t *idx, ps_error_t *err)
{
    const char *path = reader->path;
    uint8_t magic [4];
    size_t got;
    int rc = s_read (reader, magic, sizeof magic, &got, err);
    if (rc)
        return rc;
    if (got < sizeof magic)
        return ps_error_set (err, PS_ECORRUPT,
                             "%s: %zu bytes, too short for the %zu-byte IDX magic",
                             path, got, sizeof magic);
    if (magic [0] != 0 || magic [1] != 0)
        return ps_error_set (err, PS_ECORRUPT,
                             "%s: bad magic: first bytes 0x%02x 0x%02x, expected 0x00 0x00",
                             path, magic [0], magic [1]);
    if (magic [2] != S_TYPE_UBYTE)
        return ps_error_set (err, PS_ECORRUPT,
                             "%s: element type 0x%02x, expected 0x%02x (unsigned byte)",
                             path, magic [2], S_TYPE_UBYTE);
    int rank = magic [3];
    if (rank < 1 || rank > PS_IDX_MAX_RANK)
        return ps_error_set (err, PS_ECORRUPT, "%s: rank %d, expected 1..%d",
                             path, rank, PS_IDX_MAX_RANK);

    uint8_t dims [4 * PS_IDX_MAX_RANK];
    size_t dims_len = 4 * (size_t) rank;
    rc = s_read (reader, dims, dims_len, &got, err);
    if (rc)
        return rc;
    if (got < dims_len)
        return ps_error_set (err, PS_ECORRUPT,
                             "%s: header ends after %zu of its %zu dimension bytes",
                             path, got, dims_len);
    idx->rank = rank;
    idx->count = 1;
    for (int i = 0; i < rank; i++) {
        uint32_t dim = s_get_be32 (dims + 4 * i);
        if (dim == 0)
            return ps_error_set (err, PS_ECORRUPT, "%s: dimension %d is 0", path, i);
        if (idx->count > SIZE_MAX / dim)
            return ps_error_set (err, PS_ECORRUPT,
                                 "%s: dimension %d (%u) makes the element count overflow",
                                 path, i, dim);
        idx->dims [i] = dim;
        idx->count *= dim;
    }
    return PS_OK;
}

//  Read exactly idx->count data bytes into a new idx->data, then make sure
//  nothing follows them.
static int
s_read_data (s_reader_t *reader, ps_idx_t *idx, ps_error_t *err)
{
    const char *path = reader->path;
    size_t got = 0;
    size_t capacity = 0;
    while (got < idx->count) {
        if (got == capacity) {
            //  Double, never past the count and so never overflowing.
            size_t step = capacity == 0 ? S_FIRST_CAPACITY : capacity;
            capacity = idx->count - capacity < step ? idx->count : capacity + step;
            uint8_t *grown = realloc (idx->data, capacity);
            if (!grown)
                return ps_error_set (err, PS_EIO, "%s: cannot allocate %zu bytes for the data",
                                     path, capacity);
            idx->data = grown;
        }
        size_t n;
        int rc = s_read (reader, idx->data + got, capacity - got, &n, err);
        if (rc)
            return rc;
        got += n;
        if (got < capacity)
            return ps_error_set (err, PS_ECORRUPT,
                                 "%s: truncated: expected %zu bytes of data, got %zu",
                                 path, idx->count, got);
    }
    //  Count what follows the data, reading to the end so that a gzip
    //  stream damaged further on is reported as the corruption it is.
    uint8_t scratch [4096];
    size_t extra = 0;
    for (;;) {
        size_t n;
        int rc = s_read (reader, scratch, sizeof scratch, &n, err);
        if (rc)
            return rc;
        extra += n;
        if (n < sizeof scratch)
            break;
    }
    if (extra > 0)
        return ps_error_set (err, PS_ECORRUPT,
                             "%s: trailing bytes: %zu after the %zu bytes of data",
                             path, extra, idx->count);
    return PS_OK;
}

//  Read the header, and the data too when with_data, from the file at path.
static int
s_read_file (const char *path, ps_idx_t *out, bool with_data, ps_error_t *err)
{
    assert (path);
    assert (out);
    memset (out, 0, sizeof *out);
    //  The descriptor is close-on-exec, so it does not leak into a process
    //  started while the file is being read.
    int fd = ps_file_open_regular (path, err);
    if (fd < 0)
        return fd;
    s_reader_t reader = { .file = gzdopen (fd, "rb"), .path = path };
    if (!reader.file) {
        //  gzdopen fails only when out of memory; the descriptor is still ours.
        (void) close (fd);
        return ps_error_set (err, PS_EIO, "%s: cannot open: out of memory", path);
    }

    int rc = s_read_header (&reader, out, err);
    if (rc == PS_OK && with_data)
        rc = s_read_data (&reader, out, err);
    //  After a successful read every gzread went to the end of the file,
    //  where a gzip stream cut short was already caught, so what gzclose can
    //  add then is a failing close (). After the header alone, zlib has
    //  seen only the first part of the stream and gzclose reports nothing
    //  about the rest.
    int close_rc = gzclose (reader.file);
    if (close_rc != Z_OK && rc == PS_OK)
        rc = ps_error_set (err, PS_EIO, "%s: close failed: %s", path,
                           close_rc == Z_ERRNO ? strerror (errno) : zError (close_rc));
    if (rc)
        ps_idx_free (out);
    return rc;
}

int
ps_idx_read (const char *path, ps_idx_t *out, ps_error_t *err)
{
    return s_read_file (path, out, true, err);
}

int
ps_idx_read_header (const char *path, ps_idx_t *out, ps_error_t *err)
{
    return s_read_file (path, out, false, err);
}

void
ps_idx_free (ps_idx_t *idx)
{
    assert (idx);
    free (idx->data);
    memset (idx, 0, sizeof *idx);
}
