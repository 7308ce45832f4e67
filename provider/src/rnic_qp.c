/*
 * PDs, MRs, CQs and QPs over the host interface, and the data path in
 * the rings the NIC shares: ibv_post_send writes a WQE into the send ring
 * and stores the producer index in the doorbell page (waking the NIC with
 * its eventfd only if the page says it sleeps); ibv_poll_cq reads CQEs by
 * their owner word. The formats are internal/queue's (rnic_abi.h).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "hostif.h"
#include "rnic.h"

void rnic_ring(struct ibv_context *c, uint32_t off, uint32_t idx, int recv)
{
	atomic_store(word(c, off), idx);
	/* Asleep: wake it, once. The swap to RNIC_DB_NIC_WAKING spares the doorbells
	 * rung before the NIC runs again (a burst of posts, other threads) a
	 * system call each. A receive doorbell wakes it only from
	 * RNIC_DB_NIC_ASLEEP (a QP of ours is in error: its receives are
	 * flushed at once); in RNIC_DB_NIC_ASLEEP_SENDS the NIC takes receive
	 * WQEs from the ring when messages need them. The index's store and
	 * the state's load are sequentially consistent, as the NIC's store of
	 * its sleeping state and its last look at the indices are: one of the
	 * two sees the other. */
	uint32_t s = atomic_load(word(c, RNIC_DB_STATE));
	if ((s == RNIC_DB_NIC_ASLEEP || (s == RNIC_DB_NIC_ASLEEP_SENDS && !recv)) &&
	    atomic_compare_exchange_strong(word(c, RNIC_DB_STATE), &s, RNIC_DB_NIC_WAKING)) {
		uint64_t one = 1;
		ssize_t r = write(to_ctx(c)->wake_fd, &one, sizeof one);
		(void)r;
	}
}

void rnic_ev_add(struct ibv_context *c, struct rnic_evobj *e, uint32_t handle, void *obj)
{
	struct rnic_context *ctx = to_ctx(c);
	e->handle = handle;
	e->obj = obj;
	e->reported = 0;
	pthread_mutex_lock(&ctx->ev_lock);
	e->next = ctx->evobjs;
	ctx->evobjs = e;
	pthread_mutex_unlock(&ctx->ev_lock);
}

void rnic_ev_del(struct ibv_context *c, struct rnic_evobj *e, pthread_mutex_t *mu, pthread_cond_t *cond, const uint32_t *completed)
{
	struct rnic_context *ctx = to_ctx(c);
	pthread_mutex_lock(&ctx->ev_lock);
	for (struct rnic_evobj **p = &ctx->evobjs; *p; p = &(*p)->next)
		if (*p == e) {
			*p = e->next;
			break;
		}
	uint32_t n = e->reported;
	pthread_mutex_unlock(&ctx->ev_lock);
	pthread_mutex_lock(mu);
	while (*completed < n)
		pthread_cond_wait(cond, mu);
	pthread_mutex_unlock(mu);
}

/* put_sges writes n scatter/gather entries in the ring's SGE format at g. */
static void put_sges(uint8_t *g, const struct ibv_sge *sg, size_t n)
{
	for (size_t i = 0; i < n; i++, g += RNIC_SGE_LEN) {
		le64(g + RNIC_SGE_ADDR, sg[i].addr);
		le32(g + RNIC_SGE_LENGTH, sg[i].length);
		le32(g + RNIC_SGE_LKEY, sg[i].lkey);
	}
}

/* recv_ring_map reads a ring's depth, slot and producer word from the
 * reply (the caller reads limit_word) and maps it. */
static int recv_ring_map(struct recv_ring *q, struct hostif_msg *m, uint32_t max_sge, int fd)
{
	q->depth = hostif_get_u32(m);
	q->slot = hostif_get_u32(m);
	q->word = hostif_get_u32(m);
	q->max_sge = max_sge;
	if (m->err || q->depth == 0 || q->slot < RNIC_RECV_HEADER + RNIC_SGE_LEN * max_sge)
		return -1;
	q->mem = mmap(NULL, (size_t)q->depth * q->slot, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (q->mem == MAP_FAILED)
		return -1;
	pthread_spin_init(&q->lock, PTHREAD_PROCESS_PRIVATE);
	return 0;
}

static void recv_ring_unmap(struct recv_ring *q)
{
	munmap(q->mem, (size_t)q->depth * q->slot);
	pthread_spin_destroy(&q->lock);
}

/* post_recvs writes the chain's receive WQEs and rings the doorbell once. */
static int post_recvs(struct ibv_context *c, struct recv_ring *q, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	int r = 0;
	pthread_spin_lock(&q->lock);
	uint32_t pi = q->pi;
	/* How many the NIC holds: the RQ's receives not retired, or the
	 * SRQ ring's slots it has not taken. */
	uint32_t held = pi - atomic_load(word(c, q->limit_word));
	for (; wr; wr = wr->next, held++) {
		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > q->max_sge) {
			r = EINVAL;
			break;
		}
		if (held >= q->max_wr) {
			r = ENOMEM; /* the queue is full */
			break;
		}
		uint8_t *s = q->mem + (size_t)(pi % q->depth) * q->slot;
		memset(s, 0, RNIC_RECV_HEADER);
		le64(s + RNIC_RECV_WR_ID, wr->wr_id);
		s[RNIC_RECV_NUM_SGE] = wr->num_sge;
		put_sges(s + RNIC_RECV_HEADER, wr->sg_list, wr->num_sge);
		pi++;
	}
	if (pi != q->pi) {
		q->pi = pi;
		rnic_ring(c, q->word, pi, 1);
	}
	pthread_spin_unlock(&q->lock);
	if (r && bad)
		*bad = wr;
	return r;
}

/* --- PD and MR --- */

struct ibv_pd *ibv_alloc_pd(struct ibv_context *c)
{
	struct hostif_msg m;
	hostif_begin(&m, HOSTIF_ALLOC_PD, 0);
	int r = rnic_call(c, &m, HOSTIF_ALLOC_PD, NULL, NULL);
	if (r) {
		errno = r;
		return NULL;
	}
	struct ibv_pd *pd = calloc(1, sizeof *pd);
	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	pd->context = c;
	pd->handle = hostif_get_u32(&m);
	return pd;
}

