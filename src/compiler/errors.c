/* CompileError kinds: their names and how a compile fails with one. */
#include <stdarg.h>
#include <stdio.h>

#include "compiler/compiler.h"

static const char *const NAMES[BB_COMPILE_ERROR_COUNT] = {
    [BB_COMPILE_OK] = "Ok",
    [BB_COMPILE_UNKNOWN_OP] = "UnknownOp",
    [BB_COMPILE_DANGLING_INPUT] = "DanglingInput",
    [BB_COMPILE_DUPLICATE_OUTPUT] = "DuplicateOutput",
    [BB_COMPILE_MISSING_TYPE_INFO] = "MissingTypeInfo",
    [BB_COMPILE_MALFORMED_SLOT_METADATA] = "MalformedSlotMetadata",
    [BB_COMPILE_CYCLIC_GRAPH] = "CyclicGraph",
    [BB_COMPILE_OPSET_NOT_IMPORTED] = "OpsetNotImported",
    [BB_COMPILE_EXPANSION_FAILED] = "ExpansionFailed",
    [BB_COMPILE_ROLE_METHOD_FAILED] = "RoleMethodFailed",
    [BB_COMPILE_AMBIGUOUS_ROLE] = "AmbiguousRole",
    [BB_COMPILE_UNRESOLVED_PEER_CLASS] = "UnresolvedPeerClass",
    [BB_COMPILE_CROSS_CLASS_DATAFLOW] = "CrossClassDataflow",
    [BB_COMPILE_IR_VERSION_MISMATCH] = "IrVersionMismatch",
    [BB_COMPILE_MISSING_BINDING] = "MissingBinding",
    [BB_COMPILE_EMPTY_FUNCTION_TABLE] = "EmptyFunctionTable",
    [BB_COMPILE_RUNTIME_INCOMPLETE] = "RuntimeIncomplete",
    [BB_COMPILE_INTERNAL] = "Internal",
    [BB_COMPILE_TYPE_CONSTRAINT_FAILED] = "TypeConstraintFailed",
    [BB_COMPILE_UNRESOLVED_TYPE] = "UnresolvedType",
    [BB_COMPILE_UNBOUND_DEPENDENCY] = "UnboundDependency",
    [BB_COMPILE_UNKNOWN_PORT] = "UnknownPort",
    [BB_COMPILE_PORT_UNWIRED] = "PortUnwired",
    [BB_COMPILE_NETWORK_OP_NOT_AT_BOUNDARY] = "NetworkOpNotAtBoundary",
    [BB_COMPILE_INVALID_SLOT_ID] = "InvalidSlotId",
    [BB_COMPILE_UNKNOWN_SLOT_ID] = "UnknownSlotId",
    [BB_COMPILE_UNKNOWN_ROLE_RUNTIME] = "UnknownRoleRuntime",
    [BB_COMPILE_MISSING_CODEC_PORT_METADATA] = "MissingCodecPortMetadata",
    [BB_COMPILE_INVALID_CODEC_PORT] = "InvalidCodecPort",
    [BB_COMPILE_AMBIGUOUS_ROLE_BINDING] = "AmbiguousRoleBinding",
    [BB_COMPILE_MISSING_REQUIRED_TRAIT_METADATA] = "MissingRequiredTraitMetadata",
    [BB_COMPILE_DEPENDENCY_ROLE_MISMATCH] = "DependencyRoleMismatch",
    [BB_COMPILE_UNBOUND_SLOT] = "UnboundSlot",
    [BB_COMPILE_BOOTSTRAP_COMPOSITION_GAP] = "BootstrapCompositionGap",
    [BB_COMPILE_BOOTSTRAP_COMPOSITION_CYCLE] = "BootstrapCompositionCycle",
    [BB_COMPILE_INCOMPATIBLE_STORAGE_ON_EDGE] = "IncompatibleStorageOnEdge",
    [BB_COMPILE_BINDING_ROLE_MISMATCH] = "BindingRoleMismatch",
    [BB_COMPILE_BAD_INPUT] = "BadInput",
    [BB_COMPILE_WIRE_CONFLICT] = "WireConflict",
    [BB_COMPILE_SPLIT_PLACEMENT] = "SplitPlacement",
};

const char *bb_compile_error_name(bb_compile_error kind) {
  return (unsigned)kind < BB_COMPILE_ERROR_COUNT && NAMES[kind] ? NAMES[kind] : "Unknown";
}

/* The bb_error code a kind reports with: types are BB_ERR_TYPE, the shape of the input
 * graph BB_ERR_MALFORMED, missing bindings BB_ERR_NOT_FOUND, the rest
 * BB_ERR_INVALID_ARGUMENT. */
static int code_of(bb_compile_error kind) {
  switch (kind) {
    case BB_COMPILE_TYPE_CONSTRAINT_FAILED:
    case BB_COMPILE_UNRESOLVED_TYPE:
    case BB_COMPILE_INCOMPATIBLE_STORAGE_ON_EDGE:
    case BB_COMPILE_MISSING_TYPE_INFO:
    case BB_COMPILE_WIRE_CONFLICT:
      return BB_ERR_TYPE;
    case BB_COMPILE_UNKNOWN_OP:
    case BB_COMPILE_DANGLING_INPUT:
    case BB_COMPILE_DUPLICATE_OUTPUT:
    case BB_COMPILE_MALFORMED_SLOT_METADATA:
    case BB_COMPILE_CYCLIC_GRAPH:
    case BB_COMPILE_OPSET_NOT_IMPORTED:
    case BB_COMPILE_EMPTY_FUNCTION_TABLE:
    case BB_COMPILE_BAD_INPUT:
    case BB_COMPILE_BOOTSTRAP_COMPOSITION_GAP:
    case BB_COMPILE_BOOTSTRAP_COMPOSITION_CYCLE:
      return BB_ERR_MALFORMED;
    case BB_COMPILE_UNKNOWN_SLOT_ID:
    case BB_COMPILE_UNBOUND_DEPENDENCY:
    case BB_COMPILE_UNBOUND_SLOT:
      return BB_ERR_NOT_FOUND;
    case BB_COMPILE_IR_VERSION_MISMATCH:
      return BB_ERR_UNSUPPORTED;
    default:
      return BB_ERR_INVALID_ARGUMENT;
  }
}

int cc_fail(cc_ctx *x, bb_compile_error kind, const char *fmt, ...) {
  x->kind = kind;
  int code = code_of(kind);
  if (x->err) {
    x->err->code = code;
    int n = snprintf(x->err->message, sizeof x->err->message, "%s: ", bb_compile_error_name(kind));
    if (n < 0) n = 0;
    if ((size_t)n < sizeof x->err->message) {
      va_list ap;
      va_start(ap, fmt);
      vsnprintf(x->err->message + n, sizeof x->err->message - (size_t)n, fmt, ap);
      va_end(ap);
    }
  }
  return code;
}

int cc_nomem(cc_ctx *x) {
  x->kind = BB_COMPILE_INTERNAL;
  return bb_error_set(x->err, BB_ERR_NOMEM, "Internal: out of memory while compiling");
}
