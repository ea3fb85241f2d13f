/* bytesandbrains — privacy: secure aggregation (SecAgg+), differential privacy and its
 * accountant (docs/PRIVACY.md; message formats in docs/WIRE.md).
 *
 * Secure aggregation lets a server learn the sum of n clients' vectors and nothing else,
 * while up to a threshold of clients may drop out mid-round. Both ends are sans-IO state
 * machines: bytes in, bytes out, time passed in by the caller as now_ns, a deadline read
 * back as an expiry. Clients are known by their Ed25519 identity keys.
 *
 *   // the server of a round over n clients and vectors of len elements
 *   bb_secagg_server_config sc = {.struct_size = sizeof sc, .n_clients = n, .vector_len = len};
 *   bb_secagg_server_new(&sc, identity_keys, NULL, &server, &err);   // n × 32 bytes
 *   bb_secagg_server_start(server, now_ns, &err);
 *   while (bb_secagg_server_next_message(server, &to, &data, &size)) send(client[to], data, size);
 *   // a message from client i:   bb_secagg_server_receive(server, i, bytes, size, now_ns, &err);
 *   // at bb_secagg_server_expiry(server):   bb_secagg_server_handle_expiry(server, now_ns, &err);
 *   // once bb_secagg_server_stage(server) == BB_SECAGG_DONE:
 *   bb_secagg_server_result(server, sum, len, &n_summed, &err);
 *
 *   // client i, holding its identity's secret key and its update
 *   bb_secagg_client_config cc = {.struct_size = sizeof cc, .identity_secret_key = sk};
 *   bb_secagg_client_new(&cc, NULL, &client, &err);
 *   bb_secagg_client_set_input(client, update, len, &err);
 *   // a message from the server:   bb_secagg_client_receive(client, bytes, size, now_ns, &err);
 *   while (bb_secagg_client_next_message(client, &data, &size)) send(server, data, size);
 *
 * Differential privacy: clipping and exactly sampled (discrete) Gaussian noise over float
 * vectors, adaptive clipping, and a Rényi-DP accountant for the subsampled Gaussian:
 *
 *   bb_dp_client_options dp = {.struct_size = sizeof dp, .clip = 1.0, .noise_multiplier = 1.1,
 *                              .clients = 10};
 *   bb_dp_client_privatize(update, len, &dp, &report, &err);      // before masking
 *   bb_dp_epsilon(q, 1.1, rounds, 1e-5, &epsilon, &order, &err);   // the privacy spent
 *
 * Cryptography is libsodium's (X25519, Ed25519, ChaCha20, ChaCha20-Poly1305, BLAKE2b); the
 * Shamir arithmetic in GF(2^8) is written here, constant-time, and shares interoperate
 * with the npm package shamir-secret-sharing. */
#ifndef BB_PRIVACY_H
#define BB_PRIVACY_H

#include <stdbool.h>

#include "bb/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- randomness ------------------------------------------------------------------------- */

/* Where secrets and noise come from. fill NULL: the system's CSPRNG (libsodium's
 * randombytes natively, getentropy in bb.wasm). A deterministic fill makes runs
 * reproducible (tests, simulations) and must never be used for a real round. */
typedef struct bb_random_source {
  int (*fill)(void *user_data, uint8_t *out, size_t len); /* 0, or a negative code */
  void *user_data;
} bb_random_source;

/* ---- Shamir secret sharing over GF(2^8) ------------------------------------------------- */

/* Shares are the layout of the npm package shamir-secret-sharing: len bytes of y values
 * (one polynomial per secret byte, field x^8 + x^4 + x^3 + x + 1) and the x coordinate as
 * the last byte, so a share is len + 1 bytes. Arithmetic is constant-time: no branch and no
 * table lookup depends on a secret. */
#define BB_SHAMIR_MAX_SHARES 255

