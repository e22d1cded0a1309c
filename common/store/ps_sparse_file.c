//  Embedding table shard files as bytes; see ps_sparse_file.h, and
//  schemas/checkpoint.md for the layout.
//
//  A file is read by mapping it, so that a table of millions of rows is
//  verified and then built without a second copy of it in memory: the
//  checksum is computed over the mapping first, and only then is any
//  length in it believed.

#include "ps_bytes.h"
#include "ps_file.h"
#include "ps_ledger.h"
#include "ps_sparse_file.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

//  Rows go to disk as they lie in memory: little-endian float32.
_Static_assert (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
                "table files store floats in host order, which must be little-endian");

//  As the snapshot file's magic: a high-bit byte and CR LF catch 7-bit and
//  line-end-rewriting transfers.
static const uint8_t s_magic [8] = { 0x89, 'P', 'S', 'T', 'B', 'L', '\r', '\n' };

//  Offsets of the header fields (schemas/checkpoint.md).
#define S_OFF_FORMAT        8
#define S_OFF_KIND         12
#define S_OFF_BASE_SIZE    16
#define S_OFF_BASE_CRC     24
#define S_OFF_STRIPES      28
#define S_OFF_NAME         32
#define S_OFF_DIM         160
#define S_OFF_INIT_KIND   164
#define S_OFF_INIT_SEED   168
#define S_OFF_INIT_VALUE  176
#define S_OFF_INIT_LOW    184
#define S_OFF_INIT_HIGH   192
#define S_OFF_INIT_MEAN   200
#define S_OFF_INIT_STDDEV 208
#define S_OFF_OPT_KIND    216
#define S_OFF_POLICY      220
#define S_OFF_OPT_DOUBLES 224
#define S_OFF_ADMIT_COUNT 296
#define S_OFF_SKETCH      300
#define S_OFF_ADMIT_PROB  304
#define S_OFF_CAPACITY    312
#define S_OFF_TTL         320
#define S_OFF_SHARD_SEED  328
#define S_OFF_NEWEST      336
#define S_OFF_LEDGER_LEN  344
_Static_assert (S_OFF_LEDGER_LEN + 8 == PS_SPARSE_FILE_HEADER, "the header ends with ledger_len");

//  The largest sketch row a stripe may have (ps_sparse.c sizes it).
#define S_MAX_SKETCH_WIDTH  (UINT32_C (1) << 16)

static void
s_put_f64 (uint8_t *p, double value)
{
    uint64_t bits;
    memcpy (&bits, &value, sizeof bits);
    ps_put_u64 (p, bits);
}

static double
s_get_f64 (const uint8_t *p)
{
    uint64_t bits = ps_get_u64 (p);
    double value;
    memcpy (&value, &bits, sizeof value);
    return value;
}

//  The optimizer's doubles, in file order.
static double *
s_opt_double (ps_rowopt_t *opt, int i)
{
    double *fields [] = { &opt->lr, &opt->beta1, &opt->beta2, &opt->epsilon,
                          &opt->initial_accumulator, &opt->l1, &opt->l2, &opt->lr_power,
                          &opt->beta };
    return fields [i];
}
#define S_OPT_DOUBLES  9
_Static_assert (S_OFF_OPT_DOUBLES + 8 * S_OPT_DOUBLES == S_OFF_ADMIT_COUNT,
                "the optimizer doubles end where admit_count starts");

