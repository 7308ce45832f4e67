/*
 * The IBVERBS_1.0 ABI: programs linked against libibverbs 1.0 (2006)
 * import ibv_open_device@IBVERBS_1.0 and the others below, whose
 * structures libibverbs 1.1 changed (struct ibv_device lost its sysfs
 * members, struct ibv_context's ops moved, work requests put wr_id before
 * next, every object gained members). rdma-core keeps them working by
 * handing such a program proxies in the 1.0 layouts, each naming the
 * current object behind it, and so does this file: each call maps the
 * proxies it is given to the current objects, calls the current verb,
 * and maps what comes back.
 *
 * The data path of 1.0 is inline in the program (ibv_post_send calls
 * qp->context->ops.post_send): the 1.0 context's ops table holds
 * functions that translate the 1.0 work requests. The table's other
 * entries were the driver's, which a 1.0 program reached only through
 * the library's functions; they are left NULL, as rdma-core leaves them.
 *
 * The layouts are rdma-core's (libibverbs/compat-1_0.c), the 1.0 ABI as
 * Debian's libibverbs.so.1 serves it; provider/tests/compat_1_0.c
 * declares them again from the program's side. The current versions
 * (@@IBVERBS_1.1) are the plain definitions in the other files.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "rnic.h"

/* Binds impl as name@IBVERBS_1.0, the version a 1.0 program imports;
 * name@@IBVERBS_1.1 stays the default, for programs linked since. */
#define SYMVER_1_0(impl, name) __asm__(".symver " #impl ", " #name "@IBVERBS_1.0")

/* --- The 1.0 structures --- */

struct ibv_context_1_0;
struct ibv_ah_1_0;

struct ibv_device_1_0 {
	void *obsolete_sysfs_dev;
	void *obsolete_sysfs_ibdev;
	struct ibv_device *real_device; /* was the driver */
	struct _ibv_device_ops _ops;
};

struct ibv_pd_1_0 {
	struct ibv_context_1_0 *context;
	uint32_t handle;
	struct ibv_pd *real_pd;
};

struct ibv_mr_1_0 {
	struct ibv_context_1_0 *context;
	struct ibv_pd_1_0 *pd;
	uint32_t handle;
	uint32_t lkey;
	uint32_t rkey;
	struct ibv_mr *real_mr;
};

struct ibv_srq_1_0 {
	struct ibv_context_1_0 *context;
	void *srq_context;
	struct ibv_pd_1_0 *pd;
	uint32_t handle;
	pthread_mutex_t mutex;
	pthread_cond_t cond;
	uint32_t events_completed;
	struct ibv_srq *real_srq;
};

struct ibv_cq_1_0 {
	struct ibv_context_1_0 *context;
	void *cq_context;
	uint32_t handle;
	int cqe;
	pthread_mutex_t mutex;
	pthread_cond_t cond;
	uint32_t comp_events_completed;
	uint32_t async_events_completed;
	struct ibv_cq *real_cq;
};

struct ibv_qp_init_attr_1_0 {
	void *qp_context;
	struct ibv_cq_1_0 *send_cq;
	struct ibv_cq_1_0 *recv_cq;
	struct ibv_srq_1_0 *srq;
	struct ibv_qp_cap cap;
	enum ibv_qp_type qp_type;
	int sq_sig_all;
};

struct ibv_qp_1_0 {
	struct ibv_context_1_0 *context;
	void *qp_context;
	struct ibv_pd_1_0 *pd;
	struct ibv_cq_1_0 *send_cq;
	struct ibv_cq_1_0 *recv_cq;
	struct ibv_srq_1_0 *srq;
	uint32_t handle;
	uint32_t qp_num;
	enum ibv_qp_state state;
	enum ibv_qp_type qp_type;
	pthread_mutex_t mutex;
	pthread_cond_t cond;
	uint32_t events_completed;
	struct ibv_qp *real_qp;
};

struct ibv_ah_1_0 {
	struct ibv_context_1_0 *context;
	struct ibv_pd_1_0 *pd;
	uint32_t handle;
	struct ibv_ah *real_ah;
};

