//  The partition table; see ps_table.h.

#include "ps_table.h"

#include <assert.h>
#include <czmq.h>
#include <stdlib.h>
#include <string.h>

//  Key separator; it cannot occur in a variable name (ps_name_check).
#define S_KEY_SEP  '\n'

struct _ps_table_t {
    zhashx_t *partitions;       //  "var\npart" -> ps_partition_t *
};

static void
s_partition_free (void **item)
{
    ps_partition_destroy ((ps_partition_t **) item);
}

static void
s_key (char *buf, size_t len, const char *var, uint32_t part)
{
    snprintf (buf, len, "%s%c%u", var, S_KEY_SEP, part);
}

ps_table_t *
ps_table_new (void)
{
    ps_table_t *self = calloc (1, sizeof *self);
    if (!self)
        abort ();
    self->partitions = zhashx_new ();
    if (!self->partitions)
        abort ();
    zhashx_set_destructor (self->partitions, s_partition_free);
    return self;
}

void
ps_table_destroy (ps_table_t **self_p)
{
    assert (self_p);
    ps_table_t *self = *self_p;
    if (self) {
        zhashx_destroy (&self->partitions);
        free (self);
        *self_p = NULL;
    }
}

ps_partition_t *
ps_table_lookup (ps_table_t *self, const char *var, uint32_t part)
{
    assert (self);
    //  A longer name would be cut short in the key and could find another.
    if (strlen (var) >= PS_NAME_MAX)
        return NULL;
    char key [PS_NAME_MAX + 24];
    s_key (key, sizeof key, var, part);
    return zhashx_lookup (self->partitions, key);
}

void
ps_table_put (ps_table_t *self, ps_partition_t *partition)
{
    assert (self);
    char key [PS_NAME_MAX + 24];
    s_key (key, sizeof key, ps_partition_var (partition), ps_partition_part (partition));
    zhashx_update (self->partitions, key, partition);
}

size_t
ps_table_size (ps_table_t *self)
{
    assert (self);
    return zhashx_size (self->partitions);
}

static int
s_partition_cmp (const void *a, const void *b)
{
    ps_partition_t *x = *(ps_partition_t *const *) a;
    ps_partition_t *y = *(ps_partition_t *const *) b;
    int rc = strcmp (ps_partition_var (x), ps_partition_var (y));
    if (rc == 0)
        rc = ps_partition_part (x) < ps_partition_part (y) ? -1
           : ps_partition_part (x) > ps_partition_part (y);
    return rc;
}

ps_partition_t **
ps_table_sorted (ps_table_t *self, size_t *count)
{
    assert (self);
    *count = zhashx_size (self->partitions);
    ps_partition_t **list = calloc (*count + 1, sizeof *list);
    if (!list)
        abort ();
    size_t i = 0;
    for (ps_partition_t *part = zhashx_first (self->partitions); part;
         part = zhashx_next (self->partitions))
        list [i++] = part;
    qsort (list, *count, sizeof *list, s_partition_cmp);
    return list;
}
