//  Snapshot files: one partition's state on disk; see ps_snapshot.h, and
//  schemas/snapshot.md for the byte layout and the crash-safety protocol.
//
//  Writing streams the header, then the caller's value and slot arrays
//  straight from its memory with write (), feeding each chunk to the CRC as
//  it goes, so a snapshot of a large partition needs no second copy of it.
//  Reading is one pass too: the header and ledger go to a small buffer and
//  the arrays straight into their final aligned memory, with the CRC
//  computed over exactly the bytes kept. Magic, version and checksum are
//  verified before any field is trusted; then every field is checked
//  against the others.

#include "ps_floats.h"
#include "ps_bytes.h"
#include "ps_file.h"
#include "ps_snapshot.h"

#include <assert.h>
#include <limits.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

//  The value and slot arrays go to disk as they lie in memory, and the
//  format says little-endian float32.
_Static_assert (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
                "snapshot files store float arrays in host order, which must be little-endian");

//  The first byte has the high bit set and the CR LF pair follows, so a
//  transfer that strips the eighth bit or rewrites line ends is detected.
static const uint8_t s_magic [8] = { 0x89, 'P', 'S', 'N', 'A', 'P', '\r', '\n' };

//  Offsets of the fixed header fields (schemas/snapshot.md).
#define S_OFF_FORMAT       8
#define S_OFF_PART        12
#define S_OFF_RANK        16
#define S_OFF_KIND        20
#define S_OFF_NESTEROV    24
#define S_OFF_SLOTS       28
#define S_OFF_NAME        32
#define S_OFF_DIMS       160
#define S_OFF_ROW_BEGIN  224
#define S_OFF_ROW_END    232
#define S_OFF_DOUBLES    240
#define S_OFF_OPT_T      312
#define S_OFF_VERSION    320
#define S_OFF_DUPLICATES 328
#define S_OFF_ELEMENTS   336
#define S_OFF_LEDGER_LEN 344
#define S_HEADER_SIZE    352
#define S_TRAILER_SIZE     4

//  The optimizer's double fields follow one another from S_OFF_DOUBLES, 8
//  bytes each, in ps_opt_double_name's order.
_Static_assert (S_OFF_DOUBLES + 8 * PS_OPT_NDOUBLES == S_OFF_OPT_T,
                "the optimizer doubles must end where opt_t starts");

//  zlib's crc32 () takes a 32-bit length, and Linux moves at most about
//  2 GiB per write (), so big arrays go in chunks of 1 GiB.
#define S_CHUNK  ((size_t) 1 << 30)

static uint32_t
s_crc (uint32_t crc, const uint8_t *data, size_t len)
{
    while (len > 0) {
        size_t chunk = len < S_CHUNK ? len : S_CHUNK;
        crc = (uint32_t) crc32 (crc, data, (uInt) chunk);
        data += chunk;
        len -= chunk;
    }
    return crc;
}

//  Check the fields the layout depends on (the name, the shape, the row
//  range and the optimizer kind) and the optimizer's settings, with the
//  checks set_optimizer applies: a learning rate or clipping bound that is
//  NaN, infinite or negative would poison every value at the first update
//  after a restore. The writer runs this before it creates a file and the
//  reader after it parses one. Sets *elements to the number of floats in
//  each array.
static int
s_check (const ps_snapshot_t *snap, int64_t *elements, ps_error_t *err)
{
    int rc = ps_name_check (snap->var, strnlen (snap->var, PS_NAME_MAX), err);
    if (rc)
        return rc;
    ps_shape_t shape, rows;
    rc = ps_shape_set (&shape, snap->shape.dims, snap->shape.rank, err);
    if (rc)
        return rc;
    rc = ps_shape_rows (&shape, snap->row_begin, snap->row_end, &rows, err);
    if (rc)
        return rc;
    rc = ps_opt_config_validate (&snap->opt, err);
    if (rc)
        return rc;
    *elements = ps_shape_count (&rows);
    return PS_OK;
}