/* 1.0's work requests: next before wr_id, and no members after wr. */
struct ibv_send_wr_1_0 {
	struct ibv_send_wr_1_0 *next;
	uint64_t wr_id;
	struct ibv_sge *sg_list;
	int num_sge;
	enum ibv_wr_opcode opcode;
	int send_flags;
	__be32 imm_data;
	union {
		struct {
			uint64_t remote_addr;
			uint32_t rkey;
		} rdma;
		struct {
			uint64_t remote_addr;
			uint64_t compare_add;
			uint64_t swap;
			uint32_t rkey;
		} atomic;
		struct {
			struct ibv_ah_1_0 *ah;
			uint32_t remote_qpn;
			uint32_t remote_qkey;
		} ud;
	} wr;
};

struct ibv_recv_wr_1_0 {
	struct ibv_recv_wr_1_0 *next;
	uint64_t wr_id;
	struct ibv_sge *sg_list;
	int num_sge;
};

/* The union wr is the current one member for member, an AH pointer in
 * place of an AH pointer: post_send_1_0 copies it whole. */
#define SAME(m) (offsetof(struct ibv_send_wr_1_0, wr.m) - offsetof(struct ibv_send_wr_1_0, wr) == \
		 offsetof(struct ibv_send_wr, wr.m) - offsetof(struct ibv_send_wr, wr))
_Static_assert(sizeof(((struct ibv_send_wr_1_0 *)0)->wr) == sizeof(((struct ibv_send_wr *)0)->wr), "wr union size");
_Static_assert(SAME(rdma.remote_addr) && SAME(rdma.rkey) && SAME(atomic.remote_addr) && SAME(atomic.compare_add) &&
		       SAME(atomic.swap) && SAME(atomic.rkey) && SAME(ud.ah) && SAME(ud.remote_qpn) && SAME(ud.remote_qkey),
	       "wr union layout");

/* 1.0's completion channel: its fd only (1.1 put the context first). */
struct ibv_comp_channel_1_0 {
	int fd;
};

struct ibv_context_ops_1_0 {
	void *query_device, *query_port, *alloc_pd, *dealloc_pd, *reg_mr, *dereg_mr, *create_cq; /* the driver's */
	int (*poll_cq)(struct ibv_cq_1_0 *cq, int num_entries, struct ibv_wc *wc);
	int (*req_notify_cq)(struct ibv_cq_1_0 *cq, int solicited_only);
	void *cq_event, *resize_cq, *destroy_cq, *create_srq, *modify_srq, *query_srq, *destroy_srq;
	int (*post_srq_recv)(struct ibv_srq_1_0 *srq, struct ibv_recv_wr_1_0 *wr, struct ibv_recv_wr_1_0 **bad_wr);
	void *create_qp, *query_qp, *modify_qp, *destroy_qp;
	int (*post_send)(struct ibv_qp_1_0 *qp, struct ibv_send_wr_1_0 *wr, struct ibv_send_wr_1_0 **bad_wr);
	int (*post_recv)(struct ibv_qp_1_0 *qp, struct ibv_recv_wr_1_0 *wr, struct ibv_recv_wr_1_0 **bad_wr);
	void *create_ah, *destroy_ah, *attach_mcast, *detach_mcast;
};

struct ibv_context_1_0 {
	struct ibv_device_1_0 *device;
	struct ibv_context_ops_1_0 ops;
	int cmd_fd;
	int async_fd;
	int num_comp_vectors;
	struct ibv_context *real_context; /* was abi_compat */
};

/* --- What this file keeps of them --- */

/* A device proxy lives while the list that returned it or a context
 * opened on it does: a program may free the list and go on using an
 * open context's device, as ibv_get_device_list(3) allows. */
struct compat_device {
	struct ibv_device_1_0 pub; /* first: what the program holds */
	int refs;
};

/* A list: the current list behind it, then what the program holds. */
struct compat_list {
	struct ibv_device **real;
	struct ibv_device_1_0 *devs[]; /* NULL-terminated */
};

/*
 * Completion channels have one symbol for both ABIs
 * (ibv_create_comp_channel@@IBVERBS_1.0, whose argument 1.1 reinterpreted
 * as its own context), so rnic_cq.c asks this file whether the context
 * or channel it was given is a 1.0 one: the open 1.0 contexts and their
 * channels are kept on lists. rdma-core does not translate them (a 1.0
 * program's ibv_create_comp_channel reads its proxy as a current
 * context); here they work.
 */
struct compat_context {
	struct ibv_context_1_0 pub;
	struct compat_context *next;
};

struct compat_channel {
	struct ibv_comp_channel_1_0 pub;
	struct ibv_comp_channel *real;
	struct compat_channel *next;
};

