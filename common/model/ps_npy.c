//  NumPy .npy files; see ps_npy.h.
//
//  The layout (numpy.lib.format): the magic \x93NUMPY, a major and a minor
//  version byte, the header's length (2 bytes little-endian in 1.0, 4 in
//  2.0 and 3.0), then the header, a Python dict literal such as
//      {'descr': '<f4', 'fortran_order': False, 'shape': (60000, 28, 28), }
//  padded with spaces and a newline, then the data. The three keys are
//  found by name; their order in the header is not relied on.

#include "ps_npy.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ps_file.h"

#define S_MAGIC      "\x93NUMPY"
#define S_MAGIC_LEN  6

//  A header longer than this is no array's header: numpy writes tens of
//  bytes, and the limit keeps a corrupt length from reading far.
#define S_HEADER_MAX ((size_t) 1 << 20)

static const struct {
    const char *descr;
    ps_npy_dtype_t dtype;
    int itemsize;
} s_dtypes [] = {
    { "|u1", PS_NPY_U8, 1 },  { "|i1", PS_NPY_I8, 1 },  { "<u2", PS_NPY_U16, 2 },
    { "<i2", PS_NPY_I16, 2 }, { "<u4", PS_NPY_U32, 4 }, { "<i4", PS_NPY_I32, 4 },
    { "<u8", PS_NPY_U64, 8 }, { "<i8", PS_NPY_I64, 8 }, { "<f4", PS_NPY_F32, 4 },
    { "<f8", PS_NPY_F64, 8 },
};

//  Read exactly len bytes at offset, or fail naming what was short.
static int
s_pread (int fd, const char *path, void *buf, size_t len, off_t offset, const char *what,
         ps_error_t *err)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = pread (fd, (char *) buf + got, len - got, offset + (off_t) got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return ps_error_set (err, PS_EIO, "%s: read failed: %s", path, strerror (errno));
        if (n == 0)
            return ps_error_set (err, PS_ECORRUPT, "%s: truncated in the .npy %s: %zu of %zu "
                                 "bytes", path, what, got, len);
        got += (size_t) n;
    }
    return 0;
}

int
ps_npy_sniff (const char *path, bool *is_npy, ps_error_t *err)
{
    int fd = ps_file_open_regular (path, err);
    if (fd < 0)
        return fd;
    char magic [S_MAGIC_LEN];
    ssize_t n;
    do
        n = pread (fd, magic, sizeof magic, 0);
    while (n < 0 && errno == EINTR);
    int rc = n < 0 ? ps_error_set (err, PS_EIO, "%s: read failed: %s", path, strerror (errno))
                   : 0;
    *is_npy = n == (ssize_t) sizeof magic && memcmp (magic, S_MAGIC, S_MAGIC_LEN) == 0;
    (void) close (fd);
    return rc;
}

//  The text after key's colon in the header, spaces skipped, or NULL.
static const char *
s_value (const char *header, const char *key)
{
    const char *at = strstr (header, key);
    if (!at)
        return NULL;
    at += strlen (key);
    while (*at == ' ')
        at++;
    if (*at != ':')
        return NULL;
    at++;
    while (*at == ' ')
        at++;
    return at;
}

