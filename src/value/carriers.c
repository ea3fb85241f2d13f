/* The carrier types whose type_hash a peer may send: the value kinds (bb/value.h) and the
 * framework's own back-off notice. */
#include <stddef.h>

#include "bb/value.h"
#include "bb/wire.h"

/* The back-pressure notice's carrier name: its FNV-1a-64 is the notice's type hash, so
 * it never changes. */
#define BACKOFF_NOTICE "bb_runtime::framework::backpressure_notice::BackoffNoticePayload"

const char *bb_wire_type_name(uint64_t type_hash) {
  int kind = bb_val_kind_of_hash(type_hash);
  if (kind >= 0) return bb_val_carrier_name(kind);
  return bb_type_hash(BACKOFF_NOTICE) == type_hash ? BACKOFF_NOTICE : NULL;
}