static pthread_mutex_t compat_lock = PTHREAD_MUTEX_INITIALIZER;
static struct compat_context *contexts;
static struct compat_channel *channels;

static void put_device(struct ibv_device_1_0 *d) /* compat_lock held */
{
	struct compat_device *cd = (struct compat_device *)d;
	if (--cd->refs == 0)
		free(cd);
}

static struct compat_context *find_context(const void *c)
{
	pthread_mutex_lock(&compat_lock);
	struct compat_context *cc = contexts;
	while (cc && (const void *)&cc->pub != c)
		cc = cc->next;
	pthread_mutex_unlock(&compat_lock);
	return cc;
}

static struct compat_channel *find_channel(const void *ch)
{
	pthread_mutex_lock(&compat_lock);
	struct compat_channel *cc = channels;
	while (cc && (const void *)&cc->pub != ch)
		cc = cc->next;
	pthread_mutex_unlock(&compat_lock);
	return cc;
}

/* real_channel: the current channel behind a 1.0 program's channel. */
static struct ibv_comp_channel *real_channel(struct ibv_comp_channel *ch)
{
	struct compat_channel *cc = ch ? find_channel(ch) : NULL;
	return cc ? cc->real : ch;
}

/* --- Devices --- */

struct ibv_device_1_0 **rnic_1_0_get_device_list(int *num)
{
	int n;
	struct ibv_device **real = ibv_get_device_list(&n);
	if (!real)
		return NULL;
	struct compat_list *l = calloc(1, sizeof *l + (size_t)(n + 1) * sizeof l->devs[0]);
	if (!l)
		goto nomem;
	for (int i = 0; i < n; i++) {
		struct compat_device *d = calloc(1, sizeof *d);
		if (!d) {
			while (i--)
				free(l->devs[i]);
			free(l);
			goto nomem;
		}
		d->pub.real_device = real[i];
		d->refs = 1;
		l->devs[i] = &d->pub;
	}
	l->real = real;
	if (num)
		*num = n;
	return l->devs;
nomem:
	ibv_free_device_list(real);
	errno = ENOMEM;
	return NULL;
}
SYMVER_1_0(rnic_1_0_get_device_list, ibv_get_device_list);

void rnic_1_0_free_device_list(struct ibv_device_1_0 **list)
{
	if (!list)
		return;
	struct compat_list *l = (struct compat_list *)((char *)list - offsetof(struct compat_list, devs));
	pthread_mutex_lock(&compat_lock);
	for (struct ibv_device_1_0 **d = list; *d; d++)
		put_device(*d);
	pthread_mutex_unlock(&compat_lock);
	ibv_free_device_list(l->real); /* an open device outlives it (rnic_verbs.c) */
	free(l);
}
SYMVER_1_0(rnic_1_0_free_device_list, ibv_free_device_list);

const char *rnic_1_0_get_device_name(struct ibv_device_1_0 *device)
{
	return ibv_get_device_name(device->real_device);
}
SYMVER_1_0(rnic_1_0_get_device_name, ibv_get_device_name);

__be64 rnic_1_0_get_device_guid(struct ibv_device_1_0 *device)
{
	return ibv_get_device_guid(device->real_device);
}
SYMVER_1_0(rnic_1_0_get_device_guid, ibv_get_device_guid);

/* --- The data path, through the 1.0 context's ops --- */

static int poll_cq_1_0(struct ibv_cq_1_0 *cq, int num_entries, struct ibv_wc *wc)
{
	/* struct ibv_wc is as it was in 1.0 */
	return ibv_poll_cq(cq->real_cq, num_entries, wc);
}

static int req_notify_cq_1_0(struct ibv_cq_1_0 *cq, int solicited_only)
{
	return ibv_req_notify_cq(cq->real_cq, solicited_only);
}

/* Work requests are translated CHUNK at a time into current ones on the
 * stack and posted, so that a list of any length costs no allocation.
 * Posting stops at the first that fails, as it would in one call: those
 * before it are posted (ibv_post_send(3)), and *bad_wr names the 1.0
 * request that failed. */
enum { CHUNK = 16 };