//  Parse the header's dict into out's dtype, rank and dims.
static int
s_parse_header (const char *path, const char *header, ps_npy_t *out, ps_error_t *err)
{
    const char *descr = s_value (header, "'descr'");
    if (!descr || (*descr != '\'' && *descr != '"'))
        return ps_error_set (err, PS_ECORRUPT, "%s: .npy header without a 'descr': %.80s",
                             path, header);
    const char *end = strchr (descr + 1, *descr);
    size_t len = end ? (size_t) (end - descr - 1) : 0;
    if (!end || len == 0 || len >= sizeof out->descr)
        return ps_error_set (err, PS_ECORRUPT, "%s: .npy header with a bad 'descr': %.80s",
                             path, header);
    memcpy (out->descr, descr + 1, len);
    out->descr [len] = 0;
    //  numpy writes one-byte types with '|', but '<' and '>' mean the same
    //  for them.
    if (len == 3 && (out->descr [1] == 'u' || out->descr [1] == 'i') && out->descr [2] == '1')
        out->descr [0] = '|';
    size_t k = 0;
    while (k < sizeof s_dtypes / sizeof s_dtypes [0] && strcmp (s_dtypes [k].descr, out->descr))
        k++;
    if (k == sizeof s_dtypes / sizeof s_dtypes [0])
        return ps_error_set (err, PS_ECORRUPT, "%s: element type '%s' is not supported: "
                             "expected little-endian integers or floats (uint8, int32, "
                             "int64, float32, ...)", path, out->descr);
    out->dtype = s_dtypes [k].dtype;
    out->itemsize = s_dtypes [k].itemsize;

    const char *order = s_value (header, "'fortran_order'");
    if (!order || (strncmp (order, "False", 5) && strncmp (order, "True", 4)))
        return ps_error_set (err, PS_ECORRUPT, "%s: .npy header without 'fortran_order': "
                             "%.80s", path, header);
    if (strncmp (order, "True", 4) == 0)
        return ps_error_set (err, PS_ECORRUPT, "%s: the array is in Fortran order; expected C "
                             "order (numpy.ascontiguousarray before numpy.save)", path);

    const char *shape = s_value (header, "'shape'");
    if (!shape || *shape != '(')
        return ps_error_set (err, PS_ECORRUPT, "%s: .npy header without a 'shape': %.80s",
                             path, header);
    shape++;
    out->rank = 0;
    out->count = 1;
    for (;;) {
        while (*shape == ' ' || *shape == ',')
            shape++;
        if (*shape == ')')
            break;
        if (*shape < '0' || *shape > '9' || out->rank == PS_NPY_MAX_RANK)
            return ps_error_set (err, PS_ECORRUPT, "%s: .npy header with a bad 'shape' (at "
                                 "most %d dimensions): %.80s", path, PS_NPY_MAX_RANK, header);
        char *next;
        errno = 0;
        uint64_t dim = strtoull (shape, &next, 10);
        if (errno || (dim > 0 && out->count > SIZE_MAX / 8 / dim))
            return ps_error_set (err, PS_ECORRUPT, "%s: the .npy shape's elements overflow",
                                 path);
        out->dims [out->rank++] = dim;
        out->count *= (size_t) dim;
        shape = next;
    }
    if (out->rank == 0)
        return ps_error_set (err, PS_ECORRUPT, "%s: the .npy file holds a scalar, expected an "
                             "array", path);
    return 0;
}

