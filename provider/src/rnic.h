/* rnic's libibverbs: the objects behind libibverbs' structures, and the
 * helpers the files share. */
#ifndef RNIC_H
#define RNIC_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/un.h>

#include <infiniband/verbs.h>

#include "hostif.h"

/* The ring formats and the host interface's constants: rnic_abi.h,
 * generated from their definition in Go (internal/queue, internal/hostif). */

/* A device: libibverbs' struct first, so that programs reading
 * ibv_device's fields (name, node_type) find them. */
struct rnic_device {
	struct ibv_device ibdev;
	char socket[sizeof(((struct sockaddr_un *)0)->sun_path)];
	/* Devices outlive the list that returned them, as rdma-core's do:
	 * a program may free the list and go on using an open context's
	 * device (UCX does). refs counts the lists and contexts holding
	 * it; gone says its NIC was not in the last listing. */
	struct rnic_device *next;
	int refs;
	int gone;
};

/* rnic_device_get and rnic_device_put take and drop a reference to a
 * device (ibv_open_device, ibv_close_device); the last put of a device
 * whose NIC is gone frees it. */
void rnic_device_get(struct ibv_device *d);
void rnic_device_put(struct ibv_device *d);

/* An object async events name (a QP, CQ or SRQ): on its context's list
 * while it lives, so that an event the NIC sent before a destroy, read
 * after it, is dropped instead of naming freed memory. */
struct rnic_evobj {
	struct rnic_evobj *next;
	uint32_t handle;
	uint32_t reported; /* events ibv_get_async_event returned for it */
	void *obj;
};

/* An open device: the extended context (its struct ibv_context last, as
 * verbs.h requires), the socket to the NIC and the doorbell page. */
struct rnic_context {
	pthread_mutex_t lock; /* one request at a time on the socket */
	uint32_t seq;
	int fd;
	void *db;
	int wake_fd;
	int fatal_sent; /* the async socket closed and DEVICE_FATAL was reported */
	int access;	/* 0, or why the NIC may not reach this program's memory (HELLO) */
	int access_told; /* rnic_no_access has said why */
	pthread_mutex_t ev_lock;
	struct rnic_evobj *evobjs;
	struct verbs_context vctx; /* last: its context is what programs hold */
};

/* A CQ: the extended CQ (whose first fields are struct ibv_cq's) and the
 * ring of CQEs the NIC writes. */
struct rnic_cq {
	struct ibv_cq_ex ex;
	uint8_t *ring;
	uint32_t depth, ci, ci_word, arm_word;
	pthread_spinlock_t lock;
	uint8_t *cur; /* ibv_start_poll…ibv_end_poll: the CQE being read */
	struct rnic_evobj ev;
};

/* A receive ring, a QP's RQ or an SRQ: slots the NIC reads, its doorbell
 * word, and the NIC's word that says how far the program may post. */
struct recv_ring {
	uint8_t *mem;
	uint32_t depth, slot, word, pi, max_sge;
	uint32_t limit_word; /* the NIC's consumer index (SRQ) or retired count (RQ) */
	uint32_t max_wr;     /* outstanding at most: max_recv_wr (RQ), depth (SRQ) */
	pthread_spinlock_t lock;
};

struct rnic_qp {
	struct ibv_qp_ex ex; /* first, with its qp_base first: the ibv_qp programs hold */
	uint8_t *sq;
	uint32_t sq_depth, sq_slot, sq_word, sq_pi, sq_ci_word;
	struct recv_ring rq;
	struct ibv_qp_cap cap;
	pthread_spinlock_t sq_lock;
	/* ibv_wr_*: the WQEs built since wr_start, the slot being built. */
	uint32_t wr_pi;
	uint8_t *wr_cur;
	int wr_err;
	uint8_t *scratch; /* a slot for WQEs that fail: the ring is full */
	int sig_all;
	struct rnic_evobj ev;
};

struct rnic_srq {
	struct ibv_srq ibsrq;
	struct recv_ring rq;
	struct rnic_evobj ev;
};

static inline struct rnic_context *to_ctx(struct ibv_context *c)
{
	return (struct rnic_context *)((char *)c - offsetof(struct rnic_context, vctx.context));
}

/* word is a 32-bit word of the doorbell page. */
static inline _Atomic uint32_t *word(struct ibv_context *c, uint32_t off)
{
	return (_Atomic uint32_t *)((uint8_t *)to_ctx(c)->db + off);
}

static inline void le32(uint8_t *b, uint32_t v) { for (int i = 0; i < 4; i++) b[i] = v >> (8 * i); }
static inline void le64(uint8_t *b, uint64_t v) { for (int i = 0; i < 8; i++) b[i] = v >> (8 * i); }
static inline uint32_t rd32(const uint8_t *b) { return b[0] | b[1] << 8 | b[2] << 16 | (uint32_t)b[3] << 24; }
static inline uint64_t rd64(const uint8_t *b) { return rd32(b) | (uint64_t)rd32(b + 4) << 32; }

/* rnic_call sends the request built in m (op) on the context's socket and
 * reads the reply into m: 0, or the errno. */
int rnic_call(struct ibv_context *c, struct hostif_msg *m, uint16_t op, int *fds, int *nfds);

/* rnic_no_access says on stderr why the NIC may not reach the program's
 * memory (Yama, not dumpable, another uid). */
void rnic_no_access(struct ibv_context *c);

/* rnic_ring stores a producer index and wakes a sleeping NIC; a receive
 * doorbell (recv) only one that asked for it (RNIC_DB_NIC_ASLEEP). */
void rnic_ring(struct ibv_context *c, uint32_t off, uint32_t idx, int recv);

/* rnic_ev_add puts an object on the context's list of event objects. */
void rnic_ev_add(struct ibv_context *c, struct rnic_evobj *e, uint32_t handle, void *obj);
/* rnic_ev_del takes it off and waits until the program has acknowledged
 * each event it got for it (the object's mutex, cond and completed
 * count), as ibv_destroy_* do before freeing it. */
void rnic_ev_del(struct ibv_context *c, struct rnic_evobj *e, pthread_mutex_t *mu, pthread_cond_t *cond, const uint32_t *completed);

struct ibv_qp *rnic_create_qp_ex(struct ibv_context *c, struct ibv_qp_init_attr_ex *attr);
void rnic_cq_clean(struct ibv_cq *cq, uint32_t qpn);
struct ibv_cq_ex *rnic_create_cq_ex(struct ibv_context *c, struct ibv_cq_init_attr_ex *attr);
struct ibv_mw *rnic_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type);
int rnic_dealloc_mw(struct ibv_mw *mw);
int rnic_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *bind);
int rnic_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice, uint32_t flags, struct ibv_sge *sg, uint32_t n);
int rnic_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
int rnic_query_device_ex(struct ibv_context *c, const struct ibv_query_device_ex_input *input, struct ibv_device_attr_ex *attr,
			 size_t size);

/* rnic_compat.c: a completion channel of a program of the IBVERBS_1.0 ABI
 * (one symbol serves both ABIs): *is_1_0 says whether context (channel)
 * is one of that ABI's, which these then create (destroy). */
struct ibv_comp_channel *rnic_compat_create_comp_channel(struct ibv_context *context, int *is_1_0);
int rnic_compat_destroy_comp_channel(struct ibv_comp_channel *channel, int *is_1_0);

#endif