static int post_send_1_0(struct ibv_qp_1_0 *qp, struct ibv_send_wr_1_0 *wr, struct ibv_send_wr_1_0 **bad_wr)
{
	struct ibv_send_wr w[CHUNK];
	struct ibv_send_wr_1_0 *from[CHUNK];
	int ud = qp->real_qp->qp_type == IBV_QPT_UD;
	while (wr) {
		int n = 0;
		for (; wr && n < CHUNK; wr = wr->next, n++) {
			struct ibv_send_wr *r = &w[n];
			memset(r, 0, sizeof *r);
			r->wr_id = wr->wr_id;
			r->sg_list = wr->sg_list;
			r->num_sge = wr->num_sge;
			r->opcode = wr->opcode;
			r->send_flags = (unsigned int)wr->send_flags;
			r->imm_data = wr->imm_data;
			memcpy(&r->wr, &wr->wr, sizeof r->wr);
			if (ud)
				r->wr.ud.ah = wr->wr.ud.ah ? wr->wr.ud.ah->real_ah : NULL;
			if (n)
				w[n - 1].next = r;
			from[n] = wr;
		}
		struct ibv_send_wr *bad = NULL;
		int ret = ibv_post_send(qp->real_qp, w, &bad);
		if (ret) {
			if (bad_wr)
				*bad_wr = bad ? from[bad - w] : from[0];
			return ret;
		}
	}
	return 0;
}

/* post_recv_1_0 translates receive requests as post_send_1_0 does send
 * requests, and posts them with post (a QP's receive queue or an SRQ). */
static int post_recv_1_0(struct ibv_recv_wr_1_0 *wr, struct ibv_recv_wr_1_0 **bad_wr,
			 int (*post)(void *q, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad), void *q)
{
	struct ibv_recv_wr w[CHUNK];
	struct ibv_recv_wr_1_0 *from[CHUNK];
	while (wr) {
		int n = 0;
		for (; wr && n < CHUNK; wr = wr->next, n++) {
			w[n] = (struct ibv_recv_wr){.wr_id = wr->wr_id, .sg_list = wr->sg_list, .num_sge = wr->num_sge};
			if (n)
				w[n - 1].next = &w[n];
			from[n] = wr;
		}
		struct ibv_recv_wr *bad = NULL;
		int ret = post(q, w, &bad);
		if (ret) {
			if (bad_wr)
				*bad_wr = bad ? from[bad - w] : from[0];
			return ret;
		}
	}
	return 0;
}

static int post_qp_recv(void *q, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	return ibv_post_recv(q, wr, bad);
}

static int post_srq_recv(void *q, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	return ibv_post_srq_recv(q, wr, bad);
}

static int post_qp_recv_1_0(struct ibv_qp_1_0 *qp, struct ibv_recv_wr_1_0 *wr, struct ibv_recv_wr_1_0 **bad_wr)
{
	return post_recv_1_0(wr, bad_wr, post_qp_recv, qp->real_qp);
}

static int post_srq_recv_1_0(struct ibv_srq_1_0 *srq, struct ibv_recv_wr_1_0 *wr, struct ibv_recv_wr_1_0 **bad_wr)
{
	return post_recv_1_0(wr, bad_wr, post_srq_recv, srq->real_srq);
}

/* --- Contexts --- */

struct ibv_context_1_0 *rnic_1_0_open_device(struct ibv_device_1_0 *device)
{
	struct compat_context *cc = calloc(1, sizeof *cc);
	if (!cc) {
		errno = ENOMEM;
		return NULL;
	}
	struct ibv_context *real = ibv_open_device(device->real_device);
	if (!real) {
		free(cc);
		return NULL;
	}
	struct ibv_context_1_0 *c = &cc->pub;
	c->device = device;
	c->real_context = real;
	/* A 1.0 program may poll these itself (async_fd for events). */
	c->cmd_fd = real->cmd_fd;
	c->async_fd = real->async_fd;
	c->num_comp_vectors = real->num_comp_vectors;
	c->ops.poll_cq = poll_cq_1_0;
	c->ops.req_notify_cq = req_notify_cq_1_0;
	c->ops.post_send = post_send_1_0;
	c->ops.post_recv = post_qp_recv_1_0;
	c->ops.post_srq_recv = post_srq_recv_1_0;
	pthread_mutex_lock(&compat_lock);
	((struct compat_device *)device)->refs++;
	cc->next = contexts;
	contexts = cc;
	pthread_mutex_unlock(&compat_lock);
	return c;
}
SYMVER_1_0(rnic_1_0_open_device, ibv_open_device);