/* Splits secret[0..len) into n shares (2 <= threshold <= n <= 255) at the x coordinates
 * xs[0..n) (distinct, nonzero; NULL: 1..n), writing n × (len + 1) bytes to shares. */
BB_API int bb_shamir_split(const uint8_t *secret, size_t len, uint32_t n, uint32_t threshold, const uint8_t *xs,
                           const bb_random_source *random, uint8_t *shares, bb_error *err);

/* Reconstructs the secret (share_len - 1 bytes) from n shares of share_len bytes each,
 * laid out one after the other. Two shares with one x coordinate, or an x of 0, are
 * BB_ERR_MALFORMED. Fewer shares than the threshold give a wrong secret, not an error:
 * nothing in a share says what the threshold was. */
BB_API int bb_shamir_combine(const uint8_t *shares, uint32_t n, size_t share_len, uint8_t *secret, bb_error *err);

/* ---- secure aggregation: parameters ----------------------------------------------------- */

/* The protocol version this library speaks; a message of another version is refused. */
#define BB_SECAGG_VERSION 1
#define BB_SECAGG_KEY_BYTES 32       /* Ed25519 and X25519 public keys */
#define BB_SECAGG_SECRET_KEY_BYTES 64 /* an Ed25519 secret key in libsodium's layout: seed ‖ public key */
#define BB_SECAGG_SIGNATURE_BYTES 64
/* Each client's secrets are shared with its neighbours at x coordinates 1..degree. */
#define BB_SECAGG_MAX_DEGREE 254

/* What every message of a round carries about it (the setup message sends it to each
 * client, which checks it against its caps and its own demands). */
typedef struct bb_secagg_params {
  uint32_t n_clients;    /* clients invited, numbered 0..n_clients-1 */
  uint32_t degree;       /* neighbours each client shares its secrets with */
  uint32_t threshold;    /* shares that reconstruct a secret; more than degree / 2 */
  uint32_t min_clients;  /* fewest clients whose vectors may make up a sum */
  uint32_t vector_len;   /* elements of every vector */
  uint32_t modulus_bits; /* the sum lives in Z / 2^modulus_bits */
  double clip_range;     /* each element is clipped to [-clip_range, clip_range] ... */
  uint64_t quant_range;  /* ... and mapped onto the integers 0..quant_range */
} bb_secagg_params;

/* Caps on what a peer may make us hold; zero fields take the defaults in brackets. */
typedef struct bb_secagg_caps {
  uint32_t max_clients;    /* [10,000] */
  uint32_t max_vector_len; /* [4,194,304] elements */
} bb_secagg_caps;

/* Where a round is. A client names the stage whose server message it waits for. */
typedef enum bb_secagg_stage {
  BB_SECAGG_SETUP = 0,       /* client: no setup yet; server: not started */
  BB_SECAGG_ADVERTISE_KEYS,  /* the clients' public keys, signed by their identities */
  BB_SECAGG_SHARE_KEYS,      /* each client's secrets, shared with its neighbours */
  BB_SECAGG_MASKED_INPUT,    /* the masked vectors */
  BB_SECAGG_UNMASK,          /* the shares that remove the masks */
  BB_SECAGG_DONE,            /* server: the sum is ready; client: its part is done */
  BB_SECAGG_ABORTED          /* the round ended without a sum; secrets are wiped */
} bb_secagg_stage;

/* "setup", "advertise_keys", "share_keys", "masked_input", "unmask", "done", "aborted". */
BB_API const char *bb_secagg_stage_name(bb_secagg_stage stage);

/* Why a message was refused or a round aborted: the name appears in the error message
 * ("secagg: ... refused (bad_signature): ..."). */