void
ps_sparse_file_encode (const ps_sparse_file_header_t *header, uint8_t *buf)
{
    const ps_tablespec_t *spec = &header->spec;
    memset (buf, 0, PS_SPARSE_FILE_HEADER);
    memcpy (buf, s_magic, sizeof s_magic);
    ps_put_u32 (buf + S_OFF_FORMAT, PS_SPARSE_FILE_VERSION);
    ps_put_u32 (buf + S_OFF_KIND, header->full ? 0 : 1);
    ps_put_u64 (buf + S_OFF_BASE_SIZE, header->base_size);
    ps_put_u32 (buf + S_OFF_BASE_CRC, header->base_crc);
    ps_put_u32 (buf + S_OFF_STRIPES, PS_SPARSE_STRIPES);
    memcpy (buf + S_OFF_NAME, spec->name, strnlen (spec->name, PS_NAME_MAX - 1));
    ps_put_u32 (buf + S_OFF_DIM, spec->dim);
    ps_put_u32 (buf + S_OFF_INIT_KIND, (uint32_t) spec->init.kind);
    ps_put_u64 (buf + S_OFF_INIT_SEED, spec->init.seed);
    s_put_f64 (buf + S_OFF_INIT_VALUE, spec->init.value);
    s_put_f64 (buf + S_OFF_INIT_LOW, spec->init.low);
    s_put_f64 (buf + S_OFF_INIT_HIGH, spec->init.high);
    s_put_f64 (buf + S_OFF_INIT_MEAN, spec->init.mean);
    s_put_f64 (buf + S_OFF_INIT_STDDEV, spec->init.stddev);
    ps_put_u32 (buf + S_OFF_OPT_KIND, (uint32_t) spec->opt.kind);
    ps_put_u32 (buf + S_OFF_POLICY, (uint32_t) spec->policy);
    ps_rowopt_t opt = spec->opt;
    for (int i = 0; i < S_OPT_DOUBLES; i++)
        s_put_f64 (buf + S_OFF_OPT_DOUBLES + 8 * i, *s_opt_double (&opt, i));
    ps_put_u32 (buf + S_OFF_ADMIT_COUNT, spec->admit_count);
    ps_put_u32 (buf + S_OFF_SKETCH, header->sketch_width);
    s_put_f64 (buf + S_OFF_ADMIT_PROB, spec->admit_prob);
    ps_put_u64 (buf + S_OFF_CAPACITY, spec->capacity);
    ps_put_u64 (buf + S_OFF_TTL, spec->ttl);
    ps_put_u64 (buf + S_OFF_SHARD_SEED, spec->shard_seed);
    ps_put_u64 (buf + S_OFF_NEWEST, header->newest_step);
    ps_put_u64 (buf + S_OFF_LEDGER_LEN, header->ledger_len);
}

size_t
ps_sparse_file_row_bytes (const ps_tablespec_t *spec)
{
    return 24 + 4 * (size_t) spec->dim * (size_t) (1 + ps_rowopt_slot_count (spec->opt.kind));
}

//  Parse the header fields the checksum has vouched for.
static int
s_parse_header (const char *path, const uint8_t *buf, ps_sparse_file_header_t *header,
                ps_error_t *err)
{
    memset (header, 0, sizeof *header);
    uint32_t kind = ps_get_u32 (buf + S_OFF_KIND);
    if (kind > 1)
        return ps_error_set (err, PS_ECORRUPT, "file %s: kind %u, expected 0 (full) or 1 "
                             "(incremental)", path, kind);
    header->full = kind == 0;
    header->base_size = ps_get_u64 (buf + S_OFF_BASE_SIZE);
    header->base_crc = ps_get_u32 (buf + S_OFF_BASE_CRC);
    if (header->full && (header->base_size || header->base_crc))
        return ps_error_set (err, PS_ECORRUPT, "file %s: a full snapshot naming a base "
                             "snapshot, expected base size and CRC 0", path);
    uint32_t stripes = ps_get_u32 (buf + S_OFF_STRIPES);
    if (stripes != PS_SPARSE_STRIPES)
        return ps_error_set (err, PS_ECORRUPT, "file %s: %u stripes, expected %d",
                             path, stripes, PS_SPARSE_STRIPES);
    const char *name = (const char *) buf + S_OFF_NAME;
    int rc = ps_name_field_check (name, path, "table", err);
    if (rc)
        return rc;
    ps_tablespec_t *spec = &header->spec;
    memcpy (spec->name, name, PS_NAME_MAX);
    spec->dim = ps_get_u32 (buf + S_OFF_DIM);
    spec->init.kind = (ps_init_kind_t) ps_get_u32 (buf + S_OFF_INIT_KIND);
    spec->init.seed = ps_get_u64 (buf + S_OFF_INIT_SEED);
    spec->init.value = s_get_f64 (buf + S_OFF_INIT_VALUE);
    spec->init.low = s_get_f64 (buf + S_OFF_INIT_LOW);
    spec->init.high = s_get_f64 (buf + S_OFF_INIT_HIGH);
    spec->init.mean = s_get_f64 (buf + S_OFF_INIT_MEAN);
    spec->init.stddev = s_get_f64 (buf + S_OFF_INIT_STDDEV);
    spec->opt.kind = (ps_rowopt_kind_t) ps_get_u32 (buf + S_OFF_OPT_KIND);
    spec->policy = (ps_evict_policy_t) ps_get_u32 (buf + S_OFF_POLICY);
    for (int i = 0; i < S_OPT_DOUBLES; i++)
        *s_opt_double (&spec->opt, i) = s_get_f64 (buf + S_OFF_OPT_DOUBLES + 8 * i);
    spec->admit_count = ps_get_u32 (buf + S_OFF_ADMIT_COUNT);
    spec->admit_prob = s_get_f64 (buf + S_OFF_ADMIT_PROB);
    spec->capacity = ps_get_u64 (buf + S_OFF_CAPACITY);
    spec->ttl = ps_get_u64 (buf + S_OFF_TTL);
    spec->shard_seed = ps_get_u64 (buf + S_OFF_SHARD_SEED);
    ps_error_t spec_err;
    if (ps_tablespec_validate (spec, &spec_err))
        return ps_error_set (err, PS_ECORRUPT, "file %s: %s", path, spec_err.msg);
    header->sketch_width = ps_get_u32 (buf + S_OFF_SKETCH);
    uint32_t width = header->sketch_width;
    if (width > S_MAX_SKETCH_WIDTH || (width & (width - 1)) != 0)
        return ps_error_set (err, PS_ECORRUPT, "file %s: sketch width %u, expected 0 or a "
                             "power of two up to %u", path, width, S_MAX_SKETCH_WIDTH);
    header->newest_step = ps_get_u64 (buf + S_OFF_NEWEST);
    header->ledger_len = ps_get_u64 (buf + S_OFF_LEDGER_LEN);
    return PS_OK;
}