int rnic_1_0_close_device(struct ibv_context_1_0 *context)
{
	int r = ibv_close_device(context->real_context);
	if (r)
		return r;
	pthread_mutex_lock(&compat_lock);
	struct compat_context **p = &contexts;
	while (*p && &(*p)->pub != context)
		p = &(*p)->next;
	if (*p)
		*p = (*p)->next;
	put_device(context->device);
	pthread_mutex_unlock(&compat_lock);
	free((struct compat_context *)context);
	return 0;
}
SYMVER_1_0(rnic_1_0_close_device, ibv_close_device);

/* What an async event names. */
enum { EV_OTHER, EV_CQ, EV_QP, EV_SRQ };

static int event_kind(enum ibv_event_type t)
{
	switch (t) {
	case IBV_EVENT_CQ_ERR:
		return EV_CQ;
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		return EV_QP;
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED:
		return EV_SRQ;
	default:
		return EV_OTHER;
	}
}

/* The event names the 1.0 proxy: each current object's context pointer
 * is its proxy (set when the proxy was made). */
int rnic_1_0_get_async_event(struct ibv_context_1_0 *context, struct ibv_async_event *event)
{
	int r = ibv_get_async_event(context->real_context, event);
	if (r)
		return r;
	switch (event_kind(event->event_type)) {
	case EV_CQ:
		event->element.cq = event->element.cq->cq_context;
		break;
	case EV_QP:
		event->element.qp = event->element.qp->qp_context;
		break;
	case EV_SRQ:
		event->element.srq = event->element.srq->srq_context;
		break;
	}
	return 0;
}
SYMVER_1_0(rnic_1_0_get_async_event, ibv_get_async_event);

void rnic_1_0_ack_async_event(struct ibv_async_event *event)
{
	struct ibv_async_event real = *event;
	switch (event_kind(event->event_type)) {
	case EV_CQ:
		real.element.cq = ((struct ibv_cq_1_0 *)event->element.cq)->real_cq;
		break;
	case EV_QP:
		real.element.qp = ((struct ibv_qp_1_0 *)event->element.qp)->real_qp;
		break;
	case EV_SRQ:
		real.element.srq = ((struct ibv_srq_1_0 *)event->element.srq)->real_srq;
		break;
	}
	ibv_ack_async_event(&real);
}
SYMVER_1_0(rnic_1_0_ack_async_event, ibv_ack_async_event);

/* struct ibv_device_attr is as it was in 1.0. */
int rnic_1_0_query_device(struct ibv_context_1_0 *context, struct ibv_device_attr *device_attr)
{
	return ibv_query_device(context->real_context, device_attr);
}
SYMVER_1_0(rnic_1_0_query_device, ibv_query_device);

/* 1.0's struct ibv_port_attr ended at phys_state: only that much is
 * the program's to write. */
int rnic_1_0_query_port(struct ibv_context_1_0 *context, uint8_t port_num, struct ibv_port_attr *port_attr)
{
	struct ibv_port_attr a;
	int r = ibv_query_port(context->real_context, port_num, &a);
	if (!r)
		memcpy(port_attr, &a, offsetof(struct ibv_port_attr, link_layer));
	return r;
}
SYMVER_1_0(rnic_1_0_query_port, ibv_query_port);

int rnic_1_0_query_gid(struct ibv_context_1_0 *context, uint8_t port_num, int index, union ibv_gid *gid)
{
	return ibv_query_gid(context->real_context, port_num, index, gid);
}
SYMVER_1_0(rnic_1_0_query_gid, ibv_query_gid);

int rnic_1_0_query_pkey(struct ibv_context_1_0 *context, uint8_t port_num, int index, __be16 *pkey)
{
	return ibv_query_pkey(context->real_context, port_num, index, pkey);
}
SYMVER_1_0(rnic_1_0_query_pkey, ibv_query_pkey);

/* --- PDs, MRs, AHs --- */

struct ibv_pd_1_0 *rnic_1_0_alloc_pd(struct ibv_context_1_0 *context)
{
	struct ibv_pd_1_0 *pd = calloc(1, sizeof *pd);
	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	if (!(pd->real_pd = ibv_alloc_pd(context->real_context))) {
		free(pd);
		return NULL;
	}
	pd->context = context;
	pd->handle = pd->real_pd->handle;
	return pd;
}
SYMVER_1_0(rnic_1_0_alloc_pd, ibv_alloc_pd);

int rnic_1_0_dealloc_pd(struct ibv_pd_1_0 *pd)
{
	int r = ibv_dealloc_pd(pd->real_pd);
	if (!r)
		free(pd);
	return r;
}
SYMVER_1_0(rnic_1_0_dealloc_pd, ibv_dealloc_pd);

