/* The byte forms every part's save and load share: lengths, strings, peer ids and values
 * as a snapshot spells them (little-endian, docs/RUNTIME.md "Snapshots"), and a reader
 * whose first error sticks — each later read then does nothing — so a part reads its
 * whole section and checks once. */
#ifndef BBI_RUNTIME_SNAPSHOT_IO_H
#define BBI_RUNTIME_SNAPSHOT_IO_H

#include <stdbool.h>

#include "bb/bytes.h"
#include "bb/common.h"
#include "bb/value.h"
#include "bb/wire.h"

/* Snapshot bytes being read; values are decoded over `alloc`. */
typedef struct rt_reader {
  bb_le_reader in;
  const bb_allocator *alloc;
  bb_error *err;
  int rc; /* the first error (then every read is a no-op) */
} rt_reader;

rt_reader rt_reader_of(const uint8_t *data, size_t len, const bb_allocator *alloc, bb_error *err);
/* Refuses the bytes: BB_ERR_MALFORMED "restore: <what> (at byte N)" (the first error sticks). */
int rt_read_bad(rt_reader *r, const char *what);
/* BB_ERR_NOMEM "restore: out of memory" (the first error sticks). */
int rt_read_nomem(rt_reader *r);
/* len bytes into out (NULL: skipped); false once anything failed. */
bool rt_read_take(rt_reader *r, void *out, size_t len);
uint64_t rt_read_u64(rt_reader *r);
uint32_t rt_read_u32(rt_reader *r);
uint8_t rt_read_u8(rt_reader *r);
/* A u64 count that must fit in what is left, each unit at least `unit` bytes (else `what`). */
size_t rt_read_count(rt_reader *r, size_t unit, const char *what);
/* A u64 length and that many bytes, in place (NULL once anything failed). */
const uint8_t *rt_read_span(rt_reader *r, size_t *len);
bool rt_read_peer(rt_reader *r, bb_peer_id *out);
/* A value as rt_write_value wrote it (NULL once anything failed). */
bb_val *rt_read_value(rt_reader *r);

/* A u64 length, then the bytes. */
void rt_write_bytes(bb_le_writer *w, const void *data, size_t len);
void rt_write_str(bb_le_writer *w, const char *s);
void rt_write_peer(bb_le_writer *w, const bb_peer_id *p);
/* The kind's type hash, the length, then the value's wire form. */
void rt_write_value(bb_le_writer *w, const bb_val *v);

#endif /* BBI_RUNTIME_SNAPSHOT_IO_H */