static void
s_encode_header (const ps_snapshot_t *snap, int64_t elements, int nslots,
                 size_t ledger_len, uint8_t *header)
{
    memset (header, 0, S_HEADER_SIZE);
    memcpy (header, s_magic, sizeof s_magic);
    ps_put_u32 (header + S_OFF_FORMAT, PS_SNAPSHOT_VERSION);
    ps_put_u32 (header + S_OFF_PART, snap->part);
    ps_put_u32 (header + S_OFF_RANK, (uint32_t) snap->shape.rank);
    ps_put_u32 (header + S_OFF_KIND, (uint32_t) snap->opt.kind);
    ps_put_u32 (header + S_OFF_NESTEROV, snap->opt.nesterov ? 1 : 0);
    ps_put_u32 (header + S_OFF_SLOTS, (uint32_t) nslots);
    //  s_check has bounded the name below PS_NAME_MAX; the rest stays zero.
    memcpy (header + S_OFF_NAME, snap->var, strlen (snap->var));
    for (int i = 0; i < snap->shape.rank; i++)
        ps_put_u64 (header + S_OFF_DIMS + 8 * i, (uint64_t) snap->shape.dims [i]);
    ps_put_u64 (header + S_OFF_ROW_BEGIN, (uint64_t) snap->row_begin);
    ps_put_u64 (header + S_OFF_ROW_END, (uint64_t) snap->row_end);
    for (int i = 0; i < PS_OPT_NDOUBLES; i++) {
        double value = ps_opt_double_get (&snap->opt, i);
        uint64_t bits;
        memcpy (&bits, &value, sizeof bits);
        ps_put_u64 (header + S_OFF_DOUBLES + 8 * (size_t) i, bits);
    }
    ps_put_u64 (header + S_OFF_OPT_T, snap->opt_t);
    ps_put_u64 (header + S_OFF_VERSION, snap->version);
    ps_put_u64 (header + S_OFF_DUPLICATES, snap->duplicates);
    ps_put_u64 (header + S_OFF_ELEMENTS, (uint64_t) elements);
    ps_put_u64 (header + S_OFF_LEDGER_LEN, ledger_len);
}

//  What ps_file_write_atomic's writer needs: the snapshot and its encoded
//  header.
typedef struct {
    const ps_snapshot_t *snap;
    const uint8_t *header;
    size_t header_size;
    size_t array_bytes;
    int nslots;
} s_body_t;

//  Stream the header, values, slots and CRC trailer to fd.
static int
s_write_body (int fd, void *arg)
{
    const s_body_t *body = arg;
    uint32_t crc = (uint32_t) crc32 (0, Z_NULL, 0);
    if (ps_file_write_all (fd, body->header, body->header_size, &crc)
    ||  ps_file_write_all (fd, body->snap->values, body->array_bytes, &crc))
        return -1;
    for (int i = 0; i < body->nslots; i++)
        if (ps_file_write_all (fd, body->snap->slots [i], body->array_bytes, &crc))
            return -1;
    uint8_t trailer [S_TRAILER_SIZE];
    ps_put_u32 (trailer, crc);
    return ps_file_write_all (fd, trailer, sizeof trailer, NULL);
}