struct ibv_mr_1_0 *rnic_1_0_reg_mr(struct ibv_pd_1_0 *pd, void *addr, size_t length, int access)
{
	struct ibv_mr_1_0 *mr = calloc(1, sizeof *mr);
	if (!mr) {
		errno = ENOMEM;
		return NULL;
	}
	if (!(mr->real_mr = ibv_reg_mr(pd->real_pd, addr, length, access))) {
		free(mr);
		return NULL;
	}
	mr->context = pd->context;
	mr->pd = pd;
	mr->handle = mr->real_mr->handle;
	mr->lkey = mr->real_mr->lkey;
	mr->rkey = mr->real_mr->rkey;
	return mr;
}
SYMVER_1_0(rnic_1_0_reg_mr, ibv_reg_mr);

int rnic_1_0_dereg_mr(struct ibv_mr_1_0 *mr)
{
	int r = ibv_dereg_mr(mr->real_mr);
	if (!r)
		free(mr);
	return r;
}
SYMVER_1_0(rnic_1_0_dereg_mr, ibv_dereg_mr);

struct ibv_ah_1_0 *rnic_1_0_create_ah(struct ibv_pd_1_0 *pd, struct ibv_ah_attr *attr)
{
	struct ibv_ah_1_0 *ah = calloc(1, sizeof *ah);
	if (!ah) {
		errno = ENOMEM;
		return NULL;
	}
	/* struct ibv_ah_attr is as it was in 1.0 */
	if (!(ah->real_ah = ibv_create_ah(pd->real_pd, attr))) {
		free(ah);
		return NULL;
	}
	ah->context = pd->context;
	ah->pd = pd;
	ah->handle = ah->real_ah->handle;
	return ah;
}
SYMVER_1_0(rnic_1_0_create_ah, ibv_create_ah);

int rnic_1_0_destroy_ah(struct ibv_ah_1_0 *ah)
{
	int r = ibv_destroy_ah(ah->real_ah);
	if (!r)
		free(ah);
	return r;
}
SYMVER_1_0(rnic_1_0_destroy_ah, ibv_destroy_ah);

/* --- CQs and completion channels --- */

/* The current CQ's cq_context is its proxy, so that a completion event
 * (and an async event) finds the proxy; the program's context is the
 * proxy's. */
struct ibv_cq_1_0 *rnic_1_0_create_cq(struct ibv_context_1_0 *context, int cqe, void *cq_context,
				      struct ibv_comp_channel *channel, int comp_vector)
{
	struct ibv_cq_1_0 *cq = calloc(1, sizeof *cq);
	if (!cq) {
		errno = ENOMEM;
		return NULL;
	}
	if (!(cq->real_cq = ibv_create_cq(context->real_context, cqe, cq, real_channel(channel), comp_vector))) {
		free(cq);
		return NULL;
	}
	cq->context = context;
	cq->cq_context = cq_context;
	cq->handle = cq->real_cq->handle;
	cq->cqe = cq->real_cq->cqe;
	pthread_mutex_init(&cq->mutex, NULL);
	pthread_cond_init(&cq->cond, NULL);
	return cq;
}
SYMVER_1_0(rnic_1_0_create_cq, ibv_create_cq);

int rnic_1_0_resize_cq(struct ibv_cq_1_0 *cq, int cqe)
{
	int r = ibv_resize_cq(cq->real_cq, cqe);
	if (!r)
		cq->cqe = cq->real_cq->cqe;
	return r;
}
SYMVER_1_0(rnic_1_0_resize_cq, ibv_resize_cq);

int rnic_1_0_destroy_cq(struct ibv_cq_1_0 *cq)
{
	int r = ibv_destroy_cq(cq->real_cq);
	if (r)
		return r;
	pthread_cond_destroy(&cq->cond);
	pthread_mutex_destroy(&cq->mutex);
	free(cq);
	return 0;
}
SYMVER_1_0(rnic_1_0_destroy_cq, ibv_destroy_cq);

int rnic_1_0_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq_1_0 **cq, void **cq_context)
{
	struct ibv_cq *real;
	void *proxy;
	int r = ibv_get_cq_event(real_channel(channel), &real, &proxy);
	if (r)
		return r;
	*cq = proxy;
	*cq_context = (*cq)->cq_context;
	return 0;
}
SYMVER_1_0(rnic_1_0_get_cq_event, ibv_get_cq_event);