typedef enum bb_secagg_reason {
  BB_SECAGG_OK = 0,
  BB_SECAGG_TRUNCATED,           /* fewer bytes than the header or a field needs */
  BB_SECAGG_BAD_MAGIC,
  BB_SECAGG_BAD_VERSION,
  BB_SECAGG_BAD_TYPE,            /* an unknown message type */
  BB_SECAGG_BAD_LENGTH,          /* a count that does not match the bytes, or bytes left over */
  BB_SECAGG_OVER_CAP,            /* a count past a cap */
  BB_SECAGG_BAD_VALUE,           /* a field out of its range (an element past the modulus,
                                    an unsorted or repeated index, a reserved byte set) */
  BB_SECAGG_BAD_PARAMS,          /* parameters that break the protocol's rules or the caps */
  BB_SECAGG_WEAK_PARAMS,         /* parameters weaker than this client demands */
  BB_SECAGG_OTHER_ROUND,         /* a round id other than this round's */
  BB_SECAGG_WRONG_STAGE,         /* a message this stage does not take (late, early, repeated) */
  BB_SECAGG_WRONG_SENDER,        /* the index in the message is not the sender's */
  BB_SECAGG_NOT_PARTICIPANT,     /* the setup does not list this client's identity at its index */
  BB_SECAGG_BAD_SIGNATURE,       /* a public key not signed by its owner's identity */
  BB_SECAGG_BAD_KEY,             /* a low-order or repeated public key */
  BB_SECAGG_NOT_NEIGHBOUR,       /* a client the masking graph does not make a neighbour */
  BB_SECAGG_BAD_CIPHERTEXT,      /* a share that does not decrypt, or names other clients */
  BB_SECAGG_TOO_FEW_NEIGHBOURS,  /* fewer neighbours left than the threshold */
  BB_SECAGG_BOTH_SHARES,         /* asked for both kinds of share of one client (a lying server) */
  BB_SECAGG_TOO_FEW_CLIENTS,     /* fewer clients left than min_clients */
  BB_SECAGG_BELOW_THRESHOLD,     /* a secret the sum needs has fewer shares than the threshold */
  BB_SECAGG_BAD_SHARES,          /* shares that reconstruct something other than what was committed */
  BB_SECAGG_DEADLINE,            /* a client heard nothing from the server in time */
  BB_SECAGG_SERVER_ABORT         /* the server ended the round */
} bb_secagg_reason;

/* A stable token for a reason ("ok", "truncated", ..., "server_abort"). */
BB_API const char *bb_secagg_reason_name(bb_secagg_reason reason);

/* ---- secure aggregation: the server ------------------------------------------------------ */

typedef struct bb_secagg_server bb_secagg_server;

/* A round. Zero fields take the defaults in brackets (Flower's SecAgg+ defaults for the
 * quantisation); the round fails to start unless n_clients × quant_range < 2^modulus_bits,
 * so that the sum never wraps. */
typedef struct bb_secagg_server_config {
  size_t struct_size;        /* sizeof(bb_secagg_server_config) */
  uint32_t n_clients;        /* clients invited (2..caps.max_clients) */
  uint32_t degree;           /* neighbours per client, even, or n_clients - 1 for every other
                                client [n_clients - 1 up to 32 clients, else the even number
                                nearest 6 log2 n_clients] */
  uint32_t threshold;        /* > degree / 2 and <= degree [degree / 2 + 1] */
  uint32_t min_clients;      /* >= 2 [max(threshold, 2)] */
  uint32_t vector_len;       /* 1..caps.max_vector_len */
  uint32_t modulus_bits;     /* 8..64 [32] */
  double clip_range;         /* > 0 [8.0] */
  uint64_t quant_range;      /* >= 1 [2^22] */
  uint64_t stage_timeout_ns; /* how long each stage waits for the clients [30 s] */
  bb_secagg_caps caps;
  bb_random_source random;
} bb_secagg_server_config;

/* Makes a server for one round. identity_keys holds the n_clients Ed25519 public keys,
 * client i's at i × 32; they are copied. */
BB_API int bb_secagg_server_new(const bb_secagg_server_config *config, const uint8_t *identity_keys,
                                const bb_allocator *alloc, bb_secagg_server **out, bb_error *err);
