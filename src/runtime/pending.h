/* Pending operations, a part of its own: ops parked until the completion of a command,
 * in an open-addressing table by command id. The table holds each parked execution but
 * never touches its references: whoever parks an op hands its hold to the table, and
 * rt_pending_remove hands it back. */
#ifndef BBI_RUNTIME_PENDING_H
#define BBI_RUNTIME_PENDING_H

#include "runtime/exec.h"
#include "runtime/snapshot_io.h"

/* An op waiting for the completion of `command`. */
typedef struct rt_pending {
  uint64_t command;
  rt_exec *exec;
  uint32_t op;
  bool used;
} rt_pending;

/* Invariants: cap is 0 or a power of two at least twice len; each command at most once;
 * every entry is reachable from its home slot without crossing an empty slot (no
 * tombstones). */
typedef struct rt_pending_table {
  const bb_allocator *alloc;
  rt_pending *items;
  size_t len, cap;
} rt_pending_table;

void rt_pending_init(rt_pending_table *t, const bb_allocator *alloc);
/* Parks op of e until `command` completes; BB_ERR_EXISTS (the command is awaited
 * already), BB_ERR_NOMEM. */
int rt_pending_add(rt_pending_table *t, uint64_t command, rt_exec *e, uint32_t op);
/* The op waiting for `command`, or NULL. */
rt_pending *rt_pending_find(const rt_pending_table *t, uint64_t command);
/* Removes an entry rt_pending_find returned and hands it back: its execution's hold is
 * the caller's now. */
rt_pending rt_pending_remove(rt_pending_table *t, rt_pending *p);
/* Frees the table (its executions' holds must have been taken back first). */
void rt_pending_free(rt_pending_table *t);
/* Section: u64 count, then per entry (in slot order) the command, the execution's id and
 * the op. */
void rt_pending_save(const rt_pending_table *t, bb_le_writer *w);
/* Reads a section into an empty table. Commands must be minted (0 < command <
 * next_command) and distinct, executions known to `execs`, at most `max` entries. */
int rt_pending_load(rt_pending_table *t, rt_reader *r, const rt_exec_lookup *execs, uint64_t next_command,
                    size_t max);

#endif /* BBI_RUNTIME_PENDING_H */
