/*
 * rnic's librdmacm: the internals shared by its files.
 *
 * An rdma_cm id lives on one NIC: the NIC process runs the connection
 * manager (package cm) and serves ids on its CM socket
 * (internal/hostif/cm.go). This library keeps, per NIC it uses, a
 * command connection; per event channel, an epoll descriptor (the
 * channel's fd, so that programs can poll it) holding one events
 * connection per NIC its ids use and an eventfd for events the library
 * makes itself (an address no NIC serves).
 */
#ifndef RNIC_CMA_H
#define RNIC_CMA_H

#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "../src/hostif.h"

/* CM_VERSION, the OP_CM_* operations and the CM_OPT_* options are
 * rnic_abi.h's (via hostif.h), generated from internal/hostif. */
enum {
	PS_TCP = 0x0106,
	PS_UDP = 0x0111,
	UDP_QKEY = 0x01234567,
	MAX_NICS = 64,
	MAX_PRIVATE = 256,
};

struct cma_nic {
	char name[64];
	char cm_socket[PATH_MAX];
	struct sockaddr_storage addr;
	struct ibv_context *verbs; /* opened on first use */
	struct ibv_pd *pd;         /* the PD of ids given none */
	int cmd;                   /* command connection, -1 until used */
	uint32_t seq;
	pthread_mutex_t lock;
};

struct cma_channel;

/* An id; public is what the program sees. A wildcard id has no NIC of
 * its own: from its bind on, a sub-id on each NIC holds its port there
 * (for the wildcard address: the NIC checks it against the port's other
 * holders as the kernel checks a bind), and it listens through them. */
struct cma_id {
	struct rdma_cm_id id;
	struct cma_nic *nic;
	uint32_t handle; /* on nic's CM, 0 until the id is there */
	struct cma_channel *chan;
	int sync;        /* made with a NULL channel: events handled inside the calls */
	int ownchan;     /* its channel is its own (sync), destroyed with it */
	int wildcard;    /* bound to the any-address */
	int loopback;    /* a wildcard bound to a loopback address no NIC holds (rdma_bind_addr) */
	int listening;   /* rdma_listen succeeded */
	uint16_t port;   /* the bound port (wildcard) */
	struct cma_id **subs;
	int nsubs;
	struct cma_id *parent; /* a wildcard listener's sub-id: events go to the parent */
	struct ibv_qp_init_attr *qp_init; /* rdma_create_ep's, for rdma_get_request */
	struct ibv_sa_path_rec path;
	/* rdma_set_option's options, which the NIC applies (an id keeps them
	 * for the NICs it goes to): ACK_TIMEOUT and TOS + 1 (0: unset; the
	 * route takes them, the library the QP's timeout), AFONLY
	 * (afonly_set: the program set it; else the NIC takes the kernel's
	 * default at bind), REUSEADDR. */
	int ack_timeout;
	int tos;
	int afonly, afonly_set, reuseaddr;
};

struct cma_event {
	struct rdma_cm_event ev;
	uint8_t private[MAX_PRIVATE];
};

#endif