int
ps_snapshot_write (const char *path, const ps_snapshot_t *snap, ps_error_t *err)
{
    assert (path);
    assert (snap);
    assert (snap->ledger);
    int64_t elements;
    ps_error_t check_err;
    if (s_check (snap, &elements, &check_err))
        return ps_error_set (err, PS_EINVAL, "file %s: %s", path, check_err.msg);
    int nslots = ps_opt_slot_count (snap->opt.kind);
    assert (snap->values);
    for (int i = 0; i < nslots; i++)
        assert (snap->slots [i]);

    size_t ledger_len = ps_ledger_encoded_size (snap->ledger);
    size_t header_size = S_HEADER_SIZE + ledger_len;
    size_t tmp_size = strlen (path) + 32;
    uint8_t *header = malloc (header_size);
    char *tmp = malloc (tmp_size);
    if (!header || !tmp) {
        free (header);
        free (tmp);
        return ps_error_set (err, PS_EIO, "file %s: cannot allocate %zu bytes for the header",
                             path, header_size);
    }
    s_encode_header (snap, elements, nslots, ledger_len, header);
    ps_ledger_encode (snap->ledger, header + S_HEADER_SIZE);
    snprintf (tmp, tmp_size, "%s.tmp.%ld", path, (long) getpid ());
    s_body_t body = {
        .snap = snap, .header = header, .header_size = header_size,
        .array_bytes = (size_t) elements * sizeof (float), .nslots = nslots,
    };
    int rc = ps_file_write_atomic (path, tmp, s_write_body, &body, err);
    free (header);
    free (tmp);
    return rc;
}

//  Reading state: the open file, its size, how far we are, and the CRC of
//  every byte read so far.
typedef struct {
    int fd;
    const char *path;
    size_t size;
    size_t offset;
    uint32_t crc;
} s_reader_t;

//  Read exactly len bytes into buf, resuming after short reads and signals.
//  A file that ends early is corrupt (it shrank under us, since its size
//  was checked); a failing read is an I/O error.
static int
s_read (s_reader_t *reader, void *buf, size_t len, ps_error_t *err)
{
    uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = read (reader->fd, p, len < S_CHUNK ? len : S_CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return ps_error_set (err, PS_EIO, "file %s: read failed: %s",
                                 reader->path, strerror (errno));
        if (n == 0)
            return ps_error_set (err, PS_ECORRUPT, "file %s: ended after %zu of %zu bytes",
                                 reader->path, reader->offset, reader->size);
        reader->crc = s_crc (reader->crc, p, (size_t) n);
        reader->offset += (size_t) n;
        p += n;
        len -= (size_t) n;
    }
    return PS_OK;
}

//  Read the 4-byte trailer and compare it with the CRC of all that came
//  before it.
static int
s_read_trailer (s_reader_t *reader, ps_error_t *err)
{
    uint32_t computed = reader->crc;
    uint8_t trailer [S_TRAILER_SIZE];
    int rc = s_read (reader, trailer, sizeof trailer, err);
    if (rc)
        return rc;
    uint32_t stored = ps_get_u32 (trailer);
    if (stored != computed)
        return ps_error_set (err, PS_ECORRUPT,
                             "file %s: checksum mismatch (stored 0x%08x, computed 0x%08x)",
                             reader->path, stored, computed);
    return PS_OK;
}

