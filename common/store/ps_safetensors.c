//  safetensors files: see ps_safetensors.h.

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_file.h"
#include "ps_safetensors.h"

//  The raw data is the elements' bytes as they are in memory, which is the
//  format's little-endian order only on a little-endian machine.
_Static_assert (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
                "safetensors data is little-endian; this writer copies memory as it is");

//  The key the format reserves for the metadata.
#define S_METADATA "__metadata__"

//  The largest header a reader accepts, as the reference reader does
//  (100 MB): a corrupt length must not make us allocate the disk's size.
#define S_HEADER_MAX (100u * 1000 * 1000)

//  The largest file a reader loads: several times any model we train.
#define S_FILE_MAX ((size_t) 16 << 30)

struct _ps_safetensors_t {
    int count;
    ps_tensor_t *tensors;       //  names and data owned (cast away on free)
    json_t *metadata;           //  an object, perhaps empty
};

//  What the writer hands ps_file_write_atomic.
typedef struct {
    const char *header;         //  the JSON text
    size_t header_len;          //  padded length (spaces after the JSON)
    const ps_tensor_t *tensors;
    int count;
} s_writing_t;

static int
s_write_content (int fd, void *arg)
{
    const s_writing_t *w = arg;
    uint64_t len = w->header_len;
    uint8_t len_bytes [8];
    for (int i = 0; i < 8; i++)
        len_bytes [i] = (uint8_t) (len >> (8 * i));
    if (ps_file_write_all (fd, len_bytes, sizeof len_bytes, NULL))
        return -1;
    size_t text = strlen (w->header);
    if (ps_file_write_all (fd, w->header, text, NULL))
        return -1;
    static const char spaces [8] = "        ";
    if (ps_file_write_all (fd, spaces, w->header_len - text, NULL))
        return -1;
    for (int i = 0; i < w->count; i++)
        if (ps_tensor_write (&w->tensors [i], fd, NULL))
            return -1;
    return 0;
}

//  The header object: the metadata first, then each tensor in order.
static json_t *
s_header (const ps_tensor_t *tensors, int count, const json_t *metadata, ps_error_t *err)
{
    json_t *header = json_object ();
    if (!header)
        abort ();
    if (metadata) {
        const char *key;
        json_t *value;
        if (!json_is_object (metadata)) {
            json_decref (header);
            ps_error_set (err, PS_EINVAL, "safetensors metadata must be an object");
            return NULL;
        }
        json_object_foreach ((json_t *) metadata, key, value)
            if (!json_is_string (value)) {
                json_decref (header);
                ps_error_set (err, PS_EINVAL, "safetensors metadata \"%s\" is not a string "
                              "(the format allows string values only)", key);
                return NULL;
            }
        json_object_set_new (header, S_METADATA, json_deep_copy (metadata));
    }
    uint64_t offset = 0;
    for (int i = 0; i < count; i++) {
        const ps_tensor_t *t = &tensors [i];
        if (strcmp (t->name, S_METADATA) == 0 || json_object_get (header, t->name)) {
            json_decref (header);
            ps_error_set (err, PS_EINVAL, "tensor \"%s\": %s", t->name,
                          strcmp (t->name, S_METADATA) == 0 ? "a reserved name"
                                                            : "named twice");
            return NULL;
        }
        json_t *shape = json_array ();
        for (int d = 0; d < t->shape.rank; d++)
            json_array_append_new (shape, json_integer (t->shape.dims [d]));
        uint64_t end = offset + ps_tensor_bytes (t);
        json_t *entry = json_pack ("{s:s, s:o, s:[I, I]}", "dtype",
                                   t->dtype == PS_DTYPE_U64 ? "U64" : "F32", "shape", shape,
                                   "data_offsets", (json_int_t) offset, (json_int_t) end);
        if (!entry)
            abort ();
        json_object_set_new (header, t->name, entry);
        offset = end;
    }
    return header;
}

int
ps_safetensors_write (const char *path, const ps_tensor_t *tensors, int count,
                      const json_t *metadata, ps_error_t *err)
{
    json_t *header = s_header (tensors, count, metadata, err);
    if (!header)
        return PS_EINVAL;
    char *text = json_dumps (header, JSON_COMPACT);
    json_decref (header);
    if (!text)
        abort ();
    size_t len = strlen (text);
    s_writing_t w = { .header = text, .header_len = (len + 7) / 8 * 8, .tensors = tensors,
                      .count = count };
    int rc = ps_file_write_beside (path, s_write_content, &w, err);
    free (text);
    return rc;
}

//  A JSON integer in [0, max], or -1.
static int64_t
s_uint (const json_t *value, int64_t max)
{
    if (!json_is_integer (value))
        return -1;
    json_int_t v = json_integer_value (value);
    return v < 0 || v > max ? -1 : (int64_t) v;
}

