/*
 * CQs and completion channels: a CQ is a ring of CQEs the NIC writes
 * (internal/queue, rnic_abi.h), polled by each slot's owner word; both
 * ibv_poll_cq and the extended polling of ibv_create_cq_ex
 * (ibv_start_poll, ibv_next_poll, ibv_wc_read_*) read it. Arming writes a
 * word of the doorbell page; the NIC sends the CQ's cookie (its address)
 * on the channel's socket.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "hostif.h"
#include "rnic.h"

/* A completion channel: the program's end of the socket the NIC sends
 * each armed CQ's cookie on. */
struct rnic_channel {
	struct ibv_comp_channel ch;
	uint32_t handle;
};

struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *c)
{
	int is_1_0;
	struct ibv_comp_channel *ch_1_0 = rnic_compat_create_comp_channel(c, &is_1_0);
	if (is_1_0)
		return ch_1_0;
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
	int is_1_0, r_1_0 = rnic_compat_destroy_comp_channel(channel, &is_1_0);
	if (is_1_0)
		return r_1_0;
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

static uint8_t *slot(struct rnic_cq *cq, uint32_t i);

/* cqe_at returns the CQE at the consumer index if the NIC has written it. */
static uint8_t *cqe_at(struct rnic_cq *cq) { return slot(cq, cq->ci); }

static int rnic_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
	struct rnic_cq *cq = (struct rnic_cq *)ibcq;
	int k = 0;
	pthread_spin_lock(&cq->lock);
	uint8_t *s;
	while (k < n && (s = cqe_at(cq))) {
		struct ibv_wc *w = &wc[k++];
		memset(w, 0, sizeof *w);
		w->wr_id = rd64(s + RNIC_CQE_WR_ID);
		w->status = rd32(s + RNIC_CQE_STATUS);
		w->opcode = rd32(s + RNIC_CQE_OPCODE);
		w->wc_flags = rd32(s + RNIC_CQE_FLAGS);
		w->byte_len = rd32(s + RNIC_CQE_BYTE_LEN);
		w->imm_data = htonl(rd32(s + RNIC_CQE_IMM)); /* the CQE holds it in host order, ibv_wc in network order */
		w->qp_num = rd32(s + RNIC_CQE_QP_NUM);
		w->src_qp = rd32(s + RNIC_CQE_SRC_QP);
		w->vendor_err = rd32(s + RNIC_CQE_VENDOR_ERR);
		w->pkey_index = s[RNIC_CQE_PKEY_INDEX] | s[RNIC_CQE_PKEY_INDEX + 1] << 8;
		w->sl = s[RNIC_CQE_SL];
		cq->ci++;
	}
	if (k)
		atomic_store(word(ibcq->context, cq->ci_word), cq->ci);
	pthread_spin_unlock(&cq->lock);
	return k;
}

/* Arming: the NIC sends the CQ's next event on its channel, for the next
 * completion or (solicited_only) the next solicited or failed one, and
 * clears the word when it does. */
static int rnic_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	struct rnic_cq *cq = (struct rnic_cq *)ibcq;
	if (!ibcq->channel)
		return EINVAL;
	atomic_store(word(ibcq->context, cq->arm_word), solicited_only ? 2u : 1u);
	return 0;
}

/* slot returns the CQE slot of index i if the NIC has written it there. */
static uint8_t *slot(struct rnic_cq *cq, uint32_t i)
{
	uint8_t *s = cq->ring + (size_t)(i % cq->depth) * RNIC_CQE_LEN;
	if (atomic_load_explicit((_Atomic uint32_t *)(s + RNIC_CQE_OWNER), memory_order_acquire) != i / cq->depth + 1)
		return NULL;
	return s;
}

/* rnic_cq_clean removes QP qpn's CQEs the program has not polled (the QP
 * went to RESET), as mlx5's cq_clean does:
 * from the newest CQE back, the others move towards the newest end, and
 * the consumer index skips the slots freed at the oldest end. The NIC
 * writes only beyond the newest CQE, which this does not move. */
void rnic_cq_clean(struct ibv_cq *ibcq, uint32_t qpn)
{
	struct rnic_cq *cq = (struct rnic_cq *)ibcq;
	pthread_spin_lock(&cq->lock);
	uint32_t end = cq->ci;
	while (end - cq->ci < cq->depth && slot(cq, end))
		end++;
	uint32_t removed = 0;
	for (uint32_t i = end; i-- != cq->ci;) {
		uint8_t *s = slot(cq, i);
		if (rd32(s + RNIC_CQE_QP_NUM) == qpn) {
			removed++;
			continue;
		}
		if (removed) {
			uint32_t j = i + removed;
			uint8_t *d = cq->ring + (size_t)(j % cq->depth) * RNIC_CQE_LEN;
			memcpy(d, s, RNIC_CQE_OWNER);
			atomic_store_explicit((_Atomic uint32_t *)(d + RNIC_CQE_OWNER), j / cq->depth + 1, memory_order_release);
		}
	}
	if (removed) {
		cq->ci += removed;
		atomic_store(word(ibcq->context, cq->ci_word), cq->ci);
	}
	pthread_spin_unlock(&cq->lock);
}

