//  NumPy .npz files: see ps_npz.h. The zip records are those of PKWARE's
//  APPNOTE.TXT (local file header, central directory header, end of
//  central directory record), with every field little-endian.

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ps_file.h"
#include "ps_npz.h"

_Static_assert (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
                "npy data is written '<f4' and '<u8' (little-endian) from memory as it is");

//  The zip version needed to extract a stored entry (2.0, what every
//  reader takes), and the fixed MS-DOS date of 1980-01-01 (day 1, month 1,
//  year 0) at 00:00:00.
#define S_ZIP_VERSION   20
#define S_DOS_DATE      0x0021
#define S_DOS_TIME      0

//  Where the CRC-32 lies in a local file header.
#define S_LOCAL_CRC     14

//  One entry of the archive: its name, the .npy header (or the whole
//  metadata text) and the tensor after it (none for the metadata).
typedef struct {
    char *name;
    char *head;
    size_t head_len;
    const ps_tensor_t *tensor;
    uint64_t data_len;
    uint32_t crc;               //  known once the entry is written
    uint32_t offset;            //  of its local header in the archive
} s_entry_t;

typedef struct {
    s_entry_t *entries;
    int count;
} s_archive_t;

//  Little-endian fields into a record buffer.
static uint8_t *
s_u16 (uint8_t *at, uint32_t v)
{
    at [0] = (uint8_t) v;
    at [1] = (uint8_t) (v >> 8);
    return at + 2;
}

static uint8_t *
s_u32 (uint8_t *at, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        at [i] = (uint8_t) (v >> (8 * i));
    return at + 4;
}

//  The .npy header of a float32 or uint64 array of this shape, padded so
//  that the data starts at a multiple of 64 bytes, as numpy writes it.
//  Returns a new buffer of *len bytes.
static char *
s_npy_header (const ps_shape_t *shape, ps_dtype_t dtype, size_t *len)
{
    char dims [PS_MAX_RANK * 24 + 4] = "";
    size_t at = 0;
    for (int d = 0; d < shape->rank; d++)
        at += (size_t) snprintf (dims + at, sizeof dims - at, "%s%lld", d ? ", " : "",
                                 (long long) shape->dims [d]);
    if (shape->rank == 1)
        snprintf (dims + at, sizeof dims - at, ",");
    char dict [sizeof dims + 80];
    int n = snprintf (dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, "
                      "'shape': (%s), }", dtype == PS_DTYPE_U64 ? "<u8" : "<f4", dims);
    //  magic (6), version (2), header length (2), dict, padding, newline.
    size_t total = (10 + (size_t) n + 1 + 63) / 64 * 64;
    char *head = malloc (total);
    if (!head)
        abort ();
    memcpy (head, "\x93NUMPY\x01\x00", 8);
    s_u16 ((uint8_t *) head + 8, (uint32_t) (total - 10));
    memcpy (head + 10, dict, (size_t) n);
    memset (head + 10 + n, ' ', total - 10 - (size_t) n - 1);
    head [total - 1] = '\n';
    *len = total;
    return head;
}

//  Put the entry's CRC-32 into its local header, written before the data
//  it sums was produced: a filled tensor is read once, and never held.
static int
s_patch_crc (int fd, const s_entry_t *e)
{
    uint8_t crc [4];
    s_u32 (crc, e->crc);
    ssize_t n = pwrite (fd, crc, sizeof crc, (off_t) e->offset + S_LOCAL_CRC);
    if (n == (ssize_t) sizeof crc)
        return 0;
    if (n >= 0)
        errno = EIO;
    return -1;
}