int ibv_dealloc_pd(struct ibv_pd *pd)
{
	struct hostif_msg m;
	hostif_begin(&m, HOSTIF_DEALLOC_PD, 0);
	hostif_u32(&m, pd->handle);
	int r = rnic_call(pd->context, &m, HOSTIF_DEALLOC_PD, NULL, NULL);
	if (r)
		return r;
	free(pd);
	return 0;
}

struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova, unsigned int access)
{
	struct hostif_msg m;
	hostif_begin(&m, HOSTIF_REG_MR, 0);
	hostif_u32(&m, pd->handle);
	hostif_u64(&m, (uintptr_t)addr);
	hostif_u64(&m, length);
	hostif_u64(&m, iova);
	hostif_u32(&m, access & ~IBV_ACCESS_OPTIONAL_RANGE);
	int r = rnic_call(pd->context, &m, HOSTIF_REG_MR, NULL, NULL);
	if (r) {
		struct rnic_context *ctx = to_ctx(pd->context);
		if (r == EACCES && ctx->access == EACCES && !__atomic_exchange_n(&ctx->access_told, 1, __ATOMIC_RELAXED))
			rnic_no_access(pd->context); /* once: why the NIC is kept out */
		errno = r;
		return NULL;
	}
	struct ibv_mr *mr = calloc(1, sizeof *mr);
	if (!mr) {
		errno = ENOMEM;
		return NULL;
	}
	mr->context = pd->context;
	mr->pd = pd;
	mr->addr = addr;
	mr->length = length;
	mr->handle = hostif_get_u32(&m);
	mr->lkey = hostif_get_u32(&m);
	mr->rkey = hostif_get_u32(&m);
	return mr;
}

#undef ibv_reg_mr
struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, (uintptr_t)addr, (unsigned int)access);
}

/* ibv_advise_mr: prefetching a range of an on-demand region. The NIC
 * keeps no page mappings of its own to fill; what a prefetch can do is
 * fault the program's pages in now rather than during the transfer
 * (MADV_POPULATE_READ/WRITE, Linux 5.14; on older kernels it does
 * nothing). PREFETCH_NO_FAULT maps only what is present: nothing to do. */
int rnic_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice, uint32_t flags, struct ibv_sge *sg, uint32_t n)
{
	(void)pd;
	if ((advice != IBV_ADVISE_MR_ADVICE_PREFETCH && advice != IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE &&
	     advice != IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT) ||
	    (flags & ~(uint32_t)IBV_ADVISE_MR_FLAG_FLUSH) || !n || !sg)
		return EINVAL;
	if (advice == IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT)
		return 0;
#ifdef MADV_POPULATE_READ
	long page = sysconf(_SC_PAGESIZE);
	for (uint32_t i = 0; i < n; i++) {
		if (!sg[i].length)
			continue;
		uintptr_t start = sg[i].addr & ~(uintptr_t)(page - 1);
		uintptr_t end = sg[i].addr + sg[i].length;
		madvise((void *)start, end - start,
			advice == IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE ? MADV_POPULATE_WRITE : MADV_POPULATE_READ);
	}
#endif
	return 0;
}

/* ibv_rereg_mr: the NIC registers the region anew with what the flags
 * change, then lets the old registration go; the keys may change. On
 * failure the region is as it was. */
int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr, size_t length, int access)
{
	/* libibverbs' own checks first (ERR_INPUT), among them an access
	 * given without CHANGE_ACCESS, then what the kernel refuses
	 * (ERR_CMD): no change asked for. */
	const int known = IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_ACCESS;
	if ((flags & ~known) || ((flags & IBV_REREG_MR_CHANGE_PD) && !pd) ||
	    ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (!addr || !length)) ||
	    (access && !(flags & IBV_REREG_MR_CHANGE_ACCESS))) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	if (!flags) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_CMD;
	}
	struct ibv_pd *npd = (flags & IBV_REREG_MR_CHANGE_PD) ? pd : mr->pd;
	if (npd->context != mr->context) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	struct hostif_msg m;
	hostif_begin(&m, HOSTIF_REREG_MR, 0);
	hostif_u32(&m, mr->handle);
	hostif_u32(&m, (uint32_t)flags);
	hostif_u32(&m, npd->handle);
	hostif_u64(&m, (uintptr_t)addr);
	hostif_u64(&m, length);
	hostif_u64(&m, (uintptr_t)addr);
	hostif_u32(&m, (uint32_t)access & ~IBV_ACCESS_OPTIONAL_RANGE);
	int r = rnic_call(mr->context, &m, HOSTIF_REREG_MR, NULL, NULL);
	if (r) {
		errno = r;
		return IBV_REREG_MR_ERR_CMD;
	}
	uint32_t lkey = hostif_get_u32(&m), rkey = hostif_get_u32(&m);
	if (m.err) {
		errno = EPROTO;
		return IBV_REREG_MR_ERR_CMD;
	}
	mr->lkey = lkey;
	mr->rkey = rkey;
	mr->pd = npd;
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
		mr->addr = addr;
		mr->length = length;
	}
	return 0;
}

int ibv_dereg_mr(struct ibv_mr *mr)
{
	struct hostif_msg m;
	hostif_begin(&m, HOSTIF_DEREG_MR, 0);
	hostif_u32(&m, mr->handle);
	int r = rnic_call(mr->context, &m, HOSTIF_DEREG_MR, NULL, NULL);
	if (r)
		return r;
	free(mr);
	return 0;
}

/* --- Address handles (UD) --- */

struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	if (!pd || !attr) {
		errno = EINVAL;
		return NULL;
	}
	if (!attr->is_global) {
		errno = EINVAL; /* RoCE: an address is a GID */
		return NULL;
	}
	struct hostif_msg m;
	hostif_begin(&m, HOSTIF_CREATE_AH, 0);
	hostif_u32(&m, pd->handle);
	for (int i = 0; i < 16; i++)
		hostif_u8(&m, attr->grh.dgid.raw[i]);
	hostif_u8(&m, attr->grh.sgid_index);
	hostif_u32(&m, attr->grh.flow_label);
	hostif_u8(&m, attr->grh.hop_limit);
	hostif_u8(&m, attr->grh.traffic_class);
	hostif_u8(&m, attr->sl);
	int r = rnic_call(pd->context, &m, HOSTIF_CREATE_AH, NULL, NULL);
	if (r) {
		errno = r;
		return NULL;
	}
	struct ibv_ah *ah = calloc(1, sizeof *ah);
	if (!ah) {
		errno = ENOMEM;
		return NULL;
	}
	ah->context = pd->context;
	ah->pd = pd;
	ah->handle = hostif_get_u32(&m);
	return ah;
}

