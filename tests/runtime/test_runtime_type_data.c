/* bb_component_type.type_data: one create function serves several types, each create is
 * handed its own type's type_data, and a type registered with an older, smaller struct
 * (struct_size = BB_COMPONENT_TYPE_SIZE_V1) still installs and gets none. */
#include "rtir.h"
#include "rttest.h"

/* the node tables below leave the optional fields out */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

/* What each create saw: the type_data of the type it was created as. */
static void *seen_type_data[4];
static size_t n_seen;

static int recording_create(const bb_component_init *init, void **self, bb_error *err) {
  if (n_seen < sizeof seen_type_data / sizeof *seen_type_data) seen_type_data[n_seen++] = init->type_data;
  return stub_create(init, self, err);
}

#define SHARED_CREATE_TYPE(NAME, DATA)                                                                     \
  {.struct_size = sizeof(bb_component_type), .type_name = NAME, .roles = 1u << BB_ROLE_MODEL,            \
   .create = recording_create, .destroy = stub_destroy, .invoke = stub_invoke, .type_data = DATA}

static int first_marker, second_marker, old_marker;

/* One target, T#a1: Forward on slot "model". */
static const ir_node_spec T_NODES[] = {{BB_DOMAIN_ROLE_MODEL "::Forward", {"x"}, {"y"}, "model"}};

static uint8_t *artifact_binding(const char *type, size_t *len) {
  bb_model *m = ir_model(BB_COMPILED_VERSION);
  ir_add_fn(m, &(ir_fn_spec){.name = "T#a1", .in = {"x"}, .out = {"y"}, IR_NODES(T_NODES)});
  char binding[128];
  snprintf(binding, sizeof binding, "Model|%s|-1", type);
  ir_bind(m, "T#a1", "model", binding);
  return ir_encode(m, len);
}

/* Installs an artifact binding `type` and returns the type_data its create saw. */
static void *created_with(const bb_registry *reg, const char *type) {
  size_t len;
  uint8_t *art = artifact_binding(type, &len);
  static const char *const targets[] = {"T"};
  size_t before = n_seen;
  bb_node *n = install_peer(art, len, 1, targets, 1, reg, NULL);
  free(art);
  CHECK(n != NULL);
  CHECK_EQ_INT(n_seen, before + 1);
  bb_node_free(n);
  return n_seen > before ? seen_type_data[n_seen - 1] : NULL;
}

static void test_one_create_many_types(void) {
  static const bb_component_type FIRST = SHARED_CREATE_TYPE("First", &first_marker);
  static const bb_component_type SECOND = SHARED_CREATE_TYPE("Second", &second_marker);
  static const bb_component_type NONE = SHARED_CREATE_TYPE("None", NULL);
  bb_registry *reg = bb_registry_new(NULL);
  CHECK(bb_registry_add(reg, &FIRST, NULL) == 0 && bb_registry_add(reg, &SECOND, NULL) == 0 &&
        bb_registry_add(reg, &NONE, NULL) == 0);
  CHECK(created_with(reg, "Second") == &second_marker);
  CHECK(created_with(reg, "First") == &first_marker);
  CHECK(created_with(reg, "None") == NULL);
  bb_registry_free(reg);
}

static void test_older_struct_size(void) {
  /* The struct a caller built against the header before type_data: the runtime must not
   * read past its struct_size, so the marker placed there stays unseen. */
  bb_component_type old = SHARED_CREATE_TYPE("Old", &old_marker);
  old.struct_size = BB_COMPONENT_TYPE_SIZE_V1;
  bb_component_type too_small = old;
  too_small.type_name = "TooSmall";
  too_small.struct_size = BB_COMPONENT_TYPE_SIZE_V1 - 1;
  bb_registry *reg = bb_registry_new(NULL);
  bb_error err;
  CHECK_EQ_INT(bb_registry_add(reg, &too_small, &err), BB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "struct_size") != NULL);
  CHECK_EQ_INT(bb_registry_add(reg, &old, NULL), 0);
  CHECK(created_with(reg, "Old") == NULL);
  bb_registry_free(reg);
}

int main(void) {
  RUN(test_one_create_many_types);
  RUN(test_older_struct_size);
  return bb_test_finish();
}