//  Read the file: header and ledger into a new buffer *head_p, the value
//  and slot arrays straight into their final, aligned memory in snap, and
//  verify the checksum on the way. The checks run in this order: size
//  enough for magic and format version, magic, format version, size enough
//  for a header and trailer, checksum. The format version comes before the
//  checksum so that a file from a newer release is reported as such, even
//  if that release checksums differently.
static int
s_load (s_reader_t *reader, uint8_t **head_p, ps_snapshot_t *snap, ps_error_t *err)
{
    const char *path = reader->path;
    uint8_t header [S_HEADER_SIZE];
    size_t first = reader->size < S_HEADER_SIZE ? reader->size : S_HEADER_SIZE;
    int rc = s_read (reader, header, first, err);
    if (rc)
        return rc;
    if (memcmp (header, s_magic, sizeof s_magic) != 0)
        return ps_error_set (err, PS_ECORRUPT, "file %s: bad magic", path);
    uint32_t format = ps_get_u32 (header + S_OFF_FORMAT);
    if (format != PS_SNAPSHOT_VERSION)
        return ps_error_set (err, PS_EVERSION, "file %s: format version %u, expected %d",
                             path, format, PS_SNAPSHOT_VERSION);
    if (reader->size < S_HEADER_SIZE + S_TRAILER_SIZE)
        return ps_error_set (err, PS_ECORRUPT, "file %s: %zu bytes, expected at least %d",
                             path, reader->size, S_HEADER_SIZE + S_TRAILER_SIZE);

    //  The lengths come from bytes the checksum has not vouched for yet.
    //  They only decide where the following bytes go, and must add up to
    //  the file size before anything is allocated, so a corrupt length can
    //  cost no more memory than the file's size.
    uint64_t ledger_len = ps_get_u64 (header + S_OFF_LEDGER_LEN);
    uint64_t elements = ps_get_u64 (header + S_OFF_ELEMENTS);
    uint32_t nslots = ps_get_u32 (header + S_OFF_SLOTS);
    size_t room = reader->size - S_HEADER_SIZE - S_TRAILER_SIZE;
    bool fits = nslots <= PS_OPT_MAX_SLOTS
             && elements <= room / sizeof (float) / (1 + nslots)
             && ledger_len == room - elements * sizeof (float) * (1 + nslots);
    if (!fits) {
        //  Read on to the trailer, so that a damaged file is reported as a
        //  checksum mismatch like any other damage, and only a file with a
        //  good checksum as one with inconsistent lengths.
        uint8_t scratch [4096];
        while (reader->offset < reader->size - S_TRAILER_SIZE) {
            size_t left = reader->size - S_TRAILER_SIZE - reader->offset;
            rc = s_read (reader, scratch, left < sizeof scratch ? left : sizeof scratch, err);
            if (rc)
                return rc;
        }
        rc = s_read_trailer (reader, err);
        if (rc)
            return rc;
        return ps_error_set (err, PS_ECORRUPT,
                             "file %s: %zu bytes, expected %d header + %llu ledger + %u x %llu array"
                             " + %d trailer bytes", path, reader->size, S_HEADER_SIZE,
                             (unsigned long long) ledger_len, 1 + nslots,
                             (unsigned long long) (elements * sizeof (float)), S_TRAILER_SIZE);
    }

    uint8_t *head = malloc (S_HEADER_SIZE + (size_t) ledger_len);
    if (!head)
        return ps_error_set (err, PS_EIO, "file %s: cannot allocate %llu bytes for the ledger",
                             path, (unsigned long long) ledger_len);
    *head_p = head;
    memcpy (head, header, S_HEADER_SIZE);
    rc = s_read (reader, head + S_HEADER_SIZE, (size_t) ledger_len, err);
    if (rc)
        return rc;
    size_t array_bytes = (size_t) elements * sizeof (float);
    for (uint32_t i = 0; i <= nslots; i++) {
        float *array = ps_floats_alloc ((size_t) elements);
        if (!array)
            return ps_error_set (err, PS_ETOOBIG, "file %s: cannot allocate %zu bytes for an array",
                                 path, array_bytes);
        if (i == 0)
            snap->values = array;
        else
            snap->slots [i - 1] = array;
        rc = s_read (reader, array, array_bytes, err);
        if (rc)
            return rc;
    }
    return s_read_trailer (reader, err);
}