//  Cut the bytes after the header and ledger into the stripes' sections,
//  checking each length against what is left before believing it.
static int
s_parse_sections (ps_sparse_file_t *file, const uint8_t *p, size_t left, ps_error_t *err)
{
    const ps_sparse_file_header_t *header = &file->header;
    size_t row_bytes = ps_sparse_file_row_bytes (&header->spec);
    size_t sketch_bytes = (size_t) PS_SPARSE_SKETCH_DEPTH * header->sketch_width;
    for (uint32_t s = 0; s < PS_SPARSE_STRIPES; s++) {
        ps_sparse_file_section_t *section = &file->sections [s];
        if (left < PS_SPARSE_FILE_SECTION + sketch_bytes)
            return ps_error_set (err, PS_ECORRUPT, "file %s: stripe %u's section is cut "
                                 "short (%zu bytes left)", file->path, s, left);
        section->last_sweep = ps_get_u64 (p);
        section->nevicted = ps_get_u64 (p + 8);
        section->nrows = ps_get_u64 (p + 16);
        section->sketch = p + PS_SPARSE_FILE_SECTION;
        p += PS_SPARSE_FILE_SECTION + sketch_bytes;
        left -= PS_SPARSE_FILE_SECTION + sketch_bytes;
        if (header->full && section->nevicted)
            return ps_error_set (err, PS_ECORRUPT, "file %s: a full snapshot with %llu "
                                 "evicted ids in stripe %u, expected none", file->path,
                                 (unsigned long long) section->nevicted, s);
        if (section->nevicted > left / 8
        ||  section->nrows > (left - 8 * section->nevicted) / row_bytes)
            return ps_error_set (err, PS_ECORRUPT, "file %s: stripe %u holds %llu evicted "
                                 "ids and %llu rows of %zu bytes, more than the %zu bytes "
                                 "left", file->path, s,
                                 (unsigned long long) section->nevicted,
                                 (unsigned long long) section->nrows, row_bytes, left);
        section->evicted = p;
        section->rows = p + 8 * section->nevicted;
        size_t bytes = 8 * section->nevicted + row_bytes * section->nrows;
        p += bytes;
        left -= bytes;
    }
    if (left != 0)
        return ps_error_set (err, PS_ECORRUPT, "file %s: %zu bytes after the last stripe, "
                             "expected none", file->path, left);
    return PS_OK;
}

//  Verify the mapped bytes in the order of schemas/checkpoint.md: magic,
//  version, size, checksum, then the fields.
static int
s_verify (ps_sparse_file_t *file, const uint8_t *buf, size_t size, ps_error_t *err)
{
    const char *path = file->path;
    if (size < 12 || memcmp (buf, s_magic, sizeof s_magic) != 0)
        return ps_error_set (err, PS_ECORRUPT, "file %s: bad magic, expected a table "
                             "snapshot", path);
    uint32_t format = ps_get_u32 (buf + S_OFF_FORMAT);
    if (format != PS_SPARSE_FILE_VERSION)
        return ps_error_set (err, PS_EVERSION, "file %s: format version %u, expected %d",
                             path, format, PS_SPARSE_FILE_VERSION);
    if (size < PS_SPARSE_FILE_HEADER + PS_SPARSE_FILE_TRAILER)
        return ps_error_set (err, PS_ECORRUPT, "file %s: %zu bytes, expected at least %d",
                             path, size, PS_SPARSE_FILE_HEADER + PS_SPARSE_FILE_TRAILER);
    size_t body = size - PS_SPARSE_FILE_TRAILER;
    uint32_t crc = (uint32_t) crc32 (0, Z_NULL, 0);
    for (size_t done = 0; done < body; ) {
        size_t chunk = body - done < (1u << 30) ? body - done : (1u << 30);
        crc = (uint32_t) crc32 (crc, buf + done, (uInt) chunk);
        done += chunk;
    }
    uint32_t stored = ps_get_u32 (buf + body);
    if (stored != crc)
        return ps_error_set (err, PS_ECORRUPT,
                             "file %s: checksum mismatch (stored 0x%08x, computed 0x%08x)",
                             path, stored, crc);
    file->size = size;
    file->crc = crc;
    int rc = s_parse_header (path, buf, &file->header, err);
    if (rc)
        return rc;
    size_t left = body - PS_SPARSE_FILE_HEADER;
    if (file->header.ledger_len > left)
        return ps_error_set (err, PS_ECORRUPT, "file %s: a ledger of %llu bytes, more than "
                             "the %zu left", path,
                             (unsigned long long) file->header.ledger_len, left);
    file->ledger = buf + PS_SPARSE_FILE_HEADER;
    return s_parse_sections (file, file->ledger + file->header.ledger_len,
                             left - (size_t) file->header.ledger_len, err);
}

