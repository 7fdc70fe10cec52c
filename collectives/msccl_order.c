/* msccl_order.c -- the reference execution of an MSCCL program that orders each peer's one
 * stream (msccl_import.h, "Streams and channels"). */
#include <stdlib.h>

#include "collectives/msccl_program.h"
#include "common/error.h"

/* One message in a pair's single stream: its channel and its place among the channel's. */
typedef struct {
  int chan, idx;
} msg_t;

typedef struct {
  msg_t *v;
  int n, cap, head;
} fifo_t;

/* Runs the program in rounds (msccl_import.h) and records, per gpu, the order its steps ran. */
weft_result_t msccl_reference_run(msccl_program_t *p) {
  int n = p->ngpus;
  weft_result_t res = WEFT_SUCCESS;
  fifo_t *fifo = NULL;
  int **pc = calloc((size_t)n, sizeof *pc);
  int *ready_tb = NULL, *ready_g = NULL, *pair_from = NULL, *pair_to = NULL;
  int total = 0, nready_cap = 0, npairs = 0, ntbs = 0;
  if (!pc) goto oom;
  /* One stream per (sender, receiver) that some tb sends on, numbered as found. */
  for (int g = 0; g < n; g++) ntbs += p->gpus[g].ntbs;
  pair_from = malloc(sizeof(int) * (size_t)(ntbs + 1));
  pair_to = malloc(sizeof(int) * (size_t)(ntbs + 1));
  fifo = calloc((size_t)ntbs + 1, sizeof *fifo);
  if (!pair_from || !pair_to || !fifo) goto oom;
  for (int g = 0; g < n; g++)
    for (int t = 0; t < p->gpus[g].ntbs; t++) {
      tb_t *tb = &p->gpus[g].tbs[t];
      tb->send_pair = -1;
      if (tb->send < 0) continue;
      for (int k = 0; k < npairs && tb->send_pair < 0; k++)
        if (pair_from[k] == g && pair_to[k] == tb->send) tb->send_pair = k;
      if (tb->send_pair < 0) {
        pair_from[npairs] = g;
        pair_to[npairs] = tb->send;
        tb->send_pair = npairs++;
      }
    }
  for (int g = 0; g < n; g++)
    for (int t = 0; t < p->gpus[g].ntbs; t++) {
      tb_t *tb = &p->gpus[g].tbs[t];
      tb->recv_pair = -1;
      for (int k = 0; k < npairs && tb->recv >= 0 && tb->recv_pair < 0; k++)
        if (pair_from[k] == tb->recv && pair_to[k] == g) tb->recv_pair = k;
    }
  for (int g = 0; g < n; g++) {
    gpu_t *x = &p->gpus[g];
    int steps = 0;
    for (int t = 0; t < x->ntbs; t++) steps += x->tbs[t].nsteps;
    x->run_tb = malloc(sizeof(int) * (size_t)(steps + 1));
    x->run_step = malloc(sizeof(int) * (size_t)(steps + 1));
    pc[g] = calloc((size_t)x->ntbs + 1, sizeof(int));
    if (!x->run_tb || !x->run_step || !pc[g]) goto oom;
    total += steps;
    nready_cap += x->ntbs;
  }
  ready_tb = malloc(sizeof(int) * (size_t)(nready_cap + 1));
  ready_g = malloc(sizeof(int) * (size_t)(nready_cap + 1));
  if (!ready_tb || !ready_g) goto oom;
  for (int ran = 0; ran < total;) {
    /* Which tbs' next steps may run, judged at the round's start. */
    int nready = 0;
    for (int g = 0; g < n; g++) {
      const gpu_t *x = &p->gpus[g];
      for (int t = 0; t < x->ntbs; t++) {
        if (pc[g][t] >= x->tbs[t].nsteps) continue;
        const tb_t *tb = &x->tbs[t];
        const step_t *st = &tb->steps[pc[g][t]];
        if (st->depid >= 0 && pc[g][st->depid] <= st->deps) continue;
        if (type_recvs(st->type)) {
          const fifo_t *f = tb->recv_pair >= 0 ? &fifo[tb->recv_pair] : NULL;
          if (!f || f->head >= f->n || f->v[f->head].chan != tb->chan ||
              f->v[f->head].idx != st->recv_idx)
            continue;
        }
        ready_g[nready] = g;
        ready_tb[nready++] = t;
      }
    }
    if (nready == 0) break;
    for (int k = 0; k < nready; k++) {
      int g = ready_g[k], t = ready_tb[k];
      gpu_t *x = &p->gpus[g];
      const tb_t *tb = &x->tbs[t];
      const step_t *st = &tb->steps[pc[g][t]];
      if (type_recvs(st->type)) fifo[tb->recv_pair].head++;
      if (type_sends(st->type)) {
        fifo_t *f = &fifo[tb->send_pair];
        if (f->n == f->cap) {
          int cap = f->cap ? 2 * f->cap : 16;
          msg_t *v = realloc(f->v, sizeof *v * (size_t)cap);
          if (!v) goto oom;
          f->v = v;
          f->cap = cap;
        }
        f->v[f->n++] = (msg_t){tb->chan, st->send_idx};
      }
      x->run_tb[x->nrun] = t;
      x->run_step[x->nrun++] = pc[g][t]++;
      ran++;
    }
    if (ran == total) break;
  }
  /* Stuck: name the first step that could not run, and why. */
  for (int g = 0; g < n && res == WEFT_SUCCESS; g++) {
    const gpu_t *x = &p->gpus[g];
    for (int t = 0; t < x->ntbs && res == WEFT_SUCCESS; t++) {
      if (pc[g][t] >= x->tbs[t].nsteps) continue;
      const tb_t *tb = &x->tbs[t];
      const step_t *st = &tb->steps[pc[g][t]];
      if (st->depid >= 0 && pc[g][st->depid] <= st->deps) continue;
      if (!type_recvs(st->type)) continue;
      const fifo_t *f = tb->recv_pair >= 0 ? &fifo[tb->recv_pair] : NULL;
      int sent = 0;
      for (int k = f ? f->head : 0; f && k < f->n; k++)
        sent |= f->v[k].chan == tb->chan && f->v[k].idx == st->recv_idx;
      if (sent)
        res = WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                       "%s:%d: <step>: gpu %d tb %d step %d receives from gpu %d on channel %d "
                       "only after a message gpu %d sent it earlier on channel %d: weft carries "
                       "one ordered stream per peer, and this program needs that message "
                       "overtaken",
                       p->what, st->line, g, t, pc[g][t], tb->recv, tb->chan, tb->recv,
                       f->v[f->head].chan);
      else
        res = WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                       "%s:%d: <step>: gpu %d tb %d step %d waits for a message from gpu %d on "
                       "channel %d that gpu %d never gets to send: the program deadlocks",
                       p->what, st->line, g, t, pc[g][t], tb->recv, tb->chan, tb->recv);
    }
  }
  if (res == WEFT_SUCCESS && p->ngpus > 0) {
    int ran = 0;
    for (int g = 0; g < n; g++) ran += p->gpus[g].nrun;
    if (ran < total)
      res = WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "%s: the program deadlocks (%d of %d steps run)",
                     p->what, ran, total);
  }
  goto out;
oom:
  res = WEFT_ERR(WEFT_ERR_NO_MEMORY, "msccl: out of memory");
out:
  for (int i = 0; fifo && i < npairs; i++) free(fifo[i].v);
  free(pair_from);
  free(pair_to);
  for (int g = 0; pc && g < n; g++) free(pc[g]);
  free(fifo);
  free(pc);
  free(ready_tb);
  free(ready_g);
  return res;
}
