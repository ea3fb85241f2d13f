/* bb compile: recorded model → installable artifact. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/compiler.h"
#include "bb/roles.h"
#include "cli.h"
#include "programs/examples.h"

#define MAX_PORTS 64

static void usage(void) {
  fprintf(stderr,
          "usage: bb compile MODEL.onnx --bind SLOT=TYPE ... -o ARTIFACT.onnx\n"
          "         [--storage TYPE.PORT=DENOTATION ...] [--permissive] [--disable PASS ...]\n"
          "         [--budget-ns N]\n"
          "       bb compile --example NAME -o ARTIFACT.onnx\n"
          "       bb compile --examples\n"
          "  --bind        binds the concrete type TYPE to the slot named SLOT (role from the model)\n"
          "  --storage     declares the storage type of a concrete type's port, which types the\n"
          "                outputs of its role's nodes; ports: Model and Backend `tensor`,\n"
          "                Aggregator `element`, Index `vector`, DataSource `sample`\n"
          "                (e.g. Mlp.tensor=" BB_TYPE_TENSOR_F32 ")\n"
          "  --permissive  accept values whose type stays unresolved\n"
          "  A Backend slot bound to CpuBackend accepts the CPU backend's operators only (bb ops).\n"
          "  --disable     skip a canonical pass (bb compile --passes lists them)\n"
          "  --example     record and compile a shipped example's Module(s) with its default\n"
          "                bindings; an example with several Modules writes one artifact per\n"
          "                Module, ARTIFACT with \".<Module>\" before its extension\n"
          "  --examples    list the shipped examples\n");
}

/* Declares every --storage entry, grouped by concrete type. */
static int declare_storage(bb_compiler *c, char **specs, int n, bb_error *err) {
  for (int i = 0; i < n; i++) {
    char *dot = strchr(specs[i], '.'), *eq = strchr(specs[i], '=');
    if (!dot || !eq || eq < dot) {
      fprintf(stderr, "bb compile: --storage takes TYPE.PORT=DENOTATION, got %s\n", specs[i]);
      return 2;
    }
  }
  for (int i = 0; i < n; i++) {
    if (!specs[i]) continue;
    char *type = specs[i];
    size_t type_len = (size_t)(strchr(type, '.') - type);
    bb_component_port ports[MAX_PORTS];
    size_t n_ports = 0;
    for (int k = i; k < n && n_ports < MAX_PORTS; k++) {
      char *s = specs[k];
      if (!s || strncmp(s, type, type_len) != 0 || s[type_len] != '.') continue;
      char *eq = strchr(s, '=');
      *eq = '\0';
      ports[n_ports].port = s + type_len + 1;
      ports[n_ports].type = eq + 1;
      n_ports++;
      if (k != i) specs[k] = NULL;
    }
    type[type_len] = '\0';
    bb_component_decl decl = {sizeof decl, type, ports, n_ports, NULL, 0};
    if (bb_compiler_declare_component(c, &decl, err)) return 1;
  }
  return 0;
}

static int list_examples(void) {
  size_t n;
  const bb_example *const *all = bb_examples(&n);
  for (size_t i = 0; i < n; i++) printf("%-32s %s\n", all[i]->name, all[i]->description);
  return 0;
}

/* The output path of module i of an example: out itself for a one-module example, else
 * out with ".<Module>" inserted before its extension. */
static char *example_path(const char *out, const bb_example *ex, size_t i) {
  const char *mod = ex->modules[i]->name;
  size_t len = strlen(out) + strlen(mod) + 2;
  char *path = malloc(len);
  if (!path) return NULL;
  if (ex->n_modules == 1) {
    memcpy(path, out, strlen(out) + 1);
    return path;
  }
  const char *slash = strrchr(out, '/'), *dot = strrchr(out, '.');
  size_t stem = dot && (!slash || dot > slash + 1) ? (size_t)(dot - out) : strlen(out);
  snprintf(path, len, "%.*s.%s%s", (int)stem, out, mod, out + stem);
  return path;
}

static int compile_example(const char *name, const char *out) {
  const bb_example *ex = bb_example_find(name);
  if (!ex) {
    fprintf(stderr, "bb compile: no example named %s (bb compile --examples lists them)\n", name);
    return 2;
  }
  for (size_t i = 0; i < ex->n_modules; i++) {
    uint8_t *artifact = NULL;
    size_t len = 0;
    bb_error err;
    bb_error_clear(&err);
    if (bb_example_compile(ex, i, &artifact, &len, &err)) {
      fprintf(stderr, "bb compile: example %s, module %s: %s\n", name, ex->modules[i]->name, err.message);
      return 1;
    }
    char *path = example_path(out, ex, i);
    int rc = !path || cli_write_file(path, artifact, len);
    if (!rc) fprintf(stderr, "bb compile: wrote %s (%s, %zu bytes)\n", path, ex->modules[i]->name, len);
    else if (!path) fprintf(stderr, "bb compile: out of memory\n");
    free(path);
    bb_buffer_free(NULL, artifact);
    if (rc) return 1;
  }
  return 0;
}