//  Check one tensor's entry and copy its data out of the file's data
//  section (data, len bytes) into t, which then owns it.
static int
s_read_tensor (const char *path, const char *name, const json_t *entry, const uint8_t *data,
               uint64_t len, ps_tensor_t *t, ps_error_t *err)
{
    const json_t *dtype = json_object_get (entry, "dtype");
    const json_t *shape = json_object_get (entry, "shape");
    const json_t *offsets = json_object_get (entry, "data_offsets");
    if (!json_is_object (entry) || !json_is_string (dtype) || !json_is_array (shape)
    ||  !json_is_array (offsets) || json_array_size (offsets) != 2 || json_object_size (entry) != 3)
        return ps_error_set (err, PS_ECORRUPT, "file %s: tensor \"%s\": expected an object "
                             "{\"dtype\", \"shape\", \"data_offsets\": [begin, end]}", path, name);
    if (strcmp (json_string_value (dtype), "F32") != 0)
        return ps_error_set (err, PS_ECORRUPT, "file %s: tensor \"%s\" has dtype %s; only F32 "
                             "(float32) is read", path, name, json_string_value (dtype));
    size_t rank = json_array_size (shape);
    int64_t dims [PS_MAX_RANK];
    //  A dimension that is not a whole number becomes 0, which ps_shape_set
    //  refuses as not positive.
    for (size_t d = 0; d < rank && d < PS_MAX_RANK; d++) {
        int64_t dim = s_uint (json_array_get (shape, d), INT64_MAX);
        dims [d] = dim < 0 ? 0 : dim;
    }
    if (rank < 1 || rank > PS_MAX_RANK || ps_shape_set (&t->shape, dims, (int) rank, NULL))
        return ps_error_set (err, PS_ECORRUPT, "file %s: tensor \"%s\": expected a shape of 1 "
                             "to %d positive dimensions", path, name, PS_MAX_RANK);
    int64_t begin = s_uint (json_array_get (offsets, 0), INT64_MAX);
    int64_t end = s_uint (json_array_get (offsets, 1), INT64_MAX);
    uint64_t bytes = (uint64_t) ps_shape_count (&t->shape) * sizeof (float);
    if (begin < 0 || end < begin || (uint64_t) end > len || (uint64_t) (end - begin) != bytes)
        return ps_error_set (err, PS_ECORRUPT, "file %s: tensor \"%s\": data_offsets must hold "
                             "its %llu bytes within the %llu bytes of data", path, name,
                             (unsigned long long) bytes, (unsigned long long) len);
    float *copy = malloc (bytes ? bytes : 1);
    char *owned_name = strdup (name);
    if (!copy || !owned_name)
        abort ();
    memcpy (copy, data + begin, bytes);
    t->data = copy;
    t->name = owned_name;
    return PS_OK;
}

ps_safetensors_t *
ps_safetensors_read (const char *path, ps_error_t *err)
{
    char *file;
    size_t size;
    int rc = ps_file_read (path, S_FILE_MAX, &file, &size, err);
    if (rc)
        return NULL;
    uint64_t header_len = 0;
    for (int i = 0; i < 8 && size >= 8; i++)
        header_len |= (uint64_t) (uint8_t) file [i] << (8 * i);
    if (size < 8 || header_len > S_HEADER_MAX || header_len > size - 8) {
        ps_error_set (err, PS_ECORRUPT, "file %s: not a safetensors file: %s", path, size < 8
                      ? "shorter than the 8-byte header length"
                      : "its header length does not fit the file");
        free (file);
        return NULL;
    }
    json_error_t jerr;
    json_t *header = json_loadb (file + 8, header_len, JSON_REJECT_DUPLICATES, &jerr);
    ps_safetensors_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    if (!json_is_object (header)) {
        ps_error_set (err, PS_ECORRUPT, "file %s: the safetensors header is not a JSON object%s%s",
                      path, header ? "" : ": ", header ? "" : jerr.text);
        goto fail;
    }
    json_t *metadata = json_object_get (header, S_METADATA);
    const char *key;
    json_t *value;
    if (metadata && !json_is_object (metadata)) {
        ps_error_set (err, PS_ECORRUPT, "file %s: " S_METADATA " is not an object", path);
        goto fail;
    }
    json_object_foreach (metadata, key, value)
        if (!json_is_string (value)) {
            ps_error_set (err, PS_ECORRUPT, "file %s: metadata \"%s\" is not a string", path, key);
            goto fail;
        }
    self->metadata = metadata ? json_incref (metadata) : json_object ();
    self->tensors = calloc (json_object_size (header) + 1, sizeof (ps_tensor_t));
    if (!self->tensors)
        abort ();
    const uint8_t *data = (const uint8_t *) file + 8 + header_len;
    json_object_foreach (header, key, value) {
        if (strcmp (key, S_METADATA) == 0)
            continue;
        if (s_read_tensor (path, key, value, data, size - 8 - header_len,
                           &self->tensors [self->count], err))
            goto fail;
        self->count++;
    }
    json_decref (header);
    free (file);
    return self;
fail:
    json_decref (header);
    free (file);
    ps_safetensors_destroy (&self);
    return NULL;
}

void
ps_safetensors_destroy (ps_safetensors_t **self_p)
{
    ps_safetensors_t *self = *self_p;
    if (!self)
        return;
    for (int i = 0; i < self->count; i++) {
        free ((void *) self->tensors [i].name);
        free ((void *) self->tensors [i].data);
    }
    free (self->tensors);
    json_decref (self->metadata);
    free (self);
    *self_p = NULL;
}

int
ps_safetensors_count (const ps_safetensors_t *self)
{
    return self->count;
}

const ps_tensor_t *
ps_safetensors_tensor (const ps_safetensors_t *self, int index)
{
    return index >= 0 && index < self->count ? &self->tensors [index] : NULL;
}

const ps_tensor_t *
ps_safetensors_find (const ps_safetensors_t *self, const char *name)
{
    for (int i = 0; i < self->count; i++)
        if (strcmp (self->tensors [i].name, name) == 0)
            return &self->tensors [i];
    return NULL;
}

const char *
ps_safetensors_metadata (const ps_safetensors_t *self, const char *key)
{
    return json_string_value (json_object_get (self->metadata, key));
}