/* Wipes every secret the server holds and frees it; NULL is a no-op. */
BB_API void bb_secagg_server_free(bb_secagg_server *server);

/* Sends the setup to every client and starts the first stage's deadline. */
BB_API int bb_secagg_server_start(bb_secagg_server *server, uint64_t now_ns, bb_error *err);

/* The next message to send: 1 with *client (its index), *data and *len set (valid until
 * the next call on the server), 0 when there is none. */
BB_API int bb_secagg_server_next_message(bb_secagg_server *server, uint32_t *client, const uint8_t **data,
                                         size_t *len);

/* Takes a message from client `client` (the index the transport authenticated). A
 * refused message returns its code with the reason named; a client whose message is
 * malformed or breaks the protocol leaves the round (as if it had dropped), except a
 * repeated or late message, which is refused and changes nothing. A stage ends early once
 * every client it waits for has answered. */
BB_API int bb_secagg_server_receive(bb_secagg_server *server, uint32_t client, const uint8_t *data, size_t len,
                                    uint64_t now_ns, bb_error *err);

/* When the current stage's deadline passes (UINT64_MAX once the round is over). */
BB_API uint64_t bb_secagg_server_expiry(const bb_secagg_server *server);
/* Closes the current stage if its deadline has passed: the clients that did not answer
 * have dropped. Returns a negative code when that aborts the round: BB_ERR_LIMIT below
 * min_clients or the threshold, BB_ERR_DENIED for shares that do not rebuild what their
 * owner committed to. */
BB_API int bb_secagg_server_handle_expiry(bb_secagg_server *server, uint64_t now_ns, bb_error *err);

BB_API bb_secagg_stage bb_secagg_server_stage(const bb_secagg_server *server);
/* Why the round aborted (BB_SECAGG_OK while it has not). */
BB_API bb_secagg_reason bb_secagg_server_abort_reason(const bb_secagg_server *server);
/* The round's parameters, defaults filled in. */
BB_API void bb_secagg_server_params(const bb_secagg_server *server, bb_secagg_params *out);

/* The sum, dequantised, once the round is DONE: out[0..len) (len = vector_len) is the sum
 * of the clipped vectors of the *n_summed clients whose masked input arrived, within
 * n_summed × 2 × clip_range / quant_range of it per element. BB_ERR_LIMIT when the round
 * aborted, BB_ERR_INVALID_ARGUMENT before it is done. */
BB_API int bb_secagg_server_result(const bb_secagg_server *server, float *out, size_t len, uint32_t *n_summed,
                                   bb_error *err);
/* The same sum in the ring (each element < 2^modulus_bits), before dequantisation. */
BB_API int bb_secagg_server_result_ring(const bb_secagg_server *server, uint64_t *out, size_t len, bb_error *err);
/* Whether client i's vector is in the sum (false until the round is DONE). */
BB_API bool bb_secagg_server_summed(const bb_secagg_server *server, uint32_t client);

typedef struct bb_secagg_server_stats {
  uint64_t messages_sent, bytes_sent;
  uint64_t messages_received, bytes_received;
  uint64_t refused;              /* messages refused */
  uint32_t advertised;           /* clients whose keys arrived */
  uint32_t shared;               /* clients whose shares arrived */
  uint32_t masked;               /* clients whose masked vectors arrived (the sum's) */
  uint32_t unmasked;             /* clients whose unmasking shares arrived */
  uint32_t recovered;            /* dropped clients whose pairwise masks were removed */
} bb_secagg_server_stats;

BB_API void bb_secagg_server_get_stats(const bb_secagg_server *server, bb_secagg_server_stats *out);

/* ---- secure aggregation: a client --------------------------------------------------------- */

typedef struct bb_secagg_client bb_secagg_client;

