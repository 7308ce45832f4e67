/*
 * PDs, MRs, CQs and QPs over the host interface, and the data path in
 * the rings the NIC shares: ibv_post_send writes a WQE into the send ring
 * and stores the producer index in the doorbell page (waking the NIC with
 * its eventfd only if the page says it sleeps); ibv_poll_cq reads CQEs by
 * their owner word. The formats are internal/hostif/ring.go's.
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

enum { WQE_HEADER = 64, RECV_HEADER = 16, SGE_LEN = 16, CQE_LEN = 64, MAX_SGE = 32 };

struct rnic_cq {
	struct ibv_cq ibcq;
	uint8_t *ring;
	uint32_t depth, ci, ci_word, arm_word;
	pthread_spinlock_t lock;
};

/* A completion channel: the program's end of the socket the NIC sends
 * each armed CQ's cookie (the struct rnic_cq's address) on. */
struct rnic_channel {
	struct ibv_comp_channel ch;
	uint32_t handle;
};

struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *c)
{
	struct hostif_msg m;
	int fd = -1, nfds = 1;
	hostif_begin(&m, HOSTIF_CREATE_COMP_CHANNEL, 0);
	int r = rnic_call(c, &m, HOSTIF_CREATE_COMP_CHANNEL, &fd, &nfds);
	if (r || nfds != 1) {
		if (nfds == 1)
			close(fd);
		errno = r ? r : EPROTO;
		return NULL;
	}
	struct rnic_channel *ch = calloc(1, sizeof *ch);
	if (!ch) {
		close(fd);
		errno = ENOMEM;
		return NULL;
	}
	ch->handle = hostif_get_u32(&m);
	ch->ch.context = c;
	ch->ch.fd = fd;
	return &ch->ch;
}

int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	struct rnic_channel *ch = (struct rnic_channel *)channel;
	struct hostif_msg m;
	hostif_begin(&m, HOSTIF_DESTROY_COMP_CHANNEL, 0);
	hostif_u32(&m, ch->handle);
	int r = rnic_call(channel->context, &m, HOSTIF_DESTROY_COMP_CHANNEL, NULL, NULL);
	if (r)
		return r;
	close(channel->fd);
	free(ch);
	return 0;
}

int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq, void **cq_context)
{
	uint64_t cookie;
	ssize_t n;
	do
		n = read(channel->fd, &cookie, sizeof cookie);
	while (n < 0 && errno == EINTR);
	if (n != sizeof cookie) {
		if (n >= 0)
			errno = EIO;
		return -1;
	}
	*cq = (struct ibv_cq *)(uintptr_t)cookie;
	*cq_context = (*cq)->cq_context;
	return 0;
}

void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	pthread_mutex_lock(&cq->mutex);
	cq->comp_events_completed += nevents;
	pthread_cond_signal(&cq->cond);
	pthread_mutex_unlock(&cq->mutex);
}

/* A receive ring, a QP's RQ or an SRQ: slots the NIC reads, its doorbell word. */
struct recv_ring {
	uint8_t *mem;
	uint32_t depth, slot, word, pi, max_sge;
	pthread_spinlock_t lock;
};

struct rnic_qp {
	struct ibv_qp_ex ex; /* first, with its qp_base first: the ibv_qp programs hold */
	uint8_t *sq;
	uint32_t sq_depth, sq_slot, sq_word, sq_pi;
	struct recv_ring rq;
	struct ibv_qp_cap cap;
	pthread_spinlock_t sq_lock;
	/* ibv_wr_*: the WQEs built since wr_start, the slot being built. */
	uint32_t wr_pi;
	uint8_t *wr_cur;
	int wr_err;
};

static struct rnic_context *ctx_of(struct ibv_context *c)
{
	return (struct rnic_context *)((char *)c - offsetof(struct rnic_context, vctx.context));
}

static _Atomic uint32_t *word(struct ibv_context *c, uint32_t off)
{
	return (_Atomic uint32_t *)((uint8_t *)ctx_of(c)->db + off);
}

