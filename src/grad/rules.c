/* The backward rules of every operator family, looked up by domain and op type. */
#include <string.h>

#include "grad/builder.h"

typedef struct family {
  const gb_rule *rules;
  const size_t *count;
} family;

static const family FAMILIES[] = {
    {gb_rules_elementwise, &gb_rules_elementwise_count}, {gb_rules_linalg, &gb_rules_linalg_count},
    {gb_rules_nn, &gb_rules_nn_count},                   {gb_rules_shape, &gb_rules_shape_count},
    {gb_rules_reduce, &gb_rules_reduce_count},           {gb_rules_recurrent, &gb_rules_recurrent_count},
};

const gb_rule *gb_rule_find(const char *domain, const char *op_type) {
  bool onnx = bb_domain_is_onnx(domain);
  if (!onnx && strcmp(domain, BB_GRAD_DOMAIN) != 0) return NULL;
  for (size_t f = 0; f < sizeof FAMILIES / sizeof FAMILIES[0]; f++)
    for (size_t i = 0; i < *FAMILIES[f].count; i++) {
      const gb_rule *r = &FAMILIES[f].rules[i];
      if ((r->domain == NULL) == onnx && strcmp(r->op_type, op_type) == 0) return r;
    }
  return NULL;
}