/* Zero fields take the defaults in brackets. */
typedef struct bb_secagg_client_config {
  size_t struct_size;                 /* sizeof(bb_secagg_client_config) */
  /* This client's identity: its Ed25519 secret key (libsodium's 64-byte layout), or NULL
   * when the host signs (an identity kept in a non-extractable WebCrypto key): then
   * identity_public_key names it and bb_secagg_client_sign_payload says what to sign. */
  const uint8_t *identity_secret_key;
  const uint8_t *identity_public_key; /* 32 bytes; NULL: taken from identity_secret_key */
  uint32_t min_clients;               /* refuse a round that may sum fewer clients [2] */
  uint32_t min_threshold;             /* refuse a round with a lower threshold [2] */
  uint64_t timeout_ns;                /* abort when the server says nothing for this long [300 s] */
  bb_secagg_caps caps;
  bb_random_source random;
} bb_secagg_client_config;

BB_API int bb_secagg_client_new(const bb_secagg_client_config *config, const bb_allocator *alloc,
                                bb_secagg_client **out, bb_error *err);
/* Wipes every secret the client holds and frees it; NULL is a no-op. */
BB_API void bb_secagg_client_free(bb_secagg_client *client);

/* The vector this client contributes: len floats, clipped to the round's clip range and
 * quantised with stochastic rounding when it is masked. May be given before the round's
 * setup or while the client waits for it (bb_secagg_client_wants_input); len must then
 * match the round's vector_len. */
BB_API int bb_secagg_client_set_input(bb_secagg_client *client, const float *x, size_t len, bb_error *err);
/* The same with elements already in the ring (each < 2^modulus_bits), for inputs the
 * caller quantised itself (integer noise for distributed DP). */
BB_API int bb_secagg_client_set_input_ring(bb_secagg_client *client, const uint64_t *q, size_t len, bb_error *err);
/* True when the masked-input stage waits only for this client's vector. */
BB_API bool bb_secagg_client_wants_input(const bb_secagg_client *client);

/* Takes a message from the server. A refused message returns its code with the reason
 * named. Refusals for what an honest server never sends — a forged or repeated key, a
 * request for both kinds of share of one client, parameters weaker than this client
 * demands — abort the round and wipe the client's secrets; malformed bytes change nothing. */
BB_API int bb_secagg_client_receive(bb_secagg_client *client, const uint8_t *data, size_t len, uint64_t now_ns,
                                    bb_error *err);

/* The next message to send to the server: 1 with *data and *len (valid until the next
 * call on the client), 0 when there is none. */
BB_API int bb_secagg_client_next_message(bb_secagg_client *client, const uint8_t **data, size_t *len);

/* With a host-held identity: the bytes to sign with it (Ed25519), 1 when a signature is
 * awaited, 0 otherwise. */
BB_API int bb_secagg_client_sign_payload(const bb_secagg_client *client, const uint8_t **data, size_t *len);
/* Hands over that signature; the client then sends its keys. */
BB_API int bb_secagg_client_set_signature(bb_secagg_client *client, const uint8_t signature[64], uint64_t now_ns,
                                          bb_error *err);

/* When the client gives up waiting for the server (UINT64_MAX when done or aborted). */
BB_API uint64_t bb_secagg_client_expiry(const bb_secagg_client *client);
/* Aborts the round (BB_SECAGG_DEADLINE) if the expiry has passed; BB_ERR_LIMIT then. */
BB_API int bb_secagg_client_handle_expiry(bb_secagg_client *client, uint64_t now_ns, bb_error *err);

BB_API bb_secagg_stage bb_secagg_client_stage(const bb_secagg_client *client);
BB_API bb_secagg_reason bb_secagg_client_abort_reason(const bb_secagg_client *client);
/* This client's index in the round (once the setup arrived) and the round's parameters;
 * false before the setup. */
BB_API bool bb_secagg_client_round(const bb_secagg_client *client, uint32_t *index, bb_secagg_params *params);
/* Elements of this client's vector that the clip range cut (known once it is masked). */
BB_API uint64_t bb_secagg_client_clipped(const bb_secagg_client *client);