/* --- Extended polling (struct ibv_cq_ex) --- */

/* The current CQE's fields, read where ibv_end_poll will release it. */
static void load_cur(struct rnic_cq *cq)
{
	cq->ex.wr_id = rd64(cq->cur + RNIC_CQE_WR_ID);
	cq->ex.status = rd32(cq->cur + RNIC_CQE_STATUS);
}

static int cqx_start_poll(struct ibv_cq_ex *ex, struct ibv_poll_cq_attr *attr)
{
	struct rnic_cq *cq = (struct rnic_cq *)ex;
	if (attr->comp_mask)
		return EINVAL;
	pthread_spin_lock(&cq->lock);
	cq->cur = cqe_at(cq);
	if (!cq->cur) {
		pthread_spin_unlock(&cq->lock); /* ENOENT: the program does not call end_poll */
		return ENOENT;
	}
	load_cur(cq);
	return 0;
}

static int cqx_next_poll(struct ibv_cq_ex *ex)
{
	struct rnic_cq *cq = (struct rnic_cq *)ex;
	cq->ci++;
	atomic_store(word(ex->context, cq->ci_word), cq->ci);
	cq->cur = cqe_at(cq);
	if (!cq->cur)
		return ENOENT;
	load_cur(cq);
	return 0;
}

static void cqx_end_poll(struct ibv_cq_ex *ex)
{
	struct rnic_cq *cq = (struct rnic_cq *)ex;
	if (cq->cur) {
		cq->ci++;
		atomic_store(word(ex->context, cq->ci_word), cq->ci);
		cq->cur = NULL;
	}
	pthread_spin_unlock(&cq->lock);
}

#define CUR(ex) (((struct rnic_cq *)(ex))->cur)
static enum ibv_wc_opcode cqx_read_opcode(struct ibv_cq_ex *ex) { return rd32(CUR(ex) + RNIC_CQE_OPCODE); }
static uint32_t cqx_read_vendor_err(struct ibv_cq_ex *ex) { return rd32(CUR(ex) + RNIC_CQE_VENDOR_ERR); }
static uint32_t cqx_read_byte_len(struct ibv_cq_ex *ex) { return rd32(CUR(ex) + RNIC_CQE_BYTE_LEN); }
static __be32 cqx_read_imm_data(struct ibv_cq_ex *ex)
{
	uint32_t v = rd32(CUR(ex) + RNIC_CQE_IMM);
	/* SEND_WITH_INV's invalidated rkey is in host order, as ibv_wc's is. */
	return (rd32(CUR(ex) + RNIC_CQE_FLAGS) & IBV_WC_WITH_INV) ? v : htonl(v);
}
static uint32_t cqx_read_qp_num(struct ibv_cq_ex *ex) { return rd32(CUR(ex) + RNIC_CQE_QP_NUM); }
static uint32_t cqx_read_src_qp(struct ibv_cq_ex *ex) { return rd32(CUR(ex) + RNIC_CQE_SRC_QP); }
static unsigned int cqx_read_wc_flags(struct ibv_cq_ex *ex) { return rd32(CUR(ex) + RNIC_CQE_FLAGS); }
static uint32_t cqx_read_slid(struct ibv_cq_ex *ex)
{
	(void)ex;
	return 0; /* RoCE: no LIDs */
}
static uint8_t cqx_read_sl(struct ibv_cq_ex *ex) { return CUR(ex)[42]; }
static uint8_t cqx_read_dlid_path_bits(struct ibv_cq_ex *ex)
{
	(void)ex;
	return 0;
}

/* The CQE fields the ring carries: the standard set. No timestamps,
 * VLANs, flow tags or tag matching. */
#define RNIC_WC_FLAGS IBV_WC_STANDARD_FLAGS

