/* Protocol ops: a protocol's own ops, recorded slotless in its domain
 * (ai.bytesandbrains.protocol.<name>); at install the component whose type speaks that
 * domain runs them, the one bound as Protocol first. */
#include <stdio.h>
#include <string.h>

#include "dsl/recorder.h"

/* True for BB_DOMAIN_PROTOCOL_PREFIX followed by a C identifier. */
static bool is_protocol_domain(const char *domain) {
  size_t n = sizeof BB_DOMAIN_PROTOCOL_PREFIX - 1;
  return strncmp(domain, BB_DOMAIN_PROTOCOL_PREFIX, n) == 0 && rec_is_identifier(domain + n);
}

int bb_rec_protocol_call(bb_rec *rec, const char *domain, const char *op, const bb_value *inputs, size_t n_inputs,
                         const bb_op_attr *attrs, size_t n_attrs, bb_value *outputs, size_t n_outputs) {
  if (outputs) memset(outputs, 0, n_outputs * sizeof *outputs);
  if (!rec) return BB_ERR_INVALID_ARGUMENT;
  if (rec->failed) return rec->error.code;
  if (!domain || !is_protocol_domain(domain))
    return rec_error(rec, BB_ERR_INVALID_ARGUMENT,
                     "protocol domain '%.*s' is not " BB_DOMAIN_PROTOCOL_PREFIX "<name> (a C identifier)", REC_NAME_MAX,
                     domain ? domain : "(null)");
  if (!rec_is_identifier(op))
    return rec_error(rec, BB_ERR_INVALID_ARGUMENT,
                     "protocol %s: op '%.*s' is not a C identifier of at most %d characters", domain, REC_NAME_MAX,
                     op ? op : "(null)", REC_NAME_MAX);
  if ((n_inputs && !inputs) || (n_attrs && !attrs) || (n_outputs && !outputs))
    return rec_error(rec, BB_ERR_INVALID_ARGUMENT, "protocol %s: %s counts inputs, attributes or outputs it does not give",
                     domain, op);
  for (size_t i = 0; i < n_inputs; i++) {
    char what[REC_NAME_MAX + 32];
    snprintf(what, sizeof what, "input %zu of %s", i, op);
    if (!rec_check_value(rec, inputs[i], what)) return rec->error.code;
  }
  const char **outs = bbi_arena_alloc(rec->scratch, (n_outputs + 1) * sizeof *outs);
  if (!outs) return rec_nomem(rec);
  bb_ir_node *n = rec_node_begin(rec, op, domain, inputs, n_inputs);
  if (!n) return rec->error.code;
  for (size_t i = 0; i < n_attrs; i++)
    if (rec_set_attr(rec, n, &attrs[i], op)) return rec->error.code;
  for (size_t i = 0; i < n_outputs; i++)
    if (!(outs[i] = rec_mint_name(rec)) || rec_node_output(rec, n, outs[i])) return rec->error.code;
  if (rec_node_push(rec, n)) return rec->error.code;
  for (size_t i = 0; i < n_outputs; i++)
    if (!(outputs[i] = rec_define(rec, outs[i], BB_TYPE_ABSTRACT)).name) {
      memset(outputs, 0, n_outputs * sizeof *outputs);
      return rec->error.code;
    }
  return 0;
}