/* A fresh Ed25519 key pair (libsodium's layout: secret_key is 64 bytes) from `random`
 * (NULL: the system CSPRNG): a node's identity (its peer id is
 * bb_peer_id_from_ed25519(public_key)). */
BB_API int bb_secagg_identity_new(uint8_t public_key[32], uint8_t secret_key[64], const bb_random_source *random,
                                  bb_error *err);

/* A node's signer (bb_sign_fn, bb_install_args.sign) for a host that holds its identity's
 * secret key: user points at the 64-byte Ed25519 secret key, which must outlive the node.
 * FedAvg's secure=1 signs a client's SecAgg+ keys with it. */
BB_API int bb_identity_sign(void *user, const char *slot, const uint8_t *msg, size_t len, uint8_t signature[64],
                            bb_error *err);

/* ---- differential privacy --------------------------------------------------------------- */

/* Scales x[0..n) so that its L2 norm is at most clip (> 0). Returns the norm before. */
BB_API double bb_dp_clip(float *x, size_t n, double clip);

/* Adds Gaussian noise of standard deviation stddev (> 0) to x[0..n): x is rounded to the
 * grid (a power of two; 0 picks stddev / 2^16 rounded down to one) and each element gets
 * grid × a discrete Gaussian sample of scale stddev / grid, drawn exactly with integer
 * arithmetic (Canonne, Kamath and Steinke 2020). So the output is a multiple of the grid
 * and its distribution does not depend on the low bits of the input. */
BB_API int bb_dp_add_gaussian(float *x, size_t n, double stddev, double grid, const bb_random_source *random,
                              bb_error *err);

/* DP-FedAvg on a client (McMahan et al. 2018), noise split across the clients that sum. */
typedef struct bb_dp_client_options {
  size_t struct_size;      /* sizeof(bb_dp_client_options) */
  double clip;             /* the L2 bound C on an update (> 0) */
  double noise_multiplier; /* z: the sum of `clients` updates carries noise of stddev z × C [0: none] */
  uint32_t clients;        /* clients whose noise makes up the sum's [1: all of it here] */
  double grid;             /* noise granularity, a power of two [0: automatic] */
  bb_random_source random;
} bb_dp_client_options;

/* What a privatization did. */
typedef struct bb_dp_report {
  double norm;   /* the update's L2 norm before clipping */
  double scale;  /* the factor clipping applied (1 when within the bound) */
  double stddev; /* the noise this client added per element */
  double grid;   /* the grid the output lies on (0 without noise) */
} bb_dp_report;

/* Clips x[0..n) to clip (so that, rounded to the grid, its norm stays within clip) and adds
 * this client's share of the noise: stddev z × C / sqrt(clients). */
BB_API int bb_dp_client_privatize(float *x, size_t n, const bb_dp_client_options *options, bb_dp_report *report,
                                  bb_error *err);

/* Adaptive clipping (Andrew et al. 2021): the clip follows a quantile of the clients'
 * update norms, learnt from a noised count of the updates within it. */
typedef struct bb_dp_adaptive_clip {
  size_t struct_size;     /* sizeof(bb_dp_adaptive_clip) */
  double clip;            /* the current clip (> 0) */
  double target_quantile; /* the fraction of updates meant to fall within it [0.5] */
  double learning_rate;   /* of the geometric update [0.2] */
  double count_stddev;    /* noise on the count of updates within the clip [clients / 20] */
  double expected_clients; /* the fraction's fixed denominator under Poisson sampling, where
                              the count of updates is itself private [0: the count] */
} bb_dp_adaptive_clip;