static struct rnic_cq *create_cq(struct ibv_context *c, int cqe, void *cq_context, struct ibv_comp_channel *channel,
				 uint32_t comp_vector)
{
	if (cqe < 1 || comp_vector >= (uint32_t)c->num_comp_vectors) {
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
	hostif_u64(&m, (uintptr_t)cq);
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
	cq->ring = m.err ? MAP_FAILED : mmap(NULL, (size_t)cq->depth * RNIC_CQE_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (cq->ring == MAP_FAILED) {
		free(cq); /* the NIC's CQ goes with the context */
		errno = m.err ? EPROTO : ENOMEM;
		return NULL;
	}
	pthread_spin_init(&cq->lock, PTHREAD_PROCESS_PRIVATE);
	struct ibv_cq *ibcq = ibv_cq_ex_to_cq(&cq->ex);
	ibcq->channel = channel;
	ibcq->context = c;
	ibcq->cq_context = cq_context;
	ibcq->handle = handle;
	ibcq->cqe = (int)cq->depth;
	pthread_mutex_init(&ibcq->mutex, NULL);
	pthread_cond_init(&ibcq->cond, NULL);
	rnic_ev_add(c, &cq->ev, handle, ibcq);
	c->ops.poll_cq = rnic_poll_cq;
	c->ops.req_notify_cq = rnic_req_notify_cq;
	return cq;
}

struct ibv_cq *ibv_create_cq(struct ibv_context *c, int cqe, void *cq_context, struct ibv_comp_channel *channel, int comp_vector)
{
	if (comp_vector < 0) {
		errno = EINVAL;
		return NULL;
	}
	struct rnic_cq *cq = create_cq(c, cqe, cq_context, channel, (uint32_t)comp_vector);
	return cq ? ibv_cq_ex_to_cq(&cq->ex) : NULL;
}

struct ibv_cq_ex *rnic_create_cq_ex(struct ibv_context *c, struct ibv_cq_init_attr_ex *a)
{
	uint32_t known = IBV_CQ_INIT_ATTR_MASK_FLAGS;
	if ((a->comp_mask & ~known) || (a->wc_flags & ~(uint64_t)RNIC_WC_FLAGS) ||
	    ((a->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) && (a->flags & ~IBV_CREATE_CQ_ATTR_SINGLE_THREADED))) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (a->cqe > INT32_MAX) {
		errno = EINVAL;
		return NULL;
	}
	struct rnic_cq *cq = create_cq(c, (int)a->cqe, a->cq_context, a->channel, a->comp_vector);
	if (!cq)
		return NULL;
	struct ibv_cq_ex *ex = &cq->ex;
	ex->start_poll = cqx_start_poll;
	ex->next_poll = cqx_next_poll;
	ex->end_poll = cqx_end_poll;
	ex->read_opcode = cqx_read_opcode;
	ex->read_vendor_err = cqx_read_vendor_err;
	ex->read_wc_flags = cqx_read_wc_flags;
	if (a->wc_flags & IBV_WC_EX_WITH_BYTE_LEN)
		ex->read_byte_len = cqx_read_byte_len;
	if (a->wc_flags & IBV_WC_EX_WITH_IMM)
		ex->read_imm_data = cqx_read_imm_data;
	if (a->wc_flags & IBV_WC_EX_WITH_QP_NUM)
		ex->read_qp_num = cqx_read_qp_num;
	if (a->wc_flags & IBV_WC_EX_WITH_SRC_QP)
		ex->read_src_qp = cqx_read_src_qp;
	if (a->wc_flags & IBV_WC_EX_WITH_SLID)
		ex->read_slid = cqx_read_slid;
	if (a->wc_flags & IBV_WC_EX_WITH_SL)
		ex->read_sl = cqx_read_sl;
	if (a->wc_flags & IBV_WC_EX_WITH_DLID_PATH_BITS)
		ex->read_dlid_path_bits = cqx_read_dlid_path_bits;
	return ex;
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
	rnic_ev_del(ibcq->context, &cq->ev, &ibcq->mutex, &ibcq->cond, &ibcq->async_events_completed);
	munmap(cq->ring, (size_t)cq->depth * RNIC_CQE_LEN);
	free(cq);
	return 0;
}

/* ibv_resize_cq: the NIC moves the CQEs not yet polled into a new ring;
 * polling waits meanwhile. */
int ibv_resize_cq(struct ibv_cq *ibcq, int cqe)
{
	struct rnic_cq *cq = (struct rnic_cq *)ibcq;
	if (cqe < 1)
		return EINVAL;
	pthread_spin_lock(&cq->lock);
	struct hostif_msg m;
	int fd = -1, nfds = 1;
	hostif_begin(&m, HOSTIF_RESIZE_CQ, 0);
	hostif_u32(&m, ibcq->handle);
	hostif_u32(&m, (uint32_t)cqe);
	hostif_u32(&m, cq->ci);
	int r = rnic_call(ibcq->context, &m, HOSTIF_RESIZE_CQ, &fd, &nfds);
	if (r || nfds != 1) {
		if (nfds == 1)
			close(fd);
		pthread_spin_unlock(&cq->lock);
		return r ? r : EPROTO;
	}
	uint32_t depth = hostif_get_u32(&m);
	uint8_t *ring = m.err ? MAP_FAILED : mmap(NULL, (size_t)depth * RNIC_CQE_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (ring == MAP_FAILED) {
		pthread_spin_unlock(&cq->lock);
		return m.err ? EPROTO : ENOMEM; /* the NIC writes a ring this CQ cannot read: it is lost */
	}
	munmap(cq->ring, (size_t)cq->depth * RNIC_CQE_LEN);
	cq->ring = ring;
	cq->depth = depth;
	cq->ci = 0;
	ibcq->cqe = (int)depth;
	pthread_spin_unlock(&cq->lock);
	return 0;
}