int
ps_sparse_file_open (const char *path, ps_sparse_file_t *file, ps_error_t *err)
{
    memset (file, 0, sizeof *file);
    file->path = path;
    int fd = ps_file_open_regular (path, err);
    if (fd < 0)
        return fd;
    struct stat st;
    if (fstat (fd, &st) != 0) {
        int rc = ps_error_set (err, PS_EIO, "file %s: fstat failed: %s", path, strerror (errno));
        (void) close (fd);
        return rc;
    }
    size_t size = (size_t) st.st_size;
    if (size < PS_SPARSE_FILE_HEADER + PS_SPARSE_FILE_TRAILER) {
        //  Too short to map usefully; read what there is to tell a file
        //  of another kind from a truncated one.
        uint8_t head [PS_SPARSE_FILE_HEADER + PS_SPARSE_FILE_TRAILER];
        ssize_t n;
        do
            n = read (fd, head, size);
        while (n < 0 && errno == EINTR);
        //  A descriptor only read from has nothing to lose at close.
        (void) close (fd);
        if (n < 0)
            return ps_error_set (err, PS_EIO, "file %s: read failed: %s", path, strerror (errno));
        return s_verify (file, head, (size_t) n, err);
    }
    void *map = mmap (NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    //  The mapping outlives the descriptor, which was only read from.
    (void) close (fd);
    if (map == MAP_FAILED)
        return ps_error_set (err, PS_EIO, "file %s: mmap of %zu bytes failed: %s",
                             path, size, strerror (errno));
    file->map = map;
    int rc = s_verify (file, map, size, err);
    if (rc) {
        (void) munmap (map, size);
        memset (file, 0, sizeof *file);
    }
    return rc;
}

void
ps_sparse_file_close (ps_sparse_file_t *file)
{
    //  munmap fails only for an address or length open never makes.
    if (file->map)
        (void) munmap (file->map, (size_t) file->size);
    memset (file, 0, sizeof *file);
}

int
ps_sparse_file_open_pair (const char *full_path, const char *incr_path, ps_sparse_file_t *full,
                          ps_sparse_file_t *incr, ps_error_t *err)
{
    int rc = ps_sparse_file_open (full_path, full, err);
    if (rc)
        return rc;
    if (!full->header.full) {
        ps_sparse_file_close (full);
        return ps_error_set (err, PS_EINVAL, "file %s: an incremental snapshot, expected a "
                             "full one", full_path);
    }
    if (!incr_path)
        return PS_OK;
    if ((rc = ps_sparse_file_open (incr_path, incr, err))) {
        ps_sparse_file_close (full);
        return rc;
    }
    char diff [256];
    if (incr->header.full)
        rc = ps_error_set (err, PS_EINVAL, "file %s: a full snapshot, expected an "
                           "incremental one", incr_path);
    else
    if (incr->header.base_size != full->size || incr->header.base_crc != full->crc)
        rc = ps_error_set (err, PS_EINVAL, "file %s: follows a full snapshot of %llu bytes "
                           "with CRC 0x%08x, not %s (%llu bytes, CRC 0x%08x)", incr_path,
                           (unsigned long long) incr->header.base_size, incr->header.base_crc,
                           full_path, (unsigned long long) full->size, full->crc);
    else
    if (ps_tablespec_differs (&incr->header.spec, &full->header.spec, diff, sizeof diff))
        rc = ps_error_set (err, PS_EINVAL, "file %s: the spec differs from %s's: %s",
                           incr_path, full_path, diff);
    if (rc) {
        ps_sparse_file_close (full);
        ps_sparse_file_close (incr);
    }
    return rc;
}