/* ring stores a producer index and wakes a sleeping NIC. */
static void ring(struct ibv_context *c, uint32_t off, uint32_t idx)
{
	atomic_store(word(c, off), idx);
	if (atomic_load(word(c, 0)) == 1) {
		uint64_t one = 1;
		ssize_t r = write(ctx_of(c)->wake_fd, &one, sizeof one);
		(void)r;
	}
}

static void le32(uint8_t *b, uint32_t v) { for (int i = 0; i < 4; i++) b[i] = v >> (8 * i); }
static void le64(uint8_t *b, uint64_t v) { for (int i = 0; i < 8; i++) b[i] = v >> (8 * i); }

/* put_sges writes n scatter/gather entries in the ring's SGE format at g. */
static void put_sges(uint8_t *g, const struct ibv_sge *sg, size_t n)
{
	for (size_t i = 0; i < n; i++, g += SGE_LEN) {
		le64(g, sg[i].addr);
		le32(g + 8, sg[i].length);
		le32(g + 12, sg[i].lkey);
	}
}

static int recv_ring_map(struct recv_ring *q, struct hostif_msg *m, uint32_t max_sge, int fd)
{
	q->depth = hostif_get_u32(m);
	q->slot = hostif_get_u32(m);
	q->word = hostif_get_u32(m);
	q->max_sge = max_sge;
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
	for (; wr; wr = wr->next) {
		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > q->max_sge) {
			r = EINVAL;
			break;
		}
		uint8_t *s = q->mem + (size_t)(pi % q->depth) * q->slot;
		memset(s, 0, RECV_HEADER);
		le64(s, wr->wr_id);
		s[8] = wr->num_sge;
		put_sges(s + RECV_HEADER, wr->sg_list, wr->num_sge);
		pi++;
	}
	if (pi != q->pi) {
		q->pi = pi;
		ring(c, q->word, pi);
	}
	pthread_spin_unlock(&q->lock);
	if (r && bad)
		*bad = wr;
	return r;
}
static uint32_t rd32(const uint8_t *b) { return b[0] | b[1] << 8 | b[2] << 16 | (uint32_t)b[3] << 24; }
static uint64_t rd64(const uint8_t *b) { return rd32(b) | (uint64_t)rd32(b + 4) << 32; }

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

/* The sender of a UD receive: its GID is the GRH's source. */
struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc, struct ibv_grh *grh, uint8_t port_num)
{
	if (!(wc->wc_flags & IBV_WC_GRH) || !grh) {
		errno = EINVAL;
		return NULL;
	}
	struct ibv_ah_attr a = {.is_global = 1, .port_num = port_num, .sl = wc->sl};
	a.grh.dgid = grh->sgid;
	a.grh.sgid_index = 1;
	a.grh.hop_limit = 0xff;
	a.grh.traffic_class = (ntohl(grh->version_tclass_flow) >> 20) & 0xff;
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

/* --- CQ --- */

static int rnic_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
	struct rnic_cq *cq = (struct rnic_cq *)ibcq;
	int k = 0;
	pthread_spin_lock(&cq->lock);
	while (k < n) {
		uint8_t *s = cq->ring + (size_t)(cq->ci % cq->depth) * CQE_LEN;
		uint32_t lap = cq->ci / cq->depth + 1;
		if (atomic_load_explicit((_Atomic uint32_t *)(s + 60), memory_order_acquire) != lap)
			break;
		struct ibv_wc *w = &wc[k++];
		memset(w, 0, sizeof *w);
		w->wr_id = rd64(s);
		w->status = rd32(s + 8);
		w->opcode = rd32(s + 12);
		w->wc_flags = rd32(s + 16);
		w->byte_len = rd32(s + 20);
		w->imm_data = htonl(rd32(s + 24)); /* the CQE holds it in host order, ibv_wc in network order */
		w->qp_num = rd32(s + 28);
		w->src_qp = rd32(s + 32);
		w->vendor_err = rd32(s + 36);
		w->pkey_index = s[40] | s[41] << 8;
		w->sl = s[42];
		cq->ci++;
	}
	if (k)
		atomic_store(word(ibcq->context, cq->ci_word), cq->ci);
	pthread_spin_unlock(&cq->lock);
	return k;
}

