/* sim_symmetry.h -- private to weft-sim: the rank maps under which a call replays the same on
 * every rank, so that replaying one rank per class is exact.
 *
 * Ranks fall into classes of p/d: rank b stands for its representative rep(b) = b mod d, and
 * g_b, the map that takes rep(b) to b, is a translation by b - rep(b): a rotation (x + t) mod p,
 * or, for p and d powers of two, an XOR x ^ t. Either kind keeps ranks of a node together when d
 * is a multiple of the node size. A call has the symmetry when every rank's schedule is its
 * representative's, op for op, in everything the engine reads (sim_sym_matches), with each
 * stream's peer moved by g_b of one kind, the same for every rank of the class: a stream follows
 * rotations or XORs (a recursive doubling exchanges with XOR partners, but passes its call
 * description around a ring). Then the streams of all ranks pair up exactly as their
 * representatives' do (pair_streams: the peer of a representative's stream receives on the
 * stream of rep(peer) whose peer is g_peer^-1 of the sender, by the stream's kind), every rank's
 * replay is its representative's, and replaying the representatives is exact, up to the ties
 * the engine breaks by rank number, which sim_run.c detects. */
#ifndef WEFT_TOOLS_SIM_SIM_SYMMETRY_H_
#define WEFT_TOOLS_SIM_SIM_SYMMETRY_H_

#include "collectives/schedule.h"
#include "tools/sim/sim_internal.h"

/* The class sizes the model admits for p ranks, fewest representatives first (d < p): at most
 * `max` of them in `out`, how many returned. None in network mode (links break any symmetry). */
int sim_sym_candidates(const sim_model_t *m, int p, sim_sym_t *out, int max);

static inline int sim_sym_rep(const sim_sym_t *g, int b) { return b % g->d; }

/* g_b(x) of the given kind: x moved as rep(b) is moved onto b. */
int sim_sym_map(const sim_sym_t *g, unsigned kind, int b, int x);
/* g_b^-1(x): who x is, as seen from rep(b), for rank b. */
int sim_sym_unmap(const sim_sym_t *g, unsigned kind, int b, int x);

/* Whether schedule `s` of rank `r` is its representative's (the built record `rep`, whose
 * streams' peers are still global): op for op the same kind, count, dependencies (further ones
 * too), step and agreement flag; every stream's peer, the call description's too, moved by g_r
 * of a kind the stream's symkind still allows (narrowed to those that fit) onto one peer of r,
 * a different one for each stream, with the same link (sim_same_node): then r's streams are
 * numbered as rep's. `owner`: 2p ints, none equal to r + 1 before the call. Buffers and offsets
 * may differ: the engine does not read them. */
int sim_sym_matches(const sim_sym_t *g, const sim_model_t *m, sim_rank_t *rep, const schedule_t *s,
                    int r, int *owner);

/* The replay's one order by rank numbers that a symmetric replay must vouch for: in a round,
 * pairs that wait for ports start first-come first-served, ties by the sender's rank. Pairs of
 * one sender go in stream order, which every rank of a class shares; but senders that began to
 * wait for one receive port at the same instant go in the order of their ranks, which the
 * representatives' numbers need not keep. Once a round has started its messages, its outcome
 * is the same under any order of those senders if every such sender that did not get the port
 * was held by its own port: busy from before, or taken by a message it started ahead of this
 * one (a greedy matching keeps an edge iff no earlier neighbour is kept, and then every loser
 * has a neighbour kept ahead of it whatever the order among tied senders). Otherwise the call
 * is marked to be replayed in full (w->tie).
 *
 * sim_sym_started notes that `from` started the pair of wait key `key` in this round;
 * sim_sym_check_round checks the round's starts once it is over. */
void sim_sym_started(sim_world_t *w, int from, sim_wait_t key);
void sim_sym_check_round(sim_world_t *w);

#endif /* WEFT_TOOLS_SIM_SIM_SYMMETRY_H_ */
