/* The framework ops by (domain, op_type): each family lists its own (syscalls/<family>.c),
 * install looks an op up here once, and the node keeps the function it found. */
#include <string.h>

#include "runtime/syscalls/syscall.h"
#include "runtime/syscalls/table.h"

typedef struct family {
  const rt_syscall *ops;
  const size_t *count;
} family;

static const family FAMILIES[] = {
    {rt_syscalls_structure, &rt_syscalls_structure_count},
    {rt_syscalls_time, &rt_syscalls_time_count},
    {rt_syscalls_deadlines, &rt_syscalls_deadlines_count},
    {rt_syscalls_named, &rt_syscalls_named_count},
    {rt_syscalls_tokens, &rt_syscalls_tokens_count},
    {rt_syscalls_gates, &rt_syscalls_gates_count},
    {rt_syscalls_telemetry, &rt_syscalls_telemetry_count},
    {rt_syscalls_bundles, &rt_syscalls_bundles_count},
    {rt_syscalls_address_book, &rt_syscalls_address_book_count},
};

rt_syscall_fn rt_syscall_find(const char *domain, const char *op_type) {
  for (size_t f = 0; f < sizeof FAMILIES / sizeof *FAMILIES; f++)
    for (size_t i = 0; i < *FAMILIES[f].count; i++) {
      const rt_syscall *s = &FAMILIES[f].ops[i];
      if (strcmp(s->domain, domain) == 0 && strcmp(s->op_type, op_type) == 0) return s->fn;
    }
  return NULL;
}

void rt_syscalls_free(bb_node *n) {
  rt_syscalls_free_latches(n);
  rt_syscalls_free_named(n);
}