/* Arming: the NIC sends the CQ's next event on its channel (solicited
 * only is kept as any completion: rnic wakes at each). */
static int rnic_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	struct rnic_cq *cq = (struct rnic_cq *)ibcq;
	if (!ibcq->channel)
		return EINVAL;
	atomic_store(word(ibcq->context, cq->arm_word), solicited_only ? 2u : 1u);
	return 0;
}

struct ibv_cq *ibv_create_cq(struct ibv_context *c, int cqe, void *cq_context, struct ibv_comp_channel *channel, int comp_vector)
{
	(void)comp_vector;
	if (cqe < 1) {
		errno = EINVAL;
		return NULL;
	}
	struct rnic_cq *cq = calloc(1, sizeof *cq);
	if (!cq) {
		errno = ENOMEM;
		return NULL;
	}
	struct hostif_msg m;
	int fd = -1, nfds = 1;
	hostif_begin(&m, HOSTIF_CREATE_CQ, 0);
	hostif_u32(&m, (uint32_t)cqe);
	hostif_u32(&m, channel ? ((struct rnic_channel *)channel)->handle : 0);
	hostif_u64(&m, (uintptr_t)&cq->ibcq);
	int r = rnic_call(c, &m, HOSTIF_CREATE_CQ, &fd, &nfds);
	if (r || nfds != 1) {
		if (nfds == 1)
			close(fd);
		free(cq);
		errno = r ? r : EPROTO;
		return NULL;
	}
	uint32_t handle = hostif_get_u32(&m);
	cq->depth = hostif_get_u32(&m);
	cq->ci_word = hostif_get_u32(&m);
	cq->arm_word = hostif_get_u32(&m);
	cq->ring = mmap(NULL, (size_t)cq->depth * CQE_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (m.err || cq->ring == MAP_FAILED) {
		free(cq);
		errno = m.err ? EPROTO : ENOMEM;
		return NULL;
	}
	cq->ibcq.channel = channel;
	pthread_spin_init(&cq->lock, PTHREAD_PROCESS_PRIVATE);
	cq->ibcq.context = c;
	cq->ibcq.cq_context = cq_context;
	cq->ibcq.handle = handle;
	cq->ibcq.cqe = (int)cq->depth;
	pthread_mutex_init(&cq->ibcq.mutex, NULL);
	pthread_cond_init(&cq->ibcq.cond, NULL);
	c->ops.poll_cq = rnic_poll_cq;
	c->ops.req_notify_cq = rnic_req_notify_cq;
	return &cq->ibcq;
}

int ibv_destroy_cq(struct ibv_cq *ibcq)
{
	struct rnic_cq *cq = (struct rnic_cq *)ibcq;
	struct hostif_msg m;
	hostif_begin(&m, HOSTIF_DESTROY_CQ, 0);
	hostif_u32(&m, ibcq->handle);
	int r = rnic_call(ibcq->context, &m, HOSTIF_DESTROY_CQ, NULL, NULL);
	if (r)
		return r;
	munmap(cq->ring, (size_t)cq->depth * CQE_LEN);
	free(cq);
	return 0;
}

/* --- SRQ --- */

struct rnic_srq {
	struct ibv_srq ibsrq;
	struct recv_ring rq;
};

static int rnic_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	return post_recvs(ibsrq->context, &((struct rnic_srq *)ibsrq)->rq, wr, bad);
}

struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *a)
{
	if (a->attr.max_sge > MAX_SGE) {
		errno = EINVAL;
		return NULL;
	}
	struct hostif_msg m;
	int fd = -1, nfds = 1;
	hostif_begin(&m, HOSTIF_CREATE_SRQ, 0);
	hostif_u32(&m, pd->handle);
	hostif_u32(&m, a->attr.max_wr);
	hostif_u32(&m, a->attr.max_sge);
	hostif_u32(&m, a->attr.srq_limit);
	int r = rnic_call(pd->context, &m, HOSTIF_CREATE_SRQ, &fd, &nfds);
	if (r || nfds != 1) {
		if (nfds == 1)
			close(fd);
		errno = r ? r : EPROTO;
		return NULL;
	}
	struct rnic_srq *srq = calloc(1, sizeof *srq);
	if (!srq) {
		close(fd);
		errno = ENOMEM;
		return NULL;
	}
	srq->ibsrq.handle = hostif_get_u32(&m);
	int mapped = recv_ring_map(&srq->rq, &m, a->attr.max_sge ? a->attr.max_sge : 1, fd) == 0;
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
	recv_ring_unmap(&srq->rq);
	free(srq);
	return 0;
}