/* The sender of a UD receive, as rdma-core makes it: the address
 * vector ibv_init_ah_from_wc reads from the GRH area (the received hop
 * limit, the source GID index of the port entry the packet was sent
 * to), then an AH. */
struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc, struct ibv_grh *grh, uint8_t port_num)
{
	struct ibv_ah_attr a;
	if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &a))
		return NULL;
	return ibv_create_ah(pd, &a);
}

int ibv_destroy_ah(struct ibv_ah *ah)
{
	struct hostif_msg m;
	hostif_begin(&m, HOSTIF_DESTROY_AH, 0);
	hostif_u32(&m, ah->handle);
	int r = rnic_call(ah->context, &m, HOSTIF_DESTROY_AH, NULL, NULL);
	if (r)
		return r;
	free(ah);
	return 0;
}

/* --- SRQ --- */

static int rnic_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	return post_recvs(ibsrq->context, &((struct rnic_srq *)ibsrq)->rq, wr, bad);
}

struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *a)
{
	if (a->attr.max_sge > RNIC_MAX_SGE) {
		errno = EINVAL;
		return NULL;
	}
	struct rnic_srq *srq = calloc(1, sizeof *srq);
	if (!srq) {
		errno = ENOMEM;
		return NULL;
	}
	struct hostif_msg m;
	int fd = -1, nfds = 1;
	hostif_begin(&m, HOSTIF_CREATE_SRQ, 0);
	hostif_u32(&m, pd->handle);
	hostif_u32(&m, a->attr.max_wr);
	hostif_u32(&m, a->attr.max_sge);
	hostif_u32(&m, a->attr.srq_limit);
	hostif_u64(&m, (uintptr_t)&srq->ibsrq);
	int r = rnic_call(pd->context, &m, HOSTIF_CREATE_SRQ, &fd, &nfds);
	if (r || nfds != 1) {
		if (nfds == 1)
			close(fd);
		free(srq);
		errno = r ? r : EPROTO;
		return NULL;
	}
	srq->ibsrq.handle = hostif_get_u32(&m);
	int mapped = recv_ring_map(&srq->rq, &m, a->attr.max_sge ? a->attr.max_sge : 1, fd) == 0;
	srq->rq.limit_word = hostif_get_u32(&m);
	srq->rq.max_wr = srq->rq.depth;
	close(fd);
	if (m.err || !mapped) {
		if (mapped)
			recv_ring_unmap(&srq->rq);
		free(srq);
		errno = m.err ? EPROTO : ENOMEM;
		return NULL;
	}
	srq->ibsrq.context = pd->context;
	srq->ibsrq.srq_context = a->srq_context;
	srq->ibsrq.pd = pd;
	pthread_mutex_init(&srq->ibsrq.mutex, NULL);
	pthread_cond_init(&srq->ibsrq.cond, NULL);
	rnic_ev_add(pd->context, &srq->ev, srq->ibsrq.handle, &srq->ibsrq);
	pd->context->ops.post_srq_recv = rnic_post_srq_recv;
	return &srq->ibsrq;
}

int ibv_destroy_srq(struct ibv_srq *ibsrq)
{
	struct rnic_srq *srq = (struct rnic_srq *)ibsrq;
	struct hostif_msg m;
	hostif_begin(&m, HOSTIF_DESTROY_SRQ, 0);
	hostif_u32(&m, ibsrq->handle);
	int r = rnic_call(ibsrq->context, &m, HOSTIF_DESTROY_SRQ, NULL, NULL);
	if (r)
		return r;
	rnic_ev_del(ibsrq->context, &srq->ev, &ibsrq->mutex, &ibsrq->cond, &ibsrq->events_completed);
	recv_ring_unmap(&srq->rq);
	free(srq);
	return 0;
}

/* ibv_modify_srq: the limit (arming IBV_EVENT_SRQ_LIMIT_REACHED). An SRQ
 * is not resized (the device does not advertise IBV_DEVICE_SRQ_RESIZE). */
int ibv_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *a, int mask)
{
	if (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT))
		return EINVAL;
	if (mask & IBV_SRQ_MAX_WR)
		return EOPNOTSUPP;
	if (!(mask & IBV_SRQ_LIMIT))
		return 0;
	struct hostif_msg m;
	hostif_begin(&m, HOSTIF_ARM_SRQ, 0);
	hostif_u32(&m, ibsrq->handle);
	hostif_u32(&m, a->srq_limit);
	return rnic_call(ibsrq->context, &m, HOSTIF_ARM_SRQ, NULL, NULL);
}

int ibv_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *a)
{
	struct hostif_msg m;
	hostif_begin(&m, HOSTIF_QUERY_SRQ, 0);
	hostif_u32(&m, ibsrq->handle);
	int r = rnic_call(ibsrq->context, &m, HOSTIF_QUERY_SRQ, NULL, NULL);
	if (r)
		return r;
	a->max_wr = hostif_get_u32(&m);
	a->max_sge = hostif_get_u32(&m);
	a->srq_limit = hostif_get_u32(&m);
	return m.err ? EPROTO : 0;
}

/* --- QP --- */

/* The states a QP takes work requests in (IBTA 10.8.1: posting to a QP in
 * RESET, or a send to one not yet ready to send, is an immediate error;
 * in ERR they are flushed). */
static int can_post_send(enum ibv_qp_state s) { return s == IBV_QPS_RTS || s == IBV_QPS_SQD || s == IBV_QPS_SQE || s == IBV_QPS_ERR; }
static int can_post_recv(enum ibv_qp_state s) { return s != IBV_QPS_RESET; }

/* sq_full says whether the send ring has no free slot at index pi: the
 * NIC's consumer index says which slots it has taken. */
static int sq_full(struct rnic_qp *qp, uint32_t pi)
{
	return pi - atomic_load(word(qp->ex.qp_base.context, qp->sq_ci_word)) >= qp->sq_depth;
}

