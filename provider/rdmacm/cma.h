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

enum {
	CM_VERSION = 1,
	CM_COMMAND = 0,
	CM_EVENTS = 1,
	OP_CM_HELLO = 100,
	OP_CM_CREATE_ID = 101,
	OP_CM_DESTROY_ID = 102,
	OP_CM_BIND = 103,
	OP_CM_RESOLVE_ADDR = 104,
	OP_CM_RESOLVE_ROUTE = 105,
	OP_CM_LISTEN = 106,
	OP_CM_CONNECT = 107,
	OP_CM_ACCEPT = 108,
	OP_CM_REJECT = 109,
	OP_CM_DISCONNECT = 110,
	OP_CM_INIT_QP_ATTR = 111,
	OP_CM_NOTIFY = 112,
	OP_CM_MIGRATE = 113,
	OP_CM_EVENT = 120,
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

/* An id; public is what the program sees. A wildcard listener has no
 * NIC of its own: it listens through a sub-id on each NIC. */
struct cma_id {
	struct rdma_cm_id id;
	struct cma_nic *nic;
	uint32_t handle; /* on nic's CM, 0 until the id is there */
	struct cma_channel *chan;
	int sync;        /* made with a NULL channel: events handled inside the calls */
	int ownchan;     /* its channel is its own (sync), destroyed with it */
	int wildcard;    /* bound to the any-address */
	uint16_t port;   /* the bound port (wildcard) */
	struct cma_id **subs;
	int nsubs;
	struct cma_id *parent; /* a wildcard listener's sub-id: events go to the parent */
	struct ibv_qp_init_attr *qp_init; /* rdma_create_ep's, for rdma_get_request */
	struct ibv_sa_path_rec path;
	int ack_timeout; /* rdma_set_option's RDMA_OPTION_ID_ACK_TIMEOUT + 1, 0: unset */
	int tos;         /* RDMA_OPTION_ID_TOS + 1, 0: unset */
};

struct cma_event {
	struct rdma_cm_event ev;
	uint8_t private[MAX_PRIVATE];
};

#endif
