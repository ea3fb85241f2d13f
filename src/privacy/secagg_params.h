/* A round's parameters: the defaults a server fills in and the rules both ends check. */
#ifndef BBI_PRIVACY_SECAGG_PARAMS_H
#define BBI_PRIVACY_SECAGG_PARAMS_H

#include "bb/privacy.h"

/* The server's parameters from its config, defaults filled in (not yet checked). */
bb_secagg_params sa_params_from_config(const bb_secagg_server_config *c);

/* The protocol's rules (docs/PRIVACY.md, "Parameters") and the caps. */
int sa_params_check(const bb_secagg_params *p, const bb_secagg_caps *caps, bb_secagg_reason *reason, bb_error *err);

/* 2^bits - 1: the mask that reduces into the ring. */
static inline uint64_t sa_ring_mask(uint32_t bits) { return bits >= 64 ? UINT64_MAX : (((uint64_t)1 << bits) - 1); }

#endif