//  Check and take the header fields, whose bytes the checksum has verified,
//  and decode the ledger. head holds the header followed by the ledger.
static int
s_parse (const char *path, const uint8_t *head, ps_snapshot_t *snap, ps_error_t *err)
{
    //  The name field is NUL-terminated and zero-padded, so there is one
    //  encoding per name.
    const char *name = (const char *) head + S_OFF_NAME;
    int rc = ps_name_field_check (name, path, "variable", err);
    if (rc)
        return rc;
    memcpy (snap->var, name, PS_NAME_MAX);

    uint32_t rank = ps_get_u32 (head + S_OFF_RANK);
    if (rank < 1 || rank > PS_MAX_RANK)
        return ps_error_set (err, PS_ECORRUPT, "file %s: rank %u, expected 1..%d",
                             path, rank, PS_MAX_RANK);
    snap->shape.rank = (int) rank;
    for (int i = 0; i < PS_MAX_RANK; i++) {
        snap->shape.dims [i] = (int64_t) ps_get_u64 (head + S_OFF_DIMS + 8 * i);
        if (i >= (int) rank && snap->shape.dims [i] != 0)
            return ps_error_set (err, PS_ECORRUPT,
                                 "file %s: dimension %d is %lld beyond rank %u, expected 0",
                                 path, i, (long long) snap->shape.dims [i], rank);
    }
    uint32_t kind = ps_get_u32 (head + S_OFF_KIND);
    if (kind > PS_OPT_ADAM)
        return ps_error_set (err, PS_ECORRUPT, "file %s: optimizer kind %u, expected 0..%d",
                             path, kind, PS_OPT_ADAM);
    snap->opt.kind = (ps_opt_kind_t) kind;
    uint32_t nesterov = ps_get_u32 (head + S_OFF_NESTEROV);
    if (nesterov > 1)
        return ps_error_set (err, PS_ECORRUPT, "file %s: nesterov flag %u, expected 0 or 1",
                             path, nesterov);
    snap->opt.nesterov = nesterov == 1;
    for (int i = 0; i < PS_OPT_NDOUBLES; i++) {
        uint64_t bits = ps_get_u64 (head + S_OFF_DOUBLES + 8 * (size_t) i);
        double value;
        memcpy (&value, &bits, sizeof value);
        ps_opt_double_set (&snap->opt, i, value);
    }
    snap->part = ps_get_u32 (head + S_OFF_PART);
    snap->row_begin = (int64_t) ps_get_u64 (head + S_OFF_ROW_BEGIN);
    snap->row_end = (int64_t) ps_get_u64 (head + S_OFF_ROW_END);
    snap->opt_t = ps_get_u64 (head + S_OFF_OPT_T);
    snap->version = ps_get_u64 (head + S_OFF_VERSION);
    snap->duplicates = ps_get_u64 (head + S_OFF_DUPLICATES);

    int64_t elements;
    ps_error_t check_err;
    if (s_check (snap, &elements, &check_err))
        return ps_error_set (err, PS_ECORRUPT, "file %s: %s", path, check_err.msg);
    uint64_t stored_elements = ps_get_u64 (head + S_OFF_ELEMENTS);
    if (stored_elements != (uint64_t) elements)
        return ps_error_set (err, PS_ECORRUPT,
                             "file %s: element count %llu, expected %lld for rows [%lld,%lld)",
                             path, (unsigned long long) stored_elements, (long long) elements,
                             (long long) snap->row_begin, (long long) snap->row_end);
    int nslots = ps_opt_slot_count (snap->opt.kind);
    uint32_t stored_slots = ps_get_u32 (head + S_OFF_SLOTS);
    if (stored_slots != (uint32_t) nslots)
        return ps_error_set (err, PS_ECORRUPT, "file %s: slot count %u, expected %d for %s",
                             path, stored_slots, nslots, ps_opt_kind_name (snap->opt.kind));

    ps_error_t ledger_err;
    size_t ledger_len = (size_t) ps_get_u64 (head + S_OFF_LEDGER_LEN);
    snap->ledger = ps_ledger_decode (head + S_HEADER_SIZE, ledger_len, &ledger_err);
    if (!snap->ledger)
        return ps_error_set (err, ledger_err.code, "file %s: %s", path, ledger_err.msg);
    return PS_OK;
}

