//  The partitions a ps-server holds, by variable name and part number.
//
//  The table owns one reference to each partition; a request in progress
//  links its own (ps_partition_link), so replacing a partition (a restore)
//  never frees one that a pool thread is applying. Listings come in name
//  order, so stats and snapshot replies are stable. The table belongs to
//  the serving thread.

#ifndef PS_TABLE_H_INCLUDED
#define PS_TABLE_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

#include "ps_partition.h"

typedef struct _ps_table_t ps_table_t;

ps_table_t *ps_table_new (void);
void ps_table_destroy (ps_table_t **self_p);

//  The partition (var, part), borrowed, or NULL when the table has none.
//  A name of PS_NAME_MAX bytes or more is never found.
ps_partition_t *ps_table_lookup (ps_table_t *self, const char *var, uint32_t part);

//  Add partition, taking the caller's reference; one of the same name and
//  part is replaced (and dropped).
void ps_table_put (ps_table_t *self, ps_partition_t *partition);

size_t ps_table_size (ps_table_t *self);

//  The partitions in name order, then part order, borrowed, in an array of
//  *count entries (plus a NULL) that the caller frees.
ps_partition_t **ps_table_sorted (ps_table_t *self, size_t *count);

#endif