/* put_bind writes a BIND_MW WQE's fields. */
static void put_bind(uint8_t *s, uint32_t mw_rkey, uint32_t new_rkey, const struct ibv_mw_bind_info *b)
{
	le32(s + RNIC_BIND_MW_RKEY, mw_rkey);
	le64(s + RNIC_BIND_ADDR, b->addr);
	le32(s + RNIC_BIND_NEW_RKEY, new_rkey);
	le64(s + RNIC_BIND_LENGTH, b->length);
	le32(s + RNIC_BIND_ACCESS, b->mw_access_flags);
	le32(s + RNIC_BIND_MR_LKEY, b->mr ? b->mr->lkey : 0);
}

int rnic_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct rnic_qp *qp = (struct rnic_qp *)ibqp;
	int r = 0;
	pthread_spin_lock(&qp->sq_lock);
	uint32_t pi = qp->sq_pi;
	if (!can_post_send(ibqp->state))
		r = EINVAL;
	for (; wr && !r; wr = wr->next) {
		if (wr->opcode == IBV_WR_ATOMIC_WRITE) {
			r = EINVAL; /* its 8 bytes have no place in ibv_send_wr: ibv_wr_atomic_write */
			break;
		}
		int inl = wr->send_flags & IBV_SEND_INLINE;
		size_t total = 0;
		for (int i = 0; inl && i < wr->num_sge; i++)
			total += wr->sg_list[i].length;
		if (wr->num_sge < 0 || (!inl && (uint32_t)wr->num_sge > qp->cap.max_send_sge) ||
		    (inl && (total > qp->cap.max_inline_data || total > qp->sq_slot - RNIC_WQE_HEADER)) ||
		    (ibqp->qp_type == IBV_QPT_UD && !wr->wr.ud.ah)) {
			r = EINVAL;
			break;
		}
		if (sq_full(qp, pi)) {
			r = ENOMEM;
			break;
		}
		uint8_t *s = qp->sq + (size_t)(pi % qp->sq_depth) * qp->sq_slot;
		memset(s, 0, RNIC_WQE_HEADER);
		le64(s + RNIC_WQE_WR_ID, wr->wr_id);
		s[RNIC_WQE_OPCODE] = wr->opcode;
		s[RNIC_WQE_FLAGS] = wr->send_flags;
		s[RNIC_WQE_NUM_SGE] = wr->num_sge;
		if (wr->opcode == IBV_WR_SEND_WITH_INV || wr->opcode == IBV_WR_LOCAL_INV)
			le32(s + RNIC_WQE_IMM, wr->invalidate_rkey);
		else
			le32(s + RNIC_WQE_IMM, ntohl(wr->imm_data)); /* the ring holds it in host order */
		switch (wr->opcode) {
		case IBV_WR_ATOMIC_CMP_AND_SWP:
		case IBV_WR_ATOMIC_FETCH_AND_ADD:
			le64(s + RNIC_WQE_REMOTE_ADDR, wr->wr.atomic.remote_addr);
			le32(s + RNIC_WQE_RKEY, wr->wr.atomic.rkey);
			le64(s + RNIC_WQE_COMPARE_ADD, wr->wr.atomic.compare_add);
			le64(s + RNIC_WQE_SWAP, wr->wr.atomic.swap);
			break;
		case IBV_WR_BIND_MW:
			if (!wr->bind_mw.mw) {
				r = EINVAL;
				break;
			}
			put_bind(s, wr->bind_mw.mw->rkey, wr->bind_mw.rkey, &wr->bind_mw.bind_info);
			s[RNIC_WQE_NUM_SGE] = 0;
			break;
		default:
			le64(s + RNIC_WQE_REMOTE_ADDR, wr->wr.rdma.remote_addr);
			le32(s + RNIC_WQE_RKEY, wr->wr.rdma.rkey);
		}
		if (r)
			break;
		if (ibqp->qp_type == IBV_QPT_UD) {
			le32(s + RNIC_WQE_REMOTE_QPN, wr->wr.ud.remote_qpn);
			le32(s + RNIC_WQE_REMOTE_QKEY, wr->wr.ud.remote_qkey);
			le32(s + RNIC_WQE_AH, wr->wr.ud.ah->handle);
		}
		if (wr->opcode == IBV_WR_BIND_MW || wr->opcode == IBV_WR_LOCAL_INV) {
			/* no data */
		} else if (inl) {
			/* The payload goes into the slot now: the buffer is free on return. */
			uint8_t *p = s + RNIC_WQE_HEADER;
			for (int i = 0; i < wr->num_sge; i++) {
				memcpy(p, (void *)(uintptr_t)wr->sg_list[i].addr, wr->sg_list[i].length);
				p += wr->sg_list[i].length;
			}
			s[RNIC_WQE_NUM_SGE] = 0;
			le32(s + RNIC_WQE_INLINE_LEN, (uint32_t)total);
		} else {
			put_sges(s + RNIC_WQE_HEADER, wr->sg_list, wr->num_sge);
		}
		pi++;
	}
	if (pi != qp->sq_pi) {
		qp->sq_pi = pi;
		rnic_ring(ibqp->context, qp->sq_word, pi, 0);
	}
	pthread_spin_unlock(&qp->sq_lock);
	if (r && bad)
		*bad = wr;
	return r;
}

static int rnic_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	if (!can_post_recv(ibqp->state) || ibqp->srq) {
		if (bad)
			*bad = wr;
		return EINVAL;
	}
	return post_recvs(ibqp->context, &((struct rnic_qp *)ibqp)->rq, wr, bad);
}

struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *a)
{
	if (a->qp_type != IBV_QPT_RC && a->qp_type != IBV_QPT_UC && a->qp_type != IBV_QPT_UD) {
		errno = EOPNOTSUPP; /* no raw packet, XRC or driver QPs */
		return NULL;
	}
	if (!a->send_cq || !a->recv_cq || a->cap.max_send_sge > RNIC_MAX_SGE || a->cap.max_recv_sge > RNIC_MAX_SGE) {
		errno = EINVAL;
		return NULL;
	}
	struct rnic_qp *qp = calloc(1, sizeof *qp);
	if (!qp) {
		errno = ENOMEM;
		return NULL;
	}
	struct ibv_context *c = pd->context;
	struct hostif_msg m;
	int fds[2], nfds = 2;
	hostif_begin(&m, HOSTIF_CREATE_QP, 0);
	hostif_u32(&m, pd->handle);
	hostif_u8(&m, a->qp_type);
	hostif_u32(&m, a->send_cq->handle);
	hostif_u32(&m, a->recv_cq->handle);
	hostif_u32(&m, a->cap.max_send_wr);
	hostif_u32(&m, a->cap.max_recv_wr);
	hostif_u32(&m, a->cap.max_send_sge);
	hostif_u32(&m, a->cap.max_recv_sge);
	hostif_u32(&m, a->cap.max_inline_data);
	hostif_u8(&m, a->sq_sig_all ? 1 : 0);
	hostif_u32(&m, a->srq ? a->srq->handle : 0);
	hostif_u64(&m, (uintptr_t)&qp->ex.qp_base);
	int r = rnic_call(c, &m, HOSTIF_CREATE_QP, fds, &nfds);
	if (r || nfds != 2) {
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		free(qp);
		errno = r ? r : EPROTO;
		return NULL;
	}
	qp->ex.qp_base.handle = hostif_get_u32(&m);
	qp->ex.qp_base.qp_num = hostif_get_u32(&m);
	qp->sq_depth = hostif_get_u32(&m);
	qp->sq_slot = hostif_get_u32(&m);
	qp->sq_word = hostif_get_u32(&m);
	int rq_mapped = recv_ring_map(&qp->rq, &m, a->cap.max_recv_sge, fds[1]) == 0;
	qp->sq_ci_word = hostif_get_u32(&m);
	qp->rq.limit_word = hostif_get_u32(&m);
	qp->rq.max_wr = a->srq ? 0 : a->cap.max_recv_wr;
	qp->sq = m.err ? MAP_FAILED : mmap(NULL, (size_t)qp->sq_depth * qp->sq_slot, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
	close(fds[0]);
	close(fds[1]);
	if (m.err || qp->sq == MAP_FAILED || !rq_mapped) {
		/* the NIC's QP goes with the context */
		if (qp->sq != MAP_FAILED)
			munmap(qp->sq, (size_t)qp->sq_depth * qp->sq_slot);
		if (rq_mapped)
			recv_ring_unmap(&qp->rq);
		free(qp);
		errno = m.err ? EPROTO : ENOMEM;
		return NULL;
	}
	qp->scratch = malloc(qp->sq_slot);
	if (!qp->scratch) {
		munmap(qp->sq, (size_t)qp->sq_depth * qp->sq_slot);
		recv_ring_unmap(&qp->rq);
		free(qp);
		errno = ENOMEM;
		return NULL;
	}
	qp->sig_all = a->sq_sig_all;
	qp->cap = a->cap;
	if (a->srq)
		qp->cap.max_recv_wr = qp->cap.max_recv_sge = 0;
	a->cap = qp->cap;
	pthread_spin_init(&qp->sq_lock, PTHREAD_PROCESS_PRIVATE);
	struct ibv_qp *q = &qp->ex.qp_base;
	q->context = c;
	q->qp_context = a->qp_context;
	q->pd = pd;
	q->send_cq = a->send_cq;
	q->recv_cq = a->recv_cq;
	q->srq = a->srq;
	q->state = IBV_QPS_RESET;
	q->qp_type = a->qp_type;
	pthread_mutex_init(&q->mutex, NULL);
	pthread_cond_init(&q->cond, NULL);
	rnic_ev_add(c, &qp->ev, q->handle, q);
	c->ops.post_send = rnic_post_send;
	c->ops.post_recv = rnic_post_recv;
	return q;
}

int ibv_modify_qp(struct ibv_qp *q, struct ibv_qp_attr *a, int mask)
{
	/* What the kernel refuses before a driver sees it: a port other than
	 * the device's, a RoCE address vector without a GRH (a RoCE
	 * address is a GID: rdma_check_ah_attr), and arming path migration,
	 * which needs an alternate path (refused: rnic has no APM), so a QP
	 * is always in the MIGRATED state. */
	if (((mask & IBV_QP_PORT) && a->port_num != 1) ||
	    ((mask & IBV_QP_AV) && (a->ah_attr.port_num != 1 || !a->ah_attr.is_global)) ||
	    ((mask & IBV_QP_PATH_MIG_STATE) && a->path_mig_state != IBV_MIG_MIGRATED))
		return EINVAL;
	struct hostif_msg m;
	hostif_begin(&m, HOSTIF_MODIFY_QP, 0);
	hostif_u32(&m, q->handle);
	hostif_u32(&m, (uint32_t)mask);
	hostif_u8(&m, a->qp_state);
	hostif_u8(&m, a->cur_qp_state);
	hostif_u8(&m, a->path_mtu);
	hostif_u8(&m, 1); /* port 1, checked above */
	hostif_u32(&m, a->qkey);
	hostif_u32(&m, a->rq_psn);
	hostif_u32(&m, a->sq_psn);
	hostif_u32(&m, a->dest_qp_num);
	hostif_u32(&m, a->qp_access_flags);
	hostif_u8(&m, a->pkey_index);
	hostif_u8(&m, a->pkey_index >> 8);
	hostif_u8(&m, a->en_sqd_async_notify);
	hostif_u8(&m, a->max_rd_atomic);
	hostif_u8(&m, a->max_dest_rd_atomic);
	hostif_u8(&m, a->min_rnr_timer);
	hostif_u8(&m, a->timeout);
	hostif_u8(&m, a->retry_cnt);
	hostif_u8(&m, a->rnr_retry);
	for (int i = 0; i < 16; i++)
		hostif_u8(&m, a->ah_attr.grh.dgid.raw[i]);
	hostif_u8(&m, a->ah_attr.grh.sgid_index);
	hostif_u32(&m, a->ah_attr.grh.flow_label);
	hostif_u8(&m, a->ah_attr.grh.hop_limit);
	hostif_u8(&m, a->ah_attr.grh.traffic_class);
	hostif_u8(&m, a->ah_attr.sl);
	struct rnic_qp *qp = (struct rnic_qp *)q;
	int reset = (mask & IBV_QP_STATE) && a->qp_state == IBV_QPS_RESET;
	if (reset) {
		/* RESET empties the rings: no post may race the NIC's reading
		 * of where they end. */
		pthread_spin_lock(&qp->sq_lock);
		pthread_spin_lock(&qp->rq.lock);
	}
	int r = rnic_call(q->context, &m, HOSTIF_MODIFY_QP, NULL, NULL);
	if (!r && (mask & IBV_QP_STATE))
		q->state = a->qp_state;
	if (!r && reset) {
		/* The QP's completions go from its CQs (the NIC purged those
		 * it held, and emptied the rings: nothing posted is held). */
		rnic_cq_clean(q->send_cq, q->qp_num);
		if (q->recv_cq != q->send_cq)
			rnic_cq_clean(q->recv_cq, q->qp_num);
	}
	if (reset) {
		pthread_spin_unlock(&qp->rq.lock);
		pthread_spin_unlock(&qp->sq_lock);
	}
	return r;
}

/* ibv_query_qp: the NIC's attributes of the QP (all of them, whatever the
 * mask asks), and the creation attributes this library kept. */
int ibv_query_qp(struct ibv_qp *q, struct ibv_qp_attr *a, int mask, struct ibv_qp_init_attr *init)
{
	(void)mask;
	struct rnic_qp *qp = (struct rnic_qp *)q;
	struct hostif_msg m;
	hostif_begin(&m, HOSTIF_QUERY_QP, 0);
	hostif_u32(&m, q->handle);
	int r = rnic_call(q->context, &m, HOSTIF_QUERY_QP, NULL, NULL);
	if (r)
		return r;
	memset(a, 0, sizeof *a);
	a->qp_state = hostif_get_u8(&m);
	a->cur_qp_state = hostif_get_u8(&m);
	a->path_mtu = hostif_get_u8(&m);
	a->port_num = hostif_get_u8(&m);
	a->qkey = hostif_get_u32(&m);
	a->rq_psn = hostif_get_u32(&m);
	a->sq_psn = hostif_get_u32(&m);
	a->dest_qp_num = hostif_get_u32(&m);
	a->qp_access_flags = hostif_get_u32(&m);
	a->pkey_index = hostif_get_u16(&m);
	a->en_sqd_async_notify = hostif_get_u8(&m);
	a->max_rd_atomic = hostif_get_u8(&m);
	a->max_dest_rd_atomic = hostif_get_u8(&m);
	a->min_rnr_timer = hostif_get_u8(&m);
	a->timeout = hostif_get_u8(&m);
	a->retry_cnt = hostif_get_u8(&m);
	a->rnr_retry = hostif_get_u8(&m);
	const uint8_t *dgid = hostif_get(&m, 16);
	a->ah_attr.grh.sgid_index = hostif_get_u8(&m);
	a->ah_attr.grh.flow_label = hostif_get_u32(&m);
	a->ah_attr.grh.hop_limit = hostif_get_u8(&m);
	a->ah_attr.grh.traffic_class = hostif_get_u8(&m);
	a->ah_attr.sl = hostif_get_u8(&m);
	a->sq_draining = hostif_get_u8(&m);
	hostif_get_u32(&m); /* the NIC's QP capabilities: the library's own, below, are what the program asked for */
	hostif_get_u32(&m);
	hostif_get_u32(&m);
	hostif_get_u32(&m);
	hostif_get_u32(&m);
	if (m.err)
		return EPROTO;
	if (q->qp_type != IBV_QPT_UD) {
		memcpy(a->ah_attr.grh.dgid.raw, dgid, 16);
		a->ah_attr.is_global = 1;
		a->ah_attr.port_num = a->port_num;
	} else {
		memset(&a->ah_attr, 0, sizeof a->ah_attr);
	}
	a->cap = qp->cap;
	q->state = a->qp_state; /* the NIC may have moved it to an error state */
	if (init) {
		memset(init, 0, sizeof *init);
		init->qp_context = q->qp_context;
		init->send_cq = q->send_cq;
		init->recv_cq = q->recv_cq;
		init->srq = q->srq;
		init->cap = qp->cap;
		init->qp_type = q->qp_type;
		init->sq_sig_all = qp->sig_all;
	}
	return 0;
}

int ibv_destroy_qp(struct ibv_qp *q)
{
	struct rnic_qp *qp = (struct rnic_qp *)q;
	struct hostif_msg m;
	hostif_begin(&m, HOSTIF_DESTROY_QP, 0);
	hostif_u32(&m, q->handle);
	int r = rnic_call(q->context, &m, HOSTIF_DESTROY_QP, NULL, NULL);
	if (r)
		return r;
	rnic_ev_del(q->context, &qp->ev, &q->mutex, &q->cond, &q->events_completed);
	munmap(qp->sq, (size_t)qp->sq_depth * qp->sq_slot);
	recv_ring_unmap(&qp->rq);
	free(qp->scratch);
	free(qp);
	return 0;
}

/* --- The extended send API (ibv_wr_*) --- */

/* wqe begins the next WQE of a batch: its slot, cleared, with the
 * QP's current wr_id and flags and op. */
static uint8_t *wqe(struct ibv_qp_ex *ex, uint8_t op)
{
	struct rnic_qp *qp = (struct rnic_qp *)ex;
	uint8_t *s;
	if (qp->wr_err || sq_full(qp, qp->wr_pi)) {
		/* Built where the NIC never looks: the batch fails at
		 * wr_complete and no slot the NIC has yet to read changes. */
		if (!qp->wr_err)
			qp->wr_err = ENOMEM;
		s = qp->scratch;
		memset(s, 0, RNIC_WQE_HEADER);
		qp->wr_cur = s;
		return s;
	}
	s = qp->sq + (size_t)(qp->wr_pi % qp->sq_depth) * qp->sq_slot;
	memset(s, 0, RNIC_WQE_HEADER);
	le64(s + RNIC_WQE_WR_ID, ex->wr_id);
	s[RNIC_WQE_OPCODE] = op;
	s[RNIC_WQE_FLAGS] = ex->wr_flags;
	qp->wr_pi++;
	qp->wr_cur = s;
	return s;
}

static void rdma(struct ibv_qp_ex *ex, uint8_t op, uint32_t rkey, uint64_t addr, uint32_t imm)
{
	uint8_t *s = wqe(ex, op);
	le32(s + RNIC_WQE_IMM, imm);
	le64(s + RNIC_WQE_REMOTE_ADDR, addr);
	le32(s + RNIC_WQE_RKEY, rkey);
}

static void wr_rdma_write(struct ibv_qp_ex *ex, uint32_t rkey, uint64_t addr) { rdma(ex, IBV_WR_RDMA_WRITE, rkey, addr, 0); }
static void wr_rdma_write_imm(struct ibv_qp_ex *ex, uint32_t rkey, uint64_t addr, __be32 imm)
{
	rdma(ex, IBV_WR_RDMA_WRITE_WITH_IMM, rkey, addr, ntohl(imm));
}
static void wr_rdma_read(struct ibv_qp_ex *ex, uint32_t rkey, uint64_t addr) { rdma(ex, IBV_WR_RDMA_READ, rkey, addr, 0); }
static void wr_send(struct ibv_qp_ex *ex) { wqe(ex, IBV_WR_SEND); }
static void wr_send_imm(struct ibv_qp_ex *ex, __be32 imm) { le32(wqe(ex, IBV_WR_SEND_WITH_IMM) + RNIC_WQE_IMM, ntohl(imm)); }
static void wr_send_inv(struct ibv_qp_ex *ex, uint32_t rkey) { le32(wqe(ex, IBV_WR_SEND_WITH_INV) + RNIC_WQE_IMM, rkey); }
static void wr_local_inv(struct ibv_qp_ex *ex, uint32_t rkey) { le32(wqe(ex, IBV_WR_LOCAL_INV) + RNIC_WQE_IMM, rkey); }

static void atomic(struct ibv_qp_ex *ex, uint8_t op, uint32_t rkey, uint64_t addr, uint64_t cmp, uint64_t swap)
{
	uint8_t *s = wqe(ex, op);
	le64(s + RNIC_WQE_REMOTE_ADDR, addr);
	le32(s + RNIC_WQE_RKEY, rkey);
	le64(s + RNIC_WQE_COMPARE_ADD, cmp);
	le64(s + RNIC_WQE_SWAP, swap);
}

static void wr_atomic_cmp_swp(struct ibv_qp_ex *ex, uint32_t rkey, uint64_t addr, uint64_t cmp, uint64_t swap)
{
	atomic(ex, IBV_WR_ATOMIC_CMP_AND_SWP, rkey, addr, cmp, swap);
}

static void wr_atomic_fetch_add(struct ibv_qp_ex *ex, uint32_t rkey, uint64_t addr, uint64_t add)
{
	atomic(ex, IBV_WR_ATOMIC_FETCH_AND_ADD, rkey, addr, add, 0);
}

/* ATOMIC WRITE: the 8 bytes at atomic_wr, as the program's memory holds
 * them, stored single-copy atomically at the responder (the ring holds
 * them at RNIC_ATOMIC_WRITE_VALUE as the little-endian word they are on this host). */
static void wr_atomic_write(struct ibv_qp_ex *ex, uint32_t rkey, uint64_t addr, const void *atomic_wr)
{
	uint8_t *s = wqe(ex, IBV_WR_ATOMIC_WRITE);
	uint64_t v;
	memcpy(&v, atomic_wr, 8);
	le64(s + RNIC_WQE_REMOTE_ADDR, addr);
	le32(s + RNIC_WQE_RKEY, rkey);
	le64(s + RNIC_ATOMIC_WRITE_VALUE, v);
}

static void wr_bind_mw(struct ibv_qp_ex *ex, struct ibv_mw *mw, uint32_t rkey, const struct ibv_mw_bind_info *info)
{
	put_bind(wqe(ex, IBV_WR_BIND_MW), mw->rkey, rkey, info);
}

static void wr_set_sge_list(struct ibv_qp_ex *ex, size_t n, const struct ibv_sge *sg)
{
	struct rnic_qp *qp = (struct rnic_qp *)ex;
	uint8_t *s = qp->wr_cur;
	if (!s || n > qp->cap.max_send_sge || RNIC_WQE_HEADER + n * RNIC_SGE_LEN > qp->sq_slot) {
		qp->wr_err = EINVAL;
		return;
	}
	s[RNIC_WQE_NUM_SGE] = (uint8_t)n;
	put_sges(s + RNIC_WQE_HEADER, sg, n);
}

static void wr_set_sge(struct ibv_qp_ex *ex, uint32_t lkey, uint64_t addr, uint32_t length)
{
	struct ibv_sge sg = {.addr = addr, .length = length, .lkey = lkey};
	wr_set_sge_list(ex, 1, &sg);
}

static void wr_set_inline_data_list(struct ibv_qp_ex *ex, size_t n, const struct ibv_data_buf *buf)
{
	struct rnic_qp *qp = (struct rnic_qp *)ex;
	uint8_t *s = qp->wr_cur;
	size_t total = 0;
	for (size_t i = 0; i < n; i++)
		total += buf[i].length;
	if (!s || total > qp->cap.max_inline_data || total > qp->sq_slot - RNIC_WQE_HEADER) {
		qp->wr_err = EINVAL;
		return;
	}
	uint8_t *p = s + RNIC_WQE_HEADER;
	for (size_t i = 0; i < n; i++) {
		memcpy(p, buf[i].addr, buf[i].length);
		p += buf[i].length;
	}
	s[RNIC_WQE_FLAGS] |= IBV_SEND_INLINE;
	s[RNIC_WQE_NUM_SGE] = 0;
	le32(s + RNIC_WQE_INLINE_LEN, (uint32_t)total);
}

static void wr_set_inline_data(struct ibv_qp_ex *ex, void *addr, size_t length)
{
	struct ibv_data_buf b = {.addr = addr, .length = length};
	wr_set_inline_data_list(ex, 1, &b);
}

static void wr_set_ud_addr(struct ibv_qp_ex *ex, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey)
{
	struct rnic_qp *qp = (struct rnic_qp *)ex;
	if (!qp->wr_cur || !ah) {
		qp->wr_err = EINVAL;
		return;
	}
	le32(qp->wr_cur + RNIC_WQE_REMOTE_QPN, qpn);
	le32(qp->wr_cur + RNIC_WQE_REMOTE_QKEY, qkey);
	le32(qp->wr_cur + RNIC_WQE_AH, ah->handle);
}

static void wr_start(struct ibv_qp_ex *ex)
{
	struct rnic_qp *qp = (struct rnic_qp *)ex;
	pthread_spin_lock(&qp->sq_lock);
	qp->wr_pi = qp->sq_pi;
	qp->wr_cur = NULL;
	qp->wr_err = can_post_send(ex->qp_base.state) ? 0 : EINVAL;
}

static int wr_complete(struct ibv_qp_ex *ex)
{
	struct rnic_qp *qp = (struct rnic_qp *)ex;
	int err = qp->wr_err;
	if (!err && qp->wr_pi != qp->sq_pi) {
		qp->sq_pi = qp->wr_pi;
		rnic_ring(ex->qp_base.context, qp->sq_word, qp->sq_pi, 0);
	}
	qp->wr_cur = NULL;
	pthread_spin_unlock(&qp->sq_lock);
	return err;
}

static void wr_abort(struct ibv_qp_ex *ex)
{
	struct rnic_qp *qp = (struct rnic_qp *)ex;
	qp->wr_cur = NULL;
	pthread_spin_unlock(&qp->sq_lock);
}

static void init_qp_ex(struct rnic_qp *qp)
{
	struct ibv_qp_ex *ex = &qp->ex;
	ex->wr_rdma_write = wr_rdma_write;
	ex->wr_rdma_write_imm = wr_rdma_write_imm;
	ex->wr_rdma_read = wr_rdma_read;
	ex->wr_send = wr_send;
	ex->wr_send_imm = wr_send_imm;
	ex->wr_send_inv = wr_send_inv;
	ex->wr_local_inv = wr_local_inv;
	ex->wr_bind_mw = wr_bind_mw;
	ex->wr_atomic_write = wr_atomic_write;
	ex->wr_atomic_cmp_swp = wr_atomic_cmp_swp;
	ex->wr_atomic_fetch_add = wr_atomic_fetch_add;
	ex->wr_set_sge = wr_set_sge;
	ex->wr_set_sge_list = wr_set_sge_list;
	ex->wr_set_inline_data = wr_set_inline_data;
	ex->wr_set_inline_data_list = wr_set_inline_data_list;
	ex->wr_set_ud_addr = wr_set_ud_addr;
	ex->wr_start = wr_start;
	ex->wr_complete = wr_complete;
	ex->wr_abort = wr_abort;
}

/* The send operations the extended API builds here. */
#define RNIC_SEND_OPS                                                                                                 \
	(IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |                       \
	 IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |                \
	 IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_SEND_WITH_INV |                \
	 IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_ATOMIC_WRITE)

/* The operations each transport takes (the engine's wrInfos): UC has no
 * READ or atomics, UD only SENDs. */
#define RNIC_UC_SEND_OPS                                                                                              \
	(IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |                       \
	 IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_SEND_WITH_INV | IBV_QP_EX_WITH_BIND_MW)
#define RNIC_UD_SEND_OPS (IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM)

static uint64_t send_ops(enum ibv_qp_type t)
{
	switch (t) {
	case IBV_QPT_RC:
		return RNIC_SEND_OPS;
	case IBV_QPT_UC:
		return RNIC_UC_SEND_OPS;
	case IBV_QPT_UD:
		return RNIC_UD_SEND_OPS;
	default:
		return 0;
	}
}

struct ibv_qp *rnic_create_qp_ex(struct ibv_context *c, struct ibv_qp_init_attr_ex *a)
{
	(void)c;
	/* Creation flags and a TSO header are accepted when they ask for
	 * nothing: rnic has none of either. */
	uint32_t known = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS | IBV_QP_INIT_ATTR_CREATE_FLAGS |
			 IBV_QP_INIT_ATTR_MAX_TSO_HEADER;
	if (!(a->comp_mask & IBV_QP_INIT_ATTR_PD) || (a->comp_mask & ~known) ||
	    ((a->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && a->create_flags) ||
	    ((a->comp_mask & IBV_QP_INIT_ATTR_MAX_TSO_HEADER) && a->max_tso_header) ||
	    ((a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) && (a->send_ops_flags & ~send_ops(a->qp_type)))) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	struct ibv_qp_init_attr ia = {.qp_context = a->qp_context, .send_cq = a->send_cq, .recv_cq = a->recv_cq, .srq = a->srq,
				      .cap = a->cap, .qp_type = a->qp_type, .sq_sig_all = a->sq_sig_all};
	struct ibv_qp *q = ibv_create_qp(a->pd, &ia);
	if (!q)
		return NULL;
	a->cap = ia.cap;
	struct rnic_qp *qp = (struct rnic_qp *)q;
	if (a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)
		init_qp_ex(qp);
	return q;
}

/* ibv_qp_to_qp_ex: the extended QP, for QPs created with send
 * operations (the function pointers are NULL otherwise, as rdma-core
 * leaves them). */
struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	return &((struct rnic_qp *)qp)->ex;
}

const char *ibv_wc_status_str(enum ibv_wc_status status)
{
	static const char *const s[] = {
		[IBV_WC_SUCCESS] = "success",
		[IBV_WC_LOC_LEN_ERR] = "local length error",
		[IBV_WC_LOC_QP_OP_ERR] = "local QP operation error",
		[IBV_WC_LOC_EEC_OP_ERR] = "local EE context operation error",
		[IBV_WC_LOC_PROT_ERR] = "local protection error",
		[IBV_WC_WR_FLUSH_ERR] = "Work Request Flushed Error",
		[IBV_WC_MW_BIND_ERR] = "memory management operation error",
		[IBV_WC_BAD_RESP_ERR] = "bad response error",
		[IBV_WC_LOC_ACCESS_ERR] = "local access error",
		[IBV_WC_REM_INV_REQ_ERR] = "remote invalid request error",
		[IBV_WC_REM_ACCESS_ERR] = "remote access error",
		[IBV_WC_REM_OP_ERR] = "remote operation error",
		[IBV_WC_RETRY_EXC_ERR] = "transport retry counter exceeded",
		[IBV_WC_RNR_RETRY_EXC_ERR] = "RNR retry counter exceeded",
		[IBV_WC_LOC_RDD_VIOL_ERR] = "local RDD violation error",
		[IBV_WC_REM_INV_RD_REQ_ERR] = "remote invalid RD request",
		[IBV_WC_REM_ABORT_ERR] = "aborted error",
		[IBV_WC_INV_EECN_ERR] = "invalid EE context number",
		[IBV_WC_INV_EEC_STATE_ERR] = "invalid EE context state",
		[IBV_WC_FATAL_ERR] = "fatal error",
		[IBV_WC_RESP_TIMEOUT_ERR] = "response timeout error",
		[IBV_WC_GENERAL_ERR] = "general error",
		[IBV_WC_TM_ERR] = "TM error",
		[IBV_WC_TM_RNDV_INCOMPLETE] = "TM software rendezvous",
	};
	if ((unsigned)status < sizeof s / sizeof s[0] && s[status])
		return s[status];
	return "unknown";
}
