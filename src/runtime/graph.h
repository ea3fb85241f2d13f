/* What install fixes: the installed graphs (their ops, value sites and consumers), the
 * targets and the wire table (the components bound to slots are in components.h).
 * Nothing here changes once bb_install has returned, except a target's bound inputs and
 * its bootstrap flags. */
#ifndef BBI_RUNTIME_GRAPH_H
#define BBI_RUNTIME_GRAPH_H

#include "bb/runtime.h"
#include "util/strmap.h"

/* No site, op or graph (an empty input, an output nobody reads). */
#define RT_NONE UINT32_MAX

typedef struct rt_graph rt_graph;
typedef struct rt_op rt_op;
typedef struct rt_call rt_call; /* runtime/exec.h */

/* A framework op: reads c->in, writes c->out; 0, BB_LATER (c->command set) or BB_ERR_*. */
typedef int (*rt_syscall_fn)(rt_call *c, bb_error *err);

typedef enum rt_op_kind {
  RT_OP_UNRESOLVED = 0, /* in a partition this peer does not run */
  RT_OP_SYSCALL,
  RT_OP_CALL,
  RT_OP_COMPONENT,
  RT_OP_SEND,
  RT_OP_RECV
} rt_op_kind;

/* One data input of a Send and the wire it travels on. */
typedef struct rt_send_fill {
  uint32_t input;   /* position in the node's inputs */
  uint64_t site;    /* the wire's id (bb_wire_id of its name): what the fill addresses */
} rt_send_fill;

struct rt_op {
  const bb_ir_node *ir;
  rt_op_kind kind;
  rt_syscall_fn fn;      /* SYSCALL */
  uint32_t callee;       /* CALL: graph index */
  uint32_t component;    /* COMPONENT */
  bb_role role;          /* COMPONENT */
  uint32_t *in, n_in;    /* local sites (RT_NONE for "") */
  uint32_t *out, n_out;
  char *label;           /* "domain::OpType" or "domain::OpType@name" */
  rt_send_fill *fills;   /* SEND */
  uint32_t n_fills;
  int64_t deadline_ns;   /* SEND, DeadlineCheck: the deadline_ns attribute (relative), 0 none */
};

struct rt_graph {
  const bb_function *fn;
  uint32_t artifact;       /* index of the artifact (node->models) the function is from */
  uint64_t site_base;
  uint32_t n_sites;
  const char **site_names; /* local site → value name (borrowed from the IR) */
  bbi_strmap names;         /* value name → local site */
  rt_op *ops;
  uint32_t n_ops;
  uint32_t *cons_start, *cons; /* consumers of each local site (CSR, op indices) */
  uint32_t *formal_in, n_in;   /* local sites of the function's inputs */
  uint32_t *formal_out, n_out; /* ... and outputs */
  uint32_t *out_index;         /* local site → position in the outputs, or RT_NONE */
  uint32_t *recv_sender;       /* Recv payload site → its sender site (RT_NONE if none) */
  bool active;                 /* one of my targets or reachable from them */
  int target;                  /* index in node->targets, or -1 */
  bool bootstrap;              /* module_phase = bootstrap */
};

typedef struct rt_target {
  char *name;       /* resolved partition name */
  uint32_t artifact; /* index in node->models */
  uint32_t graph;
  int bootstrap;    /* graph index of its bootstrap, or -1 */
  bool bootstrap_done;
  bool bootstrap_wanted; /* selected by a bb_node_run_bootstraps call, not yet done */
  bb_val **bound;   /* per formal input: a value every new run starts with (or NULL) */
} rt_target;

/* A wire.Recv of a partition this node runs, by the wire it listens to: a data-plane fill
 * addressed to `id` lands in `site` of `graph` when its value fits `type`. */
typedef struct rt_wire {
  uint64_t id;   /* bb_wire_id(name) */
  char *name;    /* owned */
  char *type;    /* owned: what the artifact declares the wire carries ("": anything) */
  uint32_t graph, site;
} rt_wire;

#endif /* BBI_RUNTIME_GRAPH_H */