int
ps_snapshot_read (const char *path, ps_snapshot_t *snap, ps_error_t *err)
{
    assert (path);
    assert (snap);
    memset (snap, 0, sizeof *snap);
    int fd = ps_file_open_regular (path, err);
    if (fd < 0)
        return fd;
    s_reader_t reader = { .fd = fd, .path = path, .crc = (uint32_t) crc32 (0, Z_NULL, 0) };
    uint8_t *head = NULL;
    struct stat st;
    int rc;
    if (fstat (fd, &st) != 0)
        rc = ps_error_set (err, PS_EIO, "file %s: fstat failed: %s", path, strerror (errno));
    else
    if (st.st_size < S_OFF_FORMAT + 4)
        rc = ps_error_set (err, PS_ECORRUPT, "file %s: %lld bytes, too short for a snapshot",
                           path, (long long) st.st_size);
    else {
        reader.size = (size_t) st.st_size;
        rc = s_load (&reader, &head, snap, err);
        if (rc == PS_OK)
            rc = s_parse (path, head, snap, err);
    }
    //  A failure to close a file only read from loses nothing, but it is
    //  reported all the same when nothing else went wrong.
    if (close (fd) != 0 && rc == PS_OK)
        rc = ps_error_set (err, PS_EIO, "file %s: close failed: %s", path, strerror (errno));
    free (head);
    if (rc)
        ps_snapshot_release (snap);
    return rc;
}

void
ps_snapshot_release (ps_snapshot_t *snap)
{
    assert (snap);
    free (snap->values);
    for (int i = 0; i < PS_OPT_MAX_SLOTS; i++)
        free (snap->slots [i]);
    ps_ledger_destroy (&snap->ledger);
    memset (snap, 0, sizeof *snap);
}

int
ps_snapshot_escape (const char *name, char *buf, size_t len)
{
    assert (name);
    static const char hex [] = "0123456789ABCDEF";
    size_t used = 0;
    for (const unsigned char *p = (const unsigned char *) name; *p; p++) {
        bool plain = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z')
                  || (*p >= '0' && *p <= '9') || *p == '_' || *p == '.' || *p == '-';
        size_t need = plain ? 1 : 3;
        //  Keep room for the terminating NUL.
        if (used + need >= len || used + need > INT_MAX)
            return -1;
        if (plain)
            buf [used++] = (char) *p;
        else {
            buf [used++] = '%';
            buf [used++] = hex [*p >> 4];
            buf [used++] = hex [*p & 15];
        }
    }
    if (len)
        buf [used] = 0;
    return (int) used;
}

int
ps_snapshot_filename (const char *var, uint32_t part, char *buf, size_t len)
{
    int escaped = ps_snapshot_escape (var, buf, len);
    if (escaped < 0)
        return PS_EINVAL;
    size_t used = (size_t) escaped;
    int n = snprintf (buf + used, len - used, ".part%u.snap", part);
    if (n < 0 || (size_t) n >= len - used)
        return PS_EINVAL;
    return PS_OK;
}

int
ps_snapshot_summary (const char *path, uint64_t *bytes, uint32_t *crc, ps_error_t *err)
{
    int fd = ps_file_open_regular (path, err);
    if (fd < 0)
        return fd;
    struct stat st;
    uint8_t trailer [S_TRAILER_SIZE];
    int rc = PS_OK;
    if (fstat (fd, &st) != 0)
        rc = ps_error_set (err, PS_EIO, "file %s: fstat failed: %s", path, strerror (errno));
    else
    if (st.st_size < S_TRAILER_SIZE)
        rc = ps_error_set (err, PS_ECORRUPT, "file %s: %lld bytes, shorter than its checksum",
                           path, (long long) st.st_size);
    else
    if (pread (fd, trailer, sizeof trailer, st.st_size - S_TRAILER_SIZE) != S_TRAILER_SIZE)
        rc = ps_error_set (err, PS_EIO, "file %s: cannot read the checksum: %s",
                           path, strerror (errno));
    else {
        *bytes = (uint64_t) st.st_size;
        *crc = ps_get_u32 (trailer);
    }
    close (fd);
    return rc;
}