/* --- QP --- */

static int rnic_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct rnic_qp *qp = (struct rnic_qp *)ibqp;
	int r = 0;
	pthread_spin_lock(&qp->sq_lock);
	uint32_t pi = qp->sq_pi;
	for (; wr; wr = wr->next) {
		int inl = wr->send_flags & IBV_SEND_INLINE;
		size_t total = 0;
		for (int i = 0; inl && i < wr->num_sge; i++)
			total += wr->sg_list[i].length;
		if (wr->num_sge < 0 || (!inl && (uint32_t)wr->num_sge > qp->cap.max_send_sge) ||
		    (inl && (total > qp->cap.max_inline_data || total > qp->sq_slot - WQE_HEADER))) {
			r = EINVAL;
			break;
		}
		uint8_t *s = qp->sq + (size_t)(pi % qp->sq_depth) * qp->sq_slot;
		memset(s, 0, WQE_HEADER);
		le64(s, wr->wr_id);
		s[8] = wr->opcode;
		s[9] = wr->send_flags;
		s[10] = wr->num_sge;
		if (wr->opcode == IBV_WR_SEND_WITH_INV || wr->opcode == IBV_WR_LOCAL_INV)
			le32(s + 12, wr->invalidate_rkey);
		else
			le32(s + 12, ntohl(wr->imm_data)); /* the ring holds it in host order */
		switch (wr->opcode) {
		case IBV_WR_ATOMIC_CMP_AND_SWP:
		case IBV_WR_ATOMIC_FETCH_AND_ADD:
			le64(s + 16, wr->wr.atomic.remote_addr);
			le32(s + 24, wr->wr.atomic.rkey);
			le64(s + 32, wr->wr.atomic.compare_add);
			le64(s + 40, wr->wr.atomic.swap);
			break;
		default:
			le64(s + 16, wr->wr.rdma.remote_addr);
			le32(s + 24, wr->wr.rdma.rkey);
		}
		if (ibqp->qp_type == IBV_QPT_UD) {
			if (!wr->wr.ud.ah) {
				r = EINVAL;
				break;
			}
			le32(s + 48, wr->wr.ud.remote_qpn);
			le32(s + 52, wr->wr.ud.remote_qkey);
			le32(s + 56, wr->wr.ud.ah->handle);
		}
		if (inl) {
			/* The payload goes into the slot now: the buffer is free on return. */
			uint8_t *p = s + WQE_HEADER;
			for (int i = 0; i < wr->num_sge; i++) {
				memcpy(p, (void *)(uintptr_t)wr->sg_list[i].addr, wr->sg_list[i].length);
				p += wr->sg_list[i].length;
			}
			s[10] = 0;
			le32(s + 28, (uint32_t)total);
		} else {
			put_sges(s + WQE_HEADER, wr->sg_list, wr->num_sge);
		}
		pi++;
	}
	if (pi != qp->sq_pi) {
		qp->sq_pi = pi;
		ring(ibqp->context, qp->sq_word, pi);
	}
	pthread_spin_unlock(&qp->sq_lock);
	if (r && bad)
		*bad = wr;
	return r;
}

static int rnic_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	return post_recvs(ibqp->context, &((struct rnic_qp *)ibqp)->rq, wr, bad);
}

struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *a)
{
	if (a->cap.max_send_sge > MAX_SGE || a->cap.max_recv_sge > MAX_SGE) {
		errno = EINVAL;
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
	int r = rnic_call(c, &m, HOSTIF_CREATE_QP, fds, &nfds);
	if (r || nfds != 2) {
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		errno = r ? r : EPROTO;
		return NULL;
	}
	struct rnic_qp *qp = calloc(1, sizeof *qp);
	if (!qp) {
		close(fds[0]);
		close(fds[1]);
		errno = ENOMEM;
		return NULL;
	}
	qp->ex.qp_base.handle = hostif_get_u32(&m);
	qp->ex.qp_base.qp_num = hostif_get_u32(&m);
	qp->sq_depth = hostif_get_u32(&m);
	qp->sq_slot = hostif_get_u32(&m);
	qp->sq_word = hostif_get_u32(&m);
	int rq_mapped = recv_ring_map(&qp->rq, &m, a->cap.max_recv_sge, fds[1]) == 0;
	qp->sq = mmap(NULL, (size_t)qp->sq_depth * qp->sq_slot, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
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
	qp->cap = a->cap;
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
	c->ops.post_send = rnic_post_send;
	c->ops.post_recv = rnic_post_recv;
	return q;
}

int ibv_modify_qp(struct ibv_qp *q, struct ibv_qp_attr *a, int mask)
{
	struct hostif_msg m;
	hostif_begin(&m, HOSTIF_MODIFY_QP, 0);
	hostif_u32(&m, q->handle);
	hostif_u32(&m, (uint32_t)mask);
	hostif_u8(&m, a->qp_state);
	hostif_u8(&m, a->cur_qp_state);
	hostif_u8(&m, a->path_mtu);
	hostif_u8(&m, a->port_num ? a->port_num : a->ah_attr.port_num);
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
	int r = rnic_call(q->context, &m, HOSTIF_MODIFY_QP, NULL, NULL);
	if (r)
		return r;
	if (mask & IBV_QP_STATE)
		q->state = a->qp_state;
	return 0;
}

/* ibv_query_qp: what this library knows of the QP (its capabilities and
 * state); the NIC's other attributes are not asked for yet. */
int ibv_query_qp(struct ibv_qp *q, struct ibv_qp_attr *a, int mask, struct ibv_qp_init_attr *init)
{
	(void)mask;
	struct rnic_qp *qp = (struct rnic_qp *)q;
	memset(a, 0, sizeof *a);
	a->qp_state = a->cur_qp_state = q->state;
	a->cap = qp->cap;
	if (init) {
		memset(init, 0, sizeof *init);
		init->qp_context = q->qp_context;
		init->send_cq = q->send_cq;
		init->recv_cq = q->recv_cq;
		init->cap = qp->cap;
		init->qp_type = q->qp_type;
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
	munmap(qp->sq, (size_t)qp->sq_depth * qp->sq_slot);
	recv_ring_unmap(&qp->rq);
	free(qp);
	return 0;
}

/* --- The extended send API (ibv_wr_*) --- */

/* wqe begins the next WQE of a batch: its slot, cleared, with the
 * QP's current wr_id and flags and op. */
static uint8_t *wqe(struct ibv_qp_ex *ex, uint8_t op)
{
	struct rnic_qp *qp = (struct rnic_qp *)ex;
	uint8_t *s = qp->sq + (size_t)(qp->wr_pi % qp->sq_depth) * qp->sq_slot;
	memset(s, 0, WQE_HEADER);
	le64(s, ex->wr_id);
	s[8] = op;
	s[9] = ex->wr_flags;
	qp->wr_pi++;
	qp->wr_cur = s;
	return s;
}

static void rdma(struct ibv_qp_ex *ex, uint8_t op, uint32_t rkey, uint64_t addr, uint32_t imm)
{
	uint8_t *s = wqe(ex, op);
	le32(s + 12, imm);
	le64(s + 16, addr);
	le32(s + 24, rkey);
}

static void wr_rdma_write(struct ibv_qp_ex *ex, uint32_t rkey, uint64_t addr) { rdma(ex, IBV_WR_RDMA_WRITE, rkey, addr, 0); }
static void wr_rdma_write_imm(struct ibv_qp_ex *ex, uint32_t rkey, uint64_t addr, __be32 imm)
{
	rdma(ex, IBV_WR_RDMA_WRITE_WITH_IMM, rkey, addr, ntohl(imm));
}
static void wr_rdma_read(struct ibv_qp_ex *ex, uint32_t rkey, uint64_t addr) { rdma(ex, IBV_WR_RDMA_READ, rkey, addr, 0); }
static void wr_send(struct ibv_qp_ex *ex) { wqe(ex, IBV_WR_SEND); }
static void wr_send_imm(struct ibv_qp_ex *ex, __be32 imm) { le32(wqe(ex, IBV_WR_SEND_WITH_IMM) + 12, ntohl(imm)); }
static void wr_send_inv(struct ibv_qp_ex *ex, uint32_t rkey) { le32(wqe(ex, IBV_WR_SEND_WITH_INV) + 12, rkey); }
static void wr_local_inv(struct ibv_qp_ex *ex, uint32_t rkey) { le32(wqe(ex, IBV_WR_LOCAL_INV) + 12, rkey); }

static void atomic(struct ibv_qp_ex *ex, uint8_t op, uint32_t rkey, uint64_t addr, uint64_t cmp, uint64_t swap)
{
	uint8_t *s = wqe(ex, op);
	le64(s + 16, addr);
	le32(s + 24, rkey);
	le64(s + 32, cmp);
	le64(s + 40, swap);
}

static void wr_atomic_cmp_swp(struct ibv_qp_ex *ex, uint32_t rkey, uint64_t addr, uint64_t cmp, uint64_t swap)
{
	atomic(ex, IBV_WR_ATOMIC_CMP_AND_SWP, rkey, addr, cmp, swap);
}

static void wr_atomic_fetch_add(struct ibv_qp_ex *ex, uint32_t rkey, uint64_t addr, uint64_t add)
{
	atomic(ex, IBV_WR_ATOMIC_FETCH_AND_ADD, rkey, addr, add, 0);
}

static void wr_set_sge_list(struct ibv_qp_ex *ex, size_t n, const struct ibv_sge *sg)
{
	struct rnic_qp *qp = (struct rnic_qp *)ex;
	uint8_t *s = qp->wr_cur;
	if (!s || n > qp->cap.max_send_sge || WQE_HEADER + n * SGE_LEN > qp->sq_slot) {
		qp->wr_err = EINVAL;
		return;
	}
	s[10] = (uint8_t)n;
	put_sges(s + WQE_HEADER, sg, n);
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
	if (!s || total > qp->cap.max_inline_data || total > qp->sq_slot - WQE_HEADER) {
		qp->wr_err = EINVAL;
		return;
	}
	uint8_t *p = s + WQE_HEADER;
	for (size_t i = 0; i < n; i++) {
		memcpy(p, buf[i].addr, buf[i].length);
		p += buf[i].length;
	}
	s[9] |= IBV_SEND_INLINE;
	s[10] = 0;
	le32(s + 28, (uint32_t)total);
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
	le32(qp->wr_cur + 48, qpn);
	le32(qp->wr_cur + 52, qkey);
	le32(qp->wr_cur + 56, ah->handle);
}

static void wr_start(struct ibv_qp_ex *ex)
{
	struct rnic_qp *qp = (struct rnic_qp *)ex;
	pthread_spin_lock(&qp->sq_lock);
	qp->wr_pi = qp->sq_pi;
	qp->wr_cur = NULL;
	qp->wr_err = 0;
}

static int wr_complete(struct ibv_qp_ex *ex)
{
	struct rnic_qp *qp = (struct rnic_qp *)ex;
	int err = qp->wr_err;
	if (!err && qp->wr_pi - qp->sq_pi > qp->sq_depth)
		err = ENOMEM;
	if (!err && qp->wr_pi != qp->sq_pi) {
		qp->sq_pi = qp->wr_pi;
		ring(ex->qp_base.context, qp->sq_word, qp->sq_pi);
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
	 IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_SEND_WITH_INV)

struct ibv_qp *rnic_create_qp_ex(struct ibv_context *c, struct ibv_qp_init_attr_ex *a)
{
	(void)c;
	uint32_t known = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	if (!(a->comp_mask & IBV_QP_INIT_ATTR_PD) || (a->comp_mask & ~known) ||
	    ((a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) && (a->send_ops_flags & ~(uint64_t)RNIC_SEND_OPS))) {
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