/* `--examples` and `--example NAME -o FILE`: true when argv is one of them (its exit status
 * in *status), false for any other command line. */
static bool example_command(int argc, char **argv, int *status) {
  bool any = false;
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--examples") == 0) {
      *status = list_examples();
      return true;
    }
    if (strcmp(argv[i], "--example") == 0) any = true;
  }
  if (!any) return false;
  const char *example = NULL, *example_out = NULL;
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--example") == 0 && i + 1 < argc) example = argv[++i];
    else if (strcmp(argv[i], "-o") == 0 && i + 1 < argc) example_out = argv[++i];
    else {
      fprintf(stderr, "bb compile: --example takes only NAME and -o FILE (got %s)\n", argv[i]);
      *status = 2;
      return true;
    }
  }
  if (!example || !example_out) {
    usage();
    *status = 2;
    return true;
  }
  *status = compile_example(example, example_out);
  return true;
}

int cmd_compile(int argc, char **argv) {
  int example_status;
  if (example_command(argc, argv, &example_status)) return example_status;
  const char *in = NULL, *out = NULL;
  char **binds = calloc((size_t)argc + 1, sizeof *binds), **storage = calloc((size_t)argc + 1, sizeof *storage);
  int n_binds = 0, n_storage = 0, status = 2;
  bb_compiler *c = bb_compiler_new(NULL);
  bb_error err;
  bb_error_clear(&err);
  uint8_t *bytes = NULL, *artifact = NULL;
  size_t len = 0, artifact_len = 0;
  if (!binds || !storage || !c) {
    fprintf(stderr, "bb compile: out of memory\n");
    status = 1;
    goto done;
  }
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    bool has_value = i + 1 < argc;
    if (strcmp(a, "--passes") == 0) {
      for (const char *const *p = bb_compiler_pass_names(); *p; p++) printf("%s\n", *p);
      status = 0;
      goto done;
    } else if (strcmp(a, "--bind") == 0 && has_value) {
      binds[n_binds++] = argv[++i];
    } else if (strcmp(a, "--storage") == 0 && has_value) {
      storage[n_storage++] = argv[++i];
    } else if (strcmp(a, "--permissive") == 0) {
      bb_compiler_set_permissive_types(c, true);
    } else if (strcmp(a, "--disable") == 0 && has_value) {
      if (bb_compiler_disable_pass(c, argv[++i], &err)) {
        fprintf(stderr, "bb compile: --disable %s: %s\n", argv[i], err.message);
        goto done;
      }
    } else if (strcmp(a, "--budget-ns") == 0 && has_value) {
      char *end;
      unsigned long long ns = strtoull(argv[++i], &end, 10);
      if (*end || !ns) {
        fprintf(stderr, "bb compile: --budget-ns takes a positive number of nanoseconds\n");
        goto done;
      }
      bb_compiler_set_per_hop_budget_ns(c, (uint64_t)ns);
    } else if (strcmp(a, "-o") == 0 && has_value) {
      out = argv[++i];
    } else if (a[0] == '-') {
      fprintf(stderr, "bb compile: unknown option %s\n", a);
      usage();
      goto done;
    } else if (!in) {
      in = a;
    } else {
      fprintf(stderr, "bb compile: one model at a time (got %s and %s)\n", in, a);
      goto done;
    }
  }
  if (!in || !out) {
    usage();
    goto done;
  }
  status = 1;
  for (int i = 0; i < n_binds; i++) {
    char *eq = strchr(binds[i], '=');
    if (!eq || eq == binds[i] || !eq[1]) {
      fprintf(stderr, "bb compile: --bind takes SLOT=TYPE, got %s\n", binds[i]);
      status = 2;
      goto done;
    }
    *eq = '\0';
    if (bb_compiler_bind(c, BB_COMPILER_ROLE_OF_SLOT, binds[i], eq + 1, NULL, &err)) {
      fprintf(stderr, "bb compile: --bind %s: %s\n", binds[i], err.message);
      goto done;
    }
  }
  int rc = declare_storage(c, storage, n_storage, &err);
  if (rc) {
    if (rc == 1) fprintf(stderr, "bb compile: --storage: %s\n", err.message);
    status = rc;
    goto done;
  }
  if (bb_cpu_backend_declare_op_set(c, &err)) {
    fprintf(stderr, "bb compile: %s\n", err.message);
    goto done;
  }
  if (cli_read_file(in, &bytes, &len)) goto done;
  if (bb_compiler_compile(c, bytes, len, &artifact, &artifact_len, &err)) {
    fprintf(stderr, "bb compile: %s: %s\n", in, err.message);
    goto done;
  }
  if (cli_write_file(out, artifact, artifact_len)) goto done;
  fprintf(stderr, "bb compile: wrote %s (%zu bytes)\n", out, artifact_len);
  status = 0;
done:
  free(bytes);
  bb_buffer_free(NULL, artifact);
  bb_compiler_free(c);
  free(binds);
  free(storage);
  return status;
}