//  Read and check the header of the open file; *offset is where the data
//  starts.
static int
s_header (int fd, const char *path, ps_npy_t *out, size_t *offset, ps_error_t *err)
{
    uint8_t prefix [12];
    int rc = s_pread (fd, path, prefix, 10, 0, "header", err);
    if (rc)
        return rc;
    if (memcmp (prefix, S_MAGIC, S_MAGIC_LEN) != 0)
        return ps_error_set (err, PS_ECORRUPT, "%s: not a .npy file (no \\x93NUMPY magic)",
                             path);
    size_t header_len, start;
    if (prefix [6] == 1) {
        header_len = (size_t) prefix [8] | (size_t) prefix [9] << 8;
        start = 10;
    }
    else
    if (prefix [6] == 2 || prefix [6] == 3) {
        if ((rc = s_pread (fd, path, prefix + 10, 2, 10, "header", err)))
            return rc;
        header_len = (size_t) prefix [8] | (size_t) prefix [9] << 8
                   | (size_t) prefix [10] << 16 | (size_t) prefix [11] << 24;
        start = 12;
    }
    else
        return ps_error_set (err, PS_ECORRUPT, "%s: .npy format %d.%d, expected 1.0, 2.0 or "
                             "3.0", path, prefix [6], prefix [7]);
    if (header_len > S_HEADER_MAX)
        return ps_error_set (err, PS_ECORRUPT, "%s: a .npy header of %zu bytes, expected at "
                             "most %zu", path, header_len, S_HEADER_MAX);
    char *header = malloc (header_len + 1);
    if (!header)
        return ps_error_set (err, PS_EIO, "%s: out of memory for the header", path);
    rc = s_pread (fd, path, header, header_len, (off_t) start, "header", err);
    if (rc == 0) {
        header [header_len] = 0;
        rc = s_parse_header (path, header, out, err);
    }
    free (header);
    if (rc)
        return rc;
    *offset = start + header_len;

    struct stat st;
    if (fstat (fd, &st))
        return ps_error_set (err, PS_EIO, "%s: fstat failed: %s", path, strerror (errno));
    size_t want = out->count * (size_t) out->itemsize;
    size_t have = (size_t) st.st_size > *offset ? (size_t) st.st_size - *offset : 0;
    if (have < want)
        return ps_error_set (err, PS_ECORRUPT, "%s: truncated: the shape needs %zu bytes of "
                             "data, the file has %zu", path, want, have);
    return 0;
}

//  Read the header, and map the file too when map.
static int
s_open (const char *path, ps_npy_t *out, bool map, ps_error_t *err)
{
    assert (path && out);
    memset (out, 0, sizeof *out);
    int fd = ps_file_open_regular (path, err);
    if (fd < 0)
        return fd;
    size_t offset = 0;
    int rc = s_header (fd, path, out, &offset, err);
    if (rc == 0 && map) {
        out->map_len = offset + out->count * (size_t) out->itemsize;
        void *at = mmap (NULL, out->map_len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (at == MAP_FAILED)
            rc = ps_error_set (err, PS_EIO, "%s: mmap failed: %s", path, strerror (errno));
        else {
            out->map = at;
            out->data = (const char *) at + offset;
        }
    }
    (void) close (fd);
    if (rc)
        ps_npy_close (out);
    return rc;
}

int
ps_npy_open (const char *path, ps_npy_t *out, ps_error_t *err)
{
    return s_open (path, out, true, err);
}

int
ps_npy_read_header (const char *path, ps_npy_t *out, ps_error_t *err)
{
    return s_open (path, out, false, err);
}

void
ps_npy_close (ps_npy_t *npy)
{
    assert (npy);
    if (npy->map)
        (void) munmap (npy->map, npy->map_len);
    memset (npy, 0, sizeof *npy);
}

int64_t
ps_npy_int (const ps_npy_t *npy, size_t i)
{
    assert (npy->data && i < npy->count);
    const char *at = (const char *) npy->data + i * (size_t) npy->itemsize;
    //  The data's alignment is the header's business (numpy pads it to 64
    //  bytes), so each element is copied out rather than dereferenced.
    switch (npy->dtype) {
        case PS_NPY_U8:  { uint8_t v;  memcpy (&v, at, 1); return v; }
        case PS_NPY_I8:  { int8_t v;   memcpy (&v, at, 1); return v; }
        case PS_NPY_U16: { uint16_t v; memcpy (&v, at, 2); return v; }
        case PS_NPY_I16: { int16_t v;  memcpy (&v, at, 2); return v; }
        case PS_NPY_U32: { uint32_t v; memcpy (&v, at, 4); return v; }
        case PS_NPY_I32: { int32_t v;  memcpy (&v, at, 4); return v; }
        case PS_NPY_U64: {
            uint64_t v;
            memcpy (&v, at, 8);
            return v > INT64_MAX ? -1 : (int64_t) v;
        }
        case PS_NPY_I64: { int64_t v;  memcpy (&v, at, 8); return v; }
        default:         return -1;
    }
}
