/* The carrier types whose type_hash a peer may send: stable names, and lookup by hash. */
#include <stddef.h>

#include "bb/wire.h"

/* The reference's carrier names (runtime.md §3.4), kept so envelopes from either
 * implementation are readable. */
static const char *const CARRIERS[] = {
    "bb_runtime::syscall::values::TriggerValue",
    "bb_runtime::syscall::values::BytesValue",
    "bb_runtime::syscall::values::PeerIdValue",
    "bb_runtime::syscall::values::PeerIdVecValue",
    "bb_runtime::syscall::values::WireReqIdValue",
    "bb_runtime::syscall::values::AddressValue",
    "bb_runtime::syscall::values::AddressVecValue",
    "bb_runtime::syscall::values::CompositeValue",
    "bb_runtime::syscall::values::U64Value",
    "bb_runtime::syscall::values::TimestampValue",
    "bb_runtime::syscall::values::CommandIdValue",
    "bb_runtime::syscall::values::CorrelationTokenValue",
    "bb_runtime::framework::backpressure_notice::BackoffNoticePayload",
};

const char *bb_wire_type_name(uint64_t type_hash) {
  for (size_t i = 0; i < sizeof CARRIERS / sizeof CARRIERS[0]; i++)
    if (bb_type_hash(CARRIERS[i]) == type_hash) return CARRIERS[i];
  return NULL;
}