void rnic_1_0_ack_cq_events(struct ibv_cq_1_0 *cq, unsigned int nevents)
{
	ibv_ack_cq_events(cq->real_cq, nevents);
}
SYMVER_1_0(rnic_1_0_ack_cq_events, ibv_ack_cq_events);

struct ibv_comp_channel *rnic_compat_create_comp_channel(struct ibv_context *context, int *is_1_0)
{
	struct compat_context *c = find_context(context);
	*is_1_0 = c != NULL;
	if (!c)
		return NULL;
	struct compat_channel *ch = calloc(1, sizeof *ch);
	if (!ch) {
		errno = ENOMEM;
		return NULL;
	}
	if (!(ch->real = ibv_create_comp_channel(c->pub.real_context))) {
		free(ch);
		return NULL;
	}
	ch->pub.fd = ch->real->fd; /* the program reads or polls it itself */
	pthread_mutex_lock(&compat_lock);
	ch->next = channels;
	channels = ch;
	pthread_mutex_unlock(&compat_lock);
	return (struct ibv_comp_channel *)&ch->pub;
}

int rnic_compat_destroy_comp_channel(struct ibv_comp_channel *channel, int *is_1_0)
{
	struct compat_channel *ch = find_channel(channel);
	*is_1_0 = ch != NULL;
	if (!ch)
		return 0;
	int r = ibv_destroy_comp_channel(ch->real);
	if (r)
		return r;
	pthread_mutex_lock(&compat_lock);
	struct compat_channel **p = &channels;
	while (*p && *p != ch)
		p = &(*p)->next;
	if (*p)
		*p = ch->next;
	pthread_mutex_unlock(&compat_lock);
	free(ch);
	return 0;
}

/* --- SRQs --- */

struct ibv_srq_1_0 *rnic_1_0_create_srq(struct ibv_pd_1_0 *pd, struct ibv_srq_init_attr *srq_init_attr)
{
	struct ibv_srq_1_0 *srq = calloc(1, sizeof *srq);
	if (!srq) {
		errno = ENOMEM;
		return NULL;
	}
	struct ibv_srq_init_attr a = {.srq_context = srq, .attr = srq_init_attr->attr};
	if (!(srq->real_srq = ibv_create_srq(pd->real_pd, &a))) {
		free(srq);
		return NULL;
	}
	srq_init_attr->attr = a.attr; /* what was created, as ibv_create_srq(3) says */
	srq->context = pd->context;
	srq->srq_context = srq_init_attr->srq_context;
	srq->pd = pd;
	srq->handle = srq->real_srq->handle;
	pthread_mutex_init(&srq->mutex, NULL);
	pthread_cond_init(&srq->cond, NULL);
	return srq;
}
SYMVER_1_0(rnic_1_0_create_srq, ibv_create_srq);

int rnic_1_0_modify_srq(struct ibv_srq_1_0 *srq, struct ibv_srq_attr *srq_attr, int srq_attr_mask)
{
	return ibv_modify_srq(srq->real_srq, srq_attr, srq_attr_mask);
}
SYMVER_1_0(rnic_1_0_modify_srq, ibv_modify_srq);

int rnic_1_0_query_srq(struct ibv_srq_1_0 *srq, struct ibv_srq_attr *srq_attr)
{
	return ibv_query_srq(srq->real_srq, srq_attr);
}
SYMVER_1_0(rnic_1_0_query_srq, ibv_query_srq);

int rnic_1_0_destroy_srq(struct ibv_srq_1_0 *srq)
{
	int r = ibv_destroy_srq(srq->real_srq);
	if (r)
		return r;
	pthread_cond_destroy(&srq->cond);
	pthread_mutex_destroy(&srq->mutex);
	free(srq);
	return 0;
}
SYMVER_1_0(rnic_1_0_destroy_srq, ibv_destroy_srq);

/* --- QPs --- */

/* 1.0's struct ibv_qp_attr ended before rate_limit. */
enum { QP_ATTR_1_0 = offsetof(struct ibv_qp_attr, rate_limit) };