static int
s_write_content (int fd, void *arg)
{
    s_archive_t *a = arg;
    uint64_t offset = 0;
    for (int i = 0; i < a->count; i++) {
        s_entry_t *e = &a->entries [i];
        uint32_t size = (uint32_t) (e->head_len + e->data_len);
        size_t nlen = strlen (e->name);
        uint8_t rec [30], *at = rec;
        at = s_u32 (at, 0x04034b50);
        at = s_u16 (at, S_ZIP_VERSION);
        at = s_u16 (at, 0);             //  flags
        at = s_u16 (at, 0);             //  stored
        at = s_u16 (at, S_DOS_TIME);
        at = s_u16 (at, S_DOS_DATE);
        at = s_u32 (at, 0);             //  the CRC-32, patched after the data
        at = s_u32 (at, size);          //  compressed size
        at = s_u32 (at, size);
        at = s_u16 (at, (uint32_t) nlen);
        s_u16 (at, 0);                  //  no extra field
        e->offset = (uint32_t) offset;
        e->crc = 0;
        if (ps_file_write_all (fd, rec, sizeof rec, NULL)
        ||  ps_file_write_all (fd, e->name, nlen, NULL)
        ||  ps_file_write_all (fd, e->head, e->head_len, &e->crc)
        ||  (e->tensor && ps_tensor_write (e->tensor, fd, &e->crc))
        ||  s_patch_crc (fd, e))
            return -1;
        offset += sizeof rec + nlen + size;
    }
    uint64_t directory = offset;
    for (int i = 0; i < a->count; i++) {
        s_entry_t *e = &a->entries [i];
        uint32_t size = (uint32_t) (e->head_len + e->data_len);
        size_t nlen = strlen (e->name);
        uint8_t rec [46], *at = rec;
        at = s_u32 (at, 0x02014b50);
        at = s_u16 (at, S_ZIP_VERSION); //  made by: MS-DOS attributes, 2.0
        at = s_u16 (at, S_ZIP_VERSION);
        at = s_u16 (at, 0);
        at = s_u16 (at, 0);
        at = s_u16 (at, S_DOS_TIME);
        at = s_u16 (at, S_DOS_DATE);
        at = s_u32 (at, e->crc);
        at = s_u32 (at, size);
        at = s_u32 (at, size);
        at = s_u16 (at, (uint32_t) nlen);
        at = s_u16 (at, 0);             //  extra field
        at = s_u16 (at, 0);             //  comment
        at = s_u16 (at, 0);             //  disk
        at = s_u16 (at, 0);             //  internal attributes
        at = s_u32 (at, 0);             //  external attributes
        s_u32 (at, e->offset);
        if (ps_file_write_all (fd, rec, sizeof rec, NULL)
        ||  ps_file_write_all (fd, e->name, nlen, NULL))
            return -1;
        offset += sizeof rec + nlen;
    }
    uint8_t end [22], *at = end;
    at = s_u32 (at, 0x06054b50);
    at = s_u16 (at, 0);
    at = s_u16 (at, 0);
    at = s_u16 (at, (uint32_t) a->count);
    at = s_u16 (at, (uint32_t) a->count);
    at = s_u32 (at, (uint32_t) (offset - directory));
    at = s_u32 (at, (uint32_t) directory);
    s_u16 (at, 0);                      //  comment
    return ps_file_write_all (fd, end, sizeof end, NULL);
}

static void
s_archive_free (s_archive_t *a)
{
    for (int i = 0; i < a->count; i++) {
        free (a->entries [i].name);
        free (a->entries [i].head);
    }
    free (a->entries);
}

int
ps_npz_write (const char *path, const ps_tensor_t *tensors, int count, const char *metadata,
              ps_error_t *err)
{
    s_archive_t a = { .entries = calloc ((size_t) count + 1, sizeof (s_entry_t)) };
    if (!a.entries)
        abort ();
    //  Every offset and size of a classic zip is 32 bits; each entry adds
    //  its two headers and its name twice to the archive.
    uint64_t total = 22;
    for (int i = 0; i <= count; i++) {
        if (i == count && !metadata)
            break;
        s_entry_t *e = &a.entries [a.count++];
        if (i < count) {
            size_t nlen = strlen (tensors [i].name) + 5;
            if (!(e->name = malloc (nlen)))
                abort ();
            snprintf (e->name, nlen, "%s.npy", tensors [i].name);
            e->head = s_npy_header (&tensors [i].shape, tensors [i].dtype, &e->head_len);
            e->tensor = &tensors [i];
            e->data_len = ps_tensor_bytes (&tensors [i]);
        }
        else {
            if (!(e->name = strdup (PS_NPZ_METADATA)) || !(e->head = strdup (metadata)))
                abort ();
            e->head_len = strlen (metadata);
        }
        total += 30 + 46 + 2 * strlen (e->name) + e->head_len + e->data_len;
    }
    int rc;
    if (total > UINT32_MAX || a.count > 0xFFFF)
        rc = ps_error_set (err, PS_ETOOBIG, "file %s: %d arrays of %llu bytes in all need "
                           "zip64, which is not written; export fewer or smaller variables",
                           path, a.count, (unsigned long long) total);
    else
        rc = ps_file_write_beside (path, s_write_content, &a, err);
    s_archive_free (&a);
    return rc;
}