/* One round's update: `unclipped` of `clients` updates had a norm within state->clip.
 * clip ← clip × exp(-learning_rate × (b - target_quantile)) with b the noised fraction
 * (Σ (1[within] - 1/2) + N(0, count_stddev²)) / n + 1/2, n = expected_clients or else
 * clients, held to [0, 1] — so one update moves the clip by a factor between
 * exp(-learning_rate × (1 - target_quantile)) and exp(learning_rate × target_quantile),
 * whatever the clients sent and the noise drew; *fraction (may be NULL) receives b. */
BB_API int bb_dp_adaptive_clip_update(bb_dp_adaptive_clip *state, uint32_t unclipped, uint32_t clients,
                                      const bb_random_source *random, double *fraction, bb_error *err);

/* The noise multiplier for the updates when the count is noised with count_stddev, so
 * that the pair spends what z alone would: (z^-2 - (2 count_stddev)^-2)^-1/2.
 * BB_ERR_INVALID_ARGUMENT unless 2 count_stddev > z, when no such multiplier exists. */
BB_API int bb_dp_adaptive_noise_multiplier(double noise_multiplier, double count_stddev, double *update_multiplier,
                                           bb_error *err);

/* Poisson sampling of a round's participants: a fresh secret key per round (32 bytes
 * from the source; NULL: the system CSPRNG) and, for each participant, the keyed BLAKE2b
 * of its id under it, read as a uniform 64-bit number, say whether it takes part — with
 * probability `rate`, independently of every other participant and every other round,
 * and the same answer however often it asks within the round:
 *
 *   uint8_t key[BB_DP_SAMPLE_KEY_BYTES];
 *   bb_dp_sample_key(NULL, key, &err);                    // when the round opens
 *   if (bb_dp_sampled(key, peer, peer_len, 0.01)) ...     // for each arriving update */
#define BB_DP_SAMPLE_KEY_BYTES 32
BB_API int bb_dp_sample_key(const bb_random_source *random, uint8_t key[BB_DP_SAMPLE_KEY_BYTES], bb_error *err);
/* rate >= 1: everyone; rate <= 0 (or NaN): no one. */
BB_API bool bb_dp_sampled(const uint8_t key[BB_DP_SAMPLE_KEY_BYTES], const uint8_t *id, size_t len, double rate);

/* ---- the Rényi-DP accountant ---------------------------------------------------------- */

/* RDP at order alpha (> 1) of one step of the sampled Gaussian mechanism: sampling rate q
 * in [0, 1], noise multiplier sigma (> 0) (Mironov, Talwar and Zhang 2019: integer orders
 * by the exact binomial sum, fractional orders by its two-sided series). */
BB_API int bb_rdp_sampled_gaussian(double q, double sigma, double alpha, double *rdp, bb_error *err);

/* The orders the accountant tracks: 1.1 to 10.9 in steps of 0.1, 11 to 64, then 80, 96,
 * 128, 192, 256, 512 and 1024. */
#define BB_RDP_ORDERS 160
BB_API const double *bb_rdp_orders(void);

/* RDP spent so far at every order; zero-initialise, then add steps. */
typedef struct bb_rdp_accountant {
  double rdp[BB_RDP_ORDERS];
  uint64_t steps;
} bb_rdp_accountant;

/* Adds `steps` steps of the sampled Gaussian (q, sigma). */
BB_API int bb_rdp_accountant_add(bb_rdp_accountant *acc, double q, double sigma, uint64_t steps, bb_error *err);
/* ε at delta (0 < delta < 1) by the classic conversion ε = min over α of
 * rdp(α) + log(1/δ) / (α - 1) (Mironov 2017, Proposition 3); *order gets the α. */
BB_API int bb_rdp_accountant_epsilon(const bb_rdp_accountant *acc, double delta, double *epsilon, double *order,
                                     bb_error *err);

/* The two above for T steps of one mechanism: what `bb dp-epsilon` prints. */
BB_API int bb_dp_epsilon(double q, double sigma, uint64_t steps, double delta, double *epsilon, double *order,
                         bb_error *err);

#ifdef __cplusplus
}
#endif
#endif /* BB_PRIVACY_H */