struct ibv_qp_1_0 *rnic_1_0_create_qp(struct ibv_pd_1_0 *pd, struct ibv_qp_init_attr_1_0 *qp_init_attr)
{
	struct ibv_qp_1_0 *qp = calloc(1, sizeof *qp);
	if (!qp) {
		errno = ENOMEM;
		return NULL;
	}
	struct ibv_qp_init_attr_1_0 *ia = qp_init_attr;
	struct ibv_qp_init_attr a = {
		.qp_context = qp, /* async events find the proxy */
		.send_cq = ia->send_cq ? ia->send_cq->real_cq : NULL,
		.recv_cq = ia->recv_cq ? ia->recv_cq->real_cq : NULL,
		.srq = ia->srq ? ia->srq->real_srq : NULL,
		.cap = ia->cap,
		.qp_type = ia->qp_type,
		.sq_sig_all = ia->sq_sig_all,
	};
	if (!(qp->real_qp = ibv_create_qp(pd->real_pd, &a))) {
		free(qp);
		return NULL;
	}
	ia->cap = a.cap; /* what was created, as ibv_create_qp(3) says */
	qp->context = pd->context;
	qp->qp_context = ia->qp_context;
	qp->pd = pd;
	qp->send_cq = ia->send_cq;
	qp->recv_cq = ia->recv_cq;
	qp->srq = ia->srq;
	qp->handle = qp->real_qp->handle;
	qp->qp_num = qp->real_qp->qp_num;
	qp->state = qp->real_qp->state;
	qp->qp_type = qp->real_qp->qp_type;
	pthread_mutex_init(&qp->mutex, NULL);
	pthread_cond_init(&qp->cond, NULL);
	return qp;
}
SYMVER_1_0(rnic_1_0_create_qp, ibv_create_qp);

int rnic_1_0_query_qp(struct ibv_qp_1_0 *qp, struct ibv_qp_attr *attr, int attr_mask, struct ibv_qp_init_attr_1_0 *init_attr)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	int r = ibv_query_qp(qp->real_qp, &a, attr_mask, &ia);
	if (r)
		return r;
	memcpy(attr, &a, QP_ATTR_1_0);
	qp->state = qp->real_qp->state;
	if (init_attr) {
		init_attr->qp_context = qp->qp_context;
		init_attr->send_cq = qp->send_cq;
		init_attr->recv_cq = qp->recv_cq;
		init_attr->srq = qp->srq;
		init_attr->cap = ia.cap;
		init_attr->qp_type = ia.qp_type;
		init_attr->sq_sig_all = ia.sq_sig_all;
	}
	return 0;
}
SYMVER_1_0(rnic_1_0_query_qp, ibv_query_qp);

int rnic_1_0_modify_qp(struct ibv_qp_1_0 *qp, struct ibv_qp_attr *attr, int attr_mask)
{
	/* The program's attr is 1.0's size: what lies beyond is not its. */
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	memcpy(&a, attr, QP_ATTR_1_0);
	int r = ibv_modify_qp(qp->real_qp, &a, attr_mask);
	qp->state = qp->real_qp->state;
	return r;
}
SYMVER_1_0(rnic_1_0_modify_qp, ibv_modify_qp);

int rnic_1_0_destroy_qp(struct ibv_qp_1_0 *qp)
{
	int r = ibv_destroy_qp(qp->real_qp);
	if (r)
		return r;
	pthread_cond_destroy(&qp->cond);
	pthread_mutex_destroy(&qp->mutex);
	free(qp);
	return 0;
}
SYMVER_1_0(rnic_1_0_destroy_qp, ibv_destroy_qp);

int rnic_1_0_attach_mcast(struct ibv_qp_1_0 *qp, union ibv_gid *gid, uint16_t lid)
{
	return ibv_attach_mcast(qp->real_qp, gid, lid);
}
SYMVER_1_0(rnic_1_0_attach_mcast, ibv_attach_mcast);

int rnic_1_0_detach_mcast(struct ibv_qp_1_0 *qp, union ibv_gid *gid, uint16_t lid)
{
	return ibv_detach_mcast(qp->real_qp, gid, lid);
}
SYMVER_1_0(rnic_1_0_detach_mcast, ibv_detach_mcast);

/* --- ibv_register_driver@IBVERBS_1.1 ---
 *
 * How providers registered with libibverbs 1.1; rdma-core 13 made the
 * driver interface private. Old out-of-tree providers (libfabric's usNIC
 * one) still call it, so rdma-core keeps it as a function that does
 * nothing, and Debian 12's prints nothing either: such a provider could
 * not drive an rnic device anyway. Only the old version is exported
 * (there is no ibv_register_driver@@). */
void rnic_1_1_register_driver(const char *name, void *init_func)
{
	(void)name;
	(void)init_func;
}
__asm__(".symver rnic_1_1_register_driver, ibv_register_driver@IBVERBS_1.1");
